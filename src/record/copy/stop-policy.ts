// When a thread is copied with it stopped (adaptive and blocking modes): the policy, apart from
// the mechanics of stopping (stopper.ts) and of copying (copier.ts).

import type { Layout } from '../../layout/layout.js';
import type { ThreadCache } from './thread-cache.js';

/**
 * A thread whose optimistic copies were not proven more often than this is copied stopped
 * first (see stopsFirst); RATE_WEIGHT is the weight of each new outcome in the moving average,
 * and one copy in EXPLORE_EVERY of such a thread is still tried optimistically.
 */
export const STOP_FIRST_RATE = 0.1;
const RATE_WEIGHT = 0.05;

const EXPLORE_EVERY = 16;
const EXPLORE_WEIGHT = 1 - (1 - RATE_WEIGHT) ** EXPLORE_EVERY;

/**
 * Should this thread's next copy be made with it stopped first? Where copies can be stopped
 * (adaptive), when its recent optimistic copies were not proven more often than
 * STOP_FIRST_RATE — but one copy in EXPLORE_EVERY is still tried optimistically, to notice
 * when it calms down.
 * (The caller asks only where it can stop the target.)
 */
export function stopsFirst(cache: ThreadCache): boolean {
  if (cache.unprovenRate <= STOP_FIRST_RATE || cache.nativeThreadId === 0n) return false;
  if (++cache.stoppedFirst % EXPLORE_EVERY === 0) return false;
  return true;
}

/** Fold an optimistic copy's outcome into the thread's recent rate of copies nothing proved. */
export function learn(cache: ThreadCache, unproven: boolean): void {
  // a copy tried while the thread is stopped first (one in EXPLORE_EVERY) stands for the
  // EXPLORE_EVERY copies it stands in for
  const weight = cache.unprovenRate > STOP_FIRST_RATE ? EXPLORE_WEIGHT : RATE_WEIGHT;
  cache.unprovenRate += ((unproven ? 1 : 0) - cache.unprovenRate) * weight;
}

/**
 * May the thread be running Python code (it holds the GIL, or that cannot be told)? Only
 * such a thread can change its frames; the others wait for the GIL first. Told by the
 * thread state's holds_gil (3.15+, from `ts`: the thread state as the pass's first read found
 * it) or the GIL's last holder (Layout.gil). A wrong answer costs a stop or a check, not a
 * wrong copy: a copy that is not stopped must be proven.
 */
export function mayRunPython(layout: Layout, tstate: bigint, ts: Uint8Array | null | undefined, gilHolder: bigint | null): boolean {
  const off = layout.tstate.holdsGil;
  if (off !== null && ts && ts.length >= off + 4) return new DataView(ts.buffer, ts.byteOffset + off, 4).getInt32(0, true) !== 0;
  if (gilHolder !== null) return gilHolder === tstate;
  return true;
}
