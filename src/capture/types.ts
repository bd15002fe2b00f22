// What a capture file (.pyuw) holds, as the rest of pyunwind sees it. The byte format is in
// docs/capture-format.md; src/capture/writer.ts and reader.ts are the only code that knows it.

import type { LayoutSource } from '../layout/layout.js';

/** A copy of target memory: `bytes` were at `address` in the target. */
export interface Region {
  address: bigint;
  bytes: Uint8Array;
}

/** The file header: everything needed to interpret the regions, written once. */
export interface CaptureHeader {
  /** rebuilds the Layout (raw _Py_DebugOffsets bytes, or a built-in layout id) */
  layoutSource: LayoutSource;
  pointerSize: 4 | 8;
  /** e.g. "3.15.2" */
  pythonVersion: string;
  /** human description of the target, e.g. "pid 1234 (python3.15, 3.15.2)" */
  target: string;
  /** the command line of a target the recorder started, if it did */
  command?: string[];
  pid?: number;
  /** address of _PyRuntime in the target */
  runtimeAddress: bigint;
  /** requested sampling rate */
  rateHz: number;
  /** wall-clock start of the recording, ms since the epoch */
  startTime: number;
  /** e.g. "pyunwind 0.1.0" */
  recorder: string;
  /** how the recorder made its copies consistent, e.g. "optimistic", "blocking" (free text) */
  mode?: string;
}

/** A code object copied once (per address, and again when the address is reused). */
export interface CodeRecord {
  address: bigint;
  /** the code object's header and its qualname, name, filename and line-table objects */
  regions: Region[];
}

/** What the recorder itself concluded about a sample (the walk adds its own status later). */
export type RecorderStatus = 'ok' | 'torn';

export const SAMPLE_FLAG = {
  /** the thread held the GIL */
  GIL: 1,
  /** the main thread of its interpreter */
  MAIN: 2,
  /** copied with the target stopped (blocking, or adaptive after a copy moved) */
  STOPPED: 4,
  /** the first copy moved and was made again */
  RETRIED: 8,
} as const;

export interface SampleRecord {
  /** µs since the header's startTime (integer) */
  time: number;
  interpreterId: bigint;
  threadStateAddress: bigint;
  threadId: bigint;
  nativeThreadId: bigint;
  /** SAMPLE_FLAG bits */
  flags: number;
  recorderStatus: RecorderStatus;
  /** how long the copy took, µs (0 if not measured) */
  copyMicros: number;
  /** the sample's memory: thread state (+ base frame), chunks, frames outside the chunks */
  regions: Region[];
  /** what the copy could not read, if anything */
  errors: string[];
}

/** One block of a capture, as a reader yields it. */
export interface CaptureBlock {
  /** 0-based position among the blocks of the file */
  index: number;
  /** byte offset of the block in the file */
  offset: number;
  codes: CodeRecord[];
  samples: SampleRecord[];
  /** samples the schedule wanted during this block's span that were never attempted */
  missed: number;
}

export interface CaptureWarning {
  /** byte offset in the file where the problem is */
  offset: number;
  message: string;
}

export class CaptureError extends Error {
  override name = 'CaptureError';
}
