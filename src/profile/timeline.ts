// A profile in time order: every sample attempted, per thread, with its time, status and (for a
// trusted one) its stack — what the formats that show a timeline need (Firefox Profiler,
// Chrome DevTools, JSONL). The aggregated Profile cannot give them: it keeps one weight per
// distinct stack.
//
// Stacks are interned per thread in a prefix tree, root first: stack k is (stackParent[k],
// stackFrame[k]), −1 for no parent — the shape of the Firefox Profiler's stack table and of a
// call tree. Threads come in the Profile's order (compareThreads).

import { compareThreads, threadKey, type ProcessTag, type ThreadIds } from './thread.js';
import { TRUSTED } from '../walk/status.js';
import { sameFrame, type SampleInput, type SourceFrame, type Status } from './types.js';
import { sourceFrame } from '../symbols/types.js';

/** `stack` of an idle sample (trusted, no Python frame) */
export const IDLE_STACK = -1;
/** `stack` of a rejected sample (its status says why) */
export const REJECTED_STACK = -2;

export interface TimelineThread extends ThreadIds {
  /** the name the recorder gave it last (undefined: none) */
  name: string | undefined;
  frames: SourceFrame[];
  stackParent: number[];
  stackFrame: number[];
  /** per sample, in recording order: µs since the recording started */
  time: number[];
  /** per sample: its stack, IDLE_STACK or REJECTED_STACK */
  stack: number[];
  /** per sample */
  status: Status[];
}

interface TimelineEntry {
  thread: TimelineThread;
  frameIndex: Map<string, number>;
  stackIndex: Map<string, number>;
  // the thread's previous trusted stack, root first: its frames and their stacks — consecutive
  // samples share most of their stack, so a sample interns only below the first frame that differs
  lastFrames: SourceFrame[];
  lastPath: number[];
}

export class Timeline {
  private readonly byKey = new Map<string, TimelineEntry>();
  private count = 0;

  /** Add one attempted sample (the same input a Profile takes), in recording order. */
  add(sample: SampleInput): void {
    const key = threadKey(sample.thread);
    let entry = this.byKey.get(key);
    if (!entry) {
      const { interpreterId, threadId, nativeThreadId } = sample.thread;
      entry = {
        thread: { interpreterId, threadId, nativeThreadId, name: undefined, frames: [], stackParent: [], stackFrame: [], time: [], stack: [], status: [] },
        frameIndex: new Map(),
        stackIndex: new Map(),
        lastFrames: [],
        lastPath: [],
      };
      this.byKey.set(key, entry);
    }
    const t = entry.thread;
    if (sample.thread.name !== undefined) t.name = sample.thread.name;
    let stack: number;
    if (!TRUSTED.has(sample.status)) stack = REJECTED_STACK;
    else if (sample.frames.length === 0) stack = IDLE_STACK;
    else {
      stack = -1;
      const n = sample.frames.length;
      const { lastFrames, lastPath } = entry;
      let depth = 0;
      for (; depth < n && depth < lastPath.length; depth++) {
        const f = sample.frames[n - 1 - depth]!;
        if (!sameFrame(f, lastFrames[depth]!)) break;
        stack = lastPath[depth]!;
      }
      lastFrames.length = depth;
      lastPath.length = depth;
      for (let i = n - 1 - depth; i >= 0; i--) {
        const f = sample.frames[i]!;
        const fk = `${f.qualname}\0${f.filename}\0${f.line ?? ''}\0${f.native ? '\0native' : (f.opcode ?? '')}`;
        let fi = entry.frameIndex.get(fk);
        if (fi === undefined) {
          fi = t.frames.length;
          t.frames.push(sourceFrame(f));
          entry.frameIndex.set(fk, fi);
        }
        const sk = `${stack},${fi}`;
        let si = entry.stackIndex.get(sk);
        if (si === undefined) {
          si = t.stackParent.length;
          t.stackParent.push(stack);
          t.stackFrame.push(fi);
          entry.stackIndex.set(sk, si);
        }
        stack = si;
        lastFrames.push(f);
        lastPath.push(si);
      }
    }
    t.time.push(sample.time);
    t.stack.push(stack);
    t.status.push(sample.status);
    this.count++;
  }

  /** samples added */
  get samples(): number {
    return this.count;
  }

  threads(): TimelineThread[] {
    return [...this.byKey.values()].map((e) => e.thread).sort(compareThreads);
  }

  /**
   * Adds `other`, the timeline of one process, as that process's threads (`tag`), its times
   * moved by `offsetMicros` (so that the samples of processes recorded from different moments
   * share one clock).
   */
  addProcess(other: Timeline, tag: ProcessTag, offsetMicros = 0): this {
    for (const e of other.byKey.values()) {
      const o = e.thread;
      const t: TimelineThread = {
        ...o,
        process: tag,
        frames: [...o.frames],
        stackParent: [...o.stackParent],
        stackFrame: [...o.stackFrame],
        time: o.time.map((us) => us + offsetMicros),
        stack: [...o.stack],
        status: [...o.status],
      };
      this.byKey.set(threadKey(t), { thread: t, frameIndex: new Map(e.frameIndex), stackIndex: new Map(e.stackIndex), lastFrames: [], lastPath: [] });
      this.count += t.time.length;
    }
    return this;
  }

  /** The frames of `stack` in thread `t`, root first. */
  static path(t: TimelineThread, stack: number): SourceFrame[] {
    const out: SourceFrame[] = [];
    for (let s = stack; s >= 0; s = t.stackParent[s]!) out.push(t.frames[t.stackFrame[s]!]!);
    return out.reverse();
  }
}
