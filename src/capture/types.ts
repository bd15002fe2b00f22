// What a capture file (.pyuw) holds, as the rest of pyunwind sees it. The byte format is in
// docs/capture-format.md; src/capture/writer.ts and reader.ts are the only code that knows it.

import { FLAG_CPU_UNKNOWN, FLAG_EXCEPTION, FLAG_GC, FLAG_GIL, FLAG_MAIN, FLAG_ON_CPU, FLAG_RETRIED, FLAG_STOPPED } from './codes.js';
import type { LayoutSource } from '../layout/layout.js';
import type { NativeObject } from '../native/objects.js';
import type { NativeRegisters } from '../native/unwind.js';

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
  /** the command line of a target the recorder started, or of a subprocess it followed (read from /proc) */
  command?: string[];
  pid?: number;
  /** a subprocess followed by record --subprocesses: the process that started it */
  parentPid?: number;
  /** a subprocess followed by record --subprocesses: the pid of the recording's main target */
  rootPid?: number;
  /** address of _PyRuntime in the target */
  runtimeAddress: bigint;
  /** requested sampling rate */
  rateHz: number;
  /** wall-clock start of the recording, ms since the epoch */
  startTime: number;
  /** e.g. "pyunwind 0.1.0" */
  recorder: string;
  /** how the recorder made its copies consistent, e.g. "adaptive", "blocking, read-only", "signal" (free text; files before 0.2 call it `mode`) */
  copy?: string;
  /** which threads' samples were kept: every one (wall), or those a fact held for (absent: wall) */
  sampling?: SamplingMode;
  /** what the recorder told of each sample besides its memory (SAMPLE_FLAG bits it set); absent: none */
  facts?: SampleFact[];
  /**
   * The recorder copied each thread's asyncio tasks for async-aware stacks (3.14+): which tasks
   * (`running` or `all`), and the asyncio module's debug offsets it read them with
   * (_Py_AsyncioModuleDebugOffsets, 104 bytes as the target held them, in hex). Absent: not recorded.
   */
  asyncio?: { mode: 'running' | 'all'; debugOffsets: string };
  /**
   * true: each code record holds the code object's bytecode (co_code_adaptive), recorded again
   * when the interpreter re-specializes it (report --opcodes). Absent: captures made before
   * pyunwind 0.2, whose code records do not hold it.
   */
  bytecode?: boolean;
  /**
   * (format 1.5) The recorder copied each thread's native stack: samples may carry the thread's
   * registers, and the stack's bytes are one of their regions (the one holding rsp); the capture
   * holds native object records for the objects mapped in the process. `stackBytes`: the most
   * bytes of native stack it copies per sample. Absent: no native stacks.
   */
  native?: { stackBytes: number };
}

/**
 * What a recorder can tell of a thread at a sample besides its memory, each a SAMPLE_FLAG bit:
 * `cpu` it was on a CPU (Linux: running or runnable in /proc/PID/task/TID/stat), `gil` it held
 * the GIL (its thread state's holds_gil on 3.15+; before, it was the GIL's last holder and the
 * GIL was taken), `exception` it was handling or raising an exception (3.15+), `gc` the
 * garbage collector was running in it (3.13+: collecting, in the thread holding the GIL).
 */
export type SampleFact = 'cpu' | 'gil' | 'exception' | 'gc';
export const SAMPLE_FACTS: readonly SampleFact[] = ['cpu', 'gil', 'exception', 'gc'];

/** Which samples a profile keeps: every one (wall clock), or those of threads a fact held for. */
export type SamplingMode = 'wall' | 'cpu' | 'gil' | 'exception';
export const SAMPLING_MODES: readonly SamplingMode[] = ['wall', 'cpu', 'gil', 'exception'];

/** A code object copied once (per address, and again when the address is reused). */
export interface CodeRecord {
  address: bigint;
  /** the code object's header (with its bytecode after it) and its qualname, name, filename and line-table objects */
  regions: Region[];
}

/**
 * The name Python's `threading` module gave a thread, as the recorder read it at `time` (µs since
 * the header's startTime). The recorder writes one when it first learns a thread's name and
 * again when the name changes; the thread is the one whose samples carry these ids.
 */
export interface ThreadNameRecord {
  time: number;
  interpreterId: bigint;
  /** Thread.ident: the thread state's thread_id */
  threadId: bigint;
  nativeThreadId: bigint;
  name: string;
}

/** What the recorder itself concluded about a sample (the walk adds its own status later). */
export type RecorderStatus = 'ok' | 'torn';

export const SAMPLE_FLAG = {
  /** the thread held the GIL */
  GIL: FLAG_GIL,
  /** the main thread of its interpreter */
  MAIN: FLAG_MAIN,
  /** copied with the target stopped (blocking, adaptive after a copy was not proven; or the target waited for the copy) */
  STOPPED: FLAG_STOPPED,
  /** the first copy was not proven and was made again */
  RETRIED: FLAG_RETRIED,
  /** the thread was on a CPU (running or runnable) when its copy was made */
  ON_CPU: FLAG_ON_CPU,
  /** the thread was handling (or raising) an exception */
  EXCEPTION: FLAG_EXCEPTION,
  /** the garbage collector was running in the thread (a `<GC>` frame above its stack) */
  GC: FLAG_GC,
  /** the recorder could not tell whether the thread was on a CPU (neither on nor off: left out of a cpu profile, and counted) */
  CPU_UNKNOWN: FLAG_CPU_UNKNOWN,
} as const;

/** The flag each fact sets. */
export const FACT_FLAG: Readonly<Record<SampleFact, number>> = { cpu: SAMPLE_FLAG.ON_CPU, gil: SAMPLE_FLAG.GIL, exception: SAMPLE_FLAG.EXCEPTION, gc: SAMPLE_FLAG.GC };

/** The flag that says the recorder could not tell a fact (0: it always can: the fact is read from the copy itself). */
export const FACT_UNKNOWN_FLAG: Readonly<Record<SampleFact, number>> = { cpu: SAMPLE_FLAG.CPU_UNKNOWN, gil: 0, exception: 0, gc: 0 };

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
  /** where the regions hold frame headers: a hint to the writer, never stored (a reader leaves it unset) */
  frames?: FrameHint;
  /**
   * (format 1.5) the thread's rip, rsp and rbp at the sample, when the recorder read them (captures
   * whose header has `native`); its native stack is then the region holding rsp. Absent: not read.
   */
  registers?: NativeRegisters;
}

/**
 * Where a sample's regions hold frame headers, as the recorder knows from its copy. The writer
 * stores each such frame as an image the block keeps once (docs/capture-format.md, "Frames
 * region"); without a hint it stores the same bytes as patches. Either way they read back exact.
 */
export interface FrameHint {
  /** the frames' addresses, any order (ones not wholly inside one region are left to patches) */
  addresses: ArrayLike<number>;
  /** bytes of a frame header the copy keeps (a multiple of wordBytes, at most 32 words) */
  size: number;
  /** the target's pointer size */
  wordBytes: 4 | 8;
}

/** One block of a capture, as a reader yields it. */
export interface CaptureBlock {
  /** 0-based position among the blocks of the file */
  index: number;
  /** byte offset of the block in the file */
  offset: number;
  codes: CodeRecord[];
  samples: SampleRecord[];
  /** thread names the recorder read (format 1.1+; none in older files) */
  names: ThreadNameRecord[];
  /**
   * mapped objects the recorder described, in the order written (format 1.5+; none in older
   * files). Each applies to this block's samples and every later block's, until an object
   * record whose range overlaps it replaces it (`replaceObjects`).
   */
  objects: NativeObject[];
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
