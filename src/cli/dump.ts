// pyunwind dump --pid PID: the current stack of every thread of a running Python, once, with
// each stack's status. Copies follow record's rules: a thread whose copy moved while it was
// made is copied again with the target stopped for a moment (or, with --copy optimistic,
// shown as torn) — never printed as a stack of one moment.
// pyunwind dump --core CORE: the same of a core file (src/record/core/core-source.ts): the
// same walk, statuses and formats, the native frames from the core's thread registers.

import { shortFilename } from '../export/filenames.js';
import { targetCwd } from './target-cwd.js';
import { parseArgs } from 'node:util';
import { openLinuxProcess } from '../record/linux/process.js';
import { snapshotSamples, takeSnapshot } from '../record/copy/snapshot.js';
import { readThreadNames } from '../record/copy/thread-names.js';
import { openStopper } from '../record/linux/stopper.js';
import { unwindSnapshot, unwindSnapshotTasks, type TaskStack, type ThreadStack } from '../pipeline/snapshot-stacks.js';
import { MAX_TASKS } from '../walk/task-graph.js';
import { KernelWalker } from '../kernel/walker.js';
import { UsageError } from './errors.js';
import type { AsyncioOffsets } from '../layout/asyncio-offsets.js';
import { asyncModeOption, copyOption, parsePid } from './options.js';
import { sourceFrame } from '../symbols/types.js';
import type { SourceFrame } from '../profile/types.js';
import { asyncioOffsetsNow, TargetError, type AsyncioFound } from '../record/linux/process.js';
import { copierFor } from '../record/copy/modes.js';
import { MemoryCopier } from '../record/copy/copier.js';
import type { AnyStopper } from '../record/linux/stopper.js';
import { asyncioTstateCheck, asyncioTstateEnd, TaskCopier } from '../record/copy/task-copy.js';
import type { AsyncMode } from '../walk/task-graph.js';
import { TRUSTED } from '../walk/status.js';
import os from 'node:os';
import path from 'node:path';
import { ThreadStopper } from '../record/linux/stopper.js';
import { readNativeObjects } from '../record/linux/native-objects.js';
import { NativeRecorder, type NativeCopy } from '../record/linux/native-recorder.js';
import { withStackRegion } from '../native/stack-region.js';
import { mixStack, type MixedStack } from '../native/mixed-stack.js';
import { nativeLabel, type NativeFrameName } from '../native/symbolize.js';
import type { NativeObject } from '../native/objects.js';
import { KernelNativeUnwinder } from '../kernel/native-unwinder.js';
import { openCore, type CoreFileCheck } from '../record/core/core-source.js';
import { RED_ZONE } from '../record/linux/native-stack.js';
import { ObjectReader } from '../objects/object-reader.js';
import { frameLocals, type LocalVariable } from '../objects/frame-locals.js';
import type { MemorySource } from '../record/copy/source.js';
import type { SnapshotSamples } from '../pipeline/snapshot-stacks.js';
import type { Layout } from '../layout/layout.js';
import { snapshotAtInterrupt, type InterruptSnapshot } from '../record/linux/interrupt-snapshot.js';

export const DUMP_HELP = `Usage: pyunwind dump --pid PID [OPTIONS]
       pyunwind dump --core CORE [--executable PATH] [--lib-path DIR]... [OPTIONS]

Print the Python stack of every thread of process PID, or of the process a core file was made
of, once, each with its status (complete, complete-unverifiable, idle, or why it was
rejected). Copies follow record's rules: a copy nothing proves of one moment is made again as
--copy says (docs/reporting.md). A core is read as it is (docs/post-mortem.md).

Options:
  -p, --pid PID        the Python process (same user as you, or CAP_SYS_PTRACE)
      --core CORE      a core file of a Python process (gcore, a crash with ulimit -c, or
                       coredumpctl dump); gzip-compressed (.gz) is read as it is
      --executable PATH
                       the interpreter the core was made of, where the path the core names
                       does not hold it (or holds another build)
      --lib-path DIR   where to look, by name, for files the core maps that are missing or
                       differ at their paths (repeatable)
      --locals         each Python frame's arguments and local variables, with the values of
                       int, float, bool, None, str, bytes and short tuples, lists and dicts
  -f, --format FORMAT  text (default) or json
      --copy COPY      adaptive (default), optimistic (never stops: such a copy is shown torn),
                       blocking, or interrupt (root, or CAP_BPF and CAP_PERFMON: each running
                       thread copied by the kernel at a timer's interrupt, nothing stopped;
                       with --native and --async-aware too), as for record
      --blocking       same as --copy blocking
      --read-only      never write into the program (no profiler anchor on 3.15+)
      --opcodes        each frame's bytecode instruction too, as dis names it
      --async-aware    each thread's asyncio tasks too (CPython 3.14+), each task's stack
      --async-mode MODE
                       all (default here: every task, the running one first) or running
      --native         the C frames too, in one stack with the Python frames (every thread
                       is stopped with ptrace for its registers and native stack; from a
                       core: its threads' registers, and the files it maps)
      --full-filenames whole file paths in text (default: short, as py-spy shows them)
  -h, --help           this help
`;

/** A native frame as text: its function (or address) and its object's file name. */
function nativeText(n: NativeFrameName): string {
  const what = nativeLabel(n);
  return n.object === null ? what : `${what} (${path.basename(n.object)})`;
}

/** A native frame in json: its name (null: no symbol), object, address in it, and an unnamed function's start. */
function nativeFrameJson(n: NativeFrameName): Record<string, unknown> {
  return { name: n.name, object: n.object, address: `0x${n.address.toString(16)}`, ...(n.start !== null ? { start: `0x${n.start.toString(16)}` } : {}) };
}

function nativeJson(m: MixedStack | undefined, t: ThreadStack): Record<string, unknown> {
  if (!m) return { nativeStatus: 'native-no-stack' };
  return {
    nativeStatus: m.status,
    // the native chain as unwound, every frame (the eval loop's too), innermost first
    ...(m.unwind
      ? { nativeFrames: m.unwind.pcs.map((pc, i) => ({ pc: `0x${pc.toString(16)}`, ...nativeFrameJson(m.names[i] ?? { name: null, object: null, address: pc, start: null }) })) }
      : {}),
    ...(m.status === 'mixed'
      ? {
          stack: m.frames.map((f) =>
            f.kind === 'python' ? sourceFrame(t.frames[f.index]!) : { native: true, ...nativeFrameJson(f.name) },
          ),
        }
      : {}),
  };
}

/** What a dump found, live or from a core, ready to print. */
interface Dumped {
  description: string;
  stacks: ThreadStack[];
  taskStacks: Map<ThreadStack, TaskStack[]> | null;
  /** threads with more tasks than are followed (MAX_TASKS): said, not silently cut */
  cutTasks: Set<ThreadStack>;
  /** the names threading gives the threads (unknown: absent) */
  names: Map<string, string>;
  /** --native: each thread's mixed stack */
  native: boolean;
  mixed: Map<ThreadStack, MixedStack>;
  /** --locals: each thread's frames' locals (innermost first, as its frames), or why not */
  locals: Map<ThreadStack, (LocalVariable[] | string)[]> | null;
  /** lines said before the threads: files of a core missing or different, stacks it lacks */
  notes: string[];
  /** a core's files, each as found */
  files: CoreFileCheck[] | null;
  /** the target's working directory (short file names), where known */
  cwd: string | undefined;
  /** a core's threads that were handling a signal when it was written (the one that killed it): tid → signal */
  signals: Map<number, number>;
}

/** A signal's name (SIGSEGV), or its number. */
function signalName(n: number): string {
  return Object.entries(os.constants.signals).find(([, v]) => v === n)?.[0] ?? `signal ${n}`;
}

export async function dump(argv: string[], out: (s: string) => void): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      pid: { type: 'string', short: 'p' },
      core: { type: 'string' },
      executable: { type: 'string' },
      'lib-path': { type: 'string', multiple: true },
      locals: { type: 'boolean' },
      format: { type: 'string', short: 'f', default: 'text' },
      copy: { type: 'string' },
      // before 0.2 the copy mode: refused with the new spelling
      mode: { type: 'string', short: 'm' },
      blocking: { type: 'boolean' },
      'read-only': { type: 'boolean' },
      opcodes: { type: 'boolean' },
      'full-filenames': { type: 'boolean' },
      'async-aware': { type: 'boolean' },
      'async-mode': { type: 'string' },
      native: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
    allowPositionals: false,
  });
  if (values.help) {
    out(DUMP_HELP);
    return 0;
  }
  if (values.format !== 'text' && values.format !== 'json') throw new UsageError(`unknown format "${values.format}" (text or json)`);
  if (values.mode !== undefined && copyOption(undefined, false, values.mode)) throw new UsageError('dump has no --mode: it shows every thread (--copy says how copies are made)');
  let dumped: Dumped;
  if (values.core !== undefined) {
    if (values.pid !== undefined) throw new UsageError('dump takes --pid or --core, not both');
    for (const o of ['copy', 'blocking', 'read-only'] as const) {
      if (values[o] !== undefined) throw new UsageError(`--${o} is for a live process: a core is read as it is`);
    }
    const asyncMode = asyncModeOption(values['async-aware'], values['async-mode'] ?? (values['async-aware'] ? 'all' : undefined));
    dumped = await dumpCore(values.core, { executable: values.executable, libPaths: values['lib-path'] ?? [], native: values.native === true, locals: values.locals === true, opcodes: values.opcodes === true, asyncMode });
  } else {
    if (values.pid === undefined) throw new UsageError('dump needs --pid PID or --core CORE');
    if (values.executable !== undefined || values['lib-path'] !== undefined) throw new UsageError('--executable and --lib-path are for --core');
    dumped = await dumpLive(parsePid(values.pid), values);
  }
  out(values.format === 'json' ? renderJson(dumped) : renderText(dumped, values['full-filenames'] === true));
  return 0;
}

interface LiveValues {
  copy?: string;
  blocking?: boolean;
  'read-only'?: boolean;
  opcodes?: boolean;
  'async-aware'?: boolean;
  'async-mode'?: string;
  native?: boolean;
  locals?: boolean;
}

async function dumpLive(pid: number, values: LiveValues): Promise<Dumped> {
  const copy = copyOption(values.copy, values.blocking);
  if (copy === 'interrupt') return dumpAtInterrupt(pid, values);
  // a dump wants every task: `all` unless asked otherwise (as CPython's profiler's dump)
  const asyncMode = asyncModeOption(values['async-aware'], values['async-mode'] ?? (values['async-aware'] ? 'all' : undefined));
  const walker = await KernelWalker.load();
  const source = openLinuxProcess(pid);
  let stopper: AnyStopper | null = null;
  let stacks: ThreadStack[];
  let taskStacks: Map<ThreadStack, TaskStack[]> | null = null;
  const cutTasks = new Set<ThreadStack>();
  let names = new Map<string, string>();
  // --native: each thread's registers and stack, the objects, and its mixed stack
  let natives: Map<bigint, NativeCopy> | null = null;
  let objects: NativeObject[] = [];
  let samples: SnapshotSamples;
  let locals: Dumped['locals'] = null;
  const mixed = new Map<ThreadStack, MixedStack>();
  try {
    let tasks: { found: AsyncioFound; mode: AsyncMode } | null = null;
    if (asyncMode) {
      const found = asyncioOffsetsNow(source);
      if (typeof found === 'string') throw new TargetError('unsupported', `--async-aware: ${source.description}: ${found}`);
      tasks = { found, mode: asyncMode };
    }
    stopper = copy === 'optimistic' ? null : openStopper(pid);
    const copyOptions = { copy, ...(stopper ? { stopper } : {}), ...(values['read-only'] ? { consistency: 'reread' as const } : {}) };
    const offsets = tasks?.found.offsets;
    const copier = offsets
      ? copierFor(source, copyOptions, { tstateMin: asyncioTstateEnd(offsets, source.layout.pointerSize), tstateCheck: asyncioTstateCheck(offsets) })
      : undefined;
    // with tasks, the program stopped for the whole copy where it can be: the tasks are other
    // objects than the threads' frames, read after them (see the sampler's tick)
    // --native: every thread held stopped for its registers, its native stack and its Python
    // frames, all of one moment; --locals: held while the values are read, which are objects
    // the frames point to, not copied with them
    if (values.native && !(stopper instanceof ThreadStopper)) throw new UsageError('--native needs ptrace (to read each thread\'s registers): it is not allowed on this process here');
    if (values.locals && copy === 'optimistic') throw new UsageError('--locals reads the values while the program is stopped: not with --copy optimistic');
    const nativeObjects = values.native ? readNativeObjects(pid) : null;
    const hold = (copier !== undefined || nativeObjects !== null || values.locals === true) && stopper !== null;
    try {
      // (held: every thread was seen stopped; a stop that timed out is resumed all the same)
      const held = hold && stopper!.stopAll();
      if (values.locals && !held) throw new TargetError('read', `${source.description}: the program could not be stopped to read its locals`);
      if (nativeObjects) {
        // (the objects were read before the stop)
        const copier = new NativeRecorder(pid, stopper as ThreadStopper, null);
        try {
          natives = copier.copyHeld();
        } finally {
          copier.close();
        }
      }
      const snapshot = takeSnapshot(source, {
        ...copyOptions,
        ...(copier ? { copier, tasks: new TaskCopier(source, source.layout, offsets!, tasks!.mode, copier) } : {}),
        ...(held ? { stopped: true } : {}),
      });
      samples = withNativeStacks(snapshotSamples(snapshot), natives);
      stacks = unwindSnapshot(samples, walker, undefined, values.opcodes === true);
      if (values.locals) locals = readLocals(source, source.layout, stacks);
    } finally {
      if (hold) stopper!.resume();
    }
    if (nativeObjects) objects = nativeObjects.objects;
    names = new Map(readThreadNames(source).map((n) => [`${n.interpreterId}:${n.threadId}`, n.name]));
    if (natives) await mixStacks(source.layout, objects, samples, stacks, mixed);
    if (tasks) taskStacks = unwindSnapshotTasks(samples, stacks, walker, tasks.found.offsets, tasks.mode, values.opcodes === true, cutTasks);
  } finally {
    stopper?.close();
    source.close();
  }
  return { description: source.description, stacks, taskStacks, cutTasks, names, native: natives !== null, mixed, locals, notes: [], files: null, cwd: targetCwd(pid), signals: new Map() };
}

/**
 * --copy interrupt: each running thread copied by the kernel at the timer's interrupt, the
 * others proven off their CPUs — nothing stopped (src/record/linux/interrupt-snapshot.ts).
 */
async function dumpAtInterrupt(pid: number, values: LiveValues): Promise<Dumped> {
  if (values.locals) throw new UsageError('--locals reads the values while the program is stopped: not with --copy interrupt');
  const asyncMode = asyncModeOption(values['async-aware'], values['async-mode'] ?? (values['async-aware'] ? 'all' : undefined));
  const walker = await KernelWalker.load();
  const source = openLinuxProcess(pid);
  const mixed = new Map<ThreadStack, MixedStack>();
  let names = new Map<string, string>();
  let snap: InterruptSnapshot;
  let taskStacks: Map<ThreadStack, TaskStack[]> | null = null;
  const cutTasks = new Set<ThreadStack>();
  try {
    let asyncio: { offsets: AsyncioOffsets; mode: AsyncMode } | undefined;
    if (asyncMode) {
      const found = asyncioOffsetsNow(source);
      if (typeof found === 'string') throw new TargetError('unsupported', `--async-aware: ${source.description}: ${found}`);
      asyncio = { offsets: found.offsets, mode: asyncMode };
    }
    snap = await snapshotAtInterrupt(source, walker, { native: values.native === true, readOnly: values['read-only'] === true, opcodes: values.opcodes === true, ...(asyncio ? { asyncio } : {}) });
    names = new Map(readThreadNames(source).map((n) => [`${n.interpreterId}:${n.threadId}`, n.name]));
    if (values.native) await mixStacks(source.layout, snap.objects, snap.samples, snap.stacks, mixed);
    if (asyncio) taskStacks = unwindSnapshotTasks(snap.samples, snap.stacks, walker, asyncio.offsets, asyncio.mode, values.opcodes === true, cutTasks);
  } finally {
    source.close();
  }
  return { description: source.description, stacks: snap.stacks, taskStacks, cutTasks, names, native: values.native === true, mixed, locals: null, notes: [], files: null, cwd: targetCwd(pid), signals: new Map() };
}

/** Each thread's native stack among its regions (the walk reads entry frames from it), and its registers. */
function withNativeStacks(samples: SnapshotSamples, natives: Map<bigint, NativeCopy> | null): SnapshotSamples {
  if (!natives) return samples;
  return {
    ...samples,
    samples: samples.samples.map((s) => {
      const n = natives.get(s.nativeThreadId);
      return n ? { ...s, regions: withStackRegion(s.regions, n.stack), registers: n.registers } : s;
    }),
  };
}

/** Each thread's stack of C and Python frames, unwound in the kernel as a report of a capture is. */
async function mixStacks(layout: Layout, objects: NativeObject[], samples: SnapshotSamples, stacks: ThreadStack[], mixed: Map<ThreadStack, MixedStack>): Promise<void> {
  const unwinder = await KernelNativeUnwinder.load();
  unwinder.setObjects(objects);
  for (const [k, t] of stacks.entries()) {
    const s = samples.samples[k]!;
    if (!s.registers) {
      mixed.set(t, { status: 'native-no-stack', frames: [], unwind: null, names: [] });
      continue;
    }
    mixed.set(t, TRUSTED.has(t.status) ? mixStack(layout, objects, (r, st) => unwinder.unwind(r, st), { registers: s.registers, regions: s.regions, threadStateAddress: s.threadStateAddress }, t.walk.frames) : { status: 'native-unmatched', frames: [], unwind: null, names: [] });
  }
}

/** The locals of every frame of every thread walked to the end (read from `source` as it is now). */
function readLocals(source: MemorySource, layout: Layout, stacks: ThreadStack[]): Map<ThreadStack, (LocalVariable[] | string)[]> {
  const reader = new ObjectReader(source, layout);
  const out = new Map<ThreadStack, (LocalVariable[] | string)[]>();
  for (const t of stacks) out.set(t, t.walk.frames.map((f) => frameLocals(source, layout, reader, f)));
  return out;
}

/** Bytes of a thread's stack taken from a core for its native unwind (post-mortem: deeper than a sample's copy). */
const CORE_STACK_BYTES = 1 << 20;

async function dumpCore(file: string, o: { executable: string | undefined; libPaths: string[]; native: boolean; locals: boolean; opcodes: boolean; asyncMode: AsyncMode | null | undefined }): Promise<Dumped> {
  const walker = await KernelWalker.load();
  const opened = openCore(file, { ...(o.executable !== undefined ? { executable: o.executable } : {}), libPaths: o.libPaths });
  const source = opened.source;
  try {
    let tasks: { found: AsyncioFound; mode: AsyncMode; copier: MemoryCopier } | null = null;
    if (o.asyncMode) {
      const found = opened.asyncio();
      if (typeof found === 'string') throw new TargetError('unsupported', `--async-aware: ${source.description}: ${found}`);
      const offsets = found.offsets;
      tasks = { found, mode: o.asyncMode, copier: new MemoryCopier(source, { keepAgreeing: true, tstateMin: asyncioTstateEnd(offsets, source.layout.pointerSize), tstateCheck: asyncioTstateCheck(offsets) }) };
    }
    const snapshot = takeSnapshot(source, { paused: true, ...(tasks ? { copier: tasks.copier, tasks: new TaskCopier(source, source.layout, tasks.found.offsets, tasks.mode, tasks.copier) } : {}) });
    let natives: Map<bigint, NativeCopy> | null = null;
    if (o.native) {
      natives = new Map();
      for (const t of source.threads) {
        const sp = t.registers.rsp;
        const seg = source.core.segments.find((s) => s.vaddr <= sp && sp < s.vaddr + s.memsz);
        if (!seg) continue;
        const start = sp - RED_ZONE >= seg.vaddr ? sp - RED_ZONE : seg.vaddr;
        const length = Number(seg.vaddr + seg.memsz - start > BigInt(CORE_STACK_BYTES) ? BigInt(CORE_STACK_BYTES) : seg.vaddr + seg.memsz - start);
        const bytes = source.tryRead(start, length);
        if (bytes) natives.set(BigInt(t.tid), { registers: t.registers, stack: { address: start, bytes } });
      }
    }
    const samples = withNativeStacks(snapshotSamples(snapshot), natives);
    const stacks = unwindSnapshot(samples, walker, undefined, o.opcodes);
    const names = new Map(readThreadNames(source).map((n) => [`${n.interpreterId}:${n.threadId}`, n.name]));
    const mixed = new Map<ThreadStack, MixedStack>();
    if (natives) await mixStacks(source.layout, opened.nativeObjects().objects, samples, stacks, mixed);
    const locals = o.locals ? readLocals(source, source.layout, stacks) : null;
    const cutTasks = new Set<ThreadStack>();
    const taskStacks = tasks ? unwindSnapshotTasks(samples, stacks, walker, tasks.found.offsets, tasks.mode, o.opcodes, cutTasks) : null;
    const notes: string[] = [];
    for (const f of opened.files) {
      if (f.status === 'missing') notes.push(`${f.path}: missing (${f.why}); give it with --lib-path DIR`);
      else if (f.status === 'different') notes.push(`${f.path}: not the file the core mapped (${f.why}); give that one with --lib-path DIR`);
    }
    // (files that are not ELF — locale archives, caches — have no build id to check: not said)
    const unchecked = opened.files.filter((f) => f.status === 'unchecked' && f.why !== 'not an ELF file');
    if (unchecked.length) notes.push(`${unchecked.length} file${unchecked.length === 1 ? '' : 's'} used unchecked: the core keeps no build id for ${unchecked.length === 1 ? 'it' : 'them'} (${unchecked.map((f) => path.basename(f.path)).join(', ')})`);
    // the thread that took the signal that ended the process: the kernel writes it first (every
    // thread's note carries the signal)
    const first = source.threads[0];
    const signals = new Map(first && first.signal > 0 ? [[first.tid, first.signal]] : []);
    // threads the interpreter does not know (C threads): named, so that a crash in one is not missed
    const python = new Set(stacks.map((t) => Number(t.nativeThreadId)));
    for (const t of source.threads) {
      if (!python.has(t.tid)) notes.push(`thread ${t.tid}${signals.has(t.tid) ? ` (it got ${signalName(signals.get(t.tid)!)})` : ''}: not a Python thread (no thread state names it)`);
    }
    for (const z of opened.zeroStacks) {
      notes.push(`thread ${z.tid}: the core holds only zeros for its stack (0x${z.start.toString(16)}-0x${z.end.toString(16)}): its writer could not read it (gcore stops at a guard page); what lies there is not shown`);
    }
    return { description: source.description, stacks, taskStacks, cutTasks, names, native: natives !== null, mixed, locals, notes, files: opened.files, cwd: undefined, signals };
  } finally {
    source.close();
  }
}

function localsJson(l: LocalVariable[] | string | undefined): Record<string, unknown> {
  if (l === undefined) return {};
  if (typeof l === 'string') return { localsError: l };
  return {
    locals: l.map((v) => ({
      name: v.name,
      argument: v.argument,
      ...(v.value ? { type: v.value.type, ...(v.value.address !== 0n ? { address: `0x${v.value.address.toString(16)}` } : {}), repr: v.value.repr, ...(v.value.cut ? { cut: true } : {}) } : { type: null, repr: null }),
    })),
  };
}

function renderJson(d: Dumped): string {
  const nameOf = threadName(d);
  return (
    JSON.stringify(
      {
        target: d.description,
        ...(d.notes.length ? { notes: d.notes } : {}),
        ...(d.files ? { files: d.files.map((f) => ({ path: f.path, status: f.status, used: f.used, ...(f.why ? { why: f.why } : {}) })) } : {}),
        threads: d.stacks.map((t) => {
          const locals = d.locals?.get(t);
          return {
            interpreterId: Number(t.interpreterId),
            threadId: t.threadId.toString(),
            nativeThreadId: Number(t.nativeThreadId),
            // the name threading gives it, where known
            name: nameOf(t),
            // (a core: the signal this thread was handling when the core was written)
            ...(d.signals.has(Number(t.nativeThreadId)) ? { signal: signalName(d.signals.get(Number(t.nativeThreadId))!) } : {}),
            status: t.status,
            failAddress: t.walk.failAddress === 0n ? undefined : `0x${t.walk.failAddress.toString(16)}`,
            copyErrors: t.copyErrors.length ? t.copyErrors : undefined,
            frames: t.frames.map((f, i) => ({ ...sourceFrame(f), ...localsJson(locals?.[i]) })),
            ...(d.native ? nativeJson(d.mixed.get(t), t) : {}),
            ...(d.taskStacks ? { tasks: d.taskStacks.get(t) ?? [] } : {}),
            ...(d.cutTasks.has(t) ? { tasksCut: MAX_TASKS } : {}),
          };
        }),
      },
      null,
      2,
    ) + '\n'
  );
}

/** The name threading gives a thread; where it does not know it (not imported, or not read), the main thread is named still. */
function threadName(d: Dumped): (t: ThreadStack) => string | null {
  return (t) => d.names.get(`${t.interpreterId}:${t.threadId}`) ?? (t.mainThread ? 'MainThread' : null);
}

function renderText(d: Dumped, fullFilenames: boolean): string {
  const nameOf = threadName(d);
  // (file names short, as py-spy shows them: the program's own relative to its directory)
  const fileName = fullFilenames ? (f: string): string => f : (f: string): string => shortFilename(f, d.cwd);
  const lines = [`${d.description}: ${d.stacks.length} thread${d.stacks.length === 1 ? '' : 's'}`];
  for (const n of d.notes) lines.push(`! ${n}`);
  for (const t of d.stacks) {
    const why = t.walk.failAddress !== 0n ? ` (at 0x${t.walk.failAddress.toString(16)})` : '';
    const name = nameOf(t);
    const signal = d.signals.get(Number(t.nativeThreadId));
    lines.push('', `Thread ${t.nativeThreadId}${name === null ? '' : ` ${/^[^\s"\\\p{C}]+$/u.test(name) ? name : JSON.stringify(name)}`} (interpreter ${t.interpreterId}, thread_id 0x${t.threadId.toString(16)}): ${t.status}${why}${signal ? `, got ${signalName(signal)}` : ''}`);
    for (const e of t.copyErrors) lines.push(`  ! ${e}`);
    const locals = d.locals?.get(t);
    const frameLine = (f: SourceFrame, indent: string): string =>
      f.filename === '' && f.line === null ? `${indent}${f.qualname}` : `${indent}${f.qualname} (${fileName(f.filename)}:${f.line ?? '?'})${f.opcode === undefined ? '' : ` ${f.opcode}`}`;
    const pythonFrame = (index: number, indent: string): void => {
      lines.push(frameLine(t.frames[index]!, indent));
      const l = locals?.[index];
      if (l === undefined) return;
      if (typeof l === 'string') lines.push(`${indent}    (locals: ${l})`);
      else for (const v of l) lines.push(`${indent}    ${v.argument ? 'arg' : 'local'} ${v.name} = ${valueText(v)}`);
    };
    const own = d.taskStacks?.get(t);
    const m = d.mixed.get(t);
    if (m?.status === 'mixed') {
      for (const f of m.frames) {
        if (f.kind === 'python') pythonFrame(f.index, '  ');
        else lines.push(`  ${nativeText(f.name)}`);
      }
      continue;
    }
    if (m) lines.push(`  (native frames: ${m.status}${m.unwind ? `, ${m.unwind.pcs.length} unwound` : ''})`);
    if (!own?.length) {
      for (let i = 0; i < t.frames.length; i++) pythonFrame(i, '  ');
      continue;
    }
    // the thread's tasks: each task's stack, innermost first (the root task last)
    for (const k of own) {
      if (k.task !== null) lines.push(`  task ${JSON.stringify(k.task)} (${k.running ? 'running' : 'waiting'}): ${k.status}`);
      else lines.push(TRUSTED.has(k.status) ? '  no task running: the thread\'s own stack' : `  its tasks: ${k.status} (not shown)`);
      for (const f of k.frames) lines.push(frameLine(f, '    '));
    }
    if (d.cutTasks.has(t)) lines.push(`  … more than ${MAX_TASKS} tasks on its list: those past ${MAX_TASKS} are not shown`);
  }
  return lines.join('\n') + '\n';
}

/** A local's value as text: its repr, or its type and address. */
function valueText(v: LocalVariable): string {
  if (!v.value) return '<unreadable>';
  if (v.value.repr !== null) return v.value.repr;
  return `<${v.value.type} object at 0x${v.value.address.toString(16)}>`;
}
