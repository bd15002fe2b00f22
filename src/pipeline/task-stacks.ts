// Async-aware stacks (report --async-aware): a sample's stacks as asyncio tasks, from the tasks
// the recorder copied with it (src/record/copy/task-copy.ts). Host TypeScript on the reference path:
// the block engine walks thread stacks only.
//
// A task's stack, outermost first: the root task (a `<task NAME>` pseudo-frame, filename "")
// and its coroutine chain, then each task awaited in turn — first awaiter after first awaiter,
// a task awaited by several named `<task NAME (awaited by N)>` — down to the task itself. The
// running task's own part is the thread's frames from its coroutine's frame up (what it calls,
// synchronous or not); a waiting task's part is the chain
// of coroutines it is suspended in. In `all` mode every task on the thread's list gives a stack
// at each sample; in `running` mode only the running one. A thread running no task, or running
// the event loop's own code for its task (the task is set, no coroutine is on the thread's
// stack), keeps its thread stack; in `all` mode that running task, whose step has not reached
// its coroutine (or has left it), also gets the stack of the chain it is suspended in, as a
// waiting task does. A thread whose stack runs another coroutine than the running
// task's was copied at another moment than its tasks: the sample is rejected (`corrupt`).
//
// Validated like the thread walk: every pointer in the sample's regions, every loop bounded,
// a chain coming back on itself a `cycle`; each coroutine frame's code object must be a
// recorded one and its instruction pointer inside it (else `corrupt`); a waiting task's
// coroutines must be suspended — one found running was read after its step had begun, at
// another moment than the sample's (`torn`). A sample whose running task's view fails is
// rejected with that status, once, and counted as any rejected sample; in `all` mode a waiting
// task's stack that fails is rejected on its own (the counting unit is then the task stack).

import type { AsyncioOffsets } from '../layout/asyncio-offsets.js';
import type { Layout } from '../layout/layout.js';
import type { SampleInput, SourceFrame } from '../profile/types.js';
import type { ProcessedSample } from './sample-processor.js';
import type { CodeTable } from '../symbols/code-table.js';
import { SymbolError } from '../symbols/location-table.js';
import { GC_FRAME, NATIVE_FRAME } from '../symbols/pseudo-frames.js';
import { instrPtrFits } from '../walk/instr-ptr.js';
import { RegionMemory } from '../walk/region-memory.js';
import { TRUSTED } from '../walk/status.js';
import { TaskFault, TaskGraph, type AsyncMode, type TaskNode } from '../walk/task-graph.js';

/**
 * The pseudo-frame naming a task on a stack; a task awaited by several says how many (the
 * stack goes on with the first of them only), as CPython's profiler marks it ("(N parents)").
 */
export function taskFrame(name: string | null, awaiters = 0): SourceFrame {
  return { qualname: `<task ${name ?? '(no name)'}${awaiters > 1 ? ` (awaited by ${awaiters})` : ''}>`, filename: '', line: null };
}

/** One stack of a sample's task view, and whose it is. */
export interface TaskView {
  input: SampleInput;
  /** the task (its name; null where it could not be read), or null: the thread's own stack */
  task: { name: string | null } | null;
  /** the task the thread runs */
  running: boolean;
}

export class TaskStacks {
  /** samples whose thread had more tasks on its list than are followed (MAX_TASKS): the rest are not shown */
  cutLists = 0;

  constructor(
    readonly layout: Layout,
    readonly offsets: AsyncioOffsets,
    readonly mode: AsyncMode,
    private readonly table: CodeTable,
  ) {}

  /**
   * What a processed sample adds to the profile: its task stacks (`base` is the sample as its
   * thread stack gives it, <GC> frame included; returned as is where there is no task to show).
   */
  inputs(p: ProcessedSample, base: SampleInput): SampleInput[] {
    return this.views(p, base).map((v) => v.input);
  }

  /**
   * The same, each stack with the task it is of (its name, null where it could not be read;
   * `task` null: the thread's own stack) and whether the thread is running it (dump).
   */
  views(p: ProcessedSample, base: SampleInput): TaskView[] {
    if (!TRUSTED.has(p.status) || !p.walk) return [{ input: base, task: null, running: false }];
    const mem = new RegionMemory(p.sample.regions, this.layout.pointerSize);
    const graph = new TaskGraph(this.layout, this.offsets, mem);
    const tstate = p.sample.threadStateAddress;
    try {
      const out: TaskView[] = [];
      const running = graph.running(tstate);
      let shown = false;
      if (running !== 0n) {
        const chain = graph.awaitChain(running);
        const own = chain[0]?.coro ? chain[0].coro + BigInt(this.layout.gen!.iframe) : null;
        const at = own === null ? -1 : p.walk.frames.findIndex((f) => f.frame === own);
        if (at >= 0) {
          out.push({ input: { ...base, frames: [...threadPart(base.frames, at), ...this.awaiters(graph, mem, chain, true)] }, task: { name: chain[0]!.name }, running: true });
          shown = true;
        } else if (p.walk.frames.some((f) => mem.u8(f.frame + BigInt(this.layout.frame.owner)) === this.layout.owners.generator)) {
          // a coroutine runs, and it is not the running task's: the task was read at another
          // moment than the stack (another task's step had begun, or this one had ended and
          // its object was cleared: no coroutine, not a task any more)
          throw new TaskFault('corrupt', own ?? running, "the running task's coroutine is not on the thread's stack, another one is");
        }
      }
      if (!shown) out.push({ input: base, task: null, running: false });
      if (this.mode === 'all') {
        const tasks = graph.tasks(tstate);
        if (graph.listCut) this.cutLists++;
        for (const task of tasks) {
          if (task === running && shown) continue;
          // each waiting task's stack is counted on its own, and rejected on its own: a task
          // read while it ran (its step began after the thread's copy) is `torn`. The running
          // task not on the thread's stack (the loop's own code runs for it) is suspended too.
          let name: string | null = null;
          try {
            const chain = graph.awaitChain(task);
            name = chain[0]?.name ?? null;
            if (chain.length > 0) out.push({ input: { ...base, frames: this.awaiters(graph, mem, chain, false) }, task: { name }, running: task === running });
          } catch (e) {
            if (!(e instanceof TaskFault)) throw e;
            out.push({ input: { ...base, status: e.status, frames: [] }, task: { name }, running: task === running });
          }
        }
      }
      return out;
    } catch (e) {
      if (e instanceof TaskFault) return [{ input: { ...base, status: e.status, frames: [] }, task: null, running: false }];
      throw e;
    }
  }

  /**
   * The frames of a chain of tasks, innermost first: each task's coroutines then its pseudo-frame.
   * `runningFirst`: the first task's coroutines are on the thread's stack (given by the caller).
   */
  private awaiters(graph: TaskGraph, mem: RegionMemory, chain: TaskNode[], runningFirst: boolean): SourceFrame[] {
    const frames: SourceFrame[] = [];
    chain.forEach((node, i) => {
      if (node.coro !== 0n && !(runningFirst && i === 0)) {
        const coros = graph.coroFrames(node.coro);
        for (let k = coros.length - 1; k >= 0; k--) frames.push(this.frame(mem, coros[k]!));
      }
      frames.push(taskFrame(node.name, node.awaiters));
    });
    return frames;
  }

  /** A suspended coroutine's frame, named: its code object must be recorded and its instruction pointer inside its bytecode. */
  private frame(mem: RegionMemory, frame: bigint): SourceFrame {
    const L = this.layout;
    const executable = mem.ptr(frame + BigInt(L.frame.executable));
    const instr = mem.ptr(frame + BigInt(L.frame.instrPtr));
    if (executable === null || instr === null) throw new TaskFault('dangling', frame, 'coroutine frame not in memory');
    const code = executable & ~BigInt(L.executableTagMask);
    const info = this.table.code(code);
    if (info === undefined || info instanceof SymbolError) throw new TaskFault('corrupt', frame, `coroutine frame's code object 0x${code.toString(16)} is not a recorded code object`);
    if (!instrPtrFits(instr, info.bytecodeStart, info.bytecodeEnd, L.frame.instrPtrIsPrevious)) {
      throw new TaskFault('corrupt', frame, 'coroutine frame instruction pointer outside its code');
    }
    return source(this.table.frame(code, instr));
  }
}

const source = (f: SourceFrame): SourceFrame => ({ qualname: f.qualname, filename: f.filename, line: f.line });

const PSEUDO = new Set([GC_FRAME.qualname, NATIVE_FRAME.qualname]);
const isPseudo = (f: SourceFrame): boolean => f.filename === '' && f.line === null && PSEUDO.has(f.qualname);

/**
 * A sample's frames as sampleInput gave them (innermost first, with the <GC> and <native>
 * frames it was asked for), from the innermost through the `at`-th Python frame: the running
 * task's part of the thread's stack, its pseudo-frames kept.
 */
function threadPart(frames: readonly SourceFrame[], at: number): SourceFrame[] {
  let python = -1;
  for (let i = 0; i < frames.length; i++) {
    if (!isPseudo(frames[i]!) && ++python === at) return frames.slice(0, i + 1);
  }
  return [...frames];
}
