// What a copy of one thread gives the recorder: its memory as regions, and what the copy saw.

import type { Region } from '../../walk/types.js';
import type { CodeRecord, FrameHint } from '../../capture/types.js';
import type { PendingCodes } from './code-cache.js';
import type { NativeCopy } from '../linux/native-recorder.js';

export interface ThreadSnapshot {
  interpreterId: bigint;
  threadStateAddress: bigint;
  /** pthread handle (thread_id) */
  threadId: bigint;
  /** kernel thread id (0 where the platform has none) */
  nativeThreadId: bigint;
  /** it held the GIL: the thread state says so (3.15+), or the interpreter's GIL is taken and names it (3.13, 3.14); false where unknown */
  holdsGil: boolean;
  /** its thread state holds an exception being raised or handled (3.15+; false where unknown) */
  handlingException: boolean;
  /** the kernel had it running or runnable just after the copy (set by the sampler; false where unknown) */
  onCpu: boolean;
  /** the sampler asked the kernel and could not tell (the thread's state unreadable): neither on nor off a CPU */
  cpuUnknown: boolean;
  /** the garbage collector was running in it: collecting, and it held the GIL (3.13+; false where unknown) */
  inGc: boolean;
  /** the main thread of its interpreter (false where unknown) */
  mainThread: boolean;
  regions: Region[];
  /** where the regions hold the chain's frame headers (for the writer to store them as frame images); null: not said */
  frames: FrameHint | null;
  /** what could not be copied (the walk will then reject the sample, with a reason) */
  errors: string[];
  /**
   * Nothing proves the copy shows one moment of the thread (consistency.ts): it is never
   * passed off as a stack (`torn`).
   */
  unproven: boolean;
  /** time the copy of this thread took (the last attempt), µs */
  copyMicros: number;
  /** copies made of this thread for this sample (1 + retries used) */
  attempts: number;
  /** the last copy was made with the target stopped */
  stopped: boolean;
  /** the copy was proven by the kernel showing the thread off its CPU throughout (off-cpu.ts), without a stop */
  offCpuProof: boolean;
  /**
   * Code objects to record before this sample: seen for the first time, changed at their
   * address, or withdrawn (empty regions). Empty for a copy nothing proved.
   */
  codes: CodeRecord[];
  /** one of `codes` replaces a code object recorded earlier at the same address */
  codeReplaced: boolean;
  /** not copied here: its sample is copied in the kernel at the interrupt (CopierOptions.leaveOut) */
  leftToKernel?: boolean;
  /** its asyncio tasks, copied inside the pass over the thread list, to be put in place after it (TaskCopier.copy's `later`, settle) */
  withTasks?: { regions: Region[] | null; codes: PendingCodes | null };
  /** its registers and native stack, of the same moment as its frames (copied at the interrupt, or off its CPU beside them) */
  native?: NativeCopy;
}

/** A snapshot not filled in yet: the ids, regions and outcome are set as the copy goes. */
export function emptySnapshot(interpreterId: bigint, threadStateAddress: bigint, regions: Region[] = [], errors: string[] = []): ThreadSnapshot {
  return {
    interpreterId,
    threadStateAddress,
    threadId: 0n,
    nativeThreadId: 0n,
    holdsGil: false,
    handlingException: false,
    onCpu: false,
    cpuUnknown: false,
    inGc: false,
    mainThread: false,
    regions,
    frames: null,
    errors,
    unproven: false,
    copyMicros: 0,
    attempts: 1,
    stopped: false,
    offCpuProof: false,
    codes: [],
    codeReplaced: false,
  };
}
