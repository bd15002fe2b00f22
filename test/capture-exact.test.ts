// What a capture stores comes back exact: real recordings of programs whose stacks churn (astwalk:
// recursion that grows and shrinks; threadpool: four threads; recursion: stacks of hundreds of
// frames, unwound and grown again), on every native interpreter
// the suite covers. Every sample the recorder handed the writer — ids, time, flags, status,
// errors, and every byte of every region — is read back from the file equal, in order. The
// writer stored the regions holding the frames the recorder pointed out as stack regions of
// section blocks (docs/capture-format.md, "Section block"), which is what makes such captures
// small; this checks it did, that it made them smaller than record blocks and than words alone,
// and that storing them costs no byte of exactness.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { CaptureWriter, memorySink, openCapture } from '../src/capture/index.js';
import { SectionEncoder } from '../src/capture/section-encoder.js';
import type { CodeRecord, SampleRecord, ThreadNameRecord } from '../src/capture/types.js';
import { recordProcess } from '../src/record/linux/record-process.js';
import { nativeInterpreters } from '../harness/interpreters.js';
import { cannotRun, recordCoverage } from './helpers/coverage.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pyunwind-exact-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const available = nativeInterpreters().filter((p) => !p.missing);
const chosen = [...new Map(available.map((p) => [p.label.replace(/^.*-(3\.\d+).*$/, '$1'), p])).values()];

/** The record as the recorder gave it, with its own copy of the bytes (the recorder reuses none, but a copy cannot change). */
function kept(r: SampleRecord): SampleRecord {
  const frames = r.frames && { ...r.frames, addresses: Array.from(r.frames.addresses) };
  return { ...r, frames, regions: r.regions.map((g) => ({ address: g.address, bytes: g.bytes.slice() })), errors: [...r.errors] };
}

describe.each(chosen.length ? chosen : [{ label: 'none', command: '', missing: 'no native interpreter available' }])('captures read back exact, $label', (py) => {
  if (py.missing) {
    cannotRun('capture-exact', py.label, py.missing!);
    return;
  }
  it.each([
    { program: 'astwalk', args: ['workloads/astwalk.py', '30'] },
    { program: 'threadpool', args: ['workloads/threadpool.py', '30'] },
    { program: 'recursion', args: ['workloads/recursion.py', '30'] },
  ])('$program: every sample the recorder copied, byte for byte', async ({ program, args }) => {
    const file = path.join(dir, `${py.label}-${program}.pyuw`);
    const given: SampleRecord[] = [];
    const stackRegions = vi.spyOn(SectionEncoder.prototype as unknown as { encodeStack: () => void }, 'encodeStack');
    let stored = 0;
    try {
      await recordProcess({
        command: [py.command, ...args],
        output: file,
        rateHz: 2000,
        durationMs: 1500,
        stdio: 'ignore',
        onRecord: (r: CodeRecord | SampleRecord | ThreadNameRecord) => {
          if ('threadStateAddress' in r) given.push(kept(r));
        },
      });
      stored = stackRegions.mock.calls.length;
    } finally {
      stackRegions.mockRestore();
    }
    expect(given.length).toBeGreaterThan(50);
    // the recorder pointed out its frames, and the writer stored their regions as stack regions
    expect(stored).toBeGreaterThan(0);

    const reader = await openCapture(file);
    const back: SampleRecord[] = [];
    for (const b of reader.blocks()) back.push(...b.samples);
    const warnings = reader.warnings;
    reader.close();
    expect(warnings).toEqual([]);
    expect(back.length).toBe(given.length);
    let regions = 0;
    let bytes = 0;
    for (let i = 0; i < given.length; i++) {
      const a = given[i]!;
      const b = back[i]!;
      const where = `sample ${i}`;
      expect({ ...b, regions: [] }, where).toEqual({ ...a, frames: undefined, regions: [] });
      expect(b.regions.length, where).toBe(a.regions.length);
      for (let k = 0; k < a.regions.length; k++) {
        expect(b.regions[k]!.address, `${where} region ${k}`).toBe(a.regions[k]!.address);
        // (compared as a whole: a failing byte shows where)
        if (Buffer.compare(Buffer.from(b.regions[k]!.bytes), Buffer.from(a.regions[k]!.bytes)) !== 0) {
          expect(Buffer.from(b.regions[k]!.bytes).toString('hex'), `${where} region ${k}`).toBe(Buffer.from(a.regions[k]!.bytes).toString('hex'));
        }
        regions++;
        bytes += a.regions[k]!.bytes.length;
      }
    }
    expect(regions).toBeGreaterThan(given.length);
    expect(bytes).toBeGreaterThan(0);
    // and the stack regions made the capture smaller: the same samples take more as words alone
    // (no hint), and more as record blocks (format 1.3: frames regions and patches)
    const written = (blocks: 'sections' | 'records', hints: boolean): number => {
      const sink = memorySink();
      const w = new CaptureWriter(sink, reader.header, { blocks });
      for (const r of given) w.addSample(hints ? r : { ...r, frames: undefined });
      w.close();
      return sink.length;
    };
    const sections = written('sections', true);
    expect(sections).toBeLessThan(written('sections', false));
    expect(sections).toBeLessThan(written('records', true));
    recordCoverage('capture-exact', `${py.label} ${program}`, true);
  }, 120_000);
});
