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
      --full-filenames whole file paths in text (default: short, as py-spy shows them)
  -h, --help           this help
`;

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
    const hold = copier !== undefined && stopper !== null;
    let snapshot;
    try {
      // (held: every thread was seen stopped; a stop that timed out is resumed all the same)
      const held = hold && stopper!.stopAll();
      snapshot = takeSnapshot(source, {
        ...copyOptions,
        ...(copier ? { copier, tasks: new TaskCopier(source, source.layout, offsets!, tasks!.mode, copier) } : {}),
        ...(held ? { stopped: true } : {}),
      });
    } finally {
      if (hold) stopper!.resume();
    }
    names = new Map(readThreadNames(source).map((n) => [`${n.interpreterId}:${n.threadId}`, n.name]));
    const walker = await KernelWalker.load();
    const samples = snapshotSamples(snapshot);
    stacks = unwindSnapshot(samples, walker, undefined, values.opcodes === true);
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
