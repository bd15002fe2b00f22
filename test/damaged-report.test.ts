// A damaged capture still gives a profile, and every report of it says what it lacks: the
// blocks skipped, the samples they held (counted from the end block), the reader's warnings,
// and whether the recorder closed the file. Checked through the CLI (json and text, as a user
// reads them) on a committed real capture of five blocks, damaged three ways.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { gunzipSync } from 'node:zlib';
import { Profile as PprofProfile } from 'pprof-format';
import { openCapture } from '../src/capture/index.js';

const BIN = path.resolve('bin/pyunwind.js');
const FIXTURE = path.resolve('test/fixtures/captures/recursion-3.11.pyuw');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pyunwind-damaged-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

interface Capture {
  blocks: number;
  skippedBlocks: number;
  lostSamples: number | null;
  closedCleanly: boolean;
  warnings: { offset: number; message: string }[];
}
interface Json {
  metadata: { capture: Capture };
  summary: { attempted: number };
}

function report(file: string, format: string): string {
  const r = spawnSync(process.execPath, [BIN, 'report', '-q', '-f', format, file], { encoding: 'utf8', timeout: 60_000 });
  expect(r.status, r.stderr).toBe(0);
  return r.stdout;
}

/** The export written to a file (binary formats), as bytes. */
function exported(file: string, format: string): Buffer {
  const out = `${file}.${format}`;
  const r = spawnSync(process.execPath, [BIN, 'report', '-q', '-f', format, '-o', out, file], { encoding: 'utf8', timeout: 60_000 });
  expect(r.status, r.stderr).toBe(0);
  return fs.readFileSync(out);
}

/** The fixture's blocks: where each starts, how long it is stored, how many samples it holds. */
async function blocks(): Promise<{ offset: number; stored: number; samples: number }[]> {
  const reader = await openCapture(FIXTURE);
  try {
    const raws = [...reader.rawBlocks()];
    const decoded = [...reader.blocks()];
    expect(decoded).toHaveLength(raws.length);
    return raws.map((r, i) => ({ offset: r.offset, stored: r.stored.length, samples: decoded[i]!.samples.length }));
  } finally {
    reader.close();
  }
}

function damaged(name: string, change: (bytes: Buffer) => Buffer): string {
  const file = path.join(dir, name);
  fs.writeFileSync(file, change(fs.readFileSync(FIXTURE)));
  return file;
}

describe('a damaged capture, reported', () => {
  const whole = JSON.parse(report(FIXTURE, 'json')) as Json;

  it('intact: every block read, none skipped, closed cleanly, no warning', async () => {
    expect(whole.metadata.capture).toEqual({ blocks: (await blocks()).length, skippedBlocks: 0, lostSamples: 0, closedCleanly: true, undetermined: 0, cutTaskLists: 0, warnings: [] });
    expect(report(FIXTURE, 'text')).toMatch(/^Capture: 5 blocks read, none skipped; closed cleanly$/m);
  });

  it('a flipped byte in a payload: that block skipped, its samples counted as lost, the warning shown', async () => {
    const b = await blocks();
    const hit = b[1]!;
    const file = damaged('payload.pyuw', (bytes) => {
      bytes[hit.offset + 40 + Math.floor(hit.stored / 2)]! ^= 0xff;
      return bytes;
    });
    const json = JSON.parse(report(file, 'json')) as Json;
    const c = json.metadata.capture;
    expect(c.blocks).toBe(b.length - 1);
    expect(c.skippedBlocks).toBe(1);
    expect(c.lostSamples).toBe(hit.samples);
    expect(c.closedCleanly).toBe(true);
    expect(c.warnings).toHaveLength(1);
    expect(c.warnings[0]!.offset).toBe(hit.offset);
    expect(c.warnings[0]!.message).toMatch(/block skipped/);
    // the samples of the other blocks are all there
    expect(json.summary.attempted).toBe(whole.summary.attempted - hit.samples);
    const text = report(file, 'text');
    expect(text).toContain(`Capture: ${b.length - 1} blocks read, 1 skipped as damaged (${hit.samples} samples lost); closed cleanly\n`);
    expect(text).toContain(`Warning: byte ${hit.offset}: ${c.warnings[0]!.message}\n`);
    // and every other export with a place for it
    const capture = `capture: ${b.length - 1} blocks read, 1 skipped as damaged (${hit.samples} samples lost); closed cleanly`;
    const warning = `byte ${hit.offset}: ${c.warnings[0]!.message}`;
    const pprof = PprofProfile.decode(gunzipSync(exported(file, 'pprof')));
    const comments = pprof.comment.map((i) => pprof.stringTable.strings[Number(i)]!);
    expect(comments).toContain(capture);
    expect(comments).toContain(`warning: ${warning}`);
    const gecko = JSON.parse(report(file, 'gecko')) as { meta: { extra: { entries: { label: string; value: string }[] }[] } };
    const entries = gecko.meta.extra[0]!.entries;
    expect(entries).toContainEqual(expect.objectContaining({ label: 'Capture', value: capture.slice('capture: '.length) }));
    expect(entries).toContainEqual(expect.objectContaining({ label: 'Warning', value: warning }));
    const jsonl = JSON.parse(report(file, 'jsonl').split('\n')[0]!) as { capture: Capture };
    expect(jsonl.capture).toEqual(c);
    for (const format of ['flamegraph', 'heatmap']) {
      const html = exported(file, format).toString('utf8');
      expect(html, format).toContain(`data-key="capture-skipped" data-value="1"`);
      expect(html, format).toContain(`data-key="capture-lost" data-value="${hit.samples}"`);
      expect(html, format).toContain(`<li>${warning.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;')}</li>`);
      expect(html, format).toContain('The capture is damaged: 1 block skipped');
    }
  });

  it("a damaged block header: the reader scans past the block; the end block's count says one was lost", async () => {
    const b = await blocks();
    const hit = b[2]!;
    const file = damaged('header.pyuw', (bytes) => {
      bytes[hit.offset]! ^= 0xff; // its magic
      return bytes;
    });
    const c = (JSON.parse(report(file, 'json')) as Json).metadata.capture;
    expect(c).toMatchObject({ blocks: b.length - 1, skippedBlocks: 1, lostSamples: hit.samples, closedCleanly: true });
    expect(c.warnings.length).toBeGreaterThan(0);
    expect(report(file, 'text')).toContain(`1 skipped as damaged (${hit.samples} samples lost); closed cleanly`);
  });

  it('cut short inside a block: not closed cleanly, what was lost uncounted, the warning shown', async () => {
    const b = await blocks();
    const cut = b[3]!;
    const file = damaged('cut.pyuw', (bytes) => bytes.subarray(0, cut.offset + 40 + (cut.stored >> 1)));
    const json = JSON.parse(report(file, 'json')) as Json;
    const c = json.metadata.capture;
    expect(c).toMatchObject({ blocks: 3, closedCleanly: false, lostSamples: null });
    expect(c.warnings).toHaveLength(1);
    expect(json.summary.attempted).toBe(b[0]!.samples + b[1]!.samples + b[2]!.samples);
    const text = report(file, 'text');
    expect(text).toMatch(/^Capture: 3 blocks read, none skipped; NOT closed cleanly \(the recording was cut short/m);
    expect(text).toContain(`Warning: byte ${c.warnings[0]!.offset}: `);
  });
});
