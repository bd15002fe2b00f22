// The block engine (assembly/engine.ts + src/block-engine.ts) against the reference path
// (decode each block, walk each sample with the kernel walker, add it to the profile), on real
// captures of every native interpreter the suite covers: the profile JSON, the recording's
// statistics and the warnings must be identical — in this thread and with any number of
// processing workers — and no block may have needed the reference path. Two programs: threadpool.py (five threads of standard-library work: many threads, many
// distinct stacks, C calls) and reuse.py (code objects born and dropped at one address every few
// milliseconds: the engine must name each sample with the code object of its moment).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { BLOCK_TYPE, ByteReader, ByteWriter, RECORD_TYPE, encodeBlock, encodeHeader, encodeTrailer } from '../src/capture/format.js';
import { CaptureWriter, fileSink, openCapture } from '../src/capture/index.js';
import { unpack } from '../src/capture/reader.js';
import { reportCapture, type ReportOptions } from '../src/report.js';
import { recordCoverage } from './helpers/coverage.js';
import { nativeInterpreters } from '../harness/interpreters.js';
import { BIN } from '../harness/real-programs.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pyunwind-engine-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const PROGRAMS = [
  { name: 'threadpool', args: ['workloads/threadpool.py', '2'] },
  { name: 'reuse', args: ['workloads/reuse.py', '2'] },
];

function record(py: string, name: string, args: string[]): string {
  const file = path.join(dir, `${path.basename(path.dirname(py))}-${name}-${Math.random().toString(36).slice(2)}.pyuw`);
  const r = spawnSync(process.execPath, [BIN, 'record', '-o', file, '-r', '2000', '-q', '--', py, ...args], { encoding: 'utf8', timeout: 120_000 });
  if (r.status !== 0) throw new Error(`pyunwind record ${name}: exit ${r.status}: ${r.stderr}`);
  return file;
}

/**
 * The same recording in blocks of about `bytes` raw bytes: many blocks from a short recording,
 * so that workers get several each and meet code records sent in blocks other workers process.
 */
async function reblocked(file: string, bytes: number): Promise<string> {
  const out = file.replace(/\.pyuw$/, `-${bytes}.pyuw`);
  const reader = await openCapture(file);
  const writer = new CaptureWriter(fileSink(out), reader.header, { blockBytes: bytes });
  for (const block of reader.blocks()) {
    for (const c of block.codes) writer.addCode(c);
    for (const s of block.samples) writer.addSample(s);
    writer.addMissed(block.missed);
  }
  writer.close();
  reader.close();
  return out;
}

/**
 * The same capture with each block's code records moved after its samples: a block the writer
 * would not make, which the reference path reads the same (a block's code records apply before
 * its samples) and which workers must not split (they would see the codes too late).
 */
async function codesLast(file: string): Promise<{ file: string; moved: number }> {
  const out = file.replace(/\.pyuw$/, '-codes-last.pyuw');
  const reader = await openCapture(file);
  const parts: Uint8Array[] = [encodeHeader(reader.header)];
  let blocks = 0;
  let moved = 0;
  for (const raw of reader.rawBlocks()) {
    const payload = unpack(raw) as Uint8Array;
    const r = new ByteReader(payload);
    const w = new ByteWriter(payload.length);
    w.uint(r.uint('missed'));
    const codes: Uint8Array[] = [];
    while (r.pos < r.end) {
      const start = r.pos;
      const type = r.u8('type');
      const length = r.uint('length');
      r.pos += length;
      if (type === RECORD_TYPE.CODE) codes.push(payload.subarray(start, r.pos));
      else w.bytes(payload.subarray(start, r.pos));
    }
    for (const c of codes) w.bytes(c);
    moved += codes.length;
    parts.push(encodeBlock(BLOCK_TYPE.RECORDS, blocks++, w.view().slice(), 6));
  }
  parts.push(encodeBlock(BLOCK_TYPE.END, blocks, encodeTrailer(reader.trailer ?? { blocks, samples: 0, codes: 0, missed: 0 }), 0));
  reader.close();
  fs.writeFileSync(out, Buffer.concat(parts));
  return { file: out, moved };
}

async function processed(file: string, options: ReportOptions): Promise<{ json: string; fallbackBlocks: number; blocks: number; attempted: number }> {
  const r = await reportCapture(file, options);
  const json = JSON.stringify({ profile: r.profile.toJSON(), recording: r.recording, warnings: r.warnings, clean: r.closedCleanly, blocks: r.blocks }, (_, v) =>
    typeof v === 'bigint' ? v.toString() : v,
  );
  return { json, fallbackBlocks: r.fallbackBlocks, blocks: r.blocks, attempted: r.profile.stats().attempted };
}

describe.each(nativeInterpreters())('block engine == reference path on real captures, $label', (py) => {
  if (py.missing) {
    it(`is skipped: ${py.missing}`, () => recordCoverage('engine', py.label, false, py.missing!));
    return;
  }
  it.each(PROGRAMS)('$name', async ({ name, args }) => {
    const file = record(py.command, name, args);
    const reference = await processed(file, { reference: true });
    const engine = await processed(file, { workers: 0 });
    expect(reference.attempted).toBeGreaterThan(100);
    expect(engine.fallbackBlocks).toBe(0);
    expect(engine.json).toBe(reference.json);
    // and in worker threads, the blocks spread over them and merged in file order
    const small = await reblocked(file, 4 << 10);
    const smallReference = await processed(small, { reference: true });
    for (const workers of [0, 1, 3]) {
      const pooled = await processed(small, { workers });
      expect(pooled.blocks).toBeGreaterThan(8);
      expect(pooled.fallbackBlocks).toBe(0);
      expect(pooled.json).toBe(smallReference.json);
    }
    // code records after the samples: workers give way to one thread, with the same result
    const late = await codesLast(small);
    expect(late.moved).toBeGreaterThan(0);
    const lateReference = await processed(late.file, { reference: true });
    expect((await processed(late.file, { workers: 0 })).json).toBe(lateReference.json);
    expect((await processed(late.file, { workers: 2 })).json).toBe(lateReference.json);
    // one thread's samples only: the filter is applied in the engine, too
    const first = JSON.parse(reference.json).profile.threads[0];
    const thread = BigInt(first.nativeThreadId ?? first.threadId);
    expect((await processed(file, { thread })).json).toBe((await processed(file, { thread, reference: true })).json);
    recordCoverage('engine', py.label, true);
  }, 180_000);
});

describe('pyunwind bench on a real capture', () => {
  const py = [...nativeInterpreters()].reverse().find((p) => !p.missing);
  if (!py) {
    it('is skipped: no native interpreter available', () => recordCoverage('bench', 'native', false, 'no native interpreter'));
    return;
  }
  it(`prints the walk and end-to-end tables (${py.label})`, () => {
    const file = record(py.command, 'threadpool', ['workloads/threadpool.py', '1']);
    const r = spawnSync(process.execPath, [BIN, 'bench', file, '--rounds', '1', '--workers', '0,2', '--walk-samples', '300', '--reference-samples', '500'], { encoding: 'utf8', timeout: 180_000 });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/^Walk: 300 samples of the capture/m);
    for (const row of ['kernel (WebAssembly), batch laid out once', 'kernel + host layout and result objects', 'reference (TypeScript)', 'reference path', 'engine, this thread', 'engine, 2 workers']) {
      expect(r.stdout).toMatch(new RegExp(`^${row.replace(/[()+]/g, '\\$&')}\\s+[\\d,]+\\s`, 'm'));
    }
    recordCoverage('bench', py.label, true);
  }, 240_000);
});
