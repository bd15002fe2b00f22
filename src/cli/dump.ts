// pyunwind dump --pid PID: the current stack of every thread of a running Python, once, with
// each stack's status. Copies follow record's rules: a thread whose copy moved while it was
// made is copied again with the target stopped for a moment (or, with --copy optimistic,
// shown as torn) — never printed as a stack of one moment.

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
import { asyncModeOption, copyOption, parsePid } from './options.js';
import { sourceFrame } from '../symbols/types.js';
import type { SourceFrame } from '../profile/types.js';
import { asyncioOffsetsNow, TargetError, type AsyncioFound } from '../record/linux/process.js';
import { copierFor } from '../record/copy/modes.js';
import type { AnyStopper } from '../record/linux/stopper.js';
import { asyncioTstateCheck, asyncioTstateEnd, TaskCopier } from '../record/copy/task-copy.js';
import type { AsyncMode } from '../walk/task-graph.js';
import { TRUSTED } from '../walk/status.js';
import path from 'node:path';
import { ThreadStopper } from '../record/linux/stopper.js';
import { readNativeObjects } from '../record/linux/native-objects.js';
import { NativeRecorder, type NativeCopy } from '../record/linux/native-recorder.js';
import { withStackRegion } from '../native/stack-region.js';
import { mixStack, type MixedStack } from '../native/mixed-stack.js';
import { nativeLabel, type NativeFrameName } from '../native/symbolize.js';
import type { NativeObject } from '../native/objects.js';
import { KernelNativeUnwinder } from '../kernel/native-unwinder.js';

export const DUMP_HELP = `Usage: pyunwind dump --pid PID [OPTIONS]

Print the Python stack of every thread of process PID, once, each with its status (complete,
complete-unverifiable, idle, or why it was rejected). Copies follow record's rules: a copy
nothing proves of one moment is made again as --copy says (docs/reporting.md).

Options:
  -p, --pid PID        the Python process (same user as you, or CAP_SYS_PTRACE)
  -f, --format FORMAT  text (default) or json
      --copy COPY      adaptive (default), optimistic (never stops: such a copy is shown torn)
                       or blocking, as for record
      --blocking       same as --copy blocking
      --read-only      never write into the program (no profiler anchor on 3.15+)
      --opcodes        each frame's bytecode instruction too, as dis names it
      --async-aware    each thread's asyncio tasks too (CPython 3.14+), each task's stack
      --async-mode MODE
                       all (default here: every task, the running one first) or running
      --native         the C frames too, in one stack with the Python frames (every thread
                       is stopped with ptrace for its registers and native stack)
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

export async function dump(argv: string[], out: (s: string) => void): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      pid: { type: 'string', short: 'p' },
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
  if (values.pid === undefined) throw new UsageError('dump needs --pid PID');
  const pid = parsePid(values.pid);
  if (values.format !== 'text' && values.format !== 'json') throw new UsageError(`unknown format "${values.format}" (text or json)`);
  if (values.mode !== undefined && copyOption(undefined, false, values.mode)) throw new UsageError('dump has no --mode: it shows every thread (--copy says how copies are made)');
  const copy = copyOption(values.copy, values.blocking);
  // a dump wants every task: `all` unless asked otherwise (as CPython's profiler's dump)
  const asyncMode = asyncModeOption(values['async-aware'], values['async-mode'] ?? (values['async-aware'] ? 'all' : undefined));

  const source = openLinuxProcess(pid);
  let stopper: AnyStopper | null = null;
  let stacks: ThreadStack[];
  let taskStacks: Map<ThreadStack, TaskStack[]> | null = null;
  // threads with more tasks than are followed (MAX_TASKS): said, not silently cut
  const cutTasks = new Set<ThreadStack>();
  // the names threading gives the threads (read after the copies; unknown: null)
  let names = new Map<string, string>();
  // --native: each thread's registers and stack, the objects, and its mixed stack
  let natives: Map<bigint, NativeCopy> | null = null;
  let objects: NativeObject[] = [];
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
    // frames, all of one moment
    if (values.native && !(stopper instanceof ThreadStopper)) throw new UsageError('--native needs ptrace (to read each thread\'s registers): it is not allowed on this process here');
    const nativeObjects = values.native ? readNativeObjects(pid) : null;
    const hold = (copier !== undefined || nativeObjects !== null) && stopper !== null;
    let snapshot;
    try {
      // (held: every thread was seen stopped; a stop that timed out is resumed all the same)
      const held = hold && stopper!.stopAll();
      if (nativeObjects) {
        // (the objects were read before the stop)
        const copier = new NativeRecorder(pid, stopper as ThreadStopper, null);
        try {
          natives = copier.copyHeld();
        } finally {
          copier.close();
        }
      }
      snapshot = takeSnapshot(source, {
        ...copyOptions,
        ...(copier ? { copier, tasks: new TaskCopier(source, source.layout, offsets!, tasks!.mode, copier) } : {}),
        ...(held ? { stopped: true } : {}),
      });
    } finally {
      if (hold) stopper!.resume();
    }
    if (nativeObjects) objects = nativeObjects.objects;
    names = new Map(readThreadNames(source).map((n) => [`${n.interpreterId}:${n.threadId}`, n.name]));
    const walker = await KernelWalker.load();
    const samples = snapshotSamples(snapshot);
    if (natives) {
      // each thread's native stack among its regions (the walk reads entry frames from it)
      samples.samples = samples.samples.map((s) => {
        const n = natives!.get(s.nativeThreadId);
        return n ? { ...s, regions: withStackRegion(s.regions, n.stack), registers: n.registers } : s;
      });
    }
    stacks = unwindSnapshot(samples, walker, undefined, values.opcodes === true);
    if (natives) {
      // unwound in the kernel, as a report of a capture is
      const unwinder = await KernelNativeUnwinder.load();
      unwinder.setObjects(objects);
      for (const [k, t] of stacks.entries()) {
        const s = samples.samples[k]!;
        if (!s.registers) {
          mixed.set(t, { status: 'native-no-stack', frames: [], unwind: null, names: [] });
          continue;
        }
        mixed.set(t, TRUSTED.has(t.status) ? mixStack(source.layout, objects, (r, st) => unwinder.unwind(r, st), { registers: s.registers, regions: s.regions, threadStateAddress: s.threadStateAddress }, t.walk.frames) : { status: 'native-unmatched', frames: [], unwind: null, names: [] });
      }
    }
    if (tasks) taskStacks = unwindSnapshotTasks(samples, stacks, walker, tasks.found.offsets, tasks.mode, values.opcodes === true, cutTasks);
  } finally {
    stopper?.close();
    source.close();
  }
  // where threading does not know it (not imported, or not read), the main thread is named still
  const nameOf = (t: ThreadStack): string | null => names.get(`${t.interpreterId}:${t.threadId}`) ?? (t.mainThread ? 'MainThread' : null);
  if (values.format === 'json') {
    out(
      JSON.stringify(
        {
          target: source.description,
          threads: stacks.map((t) => ({
            interpreterId: Number(t.interpreterId),
            threadId: t.threadId.toString(),
            nativeThreadId: Number(t.nativeThreadId),
            // the name threading gives it, where known
            name: nameOf(t),
            status: t.status,
            failAddress: t.walk.failAddress === 0n ? undefined : `0x${t.walk.failAddress.toString(16)}`,
            copyErrors: t.copyErrors.length ? t.copyErrors : undefined,
            frames: t.frames.map(sourceFrame),
            ...(natives ? nativeJson(mixed.get(t), t) : {}),
            ...(taskStacks ? { tasks: taskStacks.get(t) ?? [] } : {}),
            ...(cutTasks.has(t) ? { tasksCut: MAX_TASKS } : {}),
          })),
        },
        null,
        2,
      ) + '\n',
    );
    return 0;
  }
  // (file names short, as py-spy shows them: the program's own relative to its directory)
  const cwd = targetCwd(pid);
  const fileName = values['full-filenames'] ? (f: string): string => f : (f: string): string => shortFilename(f, cwd);
  const lines = [`${source.description}: ${stacks.length} thread${stacks.length === 1 ? '' : 's'}`];
  for (const t of stacks) {
    const why = t.walk.failAddress !== 0n ? ` (at 0x${t.walk.failAddress.toString(16)})` : '';
    const name = nameOf(t);
    lines.push('', `Thread ${t.nativeThreadId}${name === null ? '' : ` ${/^[^\s"\\\p{C}]+$/u.test(name) ? name : JSON.stringify(name)}`} (interpreter ${t.interpreterId}, thread_id 0x${t.threadId.toString(16)}): ${t.status}${why}`);
    for (const e of t.copyErrors) lines.push(`  ! ${e}`);
    const frameLine = (f: SourceFrame, indent: string): string =>
      f.filename === '' && f.line === null ? `${indent}${f.qualname}` : `${indent}${f.qualname} (${fileName(f.filename)}:${f.line ?? '?'})${f.opcode === undefined ? '' : ` ${f.opcode}`}`;
    const own = taskStacks?.get(t);
    const m = mixed.get(t);
    if (m?.status === 'mixed') {
      for (const f of m.frames) lines.push(f.kind === 'python' ? frameLine(t.frames[f.index]!, '  ') : `  ${nativeText(f.name)}`);
      continue;
    }
    if (m) lines.push(`  (native frames: ${m.status}${m.unwind ? `, ${m.unwind.pcs.length} unwound` : ''})`);
    if (!own?.length) {
      for (const f of t.frames) lines.push(frameLine(f, '  '));
      continue;
    }
    // the thread's tasks: each task's stack, innermost first (the root task last)
    for (const k of own) {
      if (k.task !== null) lines.push(`  task ${JSON.stringify(k.task)} (${k.running ? 'running' : 'waiting'}): ${k.status}`);
      else lines.push(TRUSTED.has(k.status) ? '  no task running: the thread\'s own stack' : `  its tasks: ${k.status} (not shown)`);
      for (const f of k.frames) lines.push(frameLine(f, '    '));
    }
    if (cutTasks.has(t)) lines.push(`  … more than ${MAX_TASKS} tasks on its list: those past ${MAX_TASKS} are not shown`);
  }
  out(lines.join('\n') + '\n');
  return 0;
}
