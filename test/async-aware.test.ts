// Async-aware stacks on real interpreters: workloads/asynctasks.py runs a task "main" awaiting
// a gather of tasks "worker-k", each awaiting a task "sub-k" that spins, and prints, from inside
// the spinning coroutines, the call graph asyncio itself reports (asyncio.capture_call_graph):
// for each running sub-task, and once for every task waiting. Recorded with --async-aware, the
// report's stack of every sample in a spinning coroutine must be exactly one of those graphs
// (plus what spin calls): task names and coroutine names, outermost first; none may be anything
// else. With --async-mode all, every waiting task's graph is a stack too. Samples rejected are
// counted, and must stay few. workloads/asyncshared.py has one task awaited by two: its frame
// says how many await it, and its stack follows the awaiter asyncio lists first. With
// --subprocesses, a child running the same tasks is recorded with them (workloads/asyncfamily.py).
// top --async-aware and record --live --async-aware show task stacks live, the last frame
// counting what the report of the capture finds; dump --async-aware prints every task's stack.
// With --copy interrupt (root), the running thread's tasks are copied in the kernel at the tick
// with its stack (the objects its last sample's view read): the same stacks, nothing stopped,
// and a view that needed what the kernel had not copied rejected (dangling), rarely.
// 3.14 and 3.15 only: before 3.14 CPython publishes no tasks, and
// the recorder must refuse in one clear line.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readCaptureBytes } from '../src/capture/reader.js';
import type { Region } from '../src/capture/types.js';
import { layoutFromSource } from '../src/layout/index.js';
import { asyncioOffsetsOf, sampleInput } from '../src/pipeline/process-capture.js';
import { reportCapture } from '../src/pipeline/report-file.js';
import type { ProcessedSample } from '../src/pipeline/sample-processor.js';
import { CodeTable } from '../src/symbols/code-table.js';
import { TaskStacks } from '../src/pipeline/task-stacks.js';
import { RegionMemory } from '../src/walk/region-memory.js';
import { MAX_TASKS, TaskGraph } from '../src/walk/task-graph.js';
import { TICK_FOLLOW } from '../src/record/copy/task-copy.js';
import { shortFilename } from '../src/export/filenames.js';
import { nativeInterpreters } from '../harness/interpreters.js';
import { recordCoverage, skipTest, cannotRun } from './helpers/coverage.js';
import { cannotTryKernelCopies } from './helpers/bpf.js';

const BIN = path.resolve('bin/pyunwind.js');
const WORKLOAD = path.resolve('workloads/asynctasks.py');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pyunwind-async-'));
const targets: ChildProcess[] = [];
afterAll(() => {
  targets.forEach((c) => c.kill('SIGKILL'));
  fs.rmSync(dir, { recursive: true, force: true });
});

interface JsonReport {
  summary: { attempted: number; trusted: number; rejected: number; statuses: Record<string, number>; ticks: number };
  threads: { frames: { qualname: string; filename: string }[]; stacks: [number, number, number][] }[];
}

function pyunwind(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', timeout: 120_000, maxBuffer: 64 << 20, env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' } });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** Every stack of a JSON report with samples of its own: its qualnames outermost first, and its count. */
function stacksOf(json: JsonReport): { names: string[]; filenames: string[]; count: number }[] {
  const out: { names: string[]; filenames: string[]; count: number }[] = [];
  for (const t of json.threads) {
    t.stacks.forEach(([, , count], i) => {
      if (count === 0) return;
      const names: string[] = [];
      const filenames: string[] = [];
      for (let at = i; at >= 0; at = t.stacks[at]![0]) {
        const f = t.frames[t.stacks[at]![1]]!;
        names.unshift(f.qualname);
        filenames.unshift(f.filename);
      }
      out.push({ names, filenames, count });
    });
  }
  return out;
}

interface Told {
  running: Map<string, string[]>;
  waiting: Map<string, string[]>;
}

function told(stdout: string): Told {
  const running = new Map<string, string[]>();
  const waiting = new Map<string, string[]>();
  for (const line of stdout.trim().split('\n')) {
    const o = JSON.parse(line) as { task?: string; waiting?: string; graph?: string[] };
    if (o.task && o.graph) running.set(o.task, o.graph);
    if (o.waiting && o.graph) waiting.set(o.waiting, o.graph);
  }
  return { running, waiting };
}

/** The regions with a pointer-sized value written at `address` (the region holding it copied first). */
function poke(regions: readonly Region[], address: bigint, value: bigint, width = 8): Region[] {
  return regions.map((r) => {
    if (address < r.address || address + BigInt(width) > r.address + BigInt(r.bytes.length)) return r;
    const bytes = new Uint8Array(r.bytes);
    const v = new DataView(bytes.buffer);
    if (width === 8) v.setBigUint64(Number(address - r.address), value, true);
    else v.setUint8(Number(address - r.address), Number(value));
    return { address: r.address, bytes };
  });
}

/**
 * A real sample of a spinning task, its tasks' links then broken as torn or hostile memory would
 * break them: each must give a rejection with its reason, never a stack, an exception or a hang.
 */
async function tamperedSamples(file: string): Promise<Record<string, string>> {
  const header = readCaptureBytes(fs.readFileSync(file)).header;
  const layout = layoutFromSource(header.layoutSource);
  const offsets = asyncioOffsetsOf(header, 'running');
  const table = new CodeTable(layout);
  for (const b of readCaptureBytes(fs.readFileSync(file)).blocks()) for (const c of b.codes) table.add(c);
  let picked: ProcessedSample | null = null;
  await reportCapture(file, { reference: true, onSample: (p) => void (picked ??= p.frames.some((f) => f.qualname === 'crunch') ? p : null) });
  const p = picked as ProcessedSample | null;
  if (!p) throw new Error('no sample in crunch');
  const stacks = new TaskStacks(layout, offsets, 'running', table);
  const statusWith = (regions: Region[]): string => {
    const q = { ...p, sample: { ...p.sample, regions } };
    const out = stacks.inputs(q, sampleInput(q));
    return out.length === 1 ? `${out[0]!.status}${out[0]!.frames.some((f) => f.qualname.startsWith('<task ')) ? ' with tasks' : ''}` : `${out.length} stacks`;
  };
  const regions = p.sample.regions;
  const graph = new TaskGraph(layout, offsets, new RegionMemory(regions, 8));
  const running = graph.running(p.sample.threadStateAddress);
  const chain = graph.awaitChain(running);
  const [sub, worker, main] = chain.map((n) => n.address);
  const k = offsets.task;
  const at = (task: bigint | undefined, field: number): bigint => task! + BigInt(field);
  // the worker's coroutine made to await itself
  const coro = chain[1]!.coro;
  const mem = new RegionMemory(regions, 8);
  const frame = coro + BigInt(layout.gen!.iframe);
  const sp = mem.ptr(frame + BigInt(layout.objects!.stackpointer))! & ~7n;
  return {
    untouched: statusWith([...regions]),
    'root awaited by the running task': statusWith(poke(poke(regions, at(main, k.awaitedBy), sub!), at(main, k.awaitedByIsSet), 0n, 1)),
    'awaiter outside the copy': statusWith(poke(poke(regions, at(sub, k.awaitedBy), 0x10n), at(sub, k.awaitedByIsSet), 0n, 1)),
    'awaiters set that is no set': statusWith(poke(poke(regions, at(worker, k.awaitedBy), worker!), at(worker, k.awaitedByIsSet), 1n, 1)),
    'coroutine awaiting itself': statusWith(poke(regions, sp - BigInt(8 * layout.objects!.awaitedSlot), coro)),
    'running task outside the copy': statusWith(poke(regions, p.sample.threadStateAddress + BigInt(offsets.tstate.runningTask), 0x7000n)),
    // as a copy read live would find an awaiter that resumed after the thread's copy
    "awaiter's coroutine running": statusWith(poke(regions, coro + BigInt(layout.gen!.frameState), BigInt(layout.objects!.frameStates.executing & 0xff), 1)),
  };
}

const same = (a: string[], b: string[]): boolean => a.length === b.length && a.every((x, i) => x === b[i]);

/** A running-mode report against what asyncio said: samples in spin, those equal to a running task's graph, the others, the graphs seen. */
function againstGraphs(json: JsonReport, truth: Told): { inSpin: number; matched: number; impossible: string[]; seen: Set<string> } {
  const graphs = [...truth.running.values()];
  let inSpin = 0;
  let matched = 0;
  const impossible: string[] = [];
  const seen = new Set<string>();
  for (const s of stacksOf(json)) {
    const at = s.names.indexOf('spin');
    if (at < 0) continue;
    inSpin += s.count;
    const own = s.names.slice(0, at + 1);
    const graph = graphs.find((g) => same(g, own));
    if (graph) {
      matched += s.count;
      seen.add(graph.join(' > '));
      // task pseudo-frames name no file
      s.names.forEach((n, i) => n.startsWith('<task ') && expect(s.filenames[i]).toBe(''));
    } else impossible.push(`${s.names.join(' > ')} (${s.count})`);
  }
  return { inSpin, matched, impossible, seen };
}

describe.each(nativeInterpreters())('async-aware stacks, $label', (py) => {
  if (py.missing) {
    cannotRun('async-aware', py.label, py.missing!);
    return;
  }
  const version = spawnSync(py.command, ['-c', 'import sys; print(sys.version_info[1])'], { encoding: 'utf8' });
  const minor = Number(version.stdout.trim());

  if (minor < 14) {
    it('is refused in one line: CPython publishes tasks from 3.14 on', () => {
      // (a target that writes nothing itself: the recorder's line is the only one)
      const rec = pyunwind(['record', '-q', '--async-aware', '-o', path.join(dir, `${py.label}.pyuw`), '--', py.command, '-c', 'import asyncio, time; time.sleep(30)']);
      expect(rec.status).not.toBe(0);
      const lines = rec.stderr.trim().split('\n');
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(/--async-aware: CPython publishes asyncio tasks to profilers from 3\.14 on/);
      recordCoverage('async-aware', `${py.label} (refused before 3.14)`, true);
    }, 60_000);
    return;
  }

  it('running mode: the stack of each spinning task is the call graph asyncio reports', async () => {
    const file = path.join(dir, `${py.label}-running.pyuw`);
    const rec = pyunwind(['record', '-q', '-r', '1000', '--async-aware', '-o', file, '--', py.command, WORKLOAD, '4']);
    expect(rec.status, rec.stderr).toBe(0);
    const truth = told(rec.stdout);
    expect([...truth.running.keys()].sort()).toEqual(['sub-0', 'sub-1', 'sub-2']);
    expect(readCaptureBytes(fs.readFileSync(file)).header.asyncio?.mode).toBe('running');

    const r = pyunwind(['report', '-q', file, '--async-aware', '--format', 'json']);
    expect(r.status, r.stderr).toBe(0);
    const json = JSON.parse(r.stdout) as JsonReport;
    const { inSpin, matched, impossible, seen } = againstGraphs(json, truth);
    const { attempted, rejected, statuses } = json.summary;
    console.log(
      `[async-aware] ${py.label} running: ${attempted} samples, ${inSpin} in spin, ${matched} equal to asyncio's graph, ` +
        `${impossible.length} other stacks; rejected ${rejected} (${JSON.stringify(statuses)})`,
    );
    expect(impossible).toEqual([]);
    // every spinning task was seen, and spinning is what the program mostly does
    expect(seen.size).toBe(3);
    const stacked = json.summary.trusted - json.summary.statuses.idle!;
    expect(inSpin).toBeGreaterThan(0.5 * stacked);
    expect(rejected).toBeLessThan(0.1 * attempted);

    // the same capture reported without --async-aware: thread stacks, no task frame
    const plain = pyunwind(['report', '-q', file, '--format', 'collapsed']);
    expect(plain.status, plain.stderr).toBe(0);
    expect(plain.stdout).not.toContain('<task ');
    // the tasks' regions change nothing for the thread stacks: the block engine and the reference path agree
    const profileJson = (rep: Awaited<ReturnType<typeof reportCapture>>): string => JSON.stringify(rep.profile.toJSON(), (_, v) => (typeof v === 'bigint' ? v.toString() : v));
    expect(profileJson(await reportCapture(file, { workers: 0 }))).toBe(profileJson(await reportCapture(file, { reference: true })));
    // a running capture cannot give every task
    const all = pyunwind(['report', '-q', file, '--async-aware', '--async-mode', 'all']);
    expect(all.status).not.toBe(0);
    expect(all.stderr).toMatch(/holds only the running tasks/);

    // the same sample with its task links broken: rejected with the reason, never a stack
    const tampered = await tamperedSamples(file);
    console.log(`[async-aware] ${py.label} tampered: ${JSON.stringify(tampered)}`);
    expect(tampered).toEqual({
      untouched: 'complete' + (minor >= 15 ? '' : '-unverifiable') + ' with tasks',
      'root awaited by the running task': 'cycle',
      'awaiter outside the copy': 'dangling',
      'awaiters set that is no set': expect.stringMatching(/^(corrupt|dangling)$/),
      'coroutine awaiting itself': 'cycle',
      'running task outside the copy': 'dangling',
      "awaiter's coroutine running": 'torn',
    });
    recordCoverage('async-aware', `${py.label} running`, true);
  }, 120_000);

  it('all mode: the waiting tasks too, each with the graph asyncio reports for it', () => {
    const file = path.join(dir, `${py.label}-all.pyuw`);
    const rec = pyunwind(['record', '-q', '-r', '1000', '--async-aware', '--async-mode', 'all', '-o', file, '--', py.command, WORKLOAD, '4']);
    expect(rec.status, rec.stderr).toBe(0);
    const truth = told(rec.stdout);
    expect([...truth.waiting.keys()].sort()).toEqual(['main', 'sub-0', 'sub-1', 'worker-0', 'worker-1', 'worker-2']);

    const r = pyunwind(['report', '-q', file, '--async-aware', '--format', 'json']);
    expect(r.status, r.stderr).toBe(0);
    const json = JSON.parse(r.stdout) as JsonReport;
    const stacks = stacksOf(json);
    const counts = [...truth.waiting].map(([name, graph]) => [name, stacks.filter((s) => same(s.names, graph)).reduce((n, s) => n + s.count, 0)] as const);
    console.log(`[async-aware] ${py.label} all: stacks of waiting tasks ${counts.map(([n, c]) => `${n} ${c}`).join(', ')}; rejected ${json.summary.rejected} of ${json.summary.attempted}`);
    // main waits through the whole run (its stack counts the samples then); each worker waits
    // as long; each sub-task waits while another one runs (two thirds of the time)
    const count = new Map(counts);
    const samples = count.get('main')!;
    expect(samples).toBeGreaterThanOrEqual(10);
    for (const [name, c] of counts) expect(c, name).toBeGreaterThanOrEqual((name.startsWith('sub-') ? 0.2 : 0.9) * samples);
    // and the running ones are still what asyncio says
    const graphs = [...truth.running.values()];
    const wrong = stacks.filter((s) => {
      const at = s.names.indexOf('spin');
      if (at < 0) return false;
      const own = s.names.slice(0, at + 1);
      const waitingHere = [...truth.waiting.values()].some((g) => same(g, s.names));
      return !waitingHere && !graphs.some((g) => same(g, own));
    });
    expect(wrong.map((s) => s.names.join(' > '))).toEqual([]);
    // at most one running task's stack a sample (one thread): a waiting sub-task is suspended in
    // asyncio.sleep, and one read after its step had begun — its coroutine running, its frame
    // not of the sample's moment — is rejected as torn, never shown as a stack
    const runningLike = stacks.filter((s) => s.names.some((n) => /^<task sub-\d+>$/.test(n)) && s.names[s.names.length - 1] !== 'sleep').reduce((n, s) => n + s.count, 0);
    const torn = json.summary.statuses.torn ?? 0;
    console.log(`[async-aware] ${py.label} all: ${json.summary.ticks} samples, ${runningLike} stacks of a running sub-task; ${torn} waiting tasks' stacks torn`);
    expect(runningLike).toBeLessThanOrEqual(json.summary.ticks);
    // (how many are torn follows how often the tasks switch against how long a copy takes:
    // counted, not bounded; every other rejection stays rare)
    expect(json.summary.rejected - torn).toBeLessThan(0.1 * json.summary.attempted);
    // what a task's view reads is what the recorder copied for it: a chain not in the capture
    // (dangling) is the recorder's omission, never the program's — e.g. the running task's own
    // coroutine, needed when the loop's code runs for it (20-24 a run here before it was copied)
    expect(json.summary.statuses.dangling ?? 0, JSON.stringify(json.summary.statuses)).toBe(0);
    recordCoverage('async-aware', `${py.label} all`, true);
  }, 120_000);

  it.for(['running', 'all'] as const)('%s mode copied at the interrupt: the same graphs, the target never stopped, the tasks of the tick', { timeout: 120_000 }, (mode, ctx) => {
    const why = cannotTryKernelCopies();
    if (why) skipTest(ctx, 'async-aware', `${py.label} interrupt ${mode}`, why);
    const file = path.join(dir, `${py.label}-interrupt-${mode}.pyuw`);
    const rec = pyunwind(['record', '-r', '1000', '--copy', 'interrupt', '--async-aware', '--async-mode', mode, '-o', file, '--', py.command, WORKLOAD, '4']);
    expect(rec.status, rec.stderr).toBe(0);
    const line = rec.stderr.trim().split('\n').pop()!;
    // nothing stopped; some samples the kernel's (how many follows how much of the time the
    // program had a CPU: on a busy machine it waits for one, and is copied off it by the
    // recorder); the share of task views it had not copied whole, said
    expect(line).toMatch(/copied with the target stopped 0\.0% \(stopped 0\.0% of the time\)/);
    const inKernel = Number(/copied in the kernel ([\d.]+)%/.exec(line)?.[1]);
    const short = Number(/tasks not of the tick ([\d.]+)%/.exec(line)?.[1]);
    expect(inKernel, line).toBeGreaterThan(0);
    expect(short, line).toBeLessThan(2);
    const truth = told(rec.stdout);
    const r = pyunwind(['report', '-q', file, '--async-aware', '--format', 'json']);
    expect(r.status, r.stderr).toBe(0);
    const json = JSON.parse(r.stdout) as JsonReport;
    const { attempted, rejected, statuses } = json.summary;
    const stacks = stacksOf(json);
    const graphs = [...truth.running.values()];
    const waiting = [...truth.waiting.values()];
    // every stack in a spinning coroutine is a running task's graph, or (all) a waiting one's
    const wrong = stacks.filter((s) => {
      const at = s.names.indexOf('spin');
      if (at < 0) return false;
      return !graphs.some((g) => same(g, s.names.slice(0, at + 1))) && !(mode === 'all' && waiting.some((g) => same(g, s.names)));
    });
    const { inSpin, seen } = againstGraphs({ ...json, threads: json.threads }, truth);
    console.log(
      `[async-aware] ${py.label} interrupt ${mode}: ${attempted} stacks, ${inSpin} in spin, in the kernel ${inKernel} %, tasks not of the tick ${short} %; ` +
        `rejected ${rejected} (${JSON.stringify(Object.fromEntries(Object.entries(statuses).filter(([, n]) => n > 0)))})`,
    );
    expect(wrong.map((s) => `${s.names.join(' > ')} (${s.count})`)).toEqual([]);
    expect(seen.size).toBe(3);
    if (mode === 'all') {
      // each waiting task's graph is a stack, as often as it waits (see the all-mode test above)
      const main = stacks.filter((s) => same(s.names, truth.waiting.get('main')!)).reduce((n, s) => n + s.count, 0);
      expect(main).toBeGreaterThanOrEqual(10);
      for (const [name, graph] of truth.waiting) {
        const c = stacks.filter((s) => same(s.names, graph)).reduce((n, s) => n + s.count, 0);
        expect(c, name).toBeGreaterThanOrEqual((name.startsWith('sub-') ? 0.2 : 0.9) * main);
      }
    }
    // rejected: only the views the kernel had not copied whole (dangling: few), and copies
    // nothing proved (torn: a thread waiting for a CPU that got one while the recorder copied
    // it — counted, more of them on a busy machine, never a stack)
    const dangling = statuses.dangling ?? 0;
    expect(dangling, JSON.stringify(statuses)).toBeLessThan(0.02 * attempted);
    expect(rejected - dangling - (statuses.torn ?? 0), JSON.stringify(statuses)).toBe(0);
    recordCoverage('async-aware', `${py.label} interrupt ${mode}`, true);
  });

  it(`more tasks on a thread's list than are followed (${MAX_TASKS}): the samples cut are counted and said`, () => {
    // 300 tasks asleep and one that spins, for a second; then the process ends at once: a
    // teardown finishes the tasks one by one, each leaving the list, and a sample then follows
    // tasks past the first 256 (CI saw 288 different ones shown in one run)
    const program = [
      'import asyncio, os, time',
      'async def idle(): await asyncio.sleep(60)',
      'async def spin(end):',
      '    while time.monotonic() < end: sum(range(1000))',
      'async def main():',
      `    idle_tasks = [asyncio.create_task(idle(), name=f"idle-{i}") for i in range(${MAX_TASKS + 44})]`,
      '    await asyncio.sleep(0)',
      '    await asyncio.create_task(spin(time.monotonic() + 1.0), name="spin")',
      '    os._exit(0)',
      'asyncio.run(main())',
    ].join('\n');
    const file = path.join(dir, `${py.label}-many.pyuw`);
    const rec = pyunwind(['record', '-q', '-r', '200', '--async-aware', '--async-mode', 'all', '-o', file, '--', py.command, '-c', program]);
    expect(rec.status, rec.stderr).toBe(0);
    const r = pyunwind(['report', '-q', file, '--async-aware', '--format', 'json']);
    expect(r.status, r.stderr).toBe(0);
    const json = JSON.parse(r.stdout) as JsonReport & { metadata: { capture: { cutTaskLists: number } } };
    // every sample taken while the 300 lived saw the list cut; those whose tasks could not be
    // read (rejected before the list is followed) did not get that far
    const cut = json.metadata.capture.cutTaskLists;
    expect(cut).toBeGreaterThan(0);
    expect(cut).toBeLessThanOrEqual(json.summary.ticks);
    const idle = stacksOf(json).filter((s) => s.names.some((n) => /^<task idle-\d+>$/.test(n)));
    const shown = new Set(idle.map((s) => s.names.find((n) => n.startsWith('<task idle-'))));
    expect(shown.size).toBeLessThanOrEqual(MAX_TASKS);
    const text = pyunwind(['report', '-q', file, '--async-aware']);
    expect(text.stdout).toContain(`Task lists cut: in ${cut} sample${cut === 1 ? '' : 's'} a thread had more than ${MAX_TASKS} asyncio tasks; those past ${MAX_TASKS} are not shown`);
    recordCoverage('async-aware', `${py.label} many tasks`, true);
  }, 120_000);

  it.for([
    { tasks: 60, whole: true },
    { tasks: TICK_FOLLOW.tasks + 72, whole: false },
  ])('copied at the interrupt, all mode, $tasks tasks asleep beside one that spins: followed at the tick up to what the kernel takes, past it counted and said', { timeout: 60_000 }, ({ tasks, whole }, ctx) => {
    const why = cannotTryKernelCopies();
    if (why) skipTest(ctx, 'async-aware', `${py.label} interrupt ${tasks} tasks`, why);
    const program = [
      'import asyncio, time',
      'async def idle(): await asyncio.sleep(60)',
      'async def spin(end):',
      '    while time.monotonic() < end:',
      '        sum(range(1000))',
      '        await asyncio.sleep(0)',
      'async def main():',
      `    idle_tasks = [asyncio.create_task(idle(), name=f"idle-{i}") for i in range(${tasks})]`,
      '    await asyncio.sleep(0)',
      '    await asyncio.create_task(spin(time.monotonic() + 2.0), name="spin")',
      '    for t in idle_tasks: t.cancel()',
      'asyncio.run(main())',
    ].join('\n');
    const file = path.join(dir, `${py.label}-interrupt-${tasks}.pyuw`);
    // (200 Hz: a view of hundreds of tasks costs the recorder more than a millisecond)
    const rec = pyunwind(['record', '-r', '200', '--copy', 'interrupt', '--async-aware', '--async-mode', 'all', '-o', file, '--', py.command, '-c', program]);
    expect(rec.status, rec.stderr).toBe(0);
    const lines = rec.stderr.trim().split('\n');
    const summary = lines.find((l) => l.startsWith('pyunwind: recorded '))!;
    const short = Number(/tasks not of the tick ([\d.]+)%/.exec(summary)?.[1]);
    const hint = lines.find((l) => l.includes('of the task views were not of the tick'));
    const r = pyunwind(['report', '-q', file, '--async-aware', '--format', 'json']);
    expect(r.status, r.stderr).toBe(0);
    const json = JSON.parse(r.stdout) as JsonReport;
    const { attempted, statuses } = json.summary;
    const idle = stacksOf(json).filter((s) => s.names.some((n) => /^<task idle-\d+>$/.test(n)));
    const shown = new Set(idle.map((s) => s.names.find((n) => n.startsWith('<task idle-'))));
    console.log(`[async-aware] ${py.label} interrupt ${tasks} tasks: ${attempted} stacks, ${shown.size} idle tasks shown, tasks not of the tick ${short} %, ${JSON.stringify(Object.fromEntries(Object.entries(statuses).filter(([, n]) => n > 0)))}`);
    if (whole) {
      // every task followed in the kernel: each asleep task shown, nearly every view of the tick
      expect(short, summary).toBeLessThan(5);
      expect(shown.size).toBe(tasks);
      expect(hint).toBeUndefined();
    } else {
      // more than the kernel follows: the views are not of the tick, rejected (dangling) and
      // counted, and the recorder says why in one line (however few they are: on a loaded
      // machine most samples of the thread are copied off its CPU, by the recorder, whole)
      expect(short, summary).toBeGreaterThanOrEqual(10);
      expect(statuses.dangling ?? 0).toBeGreaterThan(0);
      expect(hint, rec.stderr).toContain(`the kernel follows up to ${TICK_FOLLOW.tasks} tasks a thread`);
    }
    recordCoverage('async-aware', `${py.label} interrupt ${tasks} tasks`, true);
  });

  it('a task awaited by two: its frame says so, and the stack goes on with the awaiter asyncio lists first', () => {
    const file = path.join(dir, `${py.label}-shared.pyuw`);
    const rec = pyunwind(['record', '-q', '-r', '1000', '--async-aware', '-o', file, '--', py.command, path.resolve('workloads/asyncshared.py'), '2']);
    expect(rec.status, rec.stderr).toBe(0);
    // every graph the program saw, one per number of awaiters: at its first step the shared
    // task is awaited by none yet (the waiters have not run), from the second by both
    const said = rec.stdout.trim().split('\n').map((l) => JSON.parse(l) as { graph: string[]; awaiters: Record<string, number> });
    expect(said.map((g) => g.awaiters.shared)).toContain(2);
    // the program's own graphs, each task awaited by several marked with how many
    const marked = (g: (typeof said)[number]): string[] =>
      g.graph.map((n) => {
        const task = /^<task (.*)>$/.exec(n)?.[1];
        return task !== undefined && (g.awaiters[task] ?? 0) > 1 ? `<task ${task} (awaited by ${g.awaiters[task]})>` : n;
      });
    const expected = marked(said.find((g) => g.awaiters.shared === 2)!);
    const r = pyunwind(['report', '-q', file, '--async-aware', '--format', 'json']);
    expect(r.status, r.stderr).toBe(0);
    const json = JSON.parse(r.stdout) as JsonReport;
    const running = new Map(said.map((g, i) => [`shared ${i}`, marked(g)]));
    const { inSpin, matched, impossible, seen } = againstGraphs(json, { running, waiting: new Map() });
    console.log(`[async-aware] ${py.label} shared: ${inSpin} samples in spin, ${matched} equal to one of ${said.length} graphs the program saw; seen ${[...seen].join(' | ')}; rejected ${json.summary.rejected} of ${json.summary.attempted}`);
    expect(impossible).toEqual([]);
    // the spinning steps are the ones awaited by both
    expect(seen.has(expected.join(' > '))).toBe(true);
    expect(inSpin).toBeGreaterThan(0.5 * (json.summary.trusted - (json.summary.statuses.idle ?? 0)));
    expect(json.summary.rejected).toBeLessThan(0.1 * json.summary.attempted);
    recordCoverage('async-aware', `${py.label} shared`, true);
  }, 120_000);

  it('top and record --live: the live view shows task stacks; its last frame counts what report --async-aware finds in the capture', () => {
    // top: its title says so, and the tasks are rows (pseudo-frames, no file) by total
    const t = pyunwind(['top', '--async-aware', '-s', 'total', '--iterations', '1', '-i', '1', '-n', '40', '--', py.command, WORKLOAD, '3']);
    expect(t.status, t.stderr).toBe(0);
    expect(t.stdout).toMatch(/^pyunwind top — pid \d+ .*, mode wall, async-aware running, by total$/m);
    const rowsOf = (frame: string): Map<string, number> =>
      new Map([...frame.matchAll(/^ +(?:[\d.]+|–) +(?:[\d.]+|–) +\d+ +(\d+) {2}(.+)$/gm)].map((m) => [m[2]!, Number(m[1])]));
    for (const task of ['<task main>', '<task worker-0>', '<task sub-0>']) expect(rowsOf(t.stdout).has(task), `${task} in\n${t.stdout}`).toBe(true);

    // record --live: the view while the capture is written; the last frame is drawn once the
    // recording has ended, from every sample of the file
    const file = path.join(dir, `${py.label}-live.pyuw`);
    const r = pyunwind(['record', '--live', '--async-aware', '-o', file, '--', py.command, WORKLOAD, '3']);
    expect(r.status, r.stderr).toBe(0);
    const last = r.stdout.split(/\n\n(?=pyunwind top)/).pop()!;
    const shown = rowsOf(last);
    const rep = pyunwind(['report', '-q', file, '--async-aware', '--format', 'json']);
    expect(rep.status, rep.stderr).toBe(0);
    const stacks = stacksOf(JSON.parse(rep.stdout) as JsonReport);
    const total = (name: string): number => stacks.filter((s) => s.names.includes(name)).reduce((n, s) => n + s.count, 0);
    // (a function's row names its file too, short as the terminal shows it; a task's names none)
    const row = (name: string): number | undefined => shown.get(name.startsWith('<') ? name : `${name} (${shortFilename(WORKLOAD, process.cwd())})`);
    // the view's title says what it shows; it shows its top 20 rows by self — crunch first, the
    // others (tasks have no self samples) as far as they fit beside the program's start-up
    expect(last).toMatch(/^pyunwind top — .*, mode wall, async-aware running, by self$/m);
    const compared = ['crunch', 'spin', '<task main>', '<task worker-0>', '<task sub-1>'].map((n) => [n, row(n), total(n)] as const).filter(([, s]) => s !== undefined);
    console.log(`[async-aware] ${py.label} live: last frame against the report (name, shown, reported): ${JSON.stringify(compared)}`);
    expect(compared[0]?.[0]).toBe('crunch');
    for (const [name, s, rep] of compared) {
      expect(rep, name).toBeGreaterThan(0);
      expect(s, name).toBe(rep);
    }
    recordCoverage('async-aware', `${py.label} live`, true);
  }, 120_000);

  it.for(['running', 'all'] as const)('copied at the interrupt, a program that makes new tasks all the time (%s mode): the tasks are followed in the kernel', { timeout: 60_000 }, (mode, ctx) => {
    const why = cannotTryKernelCopies();
    const label = `${py.label} interrupt new tasks${mode === 'all' ? ' all' : ''}`;
    if (why) skipTest(ctx, 'async-aware', label, why);
    // workloads/asynciotasks.py gathers six new tasks each round, hundreds of rounds a second: a
    // running task is nearly always one the thread's previous sample did not see, and in `all`
    // mode a waiting task's name and the coroutines it awaits are new at nearly every sample
    // (the task objects themselves made where the last round's were freed)
    const file = path.join(dir, `${py.label}-interrupt-churn-${mode}.pyuw`);
    const rec = pyunwind(['record', '-r', '1000', '--copy', 'interrupt', '--async-aware', '--async-mode', mode, '-o', file, '--', py.command, path.resolve('workloads/asynciotasks.py'), '3']);
    expect(rec.status, rec.stderr).toBe(0);
    const line = rec.stderr.trim().split('\n').pop()!;
    const short = Number(/tasks not of the tick ([\d.]+)%/.exec(line)?.[1]);
    const r = pyunwind(['report', '-q', file, '--async-aware', '--format', 'json']);
    expect(r.status, r.stderr).toBe(0);
    const json = JSON.parse(r.stdout) as JsonReport;
    const { attempted, statuses } = json.summary;
    // every stack in the program's own coroutines and what they call runs in a task (its
    // <module> and main, below asyncio.run, are the loop's thread stack when no task runs)
    const work = stacksOf(json).filter((s) => s.names.some((n, i) => s.filenames[i]!.endsWith('asynciotasks.py') && n !== '<module>' && n !== 'main'));
    const taskless = work.filter((s) => !s.names.some((n) => n.startsWith('<task ')));
    console.log(`[async-aware] ${label}: ${attempted} stacks, tasks not of the tick ${short} %, ${JSON.stringify(Object.fromEntries(Object.entries(statuses).filter(([, n]) => n > 0)))}`);
    expect(short, line).toBeLessThan(5);
    expect(statuses.dangling ?? 0, JSON.stringify(statuses)).toBeLessThan(0.05 * attempted);
    expect(work.reduce((n, s) => n + s.count, 0)).toBeGreaterThan(0.5 * attempted);
    expect(taskless.map((s) => s.names.join(' > '))).toEqual([]);
    recordCoverage('async-aware', label, true);
  });

  it.for([{ copy: 'default' }, { copy: 'interrupt' }])('dump --async-aware, copy $copy: every task of the thread, each stack the graph asyncio reports for it (or torn, never another)', { timeout: 120_000 }, async ({ copy }, ctx) => {
    const why = copy === 'interrupt' ? cannotTryKernelCopies() : null;
    if (why) skipTest(ctx, 'async-aware', `${py.label} dump interrupt`, why);
    const child = spawn(py.command, [WORKLOAD, '60'], { stdio: ['ignore', 'pipe', 'inherit'] });
    targets.push(child);
    // once the last sub-task has printed every waiting task's graph, all the tasks are there
    const lines: string[] = [];
    await new Promise<void>((resolve, reject) => {
      const rl = createInterface({ input: child.stdout! });
      rl.on('line', (l) => {
        lines.push(l);
        if (lines.filter((x) => x.includes('"waiting"')).length === 6) resolve();
      });
      child.on('exit', () => reject(new Error(`the program ended first: ${lines.join('\n')}`)));
    });
    const truth = told(lines.join('\n'));
    // a waiting sub-task is suspended in asyncio.sleep (as the ones the program printed)
    const expected = (task: string, running: boolean): string[] | undefined =>
      truth.waiting.get(task) ?? (!running && truth.running.has(task) ? [...truth.running.get(task)!, 'sleep'] : undefined);
    expect(expected('sub-0', false)).toEqual(truth.waiting.get('sub-0'));
    const seen = new Map<string, number>();
    let torn = 0;
    for (let k = 0; k < 8; k++) {
      const r = pyunwind(['dump', '--pid', String(child.pid), '--async-aware', '--format', 'json', ...(copy === 'interrupt' ? ['--copy', 'interrupt'] : [])]);
      expect(r.status, r.stderr).toBe(0);
      const thread = (JSON.parse(r.stdout) as { threads: { name: string; tasks: { task: string | null; running: boolean; status: string; frames: { qualname: string }[] }[] }[] }).threads[0]!;
      const names = thread.tasks.filter((t) => t.task !== null).map((t) => t.task!);
      // (a torn task is named still: it is its stack that could not be read; a thread in the
      // event loop shows its thread stack first — and if it runs the loop's own code for a
      // task, that running task's stack is the chain it is suspended in, as a waiting one's)
      const all = ['main', 'sub-0', 'sub-1', 'sub-2', 'worker-0', 'worker-1', 'worker-2'];
      const inLoop = thread.tasks[0]?.task === null;
      expect(names.length, `dump ${k}: ${JSON.stringify(thread)}`).toBe(all.length);
      expect(names.every((n) => all.includes(n)) && new Set(names).size === names.length, JSON.stringify(names)).toBe(true);
      for (const t of thread.tasks) {
        if (t.task === null) continue;
        if (t.status === 'torn') {
          torn++;
          continue;
        }
        const stack = t.frames.map((f) => f.qualname).reverse();
        // (a running task the loop's own code runs for, not its coroutine, is suspended: its
        // stack is a waiting task's)
        const suspended = !t.running || inLoop;
        const own = suspended ? stack : stack.slice(0, stack.indexOf('spin') + 1);
        expect(own, `${t.task} (${t.running ? 'running' : 'waiting'})`).toEqual(suspended ? expected(t.task, false) : truth.running.get(t.task));
        seen.set(t.task, (seen.get(t.task) ?? 0) + 1);
      }
    }
    child.kill('SIGKILL');
    console.log(`[async-aware] ${py.label} dump, copy ${copy}: 8 dumps, stacks equal to asyncio's ${JSON.stringify(Object.fromEntries(seen))}, ${torn} torn`);
    for (const task of ['main', 'worker-0', 'worker-1', 'worker-2']) expect(seen.get(task), task).toBeGreaterThanOrEqual(7);
    recordCoverage('async-aware', `${py.label} dump${copy === 'interrupt' ? ' interrupt' : ''}`, true);
  });

  it('with --subprocesses: a Python child running tasks is recorded with them once it imports asyncio; one that never does, as the interpreter allows', () => {
    const file = path.join(dir, `${py.label}-family.pyuw`);
    const childOut = path.join(dir, `${py.label}-family-child.jsonl`);
    const rec = pyunwind(['record', '-r', '1000', '--async-aware', '--subprocesses', '-o', file, '--', py.command, path.resolve('workloads/asyncfamily.py'), '4', childOut, py.command]);
    expect(rec.status, rec.stderr).toBe(0);
    const pids = (JSON.parse(rec.stdout.split('\n')[0]!) as { children: { asyncio: number; plain: number } }).children;
    // a 3.15 built with _asyncio in the interpreter publishes the offsets before any import: the
    // plain child is recorded too (with no task to show); with _asyncio a module of its own
    // (Debian's 3.14), it never loads it and is not followed
    const builtIn = spawnSync(py.command, ['-c', "import sys; print('_asyncio' in sys.builtin_module_names)"], { encoding: 'utf8' }).stdout.trim() === 'True';
    const capture = (pid: number): string => file.replace(/\.pyuw$/, `.${pid}.pyuw`);
    const notFollowed = rec.stderr.split('\n').filter((l) => l.includes(`not followed: pid ${pids.plain} `));
    if (builtIn) {
      expect(fs.existsSync(capture(pids.plain)), rec.stderr).toBe(true);
      expect(notFollowed).toEqual([]);
    } else {
      expect(fs.existsSync(capture(pids.plain))).toBe(false);
      expect(notFollowed, rec.stderr).toHaveLength(1);
      // (it exits just before the parent does: the recording may end first)
      expect(notFollowed[0]).toMatch(/--async-aware: it (exited before it imported asyncio|had not imported asyncio when the recording ended)/);
    }
    const results: string[] = [];
    for (const [who, f, truth] of [
      ['parent', file, told(rec.stdout)],
      ['asyncio child', capture(pids.asyncio), told(fs.readFileSync(childOut, 'utf8'))],
    ] as const) {
      expect([...truth.running.keys()].sort(), who).toEqual(['sub-0', 'sub-1', 'sub-2']);
      const header = readCaptureBytes(fs.readFileSync(f)).header;
      expect(header.asyncio?.mode, who).toBe('running');
      const r = pyunwind(['report', '-q', f, '--async-aware', '--format', 'json']);
      expect(r.status, r.stderr).toBe(0);
      const json = JSON.parse(r.stdout) as JsonReport;
      const { inSpin, matched, impossible, seen } = againstGraphs(json, truth);
      results.push(`${who} ${json.summary.attempted} samples, ${inSpin} in spin, ${matched} equal to asyncio's graph, rejected ${json.summary.rejected}`);
      expect(impossible, who).toEqual([]);
      expect(seen.size, who).toBe(3);
      expect(inSpin, who).toBeGreaterThan(0.5 * (json.summary.trusted - (json.summary.statuses.idle ?? 0)));
      expect(json.summary.rejected, who).toBeLessThan(0.1 * json.summary.attempted);
    }
    console.log(`[async-aware] ${py.label} --subprocesses: ${results.join('; ')}; plain child ${builtIn ? 'recorded (_asyncio built in)' : 'not followed'}`);
    recordCoverage('async-aware', `${py.label} subprocesses`, true);
  }, 120_000);
});

describe('async-aware reports of captures without tasks', () => {
  it('are refused in one line', (ctx) => {
    const fixtures = path.resolve('test/fixtures/captures');
    const any = fs.readdirSync(fixtures).find((f) => f.endsWith('.pyuw'));
    if (!any) {
      return skipTest(ctx, 'async-aware', 'plain capture', 'no capture in test/fixtures/captures');
    }
    const r = pyunwind(['report', '-q', path.join(fixtures, any), '--async-aware']);
    expect(r.status).not.toBe(0);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/holds no asyncio tasks/);
  });
});
