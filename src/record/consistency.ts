// How a copy is proven not to have moved under the copier: the comparison of two readings, and
// the profiler anchor that vouches for the frames below it (CPython 3.15+).

import type { Layout } from '../layout/layout.js';
import { readPointer } from '../walk/region-memory.js';
import { sameField, u64, type GrowingMemory } from './copy-memory.js';
import type { Range } from './native.js';

/**
 * How a copy is checked for having moved under the copier. Both read the copy twice in one
 * system call and compare the stacks the two readings show (a steady copy reads it five
 * times, and is the first reading the next one agrees with: see steady-copy.ts READINGS).
 * - `anchor` (CPython 3.15+; writes one word into the target): besides, the thread's profiler
 *   anchor (`last_profiled_frame`) is left on a frame near the top of the stack between copies;
 *   the interpreter moves it down to the caller whenever the frame it names is popped or
 *   suspended, so an anchor that did not move during the copy proves that frame and everything
 *   below it unchanged — only the frames above it rest on the comparison.
 * - `reread` (read-only; every version): the comparison alone. A change undone within the
 *   window (a frame popped and the same function called again from the same place, with the
 *   same caller waiting at the same instruction) passes: the copy then shows a stack the
 *   program had, though not a proof of one instant.
 */
export type Consistency = 'anchor' | 'reread';

/** How far below the innermost frame the profiler anchor may sit before it is set again. */
export const ANCHOR_DEPTH = 4;

/** What a copy saw, to compare with a second reading. */
export interface Seen {
  tstate: bigint;
  /** the thread state as copied */
  ts: Uint8Array;
  /** 3.11/3.12: the _PyCFrame the current frame was read from (0n: none) */
  cframe: bigint;
  /** 3.11: the calling eval loop's _PyCFrame (0n: none, or not read) and its current frame as copied */
  outerCframe: bigint;
  enteredFrom: bigint;
  /** the current frame */
  frame: bigint;
  /** the chain of frames, innermost first */
  chain: readonly bigint[];
  mem: GrowingMemory;
  /** the profiler anchor as copied (0n: none, or not checked with it) */
  anchor: bigint;
  /** the count of code-object deaths as copied, and where it is (null: this Python has none) */
  generation: bigint | null;
  generationAt: Range | null;
}

/**
 * Does the second reading (`now(address, length)`: bytes read after the copy, null if not
 * read) show the stack the copy saw? Frames at and below a profiler anchor that did not move
 * are proven unchanged by it; every other frame of the chain must show the same caller, code
 * and owner — and, below the innermost one, the same instruction (a frame popped and called
 * again comes back at its first instruction, not at the call it was in).
 */
export function unchanged(layout: Layout, consistency: Consistency, seen: Seen, now: (address: bigint, length: number) => Uint8Array | null, tstateCheck: readonly number[] = []): boolean {
  const L = layout;
  const P = L.pointerSize;
  const { tstate, ts, cframe, outerCframe, enteredFrom, frame, chain, mem, anchor, generation, generationAt } = seen;
  // the thread state: the same current frame (or _PyCFrame), top, chunk and anchor
  const fields = [L.tstate.currentFrame, L.tstate.datastackTop, L.tstate.datastackChunk, ...tstateCheck];
  if (consistency === 'anchor') fields.push(L.tstate.lastProfiledFrame!);
  for (const off of fields) {
    const b = now(tstate + BigInt(off), P);
    if (!b || readPointer(b, 0, P) !== readPointer(ts, off, P)) return false;
  }
  if (L.tstate.cframeCurrentFrame !== null && cframe !== 0n) {
    const b = now(cframe + BigInt(L.tstate.cframeCurrentFrame), P);
    if (!b || readPointer(b, 0, P) !== frame) return false;
  }
  if (outerCframe !== 0n) {
    // (the same calling eval loop, at the same frame)
    const b = now(cframe + BigInt(L.tstate.cframePrevious!), P);
    if (!b || readPointer(b, 0, P) !== outerCframe) return false;
    const e = now(outerCframe + BigInt(L.tstate.cframeCurrentFrame!), P);
    if (!e || readPointer(e, 0, P) !== enteredFrom) return false;
  }
  if (generation !== null && generationAt) {
    if (u64(now(generationAt.address, generationAt.length)) !== generation) return false;
  }
  // the anchor, where it is a Python frame of the chain, vouches for itself and what is below
  let upTo = chain.length;
  if (anchor !== 0n) {
    const j = chain.indexOf(anchor);
    const owner = j >= 0 ? mem.bytes(anchor + BigInt(L.frame.owner), 1)?.[0] : undefined;
    if (owner === L.owners.thread || owner === L.owners.generator) upTo = j;
  }
  for (let k = 0; k < upTo; k++) {
    const f = chain[k]!;
    const copied = mem.bytes(f, L.frame.size);
    const live = now(f, L.frame.size);
    if (!copied || !live) return false;
    if (!sameField(copied, live, L.frame.previous, P) || !sameField(copied, live, L.frame.executable, P) || copied[L.frame.owner] !== live[L.frame.owner]) return false;
    if (k > 0 && !sameField(copied, live, L.frame.instrPtr, P)) return false;
  }
  return true;
}

/**
 * Where to leave the profiler anchor so that it vouches for the next copy of this thread: on
 * the innermost frame's caller (the innermost frame comes and goes; the anchor would follow
 * it down anyway), unless it already sits on a Python frame of the chain near the top (then
 * null: leave it). The write is outside any copy's window; the next copy reads where it is.
 */
export function anchorTarget(layout: Layout, anchor: bigint, chain: readonly bigint[], mem: GrowingMemory): bigint | null {
  const L = layout;
  const isPython = (f: bigint): boolean => {
    const owner = mem.bytes(f + BigInt(L.frame.owner), 1)?.[0];
    return owner === L.owners.thread || owner === L.owners.generator;
  };
  const j = anchor === 0n ? -1 : chain.indexOf(anchor);
  if (j >= 0 && j <= ANCHOR_DEPTH && isPython(anchor)) return null;
  return chain.slice(1).find(isPython) ?? (chain[0] !== undefined && isPython(chain[0]) ? chain[0] : null);
}
