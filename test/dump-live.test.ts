// `pyunwind dump` follows record's copy rules. A deeply recursive program whose stack changes
// all the time (it unwinds and rebuilds 60 frames every few tens of microseconds, longer than
// a copy of them takes) is dumped again and again on every interpreter: in the default mode
// every dump must be trusted and one of the stacks the program can have; with --copy
// optimistic a dump may come back `torn`, but never as a trusted stack it cannot have. With
// --copy interrupt (where BPF can be loaded; under CI it must be), on the same program with a
// thread napping beside it: every dump of the main thread trusted and possible, the napping
// thread trusted and in `nap`; with --native, the napping thread's C frames below `nap` reach
// libc in at least 3 of 5 dumps, and are the interpreter's own in the others (caught running
// between two sleeps).
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { TRUSTED, type Status } from '../src/walk/status.js';
import { recordCoverage, cannotRun, skipTest } from './helpers/coverage.js';
import { cannotTryKernelCopies } from './helpers/bpf.js';
import { nativeInterpreters } from '../harness/interpreters.js';

const BIN = path.resolve('bin/pyunwind.js');
const DEPTH = 60;
// line numbers matter: the checks below know where each call is
const PROGRAM = `import sys
sys.setrecursionlimit(10000)
def leaf():
    x = 0
    for i in range(20):
        x += i
    return x
def down(n):
    if n == 0:
        return leaf()
    return down(n - 1)
def main():
    print("ready", flush=True)
    while True:
        down(${DEPTH})
main()
`;
const LEAF_CALL = 10;
const DOWN_CALL = 11;
const MAIN_CALL = 15;
const MODULE_CALL = 16;

interface DumpJson {
  threads: {
    name: string | null;
    nativeThreadId: number;
    status: Status;
    frames: { qualname: string; line: number | null }[];
    nativeStatus?: string;
    stack?: { native?: boolean; name?: string | null; object?: string | null; qualname?: string }[];
  }[];
}

// the same program with a thread napping beside it (its last line is the call of main)
const WITH_NAPPER = PROGRAM.replace(
  'def main():',
  `import threading, time
def nap():
    while True:
        time.sleep(0.005)
threading.Thread(target=nap, name="napper", daemon=True).start()
def main():`,
);
const NAPPER_LINES = 5;

/** Why a stack (innermost first) is not one the program can have, or null. */
function impossible(frames: { qualname: string; line: number | null }[]): string | null {
  const outer = [...frames].reverse();
  const show = () => outer.map((f) => `${f.qualname}:${f.line}`).join(' > ');
  if (outer[0]?.qualname !== '<module>' || outer[0].line !== MODULE_CALL) return `bad root: ${show()}`;
  if (outer.length === 1) return null;
  if (outer[1]!.qualname !== 'main') return `bad main: ${show()}`;
  if (outer.length > 2 && outer[1]!.line !== MAIN_CALL) return `main not at its call: ${show()}`;
  const downs = outer.slice(2).filter((f) => f.qualname === 'down');
  const rest = outer.slice(2 + downs.length);
  if (outer.slice(2, 2 + downs.length).some((f) => f.qualname !== 'down')) return `not a chain of down: ${show()}`;
  if (downs.length > DEPTH + 1) return `too deep: ${show()}`;
  // every down but the innermost one is in its recursive call
  if (downs.slice(0, -1).some((f) => f.line !== DOWN_CALL)) return `a down not at its call: ${show()}`;
  if (rest.length === 0) return null;
  if (rest.length !== 1 || rest[0]!.qualname !== 'leaf') return `unknown frames: ${show()}`;
  if (downs.length !== DEPTH + 1 || downs.at(-1)!.line !== LEAF_CALL) return `leaf under ${downs.length} downs: ${show()}`;
  return null;
}

const children: ChildProcess[] = [];
afterAll(() => children.forEach((c) => c.kill('SIGKILL')));

describe.each(nativeInterpreters())('dump of a call-heavy deep stack, $label', (py) => {
  if (py.missing) {
    cannotRun('dump-live', py.label, py.missing!);
    return;
  }
  it('never shows a moved copy as trusted: every default dump is trusted and possible', async () => {
    const child = spawn(py.command, ['-c', PROGRAM], { stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(child);
    await new Promise<void>((resolve, reject) => {
      child.stdout!.once('data', () => resolve());
      child.once('exit', (c) => reject(new Error(`program exited ${c}`)));
    });
    const dump = (mode: string): DumpJson => {
      const r = spawnSync(process.execPath, [BIN, 'dump', '--pid', String(child.pid), '-f', 'json', '--copy', mode], { encoding: 'utf8', timeout: 30_000 });
      expect(r.status, r.stderr).toBe(0);
      return JSON.parse(r.stdout) as DumpJson;
    };
    const seen: Record<string, Record<string, number>> = { adaptive: {}, optimistic: {} };
    for (const mode of ['adaptive', 'optimistic'] as const) {
      for (let i = 0; i < 10; i++) {
        const d = dump(mode);
        expect(d.threads).toHaveLength(1);
        // its one thread is the main thread, named so on every version (3.14+: the interpreter
        // says so; before: the process's first thread)
        expect(d.threads[0]!.name).toBe('MainThread');
        expect(d.threads[0]!.nativeThreadId).toBe(child.pid);
        const t = d.threads[0]!;
        seen[mode]![t.status] = (seen[mode]![t.status] ?? 0) + 1;
        if (mode === 'adaptive') expect(TRUSTED.has(t.status), `adaptive dump ${i}: ${t.status}`).toBe(true);
        if (TRUSTED.has(t.status)) {
          expect(impossible(t.frames), `${mode} dump ${i}`).toBeNull();
        } else {
          expect(t.status).toBe('torn');
          expect(t.frames).toEqual([]);
        }
      }
    }
    console.log(`${py.label}: adaptive ${JSON.stringify(seen.adaptive)}, optimistic ${JSON.stringify(seen.optimistic)}`);
    recordCoverage('dump-live', py.label, true);
    child.kill('SIGKILL');
  });
});

describe.each(nativeInterpreters())('dump --copy interrupt, $label', (py) => {
  if (py.missing) {
    cannotRun('dump-interrupt', py.label, py.missing!);
    return;
  }
  it('every dump trusted and possible; the napping thread in nap; with --native, its C frames reach libc', async (ctx) => {
    const why = cannotTryKernelCopies();
    if (why) skipTest(ctx, 'dump-interrupt', py.label, why);
    const child = spawn(py.command, ['-c', WITH_NAPPER], { stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(child);
    await new Promise<void>((resolve, reject) => {
      child.stdout!.once('data', () => resolve());
      child.once('exit', (c) => reject(new Error(`program exited ${c}`)));
    });
    const dump = (extra: string[]): DumpJson => {
      const r = spawnSync(process.execPath, [BIN, 'dump', '--pid', String(child.pid), '-f', 'json', '--copy', 'interrupt', ...extra], { encoding: 'utf8', timeout: 30_000 });
      expect(r.status, r.stderr).toBe(0);
      return JSON.parse(r.stdout) as DumpJson;
    };
    const statuses: Record<string, number> = {};
    let inLibc = 0;
    for (let i = 0; i < 10; i++) {
      const d = dump(i % 2 ? ['--native'] : []);
      expect(d.threads).toHaveLength(2);
      const main = d.threads.find((t) => t.name === 'MainThread')!;
      const napper = d.threads.find((t) => t.name === 'napper')!;
      expect(main.nativeThreadId).toBe(child.pid);
      statuses[main.status] = (statuses[main.status] ?? 0) + 1;
      // (the main thread's frames shifted by the napper's lines above main)
      const frames = main.frames.map((f) => ({ ...f, line: f.line !== null && f.line > LEAF_CALL + 1 ? f.line - NAPPER_LINES : f.line }));
      expect(TRUSTED.has(main.status), `interrupt dump ${i}: ${main.status}`).toBe(true);
      expect(impossible(frames), `interrupt dump ${i}`).toBeNull();
      expect(TRUSTED.has(napper.status), `napper, dump ${i}: ${napper.status}`).toBe(true);
      expect(napper.frames[0]!.qualname).toBe('nap');
      if (i % 2) {
        // the napping thread's C frames: the wait it is in, in libc, below nap
        expect(napper.nativeStatus).toBe('mixed');
        const stack = napper.stack!;
        const nap = stack.findIndex((f) => f.qualname === 'nap');
        expect(nap).toBeGreaterThan(0);
        const below = stack.slice(0, nap);
        if (below.some((f) => f.native && /libc/.test(f.object ?? ''))) inLibc++;
        // (or caught between two sleeps, on its CPU: its C frames then are the interpreter's own,
        // running nap — a moment of about one in a hundred, seen once in a full run)
        else expect(below.every((f) => f.native && /python|libpython/.test(f.object ?? '')), JSON.stringify(below)).toBe(true);
      }
    }
    console.log(`${py.label}: interrupt dumps of the main thread ${JSON.stringify(statuses)}; the napper's C frames in libc in ${inLibc} of 5`);
    expect(inLibc).toBeGreaterThanOrEqual(3);
    recordCoverage('dump-interrupt', py.label, true);
    child.kill('SIGKILL');
  });
});
