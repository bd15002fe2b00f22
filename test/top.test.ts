// pyunwind top against a live target (workloads/modes.py, run long, native 3.15 — the version
// with a profiler anchor to leave cleared; else the newest native one): in its plain mode
// (--iterations) it prints that many refreshes, each with the validation counts and the
// functions by self samples, the program's busy functions among the first; through a
// pseudo-terminal (util-linux `script`) it draws on the alternate screen, refreshes, switches
// the sort on `s`, and quits cleanly on `q` — leaving the target running and every thread's
// profiler anchor back at 0.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { nativeInterpreters } from '../harness/interpreters.js';
import { anchors } from './helpers/anchors.js';
import { recordCoverage, cannotRun } from './helpers/coverage.js';
import { untilReadable, waitUntil } from './helpers/wait.js';

const BIN = path.resolve('bin/pyunwind.js');
const WORKLOAD = path.resolve('workloads/modes.py');
const children: ChildProcess[] = [];
afterAll(() => children.forEach((c) => c.kill('SIGKILL')));

const py = nativeInterpreters().find((p) => p.label === 'debian-3.15' && !p.missing) ?? [...nativeInterpreters()].reverse().find((p) => !p.missing);

/** modes.py for a long while, readable by pyunwind. */
async function target(): Promise<ChildProcess> {
  const child = spawn(py!.command, [WORKLOAD, '600'], { stdio: 'ignore', env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' } });
  children.push(child);
  await untilReadable(child.pid!);
  return child;
}

const FRAME = /^pyunwind top — pid \d+ \((?:lib)?python3\.\d+(?:\.so[\d.]*)?, [\d.]+\), [\d.]+ s, 1000 Hz, mode wall, by (self|total)$/gm;

describe('pyunwind top', () => {
  if (!py) {
    cannotRun('top', 'native', 'no native interpreter');
    return;
  }
  const hasAnchor = py.label.endsWith('3.15');

  it(`--iterations: that many plain refreshes, the busy functions first (${py.label})`, async () => {
    const child = await target();
    const r = spawnSync(process.execPath, [BIN, 'top', '--pid', String(child.pid), '--iterations', '3', '-i', '0.5', '-n', '8'], { encoding: 'utf8', timeout: 60_000 });
    expect(r.status, r.stderr).toBe(0);
    const frames = r.stdout.split(/\n\n(?=pyunwind top)/);
    expect(r.stdout.match(FRAME)?.length).toBe(3);
    expect(frames).toHaveLength(3);
    const last = frames[2]!;
    expect(last).toMatch(/^samples (\d+): trusted (\d+) \(idle \d+\), rejected 0; ticks \d+ of \d+ \(missed [\d.]+%\); threads 4$/m);
    expect(r.stdout).not.toContain('\x1b[');
    // the spinner's loop, the hasher, the napper and the main thread's wait: each a quarter of the samples
    const names = [...last.matchAll(/^ +[\d.]+ +[\d.]+ +\d+ +\d+ {2}(\S+) /gm)].map((m) => m[1]);
    for (const f of ['work', 'hasher', 'napper']) expect(names.slice(0, 5), f).toContain(f);
    expect(r.stderr).toMatch(/^pyunwind top: \d+ samples of pid \d+ \(python3\.\d+, [\d.]+\) in [\d.]+ s\n$/);
    expect(child.exitCode).toBeNull();
    if (hasAnchor) expect(anchors(child.pid!).every((a) => a === 0n)).toBe(true);
    child.kill('SIGKILL');
    recordCoverage('top', `${py.label} plain`, true);
  }, 90_000);

  it(`on a terminal: the alternate screen, refreshed, s switches the sort, q quits cleanly (${py.label})`, async () => {
    const child = await target();
    // a pseudo-terminal: `script` runs the command on one and relays our stdin to it
    const t = spawn('script', ['-qfec', `${process.execPath} ${BIN} top --pid ${child.pid} -i 0.2`, '/dev/null'], { stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, COLUMNS: '120', LINES: '30' } });
    children.push(t);
    let screen = '';
    t.stdout!.on('data', (d: Buffer) => (screen += d.toString()));
    const exited = new Promise<number | null>((ok) => t.on('exit', (code) => ok(code)));
    const frames = (): number => screen.match(/pyunwind top — /g)?.length ?? 0;
    await waitUntil(() => frames() >= 2, 'two refreshes on the terminal', 60_000);
    expect(screen).toContain('\x1b[?1049h'); // the alternate screen
    expect(screen).toContain('q quit · s sort by self/total · p pause');
    expect(screen).toMatch(/mode wall, by self/);
    // while it watches, the anchor is in use (so "back to 0" below means something)
    if (hasAnchor) await waitUntil(() => anchors(child.pid!).some((a) => a !== 0n), 'top to set an anchor', 30_000);
    t.stdin!.write('s');
    await waitUntil(() => /mode wall, by total/.test(screen), 'the sort by total after s', 30_000);
    t.stdin!.write('q');
    expect(await exited).toBe(0);
    expect(screen).toContain('\x1b[?1049l'); // back to the normal screen
    expect(screen).toMatch(/pyunwind top: \d+ samples of pid \d+/);
    expect(child.exitCode).toBeNull();
    if (hasAnchor) expect(anchors(child.pid!).every((a) => a === 0n)).toBe(true);
    child.kill('SIGKILL');
    recordCoverage('top', `${py.label} terminal`, true);
  }, 120_000);

  it(`record --live: the same view while the capture is written; report reads the capture (${py.label})`, async () => {
    const child = await target();
    const file = path.join(os.tmpdir(), `pyunwind-live-${process.pid}.pyuw`);
    try {
      const r = spawnSync(process.execPath, [BIN, 'record', '--live', '--pid', String(child.pid), '-d', '1.5', '-o', file], { encoding: 'utf8', timeout: 60_000 });
      expect(r.status, r.stderr).toBe(0);
      expect(r.stdout.match(FRAME)?.length).toBeGreaterThanOrEqual(1);
      const shown = Number(/^samples (\d+):/m.exec(r.stdout.split(/\n\n(?=pyunwind top)/).pop()!)![1]);
      const rep = spawnSync(process.execPath, [BIN, 'report', '-q', file, '--format', 'json'], { encoding: 'utf8', timeout: 60_000 });
      expect(rep.status, rep.stderr).toBe(0);
      // the last frame is drawn once the recording has ended: every sample of the file
      expect((JSON.parse(rep.stdout) as { summary: { attempted: number } }).summary.attempted).toBe(shown);
    } finally {
      fs.rmSync(file, { force: true });
      child.kill('SIGKILL');
    }
  }, 90_000);
});
