// A memory source answers reads of a target interpreter's memory. Reads are whole
// structures (a thread state, a chunk, a frame, a code object), never one field at a time:
// each read of a live process is a system call.

import type { Layout } from '../../layout/layout.js';
import type { PreparedRead } from '../linux/native.js';

export type { PreparedRead } from '../linux/native.js';

export class ReadError extends Error {
  override name = 'ReadError';
  constructor(
    readonly address: bigint,
    readonly length: number,
    message: string,
  ) {
    super(message);
  }
}

export interface MemorySource {
  /** Human-readable description of the target ("pid 1234 (python3.13)", "pyodide 3.15.0rc1"). */
  readonly description: string;
  /** Address of _PyRuntime in the target. */
  readonly runtimeAddress: bigint;
  /** The layout of the target's structures. */
  readonly layout: Layout;
  /**
   * The platform gives every thread a native id (Linux): a thread state whose
   * native_thread_id is still 0 belongs to a thread that has not started yet.
   */
  readonly nativeThreadIds?: boolean;
  /**
   * Copy `length` bytes at `address` into a new array. Throws ReadError if any byte is not
   * readable. (The caller owns the returned bytes.)
   */
  read(address: bigint, length: number): Uint8Array;
  /** Like read, but returns null instead of throwing when the memory is not readable. */
  tryRead(address: bigint, length: number): Uint8Array | null;
  /**
   * Several reads at once — in one system call where the platform allows (process_vm_readv),
   * so that they happen close together in time. Null for a range that could not be read whole.
   * Absent: the caller reads the ranges one after the other with tryRead (readMany).
   */
  readv?(ranges: readonly { address: bigint; length: number }[]): (Uint8Array | null)[];
  /**
   * A gathered read made ready once, to be repeated (see NativeCalls.prepare). Absent where
   * reads cannot be gathered; the copier then reads as usual.
   */
  prepareRead?(ranges: readonly { address: bigint; length: number }[]): PreparedRead;
  /**
   * Write into the target (only the profiler anchor of CPython 3.15+ is ever written). Absent
   * for sources that cannot write; throws ReadError when a write fails.
   */
  write?(address: bigint, bytes: Uint8Array): void;
  close(): void;
}

/** Several reads, gathered into one call where the source can (see MemorySource.readv). */
export function readMany(source: MemorySource, ranges: readonly { address: bigint; length: number }[]): (Uint8Array | null)[] {
  if (source.readv) return source.readv(ranges);
  return ranges.map((r) => source.tryRead(r.address, r.length));
}
