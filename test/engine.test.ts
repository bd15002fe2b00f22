// The block engine (assembly/engine.ts + src/kernel/block-engine.ts) against the reference path
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
import { SAMPLING_MODES } from '../src/capture/types.js';
import { BLOCK_FLAG, BLOCK_TYPE, ByteReader, ByteWriter, RECORD_TYPE, encodeBlock, encodeHeader, encodeTrailer } from '../src/capture/format.js';
import { openCapture } from '../src/capture/index.js';
import { layoutFromSource } from '../src/layout/index.js';
import { CodeTable } from '../src/symbols/code-table.js';
import { blockCodes, unpack } from '../src/capture/reader.js';
import { instantiateKernel, loadKernel, readKernelBytes } from '../src/kernel/load.js';
import { reportCapture, reportCaptureBytes, type CaptureReport, type ReportOptions } from '../src/pipeline/report-file.js';
import { WORKER_BYTES, workersThatPay } from '../src/pipeline/process-capture.js';
import { WorkerPool } from '../src/pipeline/workers/pool.js';
import { recordCoverage, cannotRun } from './helpers/coverage.js';
import { reblocked } from './helpers/reblock.js';
import { blockOf } from './helpers/blocks.js';
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

/** The capture with each records block's payload and flags as `edit` makes them. */
async function rewritten(file: string, suffix: string, edit: (payload: Uint8Array) => { payload: Uint8Array; flags: number }): Promise<string> {
  const out = file.replace(/\.pyuw$/, `-${suffix}.pyuw`);
  const reader = await openCapture(file);
  const parts: Uint8Array[] = [encodeHeader(reader.header)];
  let blocks = 0;
  for (const raw of reader.rawBlocks()) {
    const { payload, flags } = edit(unpack(raw) as Uint8Array);
    parts.push(blockOf(raw.type, blocks++, payload, flags));
  }
  parts.push(encodeBlock(BLOCK_TYPE.END, blocks, encodeTrailer(reader.trailer ?? { blocks, samples: 0, codes: 0, missed: 0 }), 0));
  reader.close();
  fs.writeFileSync(out, Buffer.concat(parts));
  return out;
}

/**
 * The same capture with each block's code records moved after its samples: a block the writer
 * would not make, which the reference path reads the same (a block's code records apply before
 * its samples) and which workers must not split (they would see the codes too late).
 */
async function codesLast(file: string): Promise<{ file: string; moved: number }> {
  let moved = 0;
  const out = await rewritten(file, 'codes-last', (payload) => {
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
    return { payload: w.view().slice(), flags: 0 };
  });
  return { file: out, moved };
}

/** Every block's header claiming it holds no code records, those that do too: a lie the workers must catch. */
const allClaimNoCodes = (file: string): Promise<string> => rewritten(file, 'no-codes-claimed', (payload) => ({ payload, flags: BLOCK_FLAG.NO_CODES }));

/** The capture processed as a cross-origin-isolated page does: its bytes in a SharedArrayBuffer, the kernel's shared-memory build, blocks in `workers` workers. */
async function processedShared(file: string, workers: number): Promise<string> {
  const bytes = fs.readFileSync(file);
  const shared = new Uint8Array(new SharedArrayBuffer(bytes.length));
  shared.set(bytes);
  const module = await loadKernel(await readKernelBytes(true));
  expect((await instantiateKernel(module)).shared).toBe(true);
  const r = await reportCaptureBytes(shared, { module, workers, pool: async (n, setup) => new WorkerPool(n, setup) });
  return jsonOf(r);
}

async function processed(file: string, options: ReportOptions): Promise<{ json: string; fallbackBlocks: number; blocks: number; attempted: number }> {
  const r = await reportCapture(file, options);
  return { json: jsonOf(r), fallbackBlocks: r.fallbackBlocks, blocks: r.blocks, attempted: r.profile.stats().attempted };
}

/** How often the capture's code records give an address that held a code object another one (CodeTable.renamed). */
async function renamedAddresses(file: string): Promise<number> {
  const reader = await openCapture(file);
  const table = new CodeTable(layoutFromSource(reader.header.layoutSource));
  for (const block of reader.blocks()) for (const c of block.codes) table.add(c);
  reader.close();
  return table.renamed;
}

async function blockCount(file: string): Promise<number> {
  const reader = await openCapture(file);
  const n = [...reader.rawBlocks()].length;
  reader.close();
  return n;
}

function jsonOf(r: CaptureReport): string {
  return JSON.stringify({ profile: r.profile.toJSON(), recording: r.recording, warnings: r.warnings, clean: r.closedCleanly, blocks: r.blocks }, (_, v) => (typeof v === 'bigint' ? v.toString() : v));
}

describe.each(nativeInterpreters())('block engine == reference path on real captures, $label', (py) => {
  if (py.missing) {
    cannotRun('engine', py.label, py.missing!);
    return;
  }
  it.each(PROGRAMS)('$name', async ({ name, args }) => {
    const file = record(py.command, name, args);
    const reference = await processed(file, { reference: true });
    const engine = await processed(file, { workers: 0 });
    expect(reference.attempted).toBeGreaterThan(100);
    expect(engine.fallbackBlocks).toBe(0);
    expect(engine.json).toBe(reference.json);
    // reuse.py gives code addresses to new code objects: the engine names its stacks across
    // blocks, and must drop what it named at such an address (CodeTable.renamed)
    if (name === 'reuse') expect(await renamedAddresses(file), 'code records giving an address another code object').toBeGreaterThan(0);
    // and in worker threads, the blocks spread over them and merged in file order
    // blocks of 4 KB, smaller when the recording got few samples (a busy machine): several blocks for each worker
    let small = await reblocked(file, 4 << 10);
    for (let bytes = 2 << 10; (await blockCount(small)) <= 8 && bytes >= 256; bytes >>= 1) small = await reblocked(file, bytes);
    const smallReference = await processed(small, { reference: true });
    for (const workers of [0, 1, 3]) {
      const pooled = await processed(small, { workers });
      expect(pooled.blocks).toBeGreaterThan(8);
      expect(pooled.fallbackBlocks).toBe(0);
      expect(pooled.json).toBe(smallReference.json);
    }
    // the writer says which blocks hold no code records (the pool then inflates nothing to find them)
    const flagged = [...(await openCapture(small)).rawBlocks()];
    for (const b of flagged) expect(b.flags & BLOCK_FLAG.NO_CODES ? 0 : 1).toBe(blockCodes(unpack(b) as Uint8Array, b.type).length > 0 ? 1 : 0);
    // a header that lies about it: the workers find the code records, and one thread processes the capture
    const lying = await allClaimNoCodes(small);
    expect((await processed(lying, { workers: 3 })).json).toBe((await processed(lying, { reference: true })).json);
    // as a cross-origin-isolated page processes it (bytes in shared memory, the shared-memory build)
    for (const workers of [0, 2]) expect(await processedShared(small, workers)).toBe(smallReference.json);
    // code records after the samples (in record blocks, format 1.3: a section block keeps them
    // in a section of their own): workers give way to one thread, with the same result
    const late = await codesLast(await reblocked(small, 4 << 10, small.replace(/\.pyuw$/, '-records.pyuw'), 'records'));
    expect(late.moved).toBeGreaterThan(0);
    const lateReference = await processed(late.file, { reference: true });
    expect((await processed(late.file, { workers: 0 })).json).toBe(lateReference.json);
    expect((await processed(late.file, { workers: 2 })).json).toBe(lateReference.json);
    // the samples of one mode only (report --mode): the engine keeps those the reference path keeps
    const facts = (await openCapture(file)).header.facts ?? [];
    expect(facts).toContain('cpu');
    for (const mode of SAMPLING_MODES.filter((m) => m !== 'wall' && (facts as string[]).includes(m))) {
      const kept = await processed(file, { mode });
      expect(kept.json, mode).toBe((await processed(file, { mode, reference: true })).json);
      expect(kept.attempted).toBeLessThanOrEqual(engine.attempted);
    }
    // <native> frames (report --native): the engine adds them as nodes, the reference path to each sample; workers too
    const nativeReference = await processed(small, { native: true, reference: true });
    for (const workers of [0, 2]) expect((await processed(small, { native: true, workers })).json).toBe(nativeReference.json);
    // one thread's samples only: the filter is applied in the engine, too
    const first = JSON.parse(reference.json).profile.threads[0];
    const thread = BigInt(first.nativeThreadId ?? first.threadId);
    expect((await processed(file, { thread })).json).toBe((await processed(file, { thread, reference: true })).json);
    recordCoverage('engine', py.label, true);
  }, 180_000);
});

describe('workers by what pays', () => {
  it('none below two workers\' worth of capture; up to the processors there are, WORKER_BYTES each', () => {
    expect(workersThatPay(0, 2)).toBe(0);
    // one worker alone is only slower than this thread
    expect(workersThatPay(2 * WORKER_BYTES - 1, 2)).toBe(0);
    expect(workersThatPay(2 * WORKER_BYTES, 2)).toBe(2);
    expect(workersThatPay(100 * WORKER_BYTES, 2)).toBe(2);
    expect(workersThatPay(3 * WORKER_BYTES, 8)).toBe(3);
    expect(workersThatPay(100 * WORKER_BYTES, 1)).toBe(0);
  });
});

describe('pyunwind bench on a real capture', () => {
  const py = [...nativeInterpreters()].reverse().find((p) => !p.missing);
  if (!py) {
    cannotRun('bench', 'native', 'no native interpreter');
    return;
  }
  it(`prints the walk and end-to-end tables (${py.label})`, async () => {
    const file = record(py.command, 'threadpool', ['workloads/threadpool.py', '1']);
    const r = spawnSync(process.execPath, [BIN, 'bench', file, '--rounds', '1', '--workers', '0,2', '--walk-samples', '300', '--reference-samples', '500'], { encoding: 'utf8', timeout: 180_000 });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    // the walk takes 300 samples, or as many (not torn) as the recorder got on a busy machine
    let recorded = 0;
    const reader = await openCapture(file);
    try {
      for (const b of reader.blocks()) recorded += b.samples.filter((x) => x.recorderStatus !== 'torn').length;
    } finally {
      reader.close();
    }
    expect(recorded).toBeGreaterThan(0);
    expect(r.stdout).toMatch(new RegExp(`^Walk: ${Math.min(300, recorded)} samples of the capture`, 'm'));
    for (const row of ['kernel (WebAssembly), batch laid out once', 'kernel + host layout and result objects', 'reference (TypeScript)', 'reference path', 'engine, this thread', 'engine, 2 workers']) {
      expect(r.stdout).toMatch(new RegExp(`^${row.replace(/[()+]/g, '\\$&')}\\s+[\\d,]+\\s`, 'm'));
    }
    recordCoverage('bench', py.label, true);
  }, 240_000);
});
