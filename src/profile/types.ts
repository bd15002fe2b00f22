// What the profile takes (one validated, symbolized sample) and the plain shapes its queries
// give back. The report pipeline (src/pipeline/report-file.ts) builds SampleInputs; nothing here knows about memory.

import type { SourceFrame } from '../symbols/types.js';
import { STATUS_NAMES, type Status } from '../walk/status.js';

export type { Status };

/** One symbolized Python frame (defined with the symbols, which cannot import the profile). */
export type { SourceFrame };

/** The thread a sample was taken from. */
export interface SampleThread {
  interpreterId: bigint;
  threadId: bigint;
  nativeThreadId: bigint;
  name?: string;
}

export interface SampleInput {
  /** µs since recording start */
  time: number;
  thread: SampleThread;
  status: Status;
  /** innermost first; only read for trusted statuses */
  frames: SourceFrame[];
  /** default 1; must be finite and > 0 */
  weight?: number;
}

/** Samples per status; every key is present. */
export type StatusCounts = Record<Status, number>;

/** Do two frames name the same (qualname, filename, line, opcode)? */
export function sameFrame(a: SourceFrame, b: SourceFrame): boolean {
  return a === b || (a.line === b.line && a.qualname === b.qualname && a.filename === b.filename && a.opcode === b.opcode && a.native === b.native);
}

export function emptyStatusCounts(): StatusCounts {
  return Object.fromEntries(STATUS_NAMES.map((s) => [s, 0])) as StatusCounts;
}

/** Validation statistics of a set of attempted samples (counts of samples, not weights). */
export interface ValidationStats {
  /** every sample given to Profile.add; equals the sum of `statuses` */
  attempted: number;
  /** complete + complete-unverifiable + idle */
  trusted: number;
  /** attempted − trusted */
  rejected: number;
  statuses: StatusCounts;
}

/**
 * Validation statistics of a whole profile, and its schedule. The schedule counts *ticks*
 * (sampling moments: one tick samples every thread), the statuses count *samples*.
 */
export interface ProfileStats extends ValidationStats {
  /** ticks taken (Profile.addTicks) */
  ticks: number;
  /** ticks the schedule wanted that gave no samples: the recorder was late, or the copy failed (Profile.addMissed) */
  missed: number;
  /** ticks + missed */
  scheduled: number;
}

/**
 * A function — (qualname, filename), all lines together — with its weights in one thread.
 * `self`: weight of samples whose innermost frame is in it; `total`: weight of samples with
 * the function anywhere on the stack, counted once per sample even when it recurses.
 */
export interface FunctionStat {
  qualname: string;
  filename: string;
  self: number;
  total: number;
}

