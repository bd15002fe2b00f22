// What a thread state's own bytes tell of the thread besides its frames (the facts a sample
// records as SAMPLE_FLAG bits; see capture/types.ts SampleFact).

import type { Layout } from '../../layout/layout.js';

/** A non-null pointer at `at + off` (false where the bytes do not reach). */
function pointerSet(dv: DataView, at: number, off: number, P: number): boolean {
  if (at + off + P > dv.byteLength) return false;
  return P === 8 ? dv.getBigUint64(at + off, true) !== 0n : dv.getUint32(at + off, true) !== 0;
}

/**
 * The thread is raising an exception (current_exception) or handling one (exc_state.exc_value,
 * set in an `except` block and cleared after it), from the thread state at `at` in `dv` (3.15+:
 * false where the layout does not give those fields).
 */
export function handlingException(T: Layout['tstate'], dv: DataView, at: number, P: number): boolean {
  if (T.currentException === null || T.handledException === null) return false;
  return pointerSet(dv, at, T.currentException, P) || pointerSet(dv, at, T.handledException, P);
}

/** The thread state says it holds the GIL (3.15+ holds_gil), or null where it has no such field. */
export function holdsGilField(T: Layout['tstate'], dv: DataView, at: number): boolean | null {
  if (T.holdsGil === null || at + T.holdsGil + 4 > dv.byteLength) return null;
  return dv.getInt32(at + T.holdsGil, true) !== 0;
}
