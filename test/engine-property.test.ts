// Property test of the block engine's shortcuts (a sample whose memory did not change reuses its
// thread's last walk; a walk that meets an unchanged part of the last walk splices it): real
// recordings of a 32-deep program, with random edits to the copied memory of random samples —
// a `previous` pointer sent to another frame (skips, cycles), a byte flipped, a word zeroed or
// randomised, anywhere in the stack — must give exactly the profile the reference path gives
// (every sample decoded and walked in full). The unedited recording must really splice — and so
// must one of a program whose stack grows and shrinks between samples (astwalk: the copied
// stack's length changes, the frames below the change stay where they were), with regions
// also cut short or grown by the edits. The edited samples are written with their frames as
// frames regions (format 1.3) or as patches alone.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { CaptureWriter, fileSink, openCapture } from '../src/capture/index.js';
import type { CaptureHeader, CodeRecord, SampleRecord } from '../src/capture/types.js';
import { layoutFromSource } from '../src/layout/index.js';
import { reportCapture } from '../src/pipeline/report-file.js';
import { BlockEngine, CopyStats } from '../src/kernel/block-engine.js';
import { Profile } from '../src/profile/index.js';
import { blockCodes, unpack } from '../src/capture/reader.js';
import { CodeTable } from '../src/symbols/code-table.js';
import { ReferenceWalker, walkParams } from '../src/walk/index.js';
import { recordCoverage, cannotRun } from './helpers/coverage.js';
import { nativeInterpreters } from '../harness/interpreters.js';
import { BIN } from '../harness/real-programs.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pyunwind-engine-prop-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

interface Recording {
  header: CaptureHeader;
  codes: CodeRecord[];
  samples: SampleRecord[];
  /** aligned words of the recording that point into its own copied memory (frame links and the like) */
  pointers: bigint[];
}

async function load(file: string): Promise<Recording> {
  const reader = await openCapture(file);
  const codes: CodeRecord[] = [];
  const samples: SampleRecord[] = [];
  for (const b of reader.blocks()) {
    codes.push(...b.codes);
    samples.push(...b.samples);
  }
  reader.close();
  const pointers = new Set<bigint>();
  for (const s of samples.slice(0, 20)) {
    for (const r of s.regions) {
      const dv = new DataView(r.bytes.buffer, r.bytes.byteOffset, r.bytes.length);
      for (let o = 0; o + 8 <= r.bytes.length; o += 8) {
        const v = dv.getBigUint64(o, true);
        if (s.regions.some((q) => v >= q.address && v < q.address + BigInt(q.bytes.length))) pointers.add(v);
      }
    }
  }
  return { header: reader.header, codes, samples, pointers: [...pointers] };
}

interface Edit {
  sample: number;
  /** at a field of one of the sample's Python frames (else anywhere in a region) */
  onFrame: boolean;
  field: number;
  region: number;
  /** where in the region, as a share of its length */
  at: number;
  aligned: boolean;
  kind: 'pointer' | 'flip' | 'zero' | 'random' | 'cut' | 'grow';
  pick: number;
  random: bigint;
}

const edit = (window: number): fc.Arbitrary<Edit> =>
  fc.record({
    sample: fc.integer({ min: 0, max: window - 1 }),
    onFrame: fc.boolean(),
    field: fc.nat(),
    region: fc.nat(),
    at: fc.double({ min: 0, max: 1, noNaN: true, maxExcluded: true }),
    aligned: fc.boolean(),
    kind: fc.constantFrom('pointer', 'pointer', 'flip', 'zero', 'random', 'cut', 'grow'),
    pick: fc.nat(),
    random: fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }),
  });

function edited(rec: Recording, from: number, window: number, edits: Edit[]): SampleRecord[] {
  const out = rec.samples.slice(from, from + window).map((s) => ({ ...s, regions: s.regions.map((r) => ({ address: r.address, bytes: r.bytes.slice() })) }));
  const params = walkParams(layoutFromSource(rec.header.layoutSource));
  const codes = new CodeTable(layoutFromSource(rec.header.layoutSource), rec.codes);
  const fields = [params.framePrevious, params.frameExecutable, params.frameInstrPtr, params.frameOwner];
  for (const e of edits) {
    const s = out[e.sample % out.length]!;
    if (s.regions.length === 0) continue;
    let r = s.regions[e.region % s.regions.length]!;
    let o: number;
    if (e.onFrame) {
      // a field the walk reads (or any byte) of one of the frames the sample's walk visits
      const walk = new ReferenceWalker().walk(params, codes.ranges, [{ threadStateAddress: s.threadStateAddress, regions: s.regions }])[0]!;
      if (walk.frames.length === 0) continue;
      const frame = walk.frames[e.pick % walk.frames.length]!.frame;
      const field = e.field % 5 < 4 ? fields[e.field % 5]! : e.field % params.frameSize;
      const home = s.regions.find((q) => frame >= q.address && frame + BigInt(params.frameSize) <= q.address + BigInt(q.bytes.length));
      if (!home) continue;
      r = home;
      o = Math.min(Number(frame - home.address) + field, r.bytes.length - 8);
    } else {
      if (r.bytes.length < 8) continue;
      o = Math.floor(e.at * (r.bytes.length - 7));
      if (e.aligned) o &= ~7;
    }
    if (e.kind === 'cut' || e.kind === 'grow') {
      // the region ends elsewhere: at the byte picked, or up to 64 bytes of junk further
      const k = s.regions.indexOf(r);
      const longer = new Uint8Array(r.bytes.length + 1 + (e.pick % 64));
      longer.set(r.bytes);
      longer.fill(Number(e.random & 0xffn), r.bytes.length);
      s.regions[k] = { address: r.address, bytes: e.kind === 'cut' ? r.bytes.slice(0, o) : longer };
      continue;
    }
    const dv = new DataView(r.bytes.buffer, r.bytes.byteOffset, r.bytes.length);
    if (e.kind === 'flip') r.bytes[o]! ^= 1 << (e.pick % 8);
    else dv.setBigUint64(o, e.kind === 'zero' ? 0n : e.kind === 'random' ? e.random : rec.pointers[e.pick % Math.max(1, rec.pointers.length)] ?? 0n, true);
  }
  return out;
}

/**
 * The samples with the hint a recorder gives the writer: where their frames are (here: the frames
 * the reference walk visits), so that the writer stores those as frames regions (format 1.3).
 */
function hinted(rec: Recording, samples: SampleRecord[]): SampleRecord[] {
  const layout = layoutFromSource(rec.header.layoutSource);
  const params = walkParams(layout);
  const codes = new CodeTable(layout, rec.codes);
  const walks = new ReferenceWalker().walk(params, codes.ranges, samples.map((s) => ({ threadStateAddress: s.threadStateAddress, regions: s.regions })));
  return samples.map((s, i) => ({ ...s, frames: { addresses: walks[i]!.frames.map((f) => Number(f.frame)), size: layout.frame.size, wordBytes: layout.pointerSize } }));
}

function write(rec: Recording, samples: SampleRecord[], file: string, blockBytes: number): void {
  const w = new CaptureWriter(fileSink(file), rec.header, { blockBytes });
  for (const c of rec.codes) w.addCode(c);
  for (const s of samples) w.addSample(s);
  w.close();
}

const profileOf = async (file: string, reference: boolean): Promise<string> => {
  const r = await reportCapture(file, reference ? { reference: true } : { workers: 0 });
  return JSON.stringify({ p: r.profile.toJSON(), rec: r.recording, fallback: reference ? 0 : r.fallbackBlocks });
};

const available = nativeInterpreters().filter((p) => !p.missing);
const chosen = [...new Map(available.map((p) => [p.label.replace(/^.*-(3\.\d+).*$/, '$1'), p])).values()];

describe.each(chosen.length ? chosen : [{ label: 'none', command: '', missing: 'no native interpreter available' }])('engine shortcuts under edited memory, $label', (py) => {
  if (py.missing) {
    cannotRun('engine-property', py.label, py.missing!);
    return;
  }
  // deep.py: the stack changes only at its top; astwalk: it grows and shrinks between samples,
  // which the engine splices too when the frames below stayed where they were (before it did,
  // ~10 % of astwalk's walks were spliced here, against ~50 % since)
  it.each([
    { program: 'deep', args: (s: number) => ['workloads/deep.py', String(s), '24'], spliced: 0.5 },
    { program: 'astwalk', args: (s: number) => ['workloads/astwalk.py', String(s)], spliced: 0.3 },
  ])('$program: gives the reference profile whatever is edited', async ({ program, args, spliced }) => {
    const file = path.join(dir, `${py.label}-${program}.pyuw`);
    const window = 240;
    // what the windows below take: samples 100 … 100 + window; a loaded machine gets fewer
    // ticks, so the program runs longer until the recording has them
    let rec!: Recording;
    for (let seconds = 2; ; seconds *= 2) {
      const r = spawnSync(process.execPath, [BIN, 'record', '-o', file, '-r', '3000', '-q', '--', py.command, ...args(seconds)], { encoding: 'utf8', timeout: 120_000 });
      expect(r.status, r.stderr).toBe(0);
      rec = await load(file);
      if (rec.samples.length >= 100 + window || seconds >= 16) break;
    }
    expect(rec.samples.length).toBeGreaterThanOrEqual(100 + window);

    // the unedited recording splices its walks
    const plain = path.join(dir, `${py.label}-${program}-plain.pyuw`);
    write(rec, hinted(rec, rec.samples.slice(100)), plain, 1 << 20);
    const engine = await BlockEngine.load(layoutFromSource(rec.header.layoutSource));
    const reader = await openCapture(plain);
    for (const raw of reader.rawBlocks()) {
      const payload = unpack(raw) as Uint8Array;
      for (const c of blockCodes(payload, raw.type)) engine.codes.add(c);
      engine.processPayload({ type: raw.type, index: raw.index, offset: raw.offset, payload }, new Profile(), new CopyStats(), () => {
        throw new Error('the engine gave a real block to the reference path');
      });
    }
    reader.close();
    const stats = engine.walkStats();
    expect(stats.spliced).toBeGreaterThan(stats.walks * spliced);
    expect(await profileOf(plain, false)).toBe(await profileOf(plain, true));

    let n = 0;
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 0, max: rec.samples.length - window }), fc.array(edit(window), { minLength: 1, maxLength: 12 }), fc.constantFrom(4 << 10, 64 << 10, 1 << 20), fc.boolean(), async (from, edits, blockBytes, frames) => {
        const f = path.join(dir, `${py.label}-${program}-${n++}.pyuw`);
        const samples = edited(rec, from, window, edits);
        write(rec, frames ? hinted(rec, samples) : samples, f, blockBytes);
        const [a, b] = [await profileOf(f, false), await profileOf(f, true)];
        fs.rmSync(f);
        expect(a).toBe(b);
      }),
      { numRuns: 40, seed: 0x5eed },
    );
    recordCoverage('engine-property', py.label, true);
  }, 300_000);
});
