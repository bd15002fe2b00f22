// The interpreters' thread lists, read while threads start and end.
//
// CPython links a new thread's state into its interpreter's list before the thread runs and
// fills in its ids as it starts; it unlinks and frees a thread's state as it ends. A pass over
// a list can therefore meet a thread state with no ids yet (`unborn`), or one freed under it
// (`stale`): then the pass starts again from the list's head, passing over the threads it
// already copied.

import type { Layout } from '../../layout/layout.js';
import { readPointer } from '../../walk/region-memory.js';
import type { MemorySource } from './source.js';

// Bounds on what a (possibly corrupt) target can make a pass do.
export const MAX_INTERPRETERS = 256;
export const MAX_THREADS = 8192;

/** Times a thread list is walked again from its head after it led to a freed thread state. */
const LIST_RESTARTS = 2;

/**
 * What an entry of an interpreter's thread list turned out to be when copied:
 * - `thread`: a thread state of that interpreter;
 * - `unborn`: a thread state not yet bound to its OS thread: no thread yet, no frames;
 * - `stale`: not a thread state of that interpreter (unreadable, or its `interp` field says
 *   otherwise): the list was read while a thread that ended was being unlinked and freed.
 */
export type ListEntry = 'thread' | 'unborn' | 'stale';

/** What visiting one entry found: what it is, and (unless stale) the next entry's address. */
export interface Visit {
  entry: ListEntry;
  next: bigint;
}

/** One pass over a thread list at a time; its scratch sets are kept, not made anew every tick. */
export class ThreadListPass {
  private readonly copied = new AddressSet();
  private readonly visited = new AddressSet();
  /** filled in by the `visit` callback (one object, not one per entry) */
  readonly found: Visit = { entry: 'stale', next: 0n };

  constructor(
    private readonly source: MemorySource,
    private readonly layout: Layout,
  ) {}

  /**
   * Visit each thread state of interpreter `interp`'s list (which starts at `head`) once.
   * `visit(tstate)` copies the entry and fills in `found`; a stale entry ends this walk of the
   * list, which starts again from the head (read anew), passing over the threads copied.
   */
  walk(interp: bigint, head: bigint, visit: (tstate: bigint) => void): void {
    const P = this.layout.pointerSize;
    const { copied, visited, found } = this;
    copied.clear();
    visited.clear();
    let restarts = 0;
    let tstate = head;
    for (let t = 0; tstate !== 0n && t < MAX_THREADS * (LIST_RESTARTS + 1) && !visited.has(tstate); t++) {
      visited.add(tstate);
      let next: bigint | null;
      if (copied.has(tstate)) {
        const b = this.source.tryRead(tstate + BigInt(this.layout.tstate.next), P);
        next = b ? readPointer(b, 0, P) : null;
      } else {
        visit(tstate);
        next = found.entry === 'stale' ? null : found.next;
        if (found.entry === 'thread') copied.add(tstate);
      }
      if (next === null) {
        if (restarts++ >= LIST_RESTARTS) break;
        const again = this.source.tryRead(interp + BigInt(this.layout.interp.threadsHead), P);
        if (!again) break;
        visited.clear();
        next = readPointer(again, 0, P);
      }
      tstate = next;
    }
  }
}

/** Addresses of every thread state of every interpreter, now. */
export function liveThreadStates(source: MemorySource, layout: Layout): bigint[] {
  const P = layout.pointerSize;
  const out: bigint[] = [];
  const ptr = (a: bigint): bigint | null => {
    const b = source.tryRead(a, P);
    return b ? readPointer(b, 0, P) : null;
  };
  let interp = ptr(source.runtimeAddress + BigInt(layout.runtime.interpretersHead)) ?? 0n;
  for (let i = 0; interp !== 0n && i < MAX_INTERPRETERS; i++) {
    let t = ptr(interp + BigInt(layout.interp.threadsHead)) ?? 0n;
    for (let k = 0; t !== 0n && k < MAX_THREADS && !out.includes(t); k++) {
      out.push(t);
      t = ptr(t + BigInt(layout.tstate.next)) ?? 0n;
    }
    interp = ptr(interp + BigInt(layout.interp.next)) ?? 0n;
  }
  return out;
}

/**
 * A set of addresses that stays a list while small: a pass over an interpreter's threads
 * fills a few every tick, and a Set's clear() remakes its table each time.
 */
export class AddressSet {
  private readonly list: bigint[] = [];
  private set: Set<bigint> | null = null;

  clear(): void {
    this.list.length = 0;
    this.set = null;
  }

  has(a: bigint): boolean {
    if (this.set) return this.set.has(a);
    for (let i = 0; i < this.list.length; i++) if (this.list[i] === a) return true;
    return false;
  }

  add(a: bigint): void {
    if (this.set) this.set.add(a);
    else if (this.list.push(a) > 32) this.set = new Set(this.list);
  }
}
