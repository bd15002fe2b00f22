// A thread's native stack, copied for an offline unwind (as perf's --call-graph=dwarf keeps it):
// the bytes from just below its stack pointer (the red zone) up, as far as its stack mapping goes
// or `limit` bytes.

import type { MapEntry } from './proc-maps.js';
import type { NativeRegisters } from '../../native/unwind.js';

/** Bytes of native stack copied per thread and sample unless told otherwise. */
export const DEFAULT_STACK_BYTES = 256 * 1024;

/**
 * The x86-64 red zone: the 128 bytes below rsp a function may use without moving rsp. A row of
 * an epilogue can still say where a register was saved once it has been popped (`pop rbp; ret`:
 * rbp at CFA − 16, now below rsp), so the copy starts there.
 */
export const RED_ZONE = 128n;

/** The range to copy: [rsp − RED_ZONE, the end of rsp's mapping), at most `limit` bytes; null if rsp is in no mapping. */
export function stackRange(maps: readonly MapEntry[], regs: NativeRegisters, limit = DEFAULT_STACK_BYTES): { address: bigint; length: number } | null {
  const m = maps.find((x) => x.start <= regs.rsp && regs.rsp < x.end);
  if (!m) return null;
  const start = regs.rsp - RED_ZONE >= m.start ? regs.rsp - RED_ZONE : m.start;
  const length = m.end - start;
  return { address: start, length: Number(length > BigInt(limit) ? BigInt(limit) : length) };
}
