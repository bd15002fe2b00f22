// The product end to end on every native interpreter: workloads/hotcold.py (≈70 % of its time
// in hot(), ≈30 % in cold(), measured by itself) is recorded with `pyunwind record --pid` at
// 1 kHz for more than 3 s and reported with `pyunwind report --format json`. The hot/cold
// split must be within ±5 points of the program's own truth, every accepted stack must be one
// the program can have, the status counts must add up, and on 3.15 at least 95 % of the
// attempted samples must be complete.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openLinuxProcess } from '../src/record/linux/process.js';
import { takeSnapshot, snapshotSamples } from '../src/record/copy/snapshot.js';
import { unwindSnapshot } from '../src/pipeline/snapshot-stacks.js';
import { recordCoverage, cannotRun } from './helpers/coverage.js';
import { nativeInterpreters } from '../harness/interpreters.js';
import { checkedWalker } from './helpers/walkers.js';

const BIN = path.resolve('bin/pyunwind.js');
const WORKLOAD = path.resolve('workloads/hotcold.py');
// the recording starts once the program is in main(), which takes a while on a loaded machine
const SECONDS = 6;
/** every stack the workload can have, outermost first (its docstring) */
const POSSIBLE = new Set(['<module>', '<module>;main', '<module>;main;hot', '<module>;main;cold']);

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pyunwind-hotcold-'));
const children: ChildProcess[] = [];
afterAll(() => {
  children.forEach((c) => c.kill('SIGKILL'));
  fs.rmSync(dir, { recursive: true, force: true });
});

interface JsonProfile {
  summary: { attempted: number; trusted: number; statuses: Record<string, number>; ticks: number; missed: number; scheduled: number; firstTime: number; lastTime: number };
  threads: {
    frames: { qualname: string; filename: string; line: number | null }[];
    stacks: [number, number, number][];
    functions: { qualname: string; filename: string; self: number; total: number }[];
    statuses: Record<string, number>;
  }[];
}

/** Wait until the program is inside main() (so no start-up stack is recorded). */
async function waitForMain(pid: number): Promise<void> {
  const walker = await checkedWalker();
  const until = Date.now() + 10_000;
  while (Date.now() < until) {
    try {
      const source = openLinuxProcess(pid);
      const stacks = unwindSnapshot(snapshotSamples(takeSnapshot(source)), walker);
      source.close();
      if (stacks.some((s) => s.frames.some((f) => f.qualname === 'main'))) return;
    } catch {
      // not started far enough to be read yet
    }
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`pid ${pid} did not reach main() in 10 s`);
}

describe.each(nativeInterpreters())('record + report hotcold on $label', (py) => {
  if (py.missing) {
    cannotRun('record-hotcold', py.label, py.missing!);
    return;
  }
  it('gets the split, only possible stacks, and counts that add up', async () => {
    // calls of a few hundred µs: much longer than a copy (see the workload's docstring)
    const target = spawn(py.command, [WORKLOAD, String(SECONDS), '1000'], { stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(target);
    let stdout = '';
    target.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
    // 'close': the process exited and its stdout is drained
    const exited = new Promise((r) => target.once('close', r));
    await waitForMain(target.pid!);

    const capture = path.join(dir, `${py.label}.pyuw`);
    const rec = spawnSync(process.execPath, [BIN, 'record', '--pid', String(target.pid), '-o', capture, '--rate', '1000', '-q'], {
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(rec.status, rec.stderr).toBe(0);
    await exited;
    const truth = JSON.parse(stdout.trim().split('\n').pop()!) as { hot: number; cold: number; total: number };
    const rep = spawnSync(process.execPath, [BIN, 'report', capture, '--format', 'json', '-q'], { encoding: 'utf8', timeout: 60_000 });
    expect(rep.status, rep.stderr).toBe(0);
    const json = JSON.parse(rep.stdout) as JsonProfile;
    const s = json.summary;

    // every attempted sample is in exactly one status
    expect(Object.values(s.statuses).reduce((a, b) => a + b, 0)).toBe(s.attempted);
    // one thread: a tick is a sample; the schedule counts ticks, taken and missed
    expect(s.ticks).toBe(s.attempted);
    expect(s.scheduled).toBe(s.ticks + s.missed);
    // and record said the same of its misses as report does
    const said = /missed ([\d.]+)%/.exec(rec.stderr);
    expect(said, rec.stderr).not.toBeNull();
    expect(Math.abs(Number(said![1]) - (100 * s.missed) / s.scheduled)).toBeLessThan(0.051);
    expect(json.threads).toHaveLength(1);
    const t = json.threads[0]!;
    // recorded for more than 3 s
    expect((s.lastTime - s.firstTime) / 1e6).toBeGreaterThan(3);

    // every accepted stack is one the workload can have
    const paths: string[] = [];
    for (let i = 0; i < t.stacks.length; i++) {
      const names: string[] = [];
      for (let k = i; k >= 0; k = t.stacks[k]![0]) {
        const f = t.frames[t.stacks[k]![1]]!;
        expect(f.filename).toBe(WORKLOAD);
        names.unshift(f.qualname);
      }
      paths.push(names.join(';'));
    }
    const impossible = paths.filter((p) => !POSSIBLE.has(p));
    expect(impossible).toEqual([]);

    const fn = (name: string) => t.functions.find((f) => f.qualname === name)?.total ?? 0;
    const inMain = fn('main');
    const hotShare = (100 * fn('hot')) / inMain;
    const coldShare = (100 * fn('cold')) / inMain;
    const hotTruth = (100 * truth.hot) / truth.total;
    const coldTruth = (100 * truth.cold) / truth.total;
    const complete = (100 * (s.statuses['complete'] ?? 0)) / s.attempted;
    const trusted = (100 * s.trusted) / s.attempted;
    console.log(
      `${py.label}: ${s.attempted} samples over ${((s.lastTime - s.firstTime) / 1e6).toFixed(2)} s (missed ${((100 * s.missed) / s.scheduled).toFixed(1)}%), ` +
        `trusted ${trusted.toFixed(1)}%, complete ${complete.toFixed(1)}%; hot ${hotShare.toFixed(1)}% (truth ${hotTruth.toFixed(1)}%), ` +
        `cold ${coldShare.toFixed(1)}% (truth ${coldTruth.toFixed(1)}%)`,
    );
    expect(Math.abs(hotShare - hotTruth)).toBeLessThanOrEqual(5);
    expect(Math.abs(coldShare - coldTruth)).toBeLessThanOrEqual(5);
    expect(trusted).toBeGreaterThanOrEqual(95);
    if (json.threads[0]!.statuses['complete']! > 0 || py.label.endsWith('3.15')) expect(complete).toBeGreaterThanOrEqual(95);
    recordCoverage('record-hotcold', py.label, true);
  });
});
