// Recording and reporting on real memory: a capture reports exactly what walking the same
// samples in memory gives; a recorder killed part-way, a file cut at any offset and a block
// with a flipped byte all still report every intact block.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CaptureWriter, fileSink, openCapture, readCaptureBytes } from '../src/capture/index.js';
import type { CodeRecord, SampleRecord } from '../src/capture/types.js';
import { BLOCK_HEADER_SIZE } from '../src/capture/format.js';
import { formatVersion, layoutFromSource } from '../src/layout/index.js';
import { SampleProcessor } from '../src/pipeline/sample-processor.js';
import { Profile } from '../src/profile/index.js';
import { openLinuxProcess } from '../src/record/linux/process.js';
import { runSampler } from '../src/record/sampling/sampler.js';
import { reportCapture, sampleInput } from '../src/pipeline/report-file.js';
import { recordCoverage, skipTest, cannotRun } from './helpers/coverage.js';
import { nativeInterpreters } from '../harness/interpreters.js';
import { checkedWalker } from './helpers/walkers.js';

const BIN = path.resolve('bin/pyunwind.js');
// A steady program (each call runs for milliseconds, much longer than a copy) with a few
// functions and a generator driven from C, so stacks vary between samples.
const BUSY = `
def leaf(n):
    s = 0
    for i in range(n):
        s += i
    return s
def gen(k):
    for i in range(k):
        yield leaf(20000)
def middle():
    return sum(gen(5))
def top():
    while True:
        middle()
        leaf(50000)
print("started", flush=True)
top()
`;

// A program that runs until the file named by its argument exists, then ends normally.
const EXITS_WHEN = `
import os, sys
def leaf(n):
    s = 0
    for i in range(n):
        s += i
    return s
def top(mark):
    while not os.path.exists(mark):
        leaf(2000)
print("started", flush=True)
top(sys.argv[1])
`;

const py = [...nativeInterpreters()].reverse().find((p) => !p.missing);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pyunwind-robust-'));
const children: ChildProcess[] = [];
afterAll(() => {
  children.forEach((c) => c.kill('SIGKILL'));
  fs.rmSync(dir, { recursive: true, force: true });
});

async function startBusy(): Promise<ChildProcess> {
  const child = spawn(py!.command, ['-c', BUSY], { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  await new Promise<void>((resolve, reject) => {
    child.stdout!.once('data', () => resolve());
    child.once('exit', (c) => reject(new Error(`busy program exited ${c}`)));
  });
  return child;
}

/** samples per block of a capture, with each block's byte range */
function blocksOf(bytes: Uint8Array): { offset: number; end: number; samples: number }[] {
  const reader = readCaptureBytes(bytes);
  const raws = [...reader.rawBlocks()];
  const decoded = [...readCaptureBytes(bytes).blocks()];
  return raws.map((raw, i) => ({ offset: raw.offset, end: raw.offset + BLOCK_HEADER_SIZE + raw.stored.length, samples: decoded[i]?.samples.length ?? 0 }));
}

describe('record → report on a live interpreter', () => {
  if (!py) {
    cannotRun('record-robust', 'native', 'no native interpreter');
    return;
  }
  let capture: string;
  let bytes: Uint8Array;
  const events: ({ code: CodeRecord } | { sample: SampleRecord })[] = [];

  beforeAll(async () => {
    const target = await startBusy();
    const source = openLinuxProcess(target.pid!);
    capture = path.join(dir, 'busy.pyuw');
    const writer = new CaptureWriter(
      fileSink(capture),
      {
        layoutSource: source.layout.source,
        pointerSize: source.layout.pointerSize,
        pythonVersion: formatVersion(source.layout.version),
        target: source.description,
        runtimeAddress: source.runtimeAddress,
        rateHz: 1000,
        startTime: Date.now(),
        recorder: 'pyunwind test',
      },
      { blockBytes: 64 << 10 },
    );
    // everything the sampler hands the writer, also kept in memory in the same order
    await runSampler(
      source,
      {
        addCode: (r) => (writer.addCode(r), events.push({ code: r })),
        addSample: (r) => (writer.addSample(r), events.push({ sample: r })),
        addMissed: (n) => writer.addMissed(n),
        flush: () => writer.flush(),
      },
      { rateHz: 1000, durationMs: 2000, flushEveryMs: 250 },
    );
    writer.close();
    source.close();
    bytes = fs.readFileSync(capture);
    recordCoverage('record-robust', py.label, true);
  });

  it('reports exactly what walking the same samples in memory gives', async () => {
    const walker = await checkedWalker();
    const fromFile: string[] = [];
    const result = await reportCapture(capture, { walker, onSample: (p) => fromFile.push(JSON.stringify([p.status, p.frames.map((f) => [f.qualname, f.line])])) });
    expect(result.closedCleanly).toBe(true);
    expect(result.warnings).toEqual([]);

    const processor = new SampleProcessor(openLayout(bytes), walker);
    const inMemory: string[] = [];
    const profile = new Profile();
    for (const e of events) {
      if ('code' in e) processor.addCodes([e.code]);
      else {
        const p = processor.process([e.sample])[0]!;
        inMemory.push(JSON.stringify([p.status, p.frames.map((f) => [f.qualname, f.line])]));
        profile.add(sampleInput(p));
      }
    }
    // a loaded machine gets fewer ticks than asked for: what matters is that it got a real recording
    expect(inMemory.length).toBeGreaterThan(300);
    expect(fromFile).toEqual(inMemory);
    const a = result.profile.toJSON();
    const b = profile.toJSON();
    expect(a.threads).toEqual(b.threads);
    const trusted = result.profile.stats().trusted / result.profile.stats().attempted;
    expect(trusted).toBeGreaterThan(0.9);
    console.log(`${py.label}: ${inMemory.length} samples, ${bytes.length} bytes (${(bytes.length / inMemory.length).toFixed(1)} B/sample), trusted ${(100 * trusted).toFixed(1)}%`);
  });

  it('a file cut at any offset reports every block before the cut', () => {
    const blocks = blocksOf(bytes);
    expect(blocks.length).toBeGreaterThan(3);
    const cuts = new Set<number>();
    for (const b of blocks) for (const d of [0, 1, 7, Math.floor((b.end - b.offset) / 2), b.end - b.offset - 1]) cuts.add(b.offset + d);
    for (let i = 0; i < 40; i++) cuts.add(Math.floor(Math.random() * bytes.length));
    const dataStart = readCaptureBytes(bytes).dataStart;
    // inside the header nothing can be read: that is an error, not a warning
    expect(() => readCaptureBytes(bytes.subarray(0, dataStart - 1))).toThrow(/inside its header/);
    for (const cut of cuts) {
      if (cut < dataStart) continue;
      const reader = readCaptureBytes(bytes.subarray(0, cut));
      const got = [...reader.blocks()].reduce((n, b) => n + b.samples.length, 0);
      const want = blocks.filter((b) => b.end <= cut).reduce((n, b) => n + b.samples, 0);
      expect(got, `cut at ${cut}`).toBe(want);
      expect(reader.warnings.length, `cut at ${cut}: ${JSON.stringify(reader.warnings)}`).toBeLessThanOrEqual(1);
      if (blocks.some((b) => cut > b.offset && cut < b.end)) expect(reader.warnings[0]?.message ?? '', `cut at ${cut}`).toMatch(/cut short|ends|inside/);
    }
  });

  it('a flipped byte in a block is a checksum error for that block only', () => {
    const blocks = blocksOf(bytes);
    const victim = Math.floor(blocks.length / 2);
    const b = blocks[victim]!;
    const bad = bytes.slice();
    const at = b.offset + Math.floor((b.end - b.offset) * 0.6);
    bad[at] = bad[at]! ^ 0x40;
    const reader = readCaptureBytes(bad);
    const got = [...reader.blocks()];
    expect(reader.warnings).toHaveLength(1);
    expect(reader.warnings[0]!.message).toMatch(/checksum/);
    expect(reader.warnings[0]!.offset).toBe(b.offset);
    const total = blocks.reduce((n, x) => n + x.samples, 0);
    expect(got.reduce((n, x) => n + x.samples.length, 0)).toBe(total - b.samples);
  });

  it('a recorder killed with SIGKILL leaves a file whose complete blocks report', async () => {
    const target = await startBusy();
    const file = path.join(dir, 'killed.pyuw');
    const recorder = spawn(process.execPath, [BIN, 'record', '--pid', String(target.pid), '-o', file, '-q'], { stdio: 'ignore' });
    children.push(recorder);
    // part-way: once two blocks of samples (two seconds) are in the file, and the next is being gathered
    await waitForBlocks(file, 2);
    recorder.kill('SIGKILL');
    await new Promise((r) => recorder.once('exit', r));
    const result = await reportCapture(file, { walker: await checkedWalker() });
    expect(result.closedCleanly).toBe(false);
    expect(result.warnings.length).toBeLessThanOrEqual(1);
    const stats = result.profile.stats();
    // the two blocks of samples waited for are there (and any block of code objects alone)
    expect(result.blocks).toBeGreaterThanOrEqual(2);
    expect(stats.attempted).toBeGreaterThan(0);
    expect(stats.trusted / stats.attempted).toBeGreaterThan(0.9);
    console.log(`killed: ${stats.attempted} samples in ${result.blocks} complete blocks; warnings: ${result.warnings.map((w) => w.message).join('; ') || 'none'}`);
  });

  it('a target that exits while it is being copied: exit 0, said so, the file closed cleanly and read back', async () => {
    // recorded by pid at 10 kHz, so that the exit comes while a copy is under way (its reads
    // fail part-way) or between two; either way the recording ends there. The program ends
    // itself (a normal interpreter shutdown) once the recording is known to be under way: a
    // block is in the file.
    const mark = path.join(dir, 'exit-now');
    const target = spawn(py!.command, ['-c', EXITS_WHEN, mark], { stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(target);
    await new Promise<void>((resolve, reject) => {
      target.stdout!.once('data', () => resolve());
      target.once('exit', (c) => reject(new Error(`program exited ${c}`)));
    });
    const file = path.join(dir, 'exited.pyuw');
    const r = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const p = spawn(process.execPath, [BIN, 'record', '--pid', String(target.pid), '-o', file, '-r', '10000', '-q'], { stdio: ['ignore', 'ignore', 'pipe'] });
      children.push(p);
      let stderr = '';
      p.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
      p.once('exit', (code) => resolve({ code, stderr }));
      // (without a block in 30 s the program is ended anyway, and the checks below say what is missing)
      void waitForBlocks(file, 1).finally(() => fs.writeFileSync(mark, '')).catch(() => {});
    });
    expect(r.code, r.stderr).toBe(0);
    // one line says it (beside it at most the advice a target stopped for much of a recording
    // longer than half a second gets: --copy interrupt would not stop it)
    const lines = r.stderr.trim().split('\n').filter((l) => !/--copy interrupt would copy its running threads/.test(l));
    expect(lines, r.stderr).toHaveLength(1);
    expect(lines[0]).toMatch(/\(the target exited\)/);
    const result = await reportCapture(file, { walker: await checkedWalker() });
    expect(result.closedCleanly).toBe(true);
    expect(result.warnings).toEqual([]);
    const stats = result.profile.stats();
    expect(stats.attempted).toBeGreaterThan(0);
    expect(stats.trusted / stats.attempted).toBeGreaterThan(0.9);
    recordCoverage('record-robust', 'target exits', true);
  });

  it('a program that ends at once: the summary says too short to measure, no share of nothing', () => {
    // on every interpreter: some exit before the recorder sees their interpreter (an error,
    // one line), the others give a recording of no tick or a few
    for (const p of nativeInterpreters().filter((q) => !q.missing)) {
      const r = spawnSync(process.execPath, [BIN, 'record', '-o', path.join(dir, `pass-${p.label}.pyuw`), '--', p.command, '-c', 'pass'], { encoding: 'utf8', timeout: 60_000 });
      // (the summary, last: no hint of --copy interrupt follows a recording this short)
      const line = r.stderr.trim().split('\n').pop()!;
      if (r.status !== 0) {
        expect(line, p.label).toMatch(/exited \(0\) before it could be recorded/);
        continue;
      }
      expect(line, p.label).toMatch(/^pyunwind: recorded \d+ samples/);
      for (const share of line.matchAll(/([\d.]+)%/g)) expect(Number(share[1]), `${p.label}: ${line}`).toBeLessThanOrEqual(100);
      if (!/ticks\/s/.test(line)) expect(line, p.label).toMatch(/too short to measure: \d+ ticks? in [\d.]+ ms/);
    }
  });

  it('output that cannot be written (a file size limit): one line, exit 1, the program it started ended, every block written before reads back', async (ctx) => {
    const prlimit = ['/usr/bin/prlimit', '/bin/prlimit'].find((p) => fs.existsSync(p));
    if (!prlimit) {
      return skipTest(ctx, 'record-robust', 'output cannot be written', 'no prlimit to limit the file size');
    }
    const file = path.join(dir, 'limited.pyuw');
    // a file size limit makes writes past 30,000 bytes fail (EFBIG) as a full disk would
    // (ENOSPC); the program would run for 60 s: the recorder must end it, not wait for it
    const r = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const p = spawn(prlimit, ['--fsize=30000', process.execPath, BIN, 'record', '-o', file, '-r', '1000', '-q', '--', py!.command, '-c', BUSY], { stdio: ['ignore', 'ignore', 'pipe'] });
      children.push(p);
      let stderr = '';
      p.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
      p.once('exit', (code) => resolve({ code, stderr }));
    });
    expect(r.code, r.stderr).toBe(1);
    const lines = r.stderr.split('\n').filter((l) => l.trim());
    expect(lines, r.stderr).toHaveLength(1);
    expect(lines[0]).toMatch(new RegExp(`^pyunwind record: cannot write ${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: .*file size limit`));
    const result = await reportCapture(file, { walker: await checkedWalker() });
    expect(result.closedCleanly).toBe(false);
    expect(result.blocks).toBeGreaterThanOrEqual(1);
    const stats = result.profile.stats();
    expect(stats.attempted).toBeGreaterThan(0);
    expect(stats.trusted / stats.attempted).toBeGreaterThan(0.9);
    recordCoverage('record-robust', 'output cannot be written', true);
    console.log(`file size limit: ${stats.attempted} samples in ${result.blocks} complete blocks read back; "${lines[0]}"`);
  });

  it('Ctrl-C (SIGINT) and SIGTERM close the file cleanly', async () => {
    for (const signal of ['SIGINT', 'SIGTERM'] as const) {
      const target = await startBusy();
      const file = path.join(dir, `${signal}.pyuw`);
      const recorder = spawn(process.execPath, [BIN, 'record', '--pid', String(target.pid), '-o', file, '-q'], { stdio: 'ignore' });
      children.push(recorder);
      await waitForBlocks(file, 1);
      recorder.kill(signal);
      const code = await new Promise((r) => recorder.once('exit', (c) => r(c)));
      expect(code, signal).toBe(0);
      const reader = await openCapture(file);
      expect(reader.closedCleanly, signal).toBe(true);
      expect([...reader.blocks()].reduce((n, b) => n + b.samples.length, 0)).toBeGreaterThan(0);
      expect(reader.warnings).toEqual([]);
      reader.close();
    }
  });
});

/**
 * Wait until a capture being written holds `n` complete blocks with samples. (A block may hold
 * none: code objects read before the first tick, or one whose bytecode specialized since it was
 * recorded, end a block of their own; a starved recorder's block may hold only missed ticks.)
 */
async function waitForBlocks(file: string, n: number, timeoutMs = 30_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    try {
      const reader = readCaptureBytes(fs.readFileSync(file));
      if ([...reader.blocks()].filter((b) => b.samples.length > 0).length >= n) return;
    } catch {
      // not even a header yet
    }
    if (Date.now() > until) throw new Error(`${file} did not reach ${n} blocks in ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function openLayout(bytes: Uint8Array) {
  return layoutFromSource(readCaptureBytes(bytes).header.layoutSource);
}
