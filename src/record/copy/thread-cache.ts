// What the copier keeps of a thread between its copies.

import { AnchorTrust } from './consistency.js';
import type { SteadyCopy, SteadyHooks } from './steady-copy.js';
import type { ThreadSnapshot } from './thread-snapshot.js';

/** A data-stack chunk and how many bytes to read of it. */
export interface ChunkGuess {
  address: bigint;
  used: number;
}

/** What the copier keeps of a thread between copies, so that the next one reads at once what it needs. */
export interface ThreadCache {
  // the plan of the general copy (thread-copy.ts)
  /** bytes of the thread state to read (through the base frame on 3.15) */
  tstateLength: number;
  /** the data-stack chunks, newest first, with the lengths to read */
  chunks: ChunkGuess[];
  /** the frames of the chain outside the chunks (generator frames, entry frames on the C stack) */
  outside: bigint[];
  /** the code objects of the chain */
  codes: bigint[];
  /** 3.11/3.12: the _PyCFrame holding the current frame pointer */
  cframe: bigint;
  /** 3.11: the calling eval loop's _PyCFrame (cframe->previous; 0n: none) */
  outerCframe: bigint;
  nativeThreadId: bigint;

  // its place in the thread lists (thread-list.ts)
  /** its interpreter */
  interp: bigint;
  /** it was in its interpreter's thread list at the last pass: the next pass reads it at once */
  live: boolean;

  /** what the copier knows of its profiler anchor (consistency.ts) */
  anchor: AnchorTrust;

  // when to stop it (stop-policy.ts)
  /** share of its recent optimistic copies nothing proved or that nothing proved (an exponential moving average) */
  unprovenRate: number;
  /** copies made stopped first, in a row */
  stoppedFirst: number;
  /** at its last copy it may have been running Python (stop-policy.ts mayRunPython) */
  ranPython: boolean;

  // its steady copy (steady-copy.ts)
  /** the thread's steady copy, null until one is made */
  steady: SteadyCopy | null;
  /** general copies to make before a steady copy is tried again */
  steadySkip: number;
  /** steady copies that gave up in a row */
  steadyFailures: number;
  /** the steady copy's bytes, read with this pass (see MemoryCopier.passRead) */
  preread: Uint8Array | null;
  /** what its steady copy asks of the copier */
  steadyHooks: SteadyHooks | null;

  /**
   * its last copy proven by staying off its CPU (CopierOptions.quiet), and its count of arrivals
   * on a CPU then: while that count stands, the thread has not run since, and the copy is still
   * of it now (MemoryCopier.quietAgain)
   */
  quietCopy: { mark: bigint; snap: ThreadSnapshot } | null;

  /** whether the pass numbered `leftInPass` left it out (copied elsewhere: MemoryCopier.leavesOut) */
  leftOut: boolean;
  leftInPass: number;
}

export function newThreadCache(tstateLength: number): ThreadCache {
  return {
    tstateLength,
    chunks: [],
    outside: [],
    codes: [],
    cframe: 0n,
    outerCframe: 0n,
    nativeThreadId: 0n,
    interp: 0n,
    live: false,
    anchor: new AnchorTrust(),
    unprovenRate: 0,
    stoppedFirst: 0,
    ranPython: true,
    steady: null,
    steadySkip: 0,
    steadyFailures: 0,
    preread: null,
    steadyHooks: null,
    quietCopy: null,
    leftOut: false,
    leftInPass: -1,
  };
}
