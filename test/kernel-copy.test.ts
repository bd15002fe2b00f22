// Copies at the interrupt, the groundwork (bpf/copier.bpf.c, src/record/linux/kernel-copier.ts):
// - on every native interpreter (3.11+), a program with two threads running pure Python through
//   a generator (spin → gen → middle → leaf): the BPF program, attached to each CPU's cpu-clock
//   at 1000 Hz, copies each interrupted thread's state, the top of its data stack and the frames
//   of its chain outside it (the generator's), in the kernel, at the tick. Every record of those
//   threads walks (the WebAssembly walk, as a capture's samples do) to a trusted stack — on 3.15
//   one ending at the thread's base frame; on 3.11/3.12 through the running eval loop's
//   _PyCFrame, copied with it — that is one the program has (Thread._bootstrap … spin, gen,
//   middle, leaf, cut after spin or later), or is rejected as `incomplete`, at most 1 % of them:
//   a tick can land between the thread's pointer to the resumed generator's frame and that
//   frame's link to its caller, which the compiler orders as it likes (on 3.12.1 at 10 kHz: 40
//   of 292,200 records, each `gen` alone, each rejected); no record was lost;
// - a thread 1,500 frames deep in a recursion (its data stack a dozen 16 KiB chunks): the older
//   chunks are copied whole, in the kernel too, and every record walks through all 1,500 frames;
// - closed, or its process killed, nothing is left: no program of ours in `bpftool prog`;
// - without the rights (root's capabilities dropped), one line says what is needed.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { nativeInterpreters } from '../harness/interpreters.js';
import { KernelCopier, type KernelRecord } from '../src/record/linux/kernel-copier.js';
import { openLinuxProcess } from '../src/record/linux/process.js';
import { takeSnapshot } from '../src/record/copy/snapshot.js';
import { KernelWalker } from '../src/kernel/walker.js';
import { CodeTable } from '../src/symbols/code-table.js';
import { walkParams } from '../src/layout/walk-params.js';
import type { CodeRecord } from '../src/capture/types.js';
import { cannotRun, skipTest } from './helpers/coverage.js';
import { waitUntil } from './helpers/wait.js';
import { cannotTryKernelCopies as cannotTry, minorOf, programsOf, stillLoaded, startPython } from './helpers/bpf.js';

const CHILD = path.resolve('test/helpers/kernel-copy-child.mjs');
const SPIN = `
import threading, time, sys
def leaf(n):
    return n + 1
def middle(n):
    s = 0
    for i in range(100):
        s += leaf(i)
    return s
def gen():
    while True:
        yield middle(1)
def spin():
    for _ in gen():
        pass
ts = [threading.Thread(target=spin, daemon=True) for _ in range(2)]
for t in ts: t.start()
print(" ".join(str(t.native_id) for t in ts), flush=True)
sys.stdin.read()
`;
const DEPTH = 1500;
const DEEP = `
import threading, sys
sys.setrecursionlimit(5000)
def leaf(n):
    return n + 1
def spin():
    while True:
        leaf(1)
def down(n):
    return spin() if n == 0 else down(n - 1)
t = threading.Thread(target=down, args=(${DEPTH},), daemon=True)
t.start()
print(t.native_id, flush=True)
sys.stdin.read()
`;
const EXPECTED = ['Thread._bootstrap', 'Thread._bootstrap_inner', 'Thread.run', 'spin', 'gen', 'middle', 'leaf'];
const children: ChildProcess[] = [];
afterAll(() => {
  for (const c of children) c.kill('SIGKILL');
});

const start = (command: string, program: string, prefix: string[] = []): Promise<{ child: ChildProcess; line: string }> => startPython(command, program, children, prefix);


describe.each(nativeInterpreters())('copies at the interrupt, $label', (py) => {
  if (py.missing) {
    cannotRun('kernel-copy', py.label, py.missing!);
    return;
  }
  /**
   * Attach the copier to `program` (which prints the native ids of the threads to watch), wait
   * for `min` records of each, close it, and walk them: each record's stack (outermost first)
   * and status, and the record.
   */
  async function recordAndWalk(program: string, functions: string[], min: number): Promise<{ names: string[]; status: string; record: KernelRecord }[]> {
    const { child, line } = await start(py.command!, program);
    const watched = line.split(' ').map(Number);
    const pid = child.pid!;
    const source = openLinuxProcess(pid);
    try {
      const L = source.layout;
      // the code objects, read from user space as the recorder reads them: once, until every
      // function of the program has been seen on a stack
      const codes = new Map<bigint, CodeRecord>();
      let threads = takeSnapshot(source).threads;
      await waitUntil(() => {
        const s = takeSnapshot(source);
        threads = s.threads;
        for (const c of s.codeObjects) codes.set(c.address, c);
        const table = new CodeTable(L, [...codes.values()]);
        const names = new Set([...codes.keys()].map((a) => table.code(a)).map((c) => (c && !(c instanceof Error) ? c.qualname : null)));
        return functions.every((n) => names.has(n));
      }, 'every function of the program to be seen', 60_000);
      // the thread state through its end as the copier takes it (3.15: its base frame)
      const tstateSize = Math.max(...threads.map((t) => t.regions.find((r) => r.address === t.threadStateAddress)!.bytes.length));
      const records: KernelRecord[] = [];
      let lost: bigint;
      const copier = KernelCopier.open(pid, { rateHz: 1000, layout: L, tstateSize });
      // (ours: the programs this process holds — other tests may load theirs meanwhile)
      const ours = programsOf('self');
      expect(ours.length).toBe(2);
      try {
        copier.setThreadStates(new Map(threads.map((t) => [Number(t.nativeThreadId), t.threadStateAddress])));
        // (each thread runs when the machine lets it: wait for records of each, not for a time)
        await waitUntil(() => {
          records.push(...copier.poll());
          return watched.every((tid) => records.filter((r) => r.tid === tid).length >= min);
        }, 'records of every watched thread', 60_000);
        lost = copier.lost();
      } finally {
        copier.close();
      }
      // (the kernel frees a program when its last descriptor closes; the release can lag a moment)
      await waitUntil(() => stillLoaded(ours).length === 0, 'the programs to be gone once the copier was closed', 10_000);
      expect(lost).toBe(0n);

      const mine = records.filter((r) => watched.includes(r.tid));
      const table = new CodeTable(L, [...codes.values()]);
      const walker = await KernelWalker.load();
      const walked = walker.walk(walkParams(L), table.ranges, mine.map((r) => ({ threadStateAddress: r.threadStateAddress, regions: r.regions })));
      return walked.map((w, i) => ({ names: w.frames.map((f) => table.frame(f.code, f.instrPtr, false).qualname).reverse(), status: w.status, record: mine[i]! }));
    } finally {
      source.close();
      child.kill('SIGKILL');
    }
  }
  // every record trusted; 3.15 proves each stack whole by its base frame
  const trusted = minorOf(py.label) >= 15 ? 'complete' : 'complete-unverifiable';

  it('each running thread’s state and frames, copied in the kernel at its ticks, walk to the program’s stacks', async (ctx) => {
    const why = cannotTry();
    if (why) skipTest(ctx, 'kernel-copy', py.label, why);
    const walked = await recordAndWalk(SPIN, ['spin', 'gen', 'middle', 'leaf'], 100);
    const statuses = new Map<string, number>();
    const stacks = new Map<string, number>();
    for (const { names, status, record } of walked) {
      statuses.set(status, (statuses.get(status) ?? 0) + 1);
      const key = `${record.tid}: ${names.join(' > ')}`;
      stacks.set(key, (stacks.get(key) ?? 0) + 1);
      if (status !== trusted) continue;
      expect(names.length, key).toBeGreaterThanOrEqual(4);
      expect(names, key).toEqual(EXPECTED.slice(0, names.length));
    }
    const counts = JSON.stringify(Object.fromEntries(statuses));
    expect([...statuses.keys()].filter((s) => s !== trusted && s !== 'incomplete'), counts).toEqual([]);
    expect(statuses.get(trusted) ?? 0, counts).toBeGreaterThanOrEqual(0.99 * walked.length);
    console.log(`[kernel-copy] ${py.label}: ${walked.length} records walked, ${JSON.stringify(Object.fromEntries(statuses))}, ${stacks.size} distinct stacks`);
  });

  it('a recursion 1,500 deep: the data stack’s older chunks are copied whole, every frame walks', async (ctx) => {
    const why = cannotTry();
    if (why) skipTest(ctx, 'kernel-copy', py.label, why);
    const walked = await recordAndWalk(DEEP, ['down', 'spin', 'leaf'], 50);
    const statuses = new Map<string, number>();
    for (const { names, status, record } of walked) {
      statuses.set(status, (statuses.get(status) ?? 0) + 1);
      // (some ticks land in the thread's start or in spin itself: the stack is then cut there)
      const expected = [...EXPECTED.slice(0, 3), ...Array<string>(DEPTH + 1).fill('down'), 'spin', 'leaf'];
      expect(names.length, names.slice(-3).join(' > ')).toBeGreaterThanOrEqual(DEPTH + 5);
      expect(names).toEqual(expected.slice(0, names.length));
      // the frames live in more than one chunk of 16 KiB, and the kernel copied them as chunks
      expect(record.regions.filter((r) => r.chunk).length).toBeGreaterThan(2);
    }
    expect([...statuses.keys()], JSON.stringify(Object.fromEntries(statuses))).toEqual([trusted]);
    const chunks = walked.map((w) => w.record.regions.filter((r) => r.chunk).length);
    const bytes = walked.map((w) => w.record.regions.reduce((n, r) => n + r.bytes.length, 0));
    console.log(`[kernel-copy] ${py.label}, ${DEPTH} deep: ${walked.length} records walked, ${JSON.stringify(Object.fromEntries(statuses))}, ${Math.min(...chunks)}–${Math.max(...chunks)} chunks, ${Math.max(...bytes)} bytes`);
  });
});

describe('copies at the interrupt: nothing left behind, and the rights', () => {
  const py = nativeInterpreters().find((p) => !p.missing);
  if (!py) {
    cannotRun('kernel-copy', 'cleanup and rights', 'no native interpreter');
    return;
  }
  it('a recorder killed while attached leaves no program of ours', async (ctx) => {
    const why = cannotTry();
    if (why) skipTest(ctx, 'kernel-copy', 'cleanup', why);
    const { child: target } = await start(py.command, 'import sys; print("up", flush=True); sys.stdin.read()');
    const child = spawn(process.execPath, [CHILD, String(target.pid)], { stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(child);
    let out = '';
    child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    await waitUntil(() => out.includes('\n'), 'the copier to attach', 60_000);
    expect(out.trim()).toBe('ready');
    const ours = programsOf(child.pid!);
    expect(ours.length).toBe(2);
    expect(stillLoaded(ours)).toEqual(ours);
    const ended = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await ended;
    // (the kernel frees a program when its last descriptor closes, which exit does; the release
    // can lag the exit by a moment: wait on the listing, not a time)
    await waitUntil(() => stillLoaded(ours).length === 0, 'the programs to be gone after their recorder was killed', 10_000);
    target.kill('SIGKILL');
  });

  it('without root’s capabilities: one line saying what is needed', async (ctx) => {
    const why = cannotTry();
    if (why) skipTest(ctx, 'kernel-copy', 'rights', why);
    if (spawnSync('setpriv', ['--version']).error) skipTest(ctx, 'kernel-copy', 'rights', 'setpriv is not installed (util-linux)');
    // (the target without capabilities too: reading a process needs every capability it has)
    const drop = ['setpriv', '--inh-caps=-all', '--bounding-set=-all', '--'];
    const { child: target } = await start(py.command, 'import sys; print("up", flush=True); sys.stdin.read()', drop);
    try {
      const r = spawnSync(drop[0]!, [...drop.slice(1), process.execPath, CHILD, String(target.pid)], { encoding: 'utf8', timeout: 60_000 });
      expect(r.stdout).toBe('copies at the interrupt need root, or CAP_BPF and CAP_PERFMON (loading the BPF program was refused)\n');
      expect(r.status, r.stderr).toBe(3);
      expect(r.stderr).toBe('');
    } finally {
      target.kill('SIGKILL');
    }
  });
});
