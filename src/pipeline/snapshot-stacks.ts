// From a snapshot to validated, symbolized stacks (pyunwind dump): decode each code object,
// walk every thread's sample with a walker (the WebAssembly kernel or the reference), and turn
// each trusted frame into (qualname, filename, line). A snapshot comes as the samples a capture
// would hold (src/record/copy/snapshot.ts snapshotSamples makes them of a live copy).

import type { Layout } from '../layout/layout.js';
import { CodeTable } from '../symbols/code-table.js';
import type { SymbolizedFrame } from '../symbols/types.js';
import { walkParams, type Walker } from '../walk/index.js';
import type { Status } from '../walk/status.js';
import type { WalkResult } from '../walk/types.js';
import type { AsyncioOffsets } from '../layout/asyncio-offsets.js';
import type { SourceFrame } from '../profile/types.js';
import { SampleChain } from './sample-chain.js';
import { TRUSTED } from '../walk/status.js';
import type { AsyncMode } from '../walk/task-graph.js';
import { SAMPLE_FLAG, type CodeRecord, type SampleRecord } from '../capture/types.js';

export { CodeTable } from '../symbols/code-table.js';
export type { SymbolizedFrame } from '../symbols/types.js';

/** Every thread of a target at one moment, as samples, and the code objects their stacks reach. */
export interface SnapshotSamples {
  layout: Layout;
  codeObjects: readonly CodeRecord[];
  samples: readonly SampleRecord[];
}

export interface ThreadStack {
  interpreterId: bigint;
  threadStateAddress: bigint;
  threadId: bigint;
  nativeThreadId: bigint;
  /** Python's main thread (threading.main_thread(): see the copier for how it is known) */
  mainThread: boolean;
  status: Status;
  /** innermost first */
  frames: SymbolizedFrame[];
  walk: WalkResult;
  /** what the copy could not read, if anything */
  copyErrors: string[];
}

/** Walk and name every thread of a snapshot; `opcodes`: each frame with its instruction (SymbolizedFrame.opcode). */
export function unwindSnapshot(snapshot: SnapshotSamples, walker: Walker, maxDepth?: number, opcodes = false): ThreadStack[] {
  const layout = snapshot.layout;
  const codes = new CodeTable(layout, snapshot.codeObjects);
  const results = walker.walk(
    walkParams(layout, maxDepth),
    codes.ranges,
    snapshot.samples.map((t) => ({ threadStateAddress: t.threadStateAddress, regions: t.regions })),
  );
  return snapshot.samples.map((t, i) => {
    const walk = results[i]!;
    // a copy nothing proved of one moment is `torn`, never shown
    const status: Status = t.recorderStatus === 'torn' ? 'torn' : walk.status;
    return {
      interpreterId: t.interpreterId,
      threadStateAddress: t.threadStateAddress,
      threadId: t.threadId,
      nativeThreadId: t.nativeThreadId,
      mainThread: (t.flags & SAMPLE_FLAG.MAIN) !== 0,
      status,
      frames: status === 'torn' ? [] : walk.frames.map((f) => codes.frame(f.code, f.instrPtr, opcodes)),
      walk,
      copyErrors: t.errors,
    };
  });
}

/** One stack of a thread's asyncio view (dump --async-aware). */
export interface TaskStack {
  /** the task whose stack it is (its name; null: the thread's own stack, no task running) */
  task: string | null;
  /** the task the thread is running (its stack starts with the thread's frames) */
  running: boolean;
  status: Status;
  /** innermost first, `<task NAME>` pseudo-frames (filename "") among them */
  frames: SourceFrame[];
}

/**
 * Each thread's task stacks (the snapshot copied with its tasks: SnapshotOptions.tasks), as
 * report --async-aware makes them — the running task's first, then (mode `all`) each waiting
 * task's. A thread with no task to show, or whose stack is not trusted, gets none (its thread
 * stack stands); one whose tasks could not be read gets one entry, rejected with that status.
 * `cut` receives the threads whose task list was longer than a report follows (MAX_TASKS).
 */
export function unwindSnapshotTasks(
  snapshot: SnapshotSamples,
  stacks: readonly ThreadStack[],
  walker: Walker,
  offsets: AsyncioOffsets,
  mode: AsyncMode,
  opcodes = false,
  cut?: Set<ThreadStack>,
): Map<ThreadStack, TaskStack[]> {
  const chain = new SampleChain(snapshot.layout, walker, new CodeTable(snapshot.layout, snapshot.codeObjects), { opcodes, tasks: { offsets, mode } });
  const out = new Map<ThreadStack, TaskStack[]>();
  let i = 0;
  for (const { processed: p, input } of chain.run(snapshot.samples)) {
    const stack = stacks[i++]!;
    if (!TRUSTED.has(stack.status) || !TRUSTED.has(p.status)) continue;
    const before = chain.tasks!.cutLists;
    const views = chain.tasks!.views(p, input);
    if (chain.tasks!.cutLists !== before) cut?.add(stack);
    // only the thread's own stack: no task to show
    if (views.length === 1 && views[0]!.task === null && TRUSTED.has(views[0]!.input.status)) continue;
    const list: TaskStack[] = views.map((v) => ({
      task: v.task === null ? null : (v.task.name ?? '(no name)'),
      running: v.running,
      status: v.input.status,
      frames: v.input.frames,
    }));
    out.set(stack, list);
  }
  return out;
}
