// `dump --core` and `dump --locals` on every native interpreter, against the program itself.
//
// workloads/parked_core.py parks five threads — deep recursion (the main thread), a running
// generator, a running coroutine, non-ASCII function names, and a frame whose arguments are of
// every type the object reader decodes — and each prints its own stack (traceback.extract_stack)
// and the repr() of each frame's arguments. Then:
// - `dump --pid --locals`: every thread's stack is the program's (outermost first; threading's
//   wait frames inside), and every argument whose repr is a value (not `<…object at…>`) is shown
//   with that repr;
// - a core made by `gcore`: the same stacks, and the same locals as the live dump (values and
//   addresses); a thread whose stack gcore could not copy — the guard page glibc 2.42+ installs
//   with MADV_GUARD_INSTALL at a thread stack's bottom is unreadable, and gdb then leaves the
//   whole stack as zeros — is named by a note, exactly the threads whose stack mapping begins
//   with an unreadable page, and none of them is shown as a complete stack;
// - the same core gzip-compressed gives the same threads;
// - a core the kernel writes (SIGABRT, ulimit -c unlimited): every thread's stack and locals.
// workloads/cext/crash.py dies of SIGSEGV in a C extension (crash.c, crash_deref dereferences
// NULL): `dump --core --native` shows the crashing thread's stack down to crash_deref, under the
// program's Python frames; with the extension removed, or rebuilt different, one line says so and
// the Python stack is still shown; --lib-path finds the right one again. The library call
// (openCore, takeSnapshot, unwindSnapshot) gives the same Python stack.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, describe, expect, it } from 'vitest';
import { nativeInterpreters } from '../harness/interpreters.js';
import { readProcMaps } from '../src/record/linux/proc-maps.js';
import { cannotRun, skipTest } from './helpers/coverage.js';
import { openCore, snapshotSamples, takeSnapshot } from '../src/record/index.js';
import { unwindSnapshot } from '../src/pipeline/snapshot-stacks.js';
import { KernelWalker } from '../src/kernel/walker.js';
import { threadState, waitUntil } from './helpers/wait.js';
import { jsonLines } from './helpers/json-lines.js';

const BIN = path.resolve('bin/pyunwind.js');
const WORKLOAD = path.resolve('workloads/parked_core.py');
const CRASH_SOURCE = path.resolve('workloads/cext/crash.c');
const CRASH_PROGRAM = path.resolve('workloads/cext/crash.py');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pyunwind-core-dump-'));
const children: ChildProcess[] = [];
afterAll(() => {
  for (const c of children) c.kill('SIGKILL');
  fs.rmSync(dir, { recursive: true, force: true });
});

// three tasks waiting in leaf ← middle, and main waiting for them: the event loop parked
const ASYNC_PROGRAM = `
import asyncio
async def leaf(ev, n):
    await ev.wait()
async def middle(ev, n):
    await leaf(ev, n)
async def main():
    ev = asyncio.Event()
    ts = [asyncio.create_task(middle(ev, i), name=f"worker-{i}") for i in range(3)]
    await asyncio.sleep(0)
    print("ready", flush=True)
    await ev.wait()
asyncio.run(main())
`;

interface Said {
  thread: string;
  native_id: number;
  kind: string;
  stack: [string, number][];
  /** per frame, outermost first: argument name → repr() */
  args: Record<string, string>[];
}

interface Local {
  name: string;
  argument: boolean;
  type: string | null;
  address?: string;
  repr: string | null;
}

interface Frame {
  native?: true;
  name?: string | null;
  object?: string | null;
  qualname?: string;
  line?: number | null;
  locals?: Local[];
  localsError?: string;
}

interface Thread {
  nativeThreadId: number;
  name: string | null;
  signal?: string;
  status: string;
  frames: Frame[];
  nativeStatus?: string;
  stack?: Frame[];
}

interface Dump {
  target: string;
  notes?: string[];
  threads: Thread[];
}

function pyunwind(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', timeout: 180_000, maxBuffer: 256 << 20 });
  return { status: r.status, stdout: r.stdout ?? '', stderr: r.stderr ?? String(r.error ?? '') };
}

function dumpJson(args: string[]): Dump {
  const r = pyunwind(['dump', '--format', 'json', ...args]);
  expect(r.status, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as Dump;
}

/** The thread's stack is the program's (outermost first), and each argument that is a value shows Python's repr of it. */
function checkThread(t: Thread | undefined, s: Said, where: string): void {
  expect(t, `${where}: thread ${s.thread}`).toBeDefined();
  expect(t!.status, `${where}: ${s.thread}`).toMatch(/^complete/);
  const frames = [...t!.frames].reverse();
  const own = s.stack.map(([name, line]) => `${name}:${line}`);
  expect(frames.slice(0, own.length).map((f) => `${f.qualname!.split('.').pop()}:${f.line}`), `${where}: ${s.thread}`).toEqual(own);
  s.args.forEach((args, i) => {
    const shown = new Map((frames[i]!.locals ?? []).filter((l) => l.argument).map((l) => [l.name, l]));
    expect(frames[i]!.localsError, `${where}: ${s.thread} frame ${i}`).toBeUndefined();
    for (const [name, repr] of Object.entries(args)) {
      const l = shown.get(name);
      expect(l, `${where}: ${s.thread} ${own[i]} argument ${name}`).toBeDefined();
      // a value's repr, exactly; an object's type and address
      if (!repr.startsWith('<')) expect(l!.repr, `${where}: ${s.thread} ${own[i]} argument ${name}`).toBe(repr);
      else expect(l!.address, `${where}: ${s.thread} ${own[i]} ${name}`).toMatch(/^0x/);
    }
  });
}

/** Threads whose stack mapping starts with a page /proc/PID/mem cannot read (a guard region inside the mapping). */
function guardedStacks(pid: number, tids: number[]): number[] {
  const maps = readProcMaps(pid);
  const mem = fs.openSync(`/proc/${pid}/mem`, 'r');
  try {
    return tids.filter((tid) => {
      const sp = fs.readFileSync(`/proc/${pid}/task/${tid}/syscall`, 'latin1').trim().split(' ');
      const rsp = BigInt(sp[sp.length - 2]!);
      const m = maps.find((x) => x.start <= rsp && rsp < x.end);
      if (!m) return false;
      try {
        fs.readSync(mem, Buffer.alloc(8), 0, 8, m.start);
        return false;
      } catch {
        return true;
      }
    });
  } finally {
    fs.closeSync(mem);
  }
}

const localsOf = (d: Dump, tid: number): (Local[] | undefined)[] => d.threads.find((t) => t.nativeThreadId === tid)!.frames.map((f) => f.locals);

describe.each(nativeInterpreters())('dump --core, $label', (py) => {
  if (py.missing) {
    cannotRun('core-dump', py.label, py.missing!);
    return;
  }
  it('gcore and kernel cores of a parked program: its stacks and arguments, as it says and as a live dump shows', async (ctx) => {
    if (spawnSync('gcore', ['-h']).error) skipTest(ctx, 'core-dump', py.label, 'gcore is not installed (apt install gdb)');
    const cwd = path.join(dir, py.label);
    fs.mkdirSync(cwd, { recursive: true });
    const child = spawn('sh', ['-c', 'ulimit -c unlimited && exec "$0" "$1"', py.command, WORKLOAD], { cwd, stdio: ['pipe', 'pipe', 'inherit'], env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' } });
    children.push(child);
    const said = jsonLines<Said>(child);
    const pid = child.pid!;
    await waitUntil(() => said.length === 5, 'every thread of the program to print its stack', 60_000);
    await waitUntil(() => said.every((s) => threadState(pid, s.native_id) === 'S'), 'every thread to park', 60_000);

    // live: the program is held stopped while the values are read
    const live = dumpJson(['--pid', String(pid), '--locals']);
    for (const s of said) checkThread(live.threads.find((t) => t.nativeThreadId === s.native_id), s, 'live');
    const values = live.threads.find((t) => t.name === 'values')!;
    // the frame of every decoded type: all its arguments are values
    const park = values.frames.find((f) => f.qualname === 'park_values')!;
    expect(park.locals!.filter((l) => l.argument).map((l) => l.repr === null)).not.toContain(true);

    // gcore: the same stacks and values, but for the stacks it could not copy
    const guarded = guardedStacks(pid, said.map((s) => s.native_id));
    const g = spawnSync('gcore', ['-o', path.join(cwd, 'gcore'), String(pid)], { encoding: 'utf8', timeout: 180_000 });
    expect(g.status, g.stderr).toBe(0);
    const gfile = path.join(cwd, `gcore.${pid}`);
    const fromGcore = dumpJson(['--core', gfile, '--locals']);
    const zeroed = (fromGcore.notes ?? []).map((n) => /^thread (\d+): the core holds only zeros/.exec(n)).filter((m) => m !== null).map((m) => Number(m![1]));
    expect(zeroed.sort(), (fromGcore.notes ?? []).join('\n')).toEqual([...guarded].sort());
    for (const s of said) {
      const t = fromGcore.threads.find((x) => x.nativeThreadId === s.native_id);
      if (zeroed.includes(s.native_id)) {
        // its frames reach into the zeros (the entry frame on the C stack): never shown as complete
        expect(t!.status, s.thread).not.toMatch(/^complete/);
        continue;
      }
      checkThread(t, s, 'gcore');
      expect(localsOf(fromGcore, s.native_id), s.thread).toEqual(localsOf(live, s.native_id));
    }
    // compressed as it is
    const gz = `${gfile}.gz`;
    fs.writeFileSync(gz, gzipSync(fs.readFileSync(gfile), { level: 1 }));
    fs.rmSync(gfile);
    expect(dumpJson(['--core', gz, '--locals']).threads).toEqual(fromGcore.threads);
    fs.rmSync(gz);

    // the kernel's core: every thread
    const ended = new Promise((r) => child.once('exit', r));
    process.kill(pid, 'SIGABRT');
    await ended;
    const file = fs.readdirSync(cwd).find((f) => f === 'core' || f === `core.${pid}`);
    if (!file) skipTest(ctx, 'core-dump', py.label, `no core written (/proc/sys/kernel/core_pattern is ${fs.readFileSync('/proc/sys/kernel/core_pattern', 'utf8').trim()})`);
    const fromKernel = dumpJson(['--core', path.join(cwd, file!), '--locals']);
    // the thread that took the signal, and only it, says so (gcore's core: none)
    expect(fromKernel.threads.filter((t) => t.signal !== undefined).map((t) => t.signal)).toEqual(['SIGABRT']);
    expect(fromGcore.threads.filter((t) => t.signal !== undefined)).toEqual([]);
    expect(fromKernel.notes ?? [], 'no file missing, different or unread').toEqual(expect.not.arrayContaining([expect.stringMatching(/missing|not the file|only zeros/)]));
    for (const s of said) {
      checkThread(fromKernel.threads.find((x) => x.nativeThreadId === s.native_id), s, 'kernel core');
      expect(localsOf(fromKernel, s.native_id), s.thread).toEqual(localsOf(live, s.native_id));
    }
    fs.rmSync(path.join(cwd, file!));
  });

  // asyncio publishes its tasks to profilers from 3.14 on
  const minor = Number(/3\.(\d+)/.exec(py.label)?.[1]);
  // (defined only there: on earlier versions it does not apply, and is not a skip)
  if (minor >= 14)
    it('--async-aware from a gcore core: the tasks a live dump shows', async () => {
    const child = spawn(py.command, ['-c', ASYNC_PROGRAM], { stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(child);
    let out = '';
    child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    await waitUntil(() => out.includes('ready'), 'the tasks to start', 60_000);
    const pid = child.pid!;
    await waitUntil(() => threadState(pid, pid) === 'S', 'the event loop to wait');
    const live = dumpJson(['--pid', String(pid), '--async-aware']);
    const g = spawnSync('gcore', ['-o', path.join(dir, `async-${py.label}`), String(pid)], { encoding: 'utf8', timeout: 180_000 });
    expect(g.status, g.stderr).toBe(0);
    child.kill('SIGKILL');
    const gfile = path.join(dir, `async-${py.label}.${pid}`);
    const fromCore = dumpJson(['--core', gfile, '--async-aware']);
    fs.rmSync(gfile);
    type WithTasks = Thread & { tasks: { task: string | null; status: string; frames: Frame[] }[] };
    const main = (d: Dump): WithTasks => d.threads.find((t) => t.name === 'MainThread') as WithTasks;
    // the three workers waiting in leaf ← middle, and main: as the live dump shows them
    expect(main(live).tasks.filter((k) => k.task?.startsWith('worker-')).map((k) => [k.status, k.frames.map((f) => f.qualname)])).toEqual(
      ['worker-0', 'worker-1', 'worker-2'].map(() => [expect.stringMatching(/^complete/), expect.arrayContaining(['leaf', 'middle'])]),
    );
    expect(main(fromCore).tasks).toEqual(main(live).tasks);
  });

  it('a crash in C: the crashing thread down to the faulting function; a missing or different library said in one line', async (ctx) => {
    const where = spawnSync(py.command, ['-c', "import sysconfig; print(sysconfig.get_paths()['include']); print(sysconfig.get_config_var('EXT_SUFFIX'))"], { encoding: 'utf8' });
    expect(where.status, where.stderr).toBe(0);
    const [include, suffix] = where.stdout.trim().split('\n') as [string, string];
    const cwd = path.join(dir, `${py.label}-crash`);
    const build = (out: string, variant: number): void => {
      fs.mkdirSync(out, { recursive: true });
      // (Debian keeps pyconfig.h under the multiarch directory beside python3.N)
      const cc = spawnSync('gcc', ['-shared', '-fPIC', '-O2', `-DVARIANT=${variant}`, `-I${include}`, `-I${path.dirname(include)}`, '-o', path.join(out, `pyunwind_crash${suffix}`), CRASH_SOURCE], { encoding: 'utf8' });
      if (cc.error) skipTest(ctx, 'core-dump', py.label, 'gcc is not installed (apt install gcc)');
      expect(cc.status, cc.stderr).toBe(0);
    };
    const lib = path.join(cwd, 'lib');
    build(lib, 0);
    const crashed = spawnSync('sh', ['-c', 'ulimit -c unlimited && exec "$0" "$1"', py.command, CRASH_PROGRAM], { cwd, encoding: 'utf8', timeout: 60_000, env: { ...process.env, PYTHONPATH: lib, PYTHONDONTWRITEBYTECODE: '1', PYTHONFAULTHANDLER: '' } });
    expect(crashed.signal ?? crashed.status, crashed.stderr).toBe('SIGSEGV');
    const own = (JSON.parse(crashed.stdout.trim().split('\n')[0]!) as [string, number][]).map(([n, l]) => `${n}:${l}`);
    const file = fs.readdirSync(cwd).find((f) => f === 'core' || f.startsWith('core.'));
    if (!file) skipTest(ctx, 'core-dump', py.label, `no core written (/proc/sys/kernel/core_pattern is ${fs.readFileSync('/proc/sys/kernel/core_pattern', 'utf8').trim()})`);
    const core = path.join(cwd, file!);
    const so = path.join(lib, `pyunwind_crash${suffix}`);
    const python = (t: Thread): string[] => [...t.frames].reverse().map((f) => `${f.qualname!.split('.').pop()}:${f.line}`);

    // the one thread: C down to crash_deref, under the program's own Python frames
    const whole = dumpJson(['--core', core, '--native']);
    expect(whole.threads.length).toBe(1);
    const t = whole.threads[0]!;
    expect(t.status).toMatch(/^complete/);
    expect(t.signal).toBe('SIGSEGV');
    expect(python(t)).toEqual(own);
    expect(t.nativeStatus, JSON.stringify(t.stack)).toBe('mixed');
    expect(t.stack![0], JSON.stringify(t.stack)).toMatchObject({ native: true, name: 'crash_deref' });
    expect(t.stack![0]!.object).toBe(so);
    expect((whole.notes ?? []).filter((n) => n.includes('pyunwind_crash'))).toEqual([]);
    // the library call: the same Python stack
    const opened = openCore(core);
    try {
      const stacks = unwindSnapshot(snapshotSamples(takeSnapshot(opened.source, { paused: true })), await KernelWalker.load());
      expect(stacks.map((x) => [...x.frames].reverse().map((f) => `${f.qualname.split('.').pop()}:${f.line}`))).toEqual([own]);
    } finally {
      opened.source.close();
    }
    const text = pyunwind(['dump', '--core', core, '--native']);
    expect(text.status, text.stderr).toBe(0);
    expect(text.stdout).toMatch(/Thread \d+ MainThread .*: complete\S*, got SIGSEGV\n {2}crash_deref \(pyunwind_crash/);

    // the library gone: one line for it, the Python stack still shown
    const kept = path.join(cwd, 'kept');
    fs.mkdirSync(kept);
    fs.renameSync(so, path.join(kept, path.basename(so)));
    const missing = dumpJson(['--core', core, '--native']);
    expect(missing.notes!.filter((n) => n.includes(so))).toEqual([expect.stringMatching(new RegExp(`^${so.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: missing`))]);
    expect(python(missing.threads[0]!)).toEqual(own);
    // another build at its path: said, and not used
    build(lib, 1);
    const different = dumpJson(['--core', core, '--native']);
    expect(different.notes!.filter((n) => n.includes(so))).toEqual([expect.stringContaining('not the file the core mapped')]);
    expect(python(different.threads[0]!)).toEqual(own);
    expect(different.threads[0]!.stack?.[0]?.name ?? null).not.toBe('crash_deref');
    // the right one, where --lib-path says
    const found = dumpJson(['--core', core, '--native', '--lib-path', kept]);
    expect((found.notes ?? []).filter((n) => n.includes('pyunwind_crash'))).toEqual([]);
    expect(found.threads[0]!.stack![0]).toMatchObject({ native: true, name: 'crash_deref' });
    fs.rmSync(core);
  });
});
