// <GC> frames on every native interpreter: workloads/gcchurn.py makes cyclic garbage all the
// time and measures, with gc.callbacks, how long its collections take. Recorded at 1 kHz, its
// profile must show <GC> — always on top of a trusted Python stack — at a share of the
// thread's samples within 10 points of the program's own measure, the same in the block engine
// and on the reference path; --no-gc removes every <GC> and keeps every sample. CPython 3.11
// and 3.12 publish no collector state: their captures say so (no `gc` fact) and have no <GC>.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readCaptureBytes } from '../src/capture/reader.js';
import { reportCapture } from '../src/pipeline/report-file.js';
import { nativeInterpreters } from '../harness/interpreters.js';
import { recordCoverage, cannotRun } from './helpers/coverage.js';

const BIN = path.resolve('bin/pyunwind.js');
const WORKLOAD = path.resolve('workloads/gcchurn.py');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pyunwind-gc-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

interface JsonReport {
  summary: { attempted: number; trusted: number };
  threads: { frames: { qualname: string }[]; stacks: [number, number, number][]; functions: { qualname: string; self: number; total: number }[] }[];
}

function pyunwind(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', timeout: 120_000, maxBuffer: 64 << 20, env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' } });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

const profileJson = (r: Awaited<ReturnType<typeof reportCapture>>): string => JSON.stringify(r.profile.toJSON(), (_, v) => (typeof v === 'bigint' ? v.toString() : v));

describe.each(nativeInterpreters())('<GC> frames, $label', (py) => {
  if (py.missing) {
    cannotRun('gc-frames', py.label, py.missing!);
    return;
  }
  it('the collector at the share the program measures; --no-gc removes it', async () => {
    const file = path.join(dir, `${py.label}.pyuw`);
    const rec = pyunwind(['record', '-q', '-r', '1000', '-o', file, '--', py.command, WORKLOAD, '2.5']);
    expect(rec.status, rec.stderr).toBe(0);
    const truth = JSON.parse(rec.stdout.trim().split('\n').pop()!) as { gc: number; total: number; collections: number };
    expect(truth.collections).toBeGreaterThan(100);
    const header = readCaptureBytes(fs.readFileSync(file)).header;
    const minor = Number(header.pythonVersion.split('.')[1]);
    const r = pyunwind(['report', '-q', file, '--format', 'json']);
    expect(r.status, r.stderr).toBe(0);
    const json = JSON.parse(r.stdout) as JsonReport;
    const [thread] = json.threads;
    const gcFrame = thread!.frames.findIndex((f) => f.qualname === '<GC>');
    if (minor < 13) {
      expect(header.facts).not.toContain('gc');
      expect(gcFrame).toBe(-1);
      recordCoverage('gc-frames', `${py.label} (no collector state before 3.13)`, true);
      return;
    }
    expect(header.facts).toContain('gc');
    expect(gcFrame).toBeGreaterThanOrEqual(0);
    // always a leaf, always above a Python frame
    thread!.stacks.forEach(([parent, frame], i) => {
      if (frame !== gcFrame) return;
      expect(parent).toBeGreaterThanOrEqual(0);
      expect(thread!.frames[thread!.stacks[parent]![1]]!.qualname).not.toBe('<GC>');
      expect(thread!.stacks.some(([p]) => p === i)).toBe(false);
    });
    const fn = thread!.functions.find((f) => f.qualname === '<GC>')!;
    expect(fn.self).toBe(fn.total);
    const stacked = thread!.stacks.reduce((n, s) => n + s[2], 0);
    const share = fn.self / stacked;
    const measured = truth.gc / truth.total;
    console.log(`[gc-frames] ${py.label}: <GC> ${fn.self} of ${stacked} samples (${(100 * share).toFixed(1)} %), the program measured ${(100 * measured).toFixed(1)} % in ${truth.collections} collections`);
    expect(Math.abs(share - measured)).toBeLessThanOrEqual(0.1);
    // --no-gc: no <GC>, the same samples
    const plain = pyunwind(['report', '-q', file, '--format', 'collapsed', '--no-gc']);
    expect(plain.status, plain.stderr).toBe(0);
    expect(plain.stdout).not.toContain('<GC>');
    const counted = plain.stdout.trim().split('\n').reduce((n, l) => n + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
    expect(counted).toBe(stacked);
    // the block engine counts <GC> as the reference path adds it
    expect(profileJson(await reportCapture(file, { workers: 0 }))).toBe(profileJson(await reportCapture(file, { reference: true })));
    recordCoverage('gc-frames', py.label, true);
  }, 120_000);
});
