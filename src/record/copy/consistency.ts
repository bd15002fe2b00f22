// How a copy is known to be of one moment. Two readings of it that agree are not proof: a
// program that repeats itself every few microseconds can be caught at the same points of its
// loop by both, each reading torn alike (docs/validation.md, "Agreeing readings are not
// proof"). A copy is proven by one of:
// - a stop: the thread was stopped while it was read (stopper.ts);
// - the profiler anchor (CPython 3.15+): it did not move during the copy, and it names the
//   innermost frame or its caller (anchorProves);
// - the GIL: the thread was not the GIL's last holder when the copy began, and no thread took
//   the GIL until it ended (gilProves) — a thread without the GIL runs no Python code.

import type { Layout } from '../../layout/layout.js';
import { readPointer } from '../../walk/region-memory.js';
import { sameField, u64, type GrowingMemory } from './copy-memory.js';
import type { Range } from '../linux/native.js';

/**
 * How a running thread's copy can be proven. Both read the copy twice (or more) in one system
 * call and compare the stacks the readings show.
 * - `anchor` (CPython 3.15+; writes one word into the target): the thread's profiler anchor
 *   (`last_profiled_frame`) is kept on its innermost Python frame; the interpreter moves it down
 *   to the caller whenever the frame it names is popped or suspended, so an anchor that did not
 *   move during the copy proves that frame and everything below it unchanged (anchorProves).
 * - `reread` (read-only; every version): nothing proves the copy of a thread that runs Python:
 *   it is made with the thread stopped (adaptive, blocking) or, with `--copy optimistic`, kept
 *   when its readings agree — which is not proof.
 */
export type Consistency = 'anchor' | 'reread';

/**
 * Does the profiler anchor prove a reading? The anchor the reading shows (`anchor`, at place
 * `at` of the chain followed from the reading's current frame; -1: not in it) must be the same
 * — value and sequence — in the reading made after it (`unmoved`), name a Python frame off the
 * thread's C stack (`python`: see CStack), be one the copier may trust to have named a live
 * frame (AnchorTrust.trusts), and be the innermost frame or its caller — the caller only where
 * the innermost frame can be walked whatever moment its copy is of (`above`:
 * aboveAnchorWalks).
 *
 * Why that is enough (the argument in full: docs/validation.md). The interpreter moves the
 * anchor, and bumps its sequence, whenever the frame it names is popped or suspended (a
 * generator's yield included: checked on each interpreter by test/anchor-invariant.test.ts).
 * An anchor on a Python frame A that did not move from the reading's first read to the next
 * reading means A lived all that time; a frame below A cannot be popped, suspended, or have its
 * caller, code or waiting instruction changed while A lives, so everything the reading shows
 * from A down is as it was at every moment of the reading. Above A there is at most one frame
 * F: the current frame when the thread state was read. F's header, read a moment later, names
 * A as its caller — so it is A's callee then or at a moment of the reading (a frame pushed
 * right above a living A is A's callee), or a frame that had just been popped (its code then
 * cleared, and the walk skips it: A's own stack, of that moment) — where F is a Python frame.
 * F may also be the entry frame A's C callee ran an eval loop in, current between its Python
 * frame's return and its own: on the C stack, whose slot the thread re-uses at once, so that
 * its copy may be of any later moment (seen: an owner byte of 98, the caller still A — a sample
 * then rejected as corrupt); such an F proves nothing unless its copy shows an entry frame,
 * which the walk skips. Two frames or more above the
 * anchor are not proven: each was read at its own moment, and a frame read later can belong
 * to a call made after the frame read before it returned (the entry frame a C function's
 * callbacks share is re-used at the same address by every such call). An entry frame as the
 * anchor proves nothing: CPython pops entry frames without moving the anchor — and the
 * interpreter itself moves the anchor onto one when the frame it names returns to C, where it
 * stays after the entry frame is gone. Its owner byte cannot tell it (a copy of the dead slot
 * showed a Python frame's owner); its address can: no Python frame is ever on the C stack.
 */
export function anchorProves(at: number, python: boolean, trusted: boolean, unmoved: boolean, above: boolean): boolean {
  return unmoved && trusted && python && (at === 0 || (at === 1 && above));
}

/**
 * A thread's C stack, [low, high), as its thread state gives it (CPython 3.15+; Layout
 * tstate.cStack). Entry frames live there, and nothing else of the frame chain: Python frames
 * live in the data stack or in generator objects. A copy of the C stack may be of any moment:
 * an entry frame is popped without the profiler anchor moving, and its slot is at once used by
 * whatever the thread calls next. So an anchor found there, left on an entry frame that has
 * since returned, vouches for nothing, and the copy of a frame there may show any bytes —
 * even a Python frame's owner (docs/validation.md, "An anchor on the C stack"): a frame there
 * is never taken for a Python frame (onCStack), whatever its copy says.
 */
export interface CStack {
  low: number;
  high: number;
}

/**
 * How far a 3.15+ thread state is copied, counted from its start: through the base frame
 * embedded at `baseAt` bytes in, and the C stack's fields after it.
 */
export function tstateCopyEnd(layout: Layout, baseAt: number): number {
  const c = layout.tstate.cStack;
  return baseAt + layout.frame.size + (c === null ? 0 : Math.max(c.top, c.softLimit, c.hardLimit) + layout.pointerSize);
}

/**
 * The C stack of the thread whose state `ts` (copied from `tstate`, through the fields) is:
 * null where the copy does not reach them, or they are not set (a thread that never ran Python)
 * or not a stack. `low` is one overflow margin below the hard limit: the frame of a call that
 * found the limit crossed may lie there.
 */
export function cStackOf(layout: Layout, ts: Uint8Array, tstate: bigint): CStack | null {
  const c = layout.tstate.cStack;
  const P = layout.pointerSize;
  if (c === null || layout.tstate.baseFrame === null) return null;
  const base = readPointer(ts, layout.tstate.baseFrame, P);
  if (base < tstate) return null;
  const end = Number(base - tstate) + layout.frame.size;
  if (tstateCopyEnd(layout, Number(base - tstate)) > ts.length) return null;
  return cStackFrom(Number(readPointer(ts, end + c.top, P)), Number(readPointer(ts, end + c.softLimit, P)), Number(readPointer(ts, end + c.hardLimit, P)));
}

/** The C stack the three fields give (cStackOf), null where they are not one. */
export function cStackFrom(top: number, soft: number, hard: number): CStack | null {
  // (set together from the thread's stack: hard < soft < top, a margin of a few pages apart)
  if (!(hard > 0 && hard < soft && soft < top && soft - hard <= 1 << 20)) return null;
  return { low: hard - (soft - hard), high: top };
}

/** Is `frame` on the C stack `c` (null: not known — taken as on it: nothing is vouched for)? */
export function onCStack(c: CStack | null, frame: number): boolean {
  return c === null || (frame >= c.low && frame < c.high);
}

/**
 * With the anchor at the current frame's caller (place 1), can the current frame be walked
 * whatever moment its copy is of? Not where it is on the C stack (an entry frame, in the moment
 * between its Python frame's return and its own), unless its copy shows an entry frame, which
 * the walk skips: its caller's stack then is the anchor's, proven.
 */
export function aboveAnchorWalks(c: CStack | null, current: number, owner: number | undefined, layout: Layout): boolean {
  return !onCStack(c, current) || owner === layout.owners.interpreter;
}

/**
 * What the copier knows of a thread's profiler anchor. The interpreter only ever moves the
 * anchor from a frame being popped to its caller, which lives at that moment; a value the
 * copier wrote itself names the frame it saw — which may have returned before the write landed,
 * leaving the anchor on a dead address that a later frame at that address would seem to
 * vouch for. So a value written is trusted once a reading made after the write showed that
 * frame alive: as the current frame (alive when the thread state was read: trusted for that
 * reading already), or as the current frame's caller (alive at some moment of that reading:
 * trusted from the next reading on). From then on the interpreter moves the anchor when that
 * frame goes, to the frame below it, and so on down the stack: a value other than the one
 * written that names a frame below it in the chain the write was made from was moved there by
 * the interpreter, and is trusted. Any other value was written by someone else (another
 * profiler of the same process, whose write may name a frame that had returned by then): not
 * trusted, nor is anything before the copier's first write.
 */
export class AnchorTrust {
  /** the value this copier last wrote (null: none yet) */
  written: bigint | null = null;
  /** the same as a number, for the steady copy (-1: none yet) */
  writtenNumber = -1;
  /** a reading after the write showed `written` alive */
  confirmed = false;
  /** the frames below `written` in the chain it was written from: where the interpreter moves it */
  private readonly below = new Set<number>();

  /** The anchor was set to `target`, with `below` the frames under it in the copy's chain. */
  wrote(target: bigint, below: Iterable<number>): void {
    this.written = target;
    this.writtenNumber = Number(target);
    this.confirmed = false;
    this.below.clear();
    for (const f of below) this.below.add(f);
  }

  /**
   * May the anchor `anchor`, as a reading showed it with `current` as its current frame, be
   * trusted to name a live frame (for this reading)?
   */
  trusts(anchor: number, current: number): boolean {
    if (this.writtenNumber < 0 || anchor <= 0) return false;
    return anchor === this.writtenNumber ? this.confirmed || anchor === current : this.below.has(anchor);
  }

  /**
   * After judging a reading made after the last write: it showed `anchor` as the anchor,
   * `current` as the current frame and `caller` as that frame's caller (0: none).
   */
  saw(anchor: number, current: number, caller: number, c: CStack | null): void {
    // (a current frame on the C stack may be a dead entry frame's slot: its caller vouches for nothing)
    if (anchor === this.writtenNumber && (anchor === current || (anchor === caller && !onCStack(c, current)))) this.confirmed = true;
  }
}

/**
 * Where to leave the profiler anchor after a copy so that it proves the next one: null where it
 * already would (a trusted Python frame at the chain's first or second place), else the
 * chain's innermost Python frame. (The next copy then finds it there, or — that frame returned
 * or yielded — on its caller, where the interpreter moved it.) `isPython(k)`: the chain's k-th
 * frame is a Python frame off the C stack; `at`: where the anchor is in the chain (-1: not in it).
 */
export function anchorPlace(n: number, at: number, trusted: boolean, isPython: (k: number) => boolean): number | null {
  if (trusted && (at === 0 || at === 1) && isPython(at)) return null;
  for (let k = 0; k < n; k++) if (isPython(k)) return k;
  return null;
}

/**
 * Does the GIL prove a reading of thread `tstate` (a GIL build)? `before`: the GIL's last
 * holder and its count of hand-overs as read just before the reading; `after`: the count read
 * just after it. A thread takes the GIL before it runs Python code, and taking it when another
 * thread was its last holder makes the thread the last holder and counts a hand-over. So a
 * thread that was not the last holder before, with no hand-over counted by the end, ran no
 * Python code meanwhile: its frames stood still. (Its own last hold — released, not taken
 * again — would let it run without a count: hence "not the last holder".)
 */
export function gilProves<N extends number | bigint>(tstate: N, lastHolder: N, switchesBefore: N, switchesAfter: N): boolean {
  return lastHolder !== tstate && switchesBefore === switchesAfter;
}

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
  /** the count of code-object deaths as copied, and where it is (null: this Python has none) */
  generation: bigint | null;
  generationAt: Range | null;
}

/**
 * Do the thread-state fields `offsets` (pointer-sized) read the same in the second reading
 * (`now(address, length)`: bytes read after the copy, null if not read)?
 */
export function sameFields(layout: Layout, seen: Seen, offsets: readonly number[], now: (address: bigint, length: number) => Uint8Array | null): boolean {
  const P = layout.pointerSize;
  for (const off of offsets) {
    const b = now(seen.tstate + BigInt(off), P);
    if (!b || readPointer(b, 0, P) !== readPointer(seen.ts, off, P)) return false;
  }
  return true;
}

/**
 * Does the second reading show the stack the copy saw? The same current frame (or _PyCFrame),
 * data-stack top and chunk, count of code-object deaths, and `tstateCheck` fields; every frame
 * of the chain with the same caller, code and owner — and, below the innermost one, the same
 * instruction (a frame popped and called again comes back at its first instruction, not at the
 * call it was in). Agreement is not proof (see the top of this file): only a copy nothing
 * proves is judged by it, and kept only where the mode says so (`--copy optimistic` without
 * the anchor).
 */
export function agrees(layout: Layout, seen: Seen, now: (address: bigint, length: number) => Uint8Array | null, tstateCheck: readonly number[] = []): boolean {
  const L = layout;
  const P = L.pointerSize;
  const { cframe, outerCframe, enteredFrom, frame, chain, mem, generation, generationAt } = seen;
  if (!sameFields(L, seen, [L.tstate.currentFrame, L.tstate.datastackTop, L.tstate.datastackChunk, ...tstateCheck], now)) return false;
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
  for (let k = 0; k < chain.length; k++) {
    const f = chain[k]!;
    const copied = mem.bytes(f, L.frame.size);
    const live = now(f, L.frame.size);
    if (!copied || !live) return false;
    if (!sameField(copied, live, L.frame.previous, P) || !sameField(copied, live, L.frame.executable, P) || copied[L.frame.owner] !== live[L.frame.owner]) return false;
    if (k > 0 && !sameField(copied, live, L.frame.instrPtr, P)) return false;
  }
  return true;
}
