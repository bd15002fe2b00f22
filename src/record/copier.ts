// The copier: copies the memory of every thread of every interpreter of a target as regions,
// and each code object the stacks reach, once.
//
// Per thread it copies the thread state (on 3.15 through the base frame, which lies past
// thread_state.size), the _PyCFrame on 3.11/3.12 when it is outside the thread state, the used
// part of each data-stack chunk, and every frame the chain reaches outside those (generator
// and coroutine frames inside their objects, entry frames on the C stack). Reads are whole
// structures. The copy does not judge the stack — the walk does, over exactly these bytes —
// but it notes whether the stack moved while it was copied (`moved`).
//
// Used once by takeSnapshot, and repeatedly by the sampler: code objects are then copied once
// per address, and copied again only when the address has been reused by another code object
// (src/record/code-cache.ts). They are checked inside the copy window of the sample that uses
// them, and what was read is kept only if the copy did not move: then the frames that refer to
// them were alive throughout, and so were their code objects.

import type { Layout } from '../layout/layout.js';
import { readPointer } from '../walk/region-memory.js';
import type { Region } from '../walk/types.js';
import { CodeCache, type CodeObjectSnapshot, type PendingCodes } from './code-cache.js';
import { readMany, type MemorySource, type PreparedRead } from './source.js';
import { ANCHOR_DEPTH, SteadyCopy, type SteadyHooks } from './steady-copy.js';
import type { Range } from './native.js';

export type { CodeObjectSnapshot } from './code-cache.js';

export interface ThreadSnapshot {
  interpreterId: bigint;
  threadStateAddress: bigint;
  /** pthread handle (thread_id) */
  threadId: bigint;
  /** kernel thread id (0 where the platform has none) */
  nativeThreadId: bigint;
  /** the thread state says it holds the GIL (3.15+; false where unknown) */
  holdsGil: boolean;
  /** the main thread of its interpreter (false where unknown) */
  mainThread: boolean;
  regions: Region[];
  /** what could not be copied (the walk will then reject the sample, with a reason) */
  errors: string[];
  /**
   * The stack moved while it was copied: read again at once, it was not the stack the copy
   * saw (see MemoryCopier.copyThread).
   */
  moved: boolean;
  /** time the copy of this thread took (the last attempt), µs */
  copyMicros: number;
  /** copies made of this thread for this sample (1 + retries used) */
  attempts: number;
  /** the last copy was made with the target stopped */
  stopped: boolean;
  /**
   * Code objects to record before this sample: seen for the first time, changed at their
   * address, or withdrawn (empty regions). Empty for a copy that moved.
   */
  codes: CodeObjectSnapshot[];
  /** one of `codes` replaces a code object recorded earlier at the same address */
  codeReplaced: boolean;
}

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

/** Stops and resumes the whole target (every thread), for copies that must not move. */
export interface Stopper {
  /**
   * Stop what must not run while thread `tid` (its kernel thread id; 0: unknown) is copied —
   * that thread, or the whole target; true when it was seen stopped.
   */
  stopThread(tid: number): boolean;
  /** stop every thread of the target; true when every thread was seen stopped */
  stopAll(): boolean;
  /** let everything stopped since the last resume run on */
  resume(): void;
  /** time the target has spent stopped by this stopper so far, µs */
  readonly stoppedMicros: number;
}

export interface CopierOptions {
  /** frames followed per thread while looking for frames outside the chunks */
  maxFrames?: number;
  /** default: `anchor` where the layout has the anchor and the source can write, else `reread` */
  consistency?: Consistency;
  /** copies of a thread tried again, at once, when the copy moved (default 1) */
  retries?: number;
  /** when a thread's copy still moved after the retries: stop the target and copy it (adaptive) */
  stopper?: Stopper;
  /** false: every copy by the general path, never a SteadyCopy (for comparing the two) */
  steady?: boolean;
  /** false: do not collect `used` (a recorder that never asks for it saves a set insert per frame) */
  collectUsed?: boolean;
}

// Bounds on what a (possibly corrupt) target can make the copy do.
const MAX_INTERPRETERS = 256;
const MAX_THREADS = 8192;
const MAX_CHUNKS = 4096;
const MAX_CHUNK_BYTES = 64 << 20;
const MAX_TSTATE_TAIL = 64 << 10;

const hex = (a: bigint): string => `0x${a.toString(16)}`;

/**
 * What an entry of an interpreter's thread list turned out to be when copied:
 * - `thread`: a thread state of that interpreter;
 * - `unborn`: a thread state not yet bound to its OS thread (CPython links a new thread's state
 *   into the list before the thread starts and fills in its ids): no thread yet, no frames;
 * - `stale`: not a thread state of that interpreter (unreadable, or its `interp` field says
 *   otherwise): the list was read while a thread that ended was being unlinked and freed.
 */
type ListEntry = 'thread' | 'unborn' | 'stale';

/** A thread's copy in progress: the snapshot, the code checks made in its window, and what it is. */
interface Attempt {
  snap: ThreadSnapshot;
  codes: PendingCodes;
  entry: ListEntry;
}

/** Times a thread list is walked again from its head after it led to a freed thread state. */
const LIST_RESTARTS = 2;

export class MemoryCopier {
  private readonly P: 4 | 8;
  private readonly layout: Layout;
  private readonly maxFrames: number;
  private readonly codes: CodeCache;
  /** what each thread's previous copy found (thread state address → cache) */
  private readonly threads = new Map<bigint, ThreadCache>();
  /** the interpreters the previous pass found */
  private knownInterps: bigint[] = [];
  /** [lo, hi) of an interpreter state: every field a pass reads from it, in one read */
  private readonly interpSpan: { lo: number; hi: number };
  /** code objects reached by the stacks of the last copyAll() */
  readonly used = new Set<bigint>();
  private readonly collectUsed: boolean;
  /**
   * The caller has stopped the target for this copyAll (blocking): every copy is of one
   * moment, whatever its check says.
   */
  private allStopped = false;
  /** this pass copies as blocking mode does (see copyAll) */
  private blocking = false;
  /**
   * The copy being processed was read while its thread was stopped, and the thread runs again
   * now: it may read nothing more (a read throws FROZEN; see stoppedCopy).
   */
  private frozen = false;
  /** how copies are checked; falls back to `reread` if writing the anchor fails */
  consistency: Consistency;
  /** why writing the anchor failed, if it did */
  writeFailure: string | null = null;
  private readonly retries: number;
  private readonly stopper: Stopper | null;
  /** sets a pass over the interpreter lists fills (kept, not made anew for every tick) */
  private readonly scratch = { interps: new AddressSet(), copied: new AddressSet(), visited: new AddressSet() };
  /** where the runtime's interpreter list starts */
  private headAt: Range | null = null;
  /** thread states whose anchor this copier has set (cleared by clearAnchors) */
  private readonly anchored = new Set<bigint>();
  /** copies can be made by a SteadyCopy where the plan holds (see steady-copy.ts) */
  private readonly steadyable: boolean;
  private pass: PassRead | null = null;
  /** copies made by steady copies so far (the rest by the general path) */
  steadyCopies = 0;

  constructor(
    private readonly source: MemorySource,
    options: CopierOptions = {},
  ) {
    this.layout = source.layout;
    this.P = this.layout.pointerSize;
    this.maxFrames = options.maxFrames ?? 8192;
    this.codes = new CodeCache(source, this.layout);
    const t = this.layout.tstate;
    const canAnchor = t.lastProfiledFrame !== null && typeof source.write === 'function';
    this.consistency = options.consistency ?? (canAnchor ? 'anchor' : 'reread');
    if (this.consistency === 'anchor' && !canAnchor) {
      throw new Error(
        t.lastProfiledFrame === null
          ? `${source.description}: this Python has no profiler anchor (CPython 3.15+); use the read-only check`
          : `${source.description}: the memory source cannot write the profiler anchor`,
      );
    }
    this.retries = options.retries ?? 1;
    this.collectUsed = options.collectUsed ?? true;
    this.steadyable =
      options.steady !== false && this.layout.interp.codeObjectGeneration !== null && t.cframeCurrentFrame === null && this.P === 8 && typeof source.prepareRead === 'function';
    this.stopper = options.stopper ?? null;
    const f = this.layout.interp;
    const fields: [number, number][] = [
      [f.id, 8],
      [f.next, this.P],
      [f.threadsHead, this.P],
    ];
    if (f.threadsMain !== null) fields.push([f.threadsMain, this.P]);
    if (f.gilHolder !== null) fields.push([f.gilHolder, this.P]);
    this.interpSpan = { lo: Math.min(...fields.map(([o]) => o)), hi: Math.max(...fields.map(([o, n]) => o + n)) };
  }

  /**
   * Copy every thread of every interpreter. `stopped`: the caller has stopped the target
   * (every thread) for the whole call, so no copy can have moved. `blocking`: every copy is
   * made exact — a thread that may be running Python is stopped for its copy; one that is not
   * (it released the GIL: waiting, or in a long C call) cannot change its frames, and its copy
   * is checked instead (and made stopped if it started to run meanwhile), which spares the
   * program the stop: a stop interrupts the system call the thread waits in.
   */
  copyAll(options: { stopped?: boolean; blocking?: boolean } = {}): ThreadSnapshot[] {
    this.allStopped = options.stopped ?? false;
    this.blocking = (options.blocking ?? false) && this.stopper !== null;
    try {
      return this.copyInterpreters();
    } finally {
      this.allStopped = false;
      this.blocking = false;
    }
  }

  private copyInterpreters(): ThreadSnapshot[] {
    const L = this.layout;
    const P = this.P;
    const source = this.source;
    if (this.used.size > 0) this.used.clear();
    const threads: ThreadSnapshot[] = [];
    const f = L.interp;
    const { lo, hi } = this.interpSpan;
    // Everything the previous pass read — the interpreter list, and each thread's copy and
    // its second reading — in one gathered read. What changed since is read on its own.
    const headAt = (this.headAt ??= { address: source.runtimeAddress + BigInt(L.runtime.interpretersHead), length: P });
    let prefetched: Map<bigint, Prefetched> | null = null;
    let got: (Uint8Array | null)[];
    const pass = this.steadyable && !this.allStopped && !this.blocking ? this.passRead(headAt) : null;
    if (pass && pass.read.read() === pass.read.length) {
      // every thread read last time has a steady copy: the list and all of them in one read
      got = pass.views;
      for (let k = 0; k < pass.tstates.length; k++) this.threads.get(pass.tstates[k]!)!.preread = pass.slices[k]!;
    } else {
      const plan: Range[] = [headAt];
      for (const i of this.knownInterps) plan.push({ address: i + BigInt(lo), length: hi - lo });
      const planned: { tstate: bigint; at: number; plan: Range[] }[] = [];
      for (const [tstate, cache] of this.threads) {
        // (a thread to be stopped first is read after its stop)
        if (!cache.live || (this.stopper && !this.allStopped && !this.blocking && cache.movedRate > STOP_FIRST_RATE)) continue;
        // (a thread with a steady copy reads on its own)
        if (this.inPass(cache)) continue;
        const p = this.planOf(tstate, cache.interp, cache, !this.allStopped);
        planned.push({ tstate, at: plan.length, plan: p });
        plan.push(...p);
      }
      got = readMany(source, plan);
      prefetched = new Map();
      for (const t of planned) prefetched.set(t.tstate, { plan: t.plan, got: got.slice(t.at, t.at + t.plan.length) });
    }
    for (const cache of this.threads.values()) cache.live = false;
    const known = this.knownInterps;
    const interpBlock = (i: bigint): Uint8Array => {
      const k = known.indexOf(i);
      return (k >= 0 ? got[1 + k] : null) ?? source.read(i + BigInt(lo), hi - lo);
    };
    let interp = got[0] ? readPointer(got[0], 0, P) : readPointer(source.read(headAt.address, P), 0, P);
    const seenInterps = this.scratch.interps;
    seenInterps.clear();
    this.knownInterps = [];
    for (let i = 0; interp !== 0n && i < MAX_INTERPRETERS && !seenInterps.has(interp); i++) {
      seenInterps.add(interp);
      this.knownInterps.push(interp);
      const block = interpBlock(interp);
      const interpreterId = BigInt.asIntN(64, readPointer(block, f.id - lo, 8));
      const main = f.threadsMain !== null ? readPointer(block, f.threadsMain - lo, P) : 0n;
      const gilHolder = f.gilHolder !== null ? readPointer(block, f.gilHolder - lo, P) : null;
      let tstate = readPointer(block, f.threadsHead - lo, P);
      // The list is read while threads start and end. A thread state that is not one (freed
      // under us) ends this pass over the list, which starts again from the head, passing over
      // the threads already copied.
      const copied = this.scratch.copied;
      const visited = this.scratch.visited;
      copied.clear();
      visited.clear();
      let restarts = 0;
      for (let t = 0; tstate !== 0n && t < MAX_THREADS * (LIST_RESTARTS + 1) && !visited.has(tstate); t++) {
        visited.add(tstate);
        let next: bigint | null;
        if (copied.has(tstate)) {
          const b = this.source.tryRead(tstate + BigInt(L.tstate.next), P);
          next = b ? readPointer(b, 0, P) : null;
        } else {
          const { snap, entry } = this.thread(interp, interpreterId, tstate, prefetched?.get(tstate), gilHolder);
          next = entry === 'stale' ? null : readPointer(snap.regions[0]!.bytes, L.tstate.next, P);
          if (entry === 'thread') {
            const cache = this.threads.get(tstate);
            if (cache) {
              cache.live = true;
              cache.interp = interp;
            }
            copied.add(tstate);
            snap.mainThread = main !== 0n && main === tstate;
            threads.push(snap);
          }
        }
        if (next === null) {
          if (restarts++ >= LIST_RESTARTS) break;
          const head = this.source.tryRead(interp + BigInt(f.threadsHead), P);
          if (!head) break;
          visited.clear();
          next = readPointer(head, 0, P);
        }
        tstate = next;
      }
      interp = readPointer(block, f.next - lo, P);
    }
    // threads that were not in any list this time are gone: forget them
    for (const [tstate, cache] of this.threads) {
      cache.preread = null;
      if (!cache.live) this.threads.delete(tstate);
    }
    return threads;
  }

  /** Is the thread's next copy read with the pass (see passRead)? */
  private inPass(cache: ThreadCache): boolean {
    return cache.live && cache.steady !== null && cache.steadySkip === 0 && !this.allStopped && !this.blocking && !(this.stopper && cache.movedRate > STOP_FIRST_RATE);
  }

  /**
   * One prepared read for a whole pass: the interpreter list, and every thread with a steady
   * copy (its readings, as the steady copy lays them out) — made again only when the
   * interpreters, the threads or a plan changed. Null when no thread has a steady copy.
   */
  private passRead(headAt: Range): PassRead | null {
    const p = this.pass;
    let ok = p !== null && p.interps.length === this.knownInterps.length && p.interps.every((i, k) => i === this.knownInterps[k]);
    let k = 0;
    for (const [tstate, cache] of this.threads) {
      if (!this.inPass(cache)) continue;
      if (ok && (k >= p!.tstates.length || p!.tstates[k] !== tstate || p!.steadies[k] !== cache.steady)) ok = false;
      k++;
    }
    if (ok && k === p!.tstates.length) return p;
    this.pass = null;
    if (k === 0) return null;
    const { lo, hi } = this.interpSpan;
    const ranges: Range[] = [headAt];
    for (const i of this.knownInterps) ranges.push({ address: i + BigInt(lo), length: hi - lo });
    const next: PassRead = { read: null!, interps: [...this.knownInterps], tstates: [], steadies: [], slices: [], views: [] };
    for (const [tstate, cache] of this.threads) {
      if (!this.inPass(cache)) continue;
      next.tstates.push(tstate);
      next.steadies.push(cache.steady!);
      ranges.push(...cache.steady!.ranges);
    }
    next.read = (this.source as MemorySource & { prepareRead(r: readonly Range[]): PreparedRead }).prepareRead(ranges);
    const bytes = next.read.bytes;
    let o = 0;
    for (let r = 0; r < 1 + this.knownInterps.length; r++) {
      next.views.push(bytes.subarray(o, o + ranges[r]!.length));
      o += ranges[r]!.length;
    }
    for (const s of next.steadies) {
      next.slices.push(bytes.subarray(o, o + s.length));
      o += s.length;
    }
    this.pass = next;
    return next;
  }

  /** The copy recorded for a code object (null: the address is not a known code object). */
  codeObject(address: bigint): CodeObjectSnapshot | null {
    return this.codes.snapshot(address);
  }

  /**
   * Copy one thread: tried again at once if the copy moved, and — with a stopper — copied with
   * the target stopped if it still moves. A thread whose copies keep moving (adaptive), or any
   * thread that may be running Python (blocking), is stopped first.
   */
  private thread(interp: bigint, interpreterId: bigint, tstate: bigint, prefetched?: Prefetched, gilHolder: bigint | null = null): { snap: ThreadSnapshot; entry: ListEntry } {
    const cache = this.threads.get(tstate);
    if (cache && (this.blocking || this.stopsFirst(cache)) && this.mayRunPython(tstate, prefetched, gilHolder)) {
      // Stopped first, the copy is of the sample's own moment. (Adaptive: a thread whose copies
      // moved lately runs call-heavy code; a copy that moved would be made again with it
      // stopped a few hundred microseconds after the sample's moment, by when it is likely
      // somewhere else — more often in a long-lived frame than in a short one.)
      const attempt = this.stoppedCopy(interp, interpreterId, tstate, cache.nativeThreadId);
      if (attempt.entry !== 'thread') return attempt;
      return this.finish(attempt, 1);
    }
    let attempt = (this.allStopped ? null : this.steadyCopy(interp, interpreterId, tstate)) ?? this.copyThread(interp, interpreterId, tstate, this.allStopped, prefetched);
    if (attempt.entry !== 'thread') return attempt;
    let attempts = 1;
    if (this.allStopped) this.settle(attempt.snap);
    else if (!this.blocking) this.learn(tstate, attempt.snap.moved);
    while (attempt.snap.moved && attempts <= this.retries) {
      attempt = this.steadyCopy(interp, interpreterId, tstate) ?? this.copyThread(interp, interpreterId, tstate, false);
      attempts++;
    }
    if (attempt.snap.moved && this.stopper) {
      attempt = this.stoppedCopy(interp, interpreterId, tstate, attempt.snap.nativeThreadId);
      attempts++;
    }
    return this.finish(attempt, attempts);
  }

  /**
   * A copy made with the thread stopped — for as short a time as can be: the thread runs on as
   * soon as its memory is read (thread state, chunks, frames outside them), and the copy is
   * processed meanwhile (code checks with what was read, masking). Only if a code object needs
   * reading (new, or changed at its address) is the thread stopped again for a whole copy: a
   * code object must be read while the frame that refers to it is alive.
   */
  private stoppedCopy(interp: bigint, interpreterId: bigint, tstate: bigint, tid: bigint): Attempt {
    const stopper = this.stopper!;
    let stopped = false;
    let held = false;
    const release = (): void => {
      if (!held) return;
      held = false;
      stopper.resume();
      this.frozen = true;
    };
    let attempt: Attempt | null = null;
    try {
      stopped = stopper.stopThread(Number(tid));
      held = true;
      // not stopped (it could not be): a copy checked as usual
      if (!stopped) {
        release();
        this.frozen = false;
        return this.copyThread(interp, interpreterId, tstate, false);
      }
      // the steady copy where its plan holds: one read, and the thread runs on
      attempt = this.steadyCopy(interp, interpreterId, tstate);
      if (attempt) release();
      else attempt = this.copyThread(interp, interpreterId, tstate, true, undefined, false, release);
    } catch (e) {
      if (e !== FROZEN) throw e;
    } finally {
      this.frozen = false;
      if (held) stopper.resume();
    }
    if (!attempt) {
      try {
        stopped = stopper.stopThread(Number(tid));
        attempt = this.copyThread(interp, interpreterId, tstate, stopped);
      } finally {
        stopper.resume();
      }
    }
    if (stopped && attempt.entry === 'thread') this.settle(attempt.snap);
    return attempt;
  }

  /**
   * The copy made by the thread's SteadyCopy, when it has one that holds (see steady-copy.ts);
   * null: the general path makes it. A SteadyCopy that gave up is dropped, and tried again
   * after a number of general copies that doubles with each failure in a row.
   */
  private steadyCopy(interp: bigint, interpreterId: bigint, tstate: bigint): Attempt | null {
    if (!this.steadyable || this.frozen) return null;
    const cache = this.threads.get(tstate);
    if (!cache || cache.chunks.length === 0) return null;
    // read with the pass (once: a second copy of the thread in this pass reads on its own)
    let preread = cache.preread;
    cache.preread = null;
    if (cache.steadySkip > 0) {
      cache.steadySkip--;
      return null;
    }
    const started = performance.now();
    let steady = cache.steady;
    if (!steady || !steady.matches(cache, interp, this.consistency === 'anchor')) {
      const plan = { tstateLength: cache.tstateLength, chunks: cache.chunks, outside: cache.outside };
      const source = this.source as MemorySource & { prepareRead(r: readonly Range[]): PreparedRead };
      steady = cache.steady = new SteadyCopy(source, this.layout, tstate, interp, interp + BigInt(this.layout.interp.codeObjectGeneration!), plan, this.consistency === 'anchor', this.maxFrames);
      preread = null; // read for the steady copy it replaces
    }
    cache.steadyHooks ??= this.steadyHooks(tstate);
    const got = steady.copy(cache.steadyHooks, preread);
    if (!got) {
      cache.steady = null;
      cache.steadyFailures = Math.min(cache.steadyFailures + 1, 10);
      cache.steadySkip = 1 << (cache.steadyFailures - 1);
      return null;
    }
    cache.steadyFailures = 0;
    this.steadyCopies++;
    if (this.collectUsed) for (const c of got.codes) this.used.add(c);
    const snap: ThreadSnapshot = {
      interpreterId,
      threadStateAddress: tstate,
      threadId: got.threadId,
      nativeThreadId: got.nativeThreadId,
      holdsGil: got.holdsGil,
      mainThread: false,
      regions: got.regions,
      errors: [],
      moved: got.moved,
      copyMicros: Math.round((performance.now() - started) * 1000),
      attempts: 1,
      stopped: false,
      codes: [],
      codeReplaced: false,
    };
    return { snap, codes: EMPTY_CODES, entry: 'thread' };
  }

  /** What a thread's steady copy asks of the copier (made once per thread). */
  private steadyHooks(tstate: bigint): SteadyHooks {
    return {
      confirmed: (a, interp, g) => this.codes.confirmed(a, interp, g),
      placeAnchor: (target) => this.writeAnchor(tstate, target),
    };
  }

  /** A read of the target, inside a copy (none while `frozen`). */
  private tryRead(address: bigint, length: number): Uint8Array | null {
    if (this.frozen) throw FROZEN;
    return this.source.tryRead(address, length);
  }

  /** Keep the code checks of a copy that holds. */
  private finish(attempt: Attempt, attempts: number): { snap: ThreadSnapshot; entry: ListEntry } {
    const snap = attempt.snap;
    snap.attempts = attempts;
    // what was read of code objects in a window that moved may be a successor's or garbage
    if (!snap.moved && attempt.codes.size > 0) {
      const { fresh, replaced } = this.codes.commit(attempt.codes);
      snap.codes = fresh;
      snap.codeReplaced = replaced;
    }
    return { snap, entry: attempt.entry };
  }

  /**
   * A copy made with every thread stopped: nothing ran while it was made (the anchor check
   * may still say "moved" when the current frame is an entry frame: that proves nothing
   * either way here).
   */
  private settle(snap: ThreadSnapshot): void {
    snap.moved = false;
    snap.stopped = true;
  }

  /** Write 0 into the anchor of every thread this copier anchored that still exists. */
  clearAnchors(): void {
    const lpf = this.layout.tstate.lastProfiledFrame;
    if (this.anchored.size === 0 || lpf === null || !this.source.write) return;
    // only thread states still in the interpreters' lists: an exited thread's memory may
    // already belong to something else
    for (const tstate of this.liveThreadStates()) {
      if (!this.anchored.has(tstate)) continue;
      try {
        this.source.write(tstate + BigInt(lpf), new Uint8Array(this.P));
      } catch {
        // the thread or the process is gone: nothing left to clear
      }
    }
    this.anchored.clear();
  }

  /** Addresses of every thread state of every interpreter, now. */
  private liveThreadStates(): bigint[] {
    const L = this.layout;
    const P = this.P;
    const out: bigint[] = [];
    const ptr = (a: bigint): bigint | null => {
      const b = this.source.tryRead(a, P);
      return b ? readPointer(b, 0, P) : null;
    };
    let interp = ptr(this.source.runtimeAddress + BigInt(L.runtime.interpretersHead)) ?? 0n;
    for (let i = 0; interp !== 0n && i < MAX_INTERPRETERS; i++) {
      let t = ptr(interp + BigInt(L.interp.threadsHead)) ?? 0n;
      for (let k = 0; t !== 0n && k < MAX_THREADS && !out.includes(t); k++) {
        out.push(t);
        t = ptr(t + BigInt(L.tstate.next)) ?? 0n;
      }
      interp = ptr(interp + BigInt(L.interp.next)) ?? 0n;
    }
    return out;
  }

  /**
   * One copy of a thread. Everything the previous copy of this thread needed — the thread state,
   * the data-stack chunks, the frames outside them, the _PyCFrame on 3.11/3.12, the count of
   * code-object deaths — is read in one gathered read, and (unless the target is stopped) read
   * again at once in the same call. The copy is the first half; it did not move if the second
   * half shows the same stack: the same current frame, data-stack top and chunk, and every frame
   * of the chain with the same caller, code and owner (and, below the innermost one, the same
   * instruction) — except that frames at and below the profiler anchor (3.15+) are proven
   * unchanged by the anchor itself. The window a change can slip through is one system call
   * (a few microseconds), and a change confined to the innermost frames that undoes itself
   * within it can only show a stack the program had. What the previous copy did not foresee
   * (a deeper stack, a new chunk, a code object to check) is read after, and then all of it is
   * read again and compared.
   */
  private copyThread(
    interp: bigint,
    interpreterId: bigint,
    tstate: bigint,
    stopped: boolean,
    prefetched?: Prefetched,
    replanned = false,
    /** called once the target's memory has been read, before the code checks (see stoppedCopy) */
    released?: () => void,
  ): Attempt {
    const L = this.layout;
    const P = this.P;
    const started = performance.now();
    const errors: string[] = [];
    const regions: Region[] = [];
    const snap: ThreadSnapshot = {
      interpreterId,
      threadStateAddress: tstate,
      threadId: 0n,
      nativeThreadId: 0n,
      holdsGil: false,
      mainThread: false,
      regions,
      errors,
      moved: false,
      copyMicros: 0,
      attempts: 1,
      stopped: false,
      codes: [],
      codeReplaced: false,
    };
    const attempt: Attempt = { snap, codes: new Map(), entry: 'thread' };
    const cache = this.threadCache(tstate);
    const checking = !stopped;

    // the first read, and (checking) the same ranges again: read now, or with the others
    // (prefetched) when they were planned alike
    const n = this.planLength(cache);
    let whole: Range[];
    let got: (Uint8Array | null)[];
    const codeAt = (checking ? 2 : 1) * n;
    if (prefetched && prefetched.plan.length === codeAt + this.codeRanges(cache).length) {
      whole = prefetched.plan;
      got = prefetched.got;
    } else {
      whole = this.planOf(tstate, interp, cache, checking);
      got = this.frozen ? frozenRead() : readMany(this.source, whole);
    }
    const plan = whole.slice(0, n);
    const again = checking ? got.slice(n, 2 * n) : null;
    const codeRanges = whole.slice(codeAt);
    const codeData = got.slice(codeAt);
    const genAt = this.generationRange(interp);
    const cframeAt = genAt ? 2 : 1;
    const chunksAt = cframeAt + (cache.cframe !== 0n && L.tstate.cframeCurrentFrame !== null ? 1 : 0);
    const outsideAt = chunksAt + cache.chunks.length;

    let ts = got[0] ?? null;
    let extra = 0; // reads after the first one
    if (!ts && cache.tstateLength !== L.tstate.size) {
      extra++;
      ts = this.tryRead(tstate, L.tstate.size);
    }
    if (!ts || readPointer(ts, L.tstate.interp, P) !== interp) {
      attempt.entry = 'stale';
      return attempt;
    }
    const generation = genAt ? u64(got[1]) : null;
    // 3.15: the base frame sits inside _PyThreadStateImpl, past thread_state.size; copy the
    // thread state through its end in the same region
    if (L.tstate.baseFrame !== null) {
      const base = readPointer(ts, L.tstate.baseFrame, P);
      const end = base + BigInt(L.frame.size);
      if (base >= tstate + BigInt(L.tstate.size) && end - tstate <= BigInt(L.tstate.size + MAX_TSTATE_TAIL)) {
        const need = Number(end - tstate);
        if (ts.length < need) {
          extra++;
          const whole = this.tryRead(tstate, need);
          if (whole) ts = whole;
          else errors.push(`base frame ${hex(base)}: not readable`);
        }
        cache.tstateLength = need;
      }
    }
    regions.push({ address: tstate, bytes: ts });
    snap.threadId = readPointer(ts, L.tstate.threadId, P);
    snap.nativeThreadId = readPointer(ts, L.tstate.nativeThreadId, P);
    if (L.tstate.holdsGil !== null) snap.holdsGil = new DataView(ts.buffer, ts.byteOffset).getInt32(L.tstate.holdsGil, true) !== 0;
    const mem = new GrowingMemory(regions, P);

    const cframe = L.tstate.cframeCurrentFrame !== null ? readPointer(ts, L.tstate.currentFrame, P) : 0n;
    let frame = readPointer(ts, L.tstate.currentFrame, P);
    if (L.tstate.cframeCurrentFrame !== null) {
      // 3.11/3.12: tstate->cframe->current_frame; root_cframe is inside the thread state, a
      // running eval loop's _PyCFrame is on the C stack
      frame = 0n;
      cache.cframe = cframe;
      if (cframe !== 0n) {
        const field = cframe + BigInt(L.tstate.cframeCurrentFrame);
        if (!mem.contains(field, P)) {
          let bytes = chunksAt > cframeAt && plan[cframeAt]!.address === cframe ? got[cframeAt]! : null;
          if (!bytes) {
            extra++;
            bytes = this.tryRead(cframe, L.tstate.cframeCurrentFrame + P);
          }
          if (bytes) mem.add({ address: cframe, bytes });
          else errors.push(`cframe ${hex(cframe)}: not readable`);
        }
        frame = mem.ptr(field) ?? 0n;
      }
    }

    const base = L.tstate.baseFrame !== null ? readPointer(ts, L.tstate.baseFrame, P) : 0n;
    if ((frame === 0n || frame === base) && (snap.threadId === 0n || (this.source.nativeThreadIds === true && snap.nativeThreadId === 0n))) {
      attempt.entry = 'unborn';
      return attempt;
    }
    cache.nativeThreadId = snap.nativeThreadId;

    const guessedOutside = new Map<bigint, Uint8Array>();
    cache.outside.forEach((f, i) => {
      const b = got[outsideAt + i];
      if (b) guessedOutside.set(f, b);
    });
    extra += this.copyChunks(ts, mem, errors, cache, got.slice(chunksAt, outsideAt));
    const chain = this.followFrames(frame, base, mem, errors, guessedOutside);
    extra += chain.reads;
    // (the base frame lies in the thread state's own read: not read again on its own)
    const tsEnd = tstate + BigInt(ts.length);
    cache.outside = chain.frames.filter((f) => !mem.inChunk(f, L.frame.size) && !(f >= tstate && f + BigInt(L.frame.size) <= tsEnd));
    // the chain's code objects, inside the window (see code-cache.ts)
    const codes = this.codesOf(chain.frames, mem);
    if (this.collectUsed) for (const c of codes) this.used.add(c);
    released?.();
    const before = attempt.codes.size;
    this.codes.check(codes, interp, generation, attempt.codes, (a, len) => pick(codeRanges, codeData, a, len), this.frozen ? frozenRead : null);
    // the code objects it used lately, most recent first, to read with the next copy
    cache.codes = [...new Set([...codes, ...cache.codes])].slice(0, RECENT_CODES);
    // code objects checked with what the first read brought along cost no read of their own
    const codeReads = attempt.codes.size - before;
    if (codeReads > 0 && codes.some((c) => !codeRanges.some((r) => r.address === c))) extra += codeReads;

    if (checking) {
      // the first read did not bring everything (a deeper stack, a new chunk or code object):
      // once, copy again with the plan this copy learned, for a window of one call again
      if (extra > 0 && !replanned) return this.copyThread(interp, interpreterId, tstate, stopped, undefined, true);
      const anchor = this.consistency === 'anchor' ? readPointer(ts, L.tstate.lastProfiledFrame!, P) : 0n;
      if (extra === 0) {
        snap.moved = !this.unchanged(tstate, interp, ts, cframe, frame, chain.frames, mem, anchor, generation, (a, n) => pick(plan, again!, a, n));
      } else {
        // read again what the copy ended up using, and compare
        const used: Range[] = [{ address: tstate, length: ts.length }];
        if (genAt) used.push(genAt);
        for (const r of mem.all()) if (r.address !== tstate) used.push({ address: r.address, length: r.bytes.length });
        const second = readMany(this.source, used);
        snap.moved = !this.unchanged(tstate, interp, ts, cframe, frame, chain.frames, mem, anchor, generation, (a, n) => pick(used, second, a, n));
      }
      // Without the death counter (3.11–3.13), a code object read in the window may still be
      // of a function dropped and compiled again at the same address within it (the compare
      // cannot see a frame popped and pushed again there): a copy that found a code object
      // new or changed is made again with the target stopped, where it can be.
      if (!snap.moved && generation === null && codeReads > 0 && this.stopper && this.codes.changes(attempt.codes)) snap.moved = true;
      if (!snap.moved && this.consistency === 'anchor') this.placeAnchor(tstate, anchor, chain.frames, mem);
    }
    maskChunks(mem, chain.frames, L.frame.size, L.chunk.data);
    snap.copyMicros = Math.round((performance.now() - started) * 1000);
    return attempt;
  }

  /**
   * Does the second reading (`now(address, length)`: bytes read after the copy, null if not
   * read) show the stack the copy saw? Frames at and below a profiler anchor that did not move
   * are proven unchanged by it; every other frame of the chain must show the same caller, code
   * and owner — and, below the innermost one, the same instruction (a frame popped and called
   * again comes back at its first instruction, not at the call it was in).
   */
  private unchanged(
    tstate: bigint,
    interp: bigint,
    ts: Uint8Array,
    cframe: bigint,
    frame: bigint,
    chain: readonly bigint[],
    mem: GrowingMemory,
    anchor: bigint,
    generation: bigint | null,
    now: (address: bigint, length: number) => Uint8Array | null,
  ): boolean {
    const L = this.layout;
    const P = this.P;
    // the thread state: the same current frame (or _PyCFrame), top, chunk and anchor
    const fields = [L.tstate.currentFrame, L.tstate.datastackTop, L.tstate.datastackChunk];
    if (this.consistency === 'anchor') fields.push(L.tstate.lastProfiledFrame!);
    for (const off of fields) {
      const b = now(tstate + BigInt(off), P);
      if (!b || readPointer(b, 0, P) !== readPointer(ts, off, P)) return false;
    }
    if (L.tstate.cframeCurrentFrame !== null && cframe !== 0n) {
      const b = now(cframe + BigInt(L.tstate.cframeCurrentFrame), P);
      if (!b || readPointer(b, 0, P) !== frame) return false;
    }
    if (generation !== null) {
      const at = this.generationRange(interp)!;
      if (u64(now(at.address, at.length)) !== generation) return false;
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
   * Leave the profiler anchor where it will vouch for the next copy of this thread: on the
   * innermost frame's caller (the innermost frame comes and goes; the anchor would follow it
   * down anyway), unless it already sits on a Python frame of the chain near the top. The
   * write is outside any copy's window; the next copy reads where it is.
   */
  private placeAnchor(tstate: bigint, anchor: bigint, chain: readonly bigint[], mem: GrowingMemory): void {
    const L = this.layout;
    const isPython = (f: bigint): boolean => {
      const owner = mem.bytes(f + BigInt(L.frame.owner), 1)?.[0];
      return owner === L.owners.thread || owner === L.owners.generator;
    };
    const j = anchor === 0n ? -1 : chain.indexOf(anchor);
    if (j >= 0 && j <= ANCHOR_DEPTH && isPython(anchor)) return;
    const target = chain.slice(1).find(isPython) ?? (chain[0] !== undefined && isPython(chain[0]) ? chain[0] : undefined);
    if (target !== undefined) this.writeAnchor(tstate, target);
  }

  /** Set the thread's profiler anchor to `target`; on failure, check copies by comparing alone. */
  private writeAnchor(tstate: bigint, target: bigint): void {
    // little-endian: a 4-byte pointer is the low half of the 8-byte word
    const word = new Uint8Array(8);
    new DataView(word.buffer).setBigUint64(0, target, true);
    try {
      this.source.write!(tstate + BigInt(this.layout.tstate.lastProfiledFrame!), word.subarray(0, this.P));
      this.anchored.add(tstate);
    } catch (e) {
      // the target cannot be written after all: check copies by comparing alone from now on
      this.consistency = 'reread';
      this.writeFailure = (e as Error).message;
    }
  }

  /** The code objects of the chain's Python frames. */
  private codesOf(chain: readonly bigint[], mem: GrowingMemory): bigint[] {
    const L = this.layout;
    const tag = BigInt(L.executableTagMask);
    const out: bigint[] = [];
    for (const f of chain) {
      const bytes = mem.bytes(f, L.frame.size);
      if (!bytes) continue;
      const owner = bytes[L.frame.owner]!;
      if (owner !== L.owners.thread && owner !== L.owners.generator) continue;
      const code = readPointer(bytes, L.frame.executable, this.P) & ~tag;
      if (code !== 0n) out.push(code);
    }
    return out;
  }

  /**
   * The used part of every data-stack chunk: [chunk, datastack_top) for the newest, [chunk,
   * data + top slots) below. `guessed` holds what the first read got at the chunks the previous
   * copy found (in cache.chunks' order); a chunk not guessed, or guessed too short, is read now.
   * Returns how many reads that took, and leaves in cache.chunks what the next copy should read.
   */
  private copyChunks(ts: Uint8Array, mem: GrowingMemory, errors: string[], cache: ThreadCache, guessed: (Uint8Array | null)[]): number {
    const L = this.layout;
    const P = this.P;
    let chunk = readPointer(ts, L.tstate.datastackChunk, P);
    const top = readPointer(ts, L.tstate.datastackTop, P);
    const header = L.chunk.data;
    const found: ChunkGuess[] = [];
    let reads = 0;
    const read = (address: bigint, length: number): Uint8Array | null => {
      reads++;
      return this.tryRead(address, length);
    };
    for (let i = 0; chunk !== 0n && i < MAX_CHUNKS; i++) {
      const guess = cache.chunks[i]?.address === chunk ? (guessed[i] ?? null) : null;
      let used: number;
      let bytes: Uint8Array | null;
      if (i === 0 && top > chunk && top - chunk <= BigInt(MAX_CHUNK_BYTES)) {
        used = Number(top - chunk);
        bytes = guess && guess.length >= used ? guess.subarray(0, used) : read(chunk, used);
      } else {
        // an older chunk: its used part (data + top slots) is frozen while newer ones are in
        // use; its header says how long it is
        const head = guess && guess.length >= header ? guess : read(chunk, header);
        if (!head) {
          errors.push(`data-stack chunk ${hex(chunk)}: not readable`);
          break;
        }
        const slots = readPointer(head, L.chunk.top, P);
        const size = readPointer(head, L.chunk.size, P);
        const u = BigInt(header) + slots * BigInt(P);
        if (u > size || u > BigInt(MAX_CHUNK_BYTES)) {
          errors.push(`data-stack chunk ${hex(chunk)}: top ${slots} is past its size ${size}`);
          mem.add({ address: chunk, bytes: head.subarray(0, header) }, true);
          chunk = readPointer(head, L.chunk.previous, P);
          continue;
        }
        used = Number(u);
        bytes = used <= head.length ? head.subarray(0, used) : read(chunk, used);
      }
      if (!bytes) {
        errors.push(`data-stack chunk ${hex(chunk)} (${used} bytes): not readable`);
        break;
      }
      // the newest chunk grows and shrinks: read a little more next time, within its size
      const size = Number(readPointer(bytes, L.chunk.size, P));
      // (the newest chunk's read keeps its length while the stack moves within the slack, so
      // that the plan stays the same)
      const had = cache.chunks[i];
      const keep = i === 0 && had?.address === chunk && had.used >= used && had.used - used <= 2 * NEWEST_CHUNK_SLACK;
      found.push({ address: chunk, used: keep ? had.used : i === 0 ? Math.min(used + NEWEST_CHUNK_SLACK, Number.isSafeInteger(size) && size >= used ? size : used) : used });
      mem.add({ address: chunk, bytes }, true);
      chunk = readPointer(bytes, L.chunk.previous, P);
    }
    cache.chunks = found;
    return reads;
  }

  /**
   * Follow the chain from the current frame, copying each frame that is not in memory yet
   * (generator/coroutine frames, entry frames on the C stack); returns the chain and how many
   * reads that took.
   */
  private followFrames(frame: bigint, base: bigint, mem: GrowingMemory, errors: string[], guessed: Map<bigint, Uint8Array>): { frames: bigint[]; reads: number } {
    const L = this.layout;
    const P = this.P;
    const size = L.frame.size;
    const seen = new Set<bigint>();
    const frames: bigint[] = [];
    let reads = 0;
    for (let depth = 0; frame !== 0n && depth < this.maxFrames && !seen.has(frame); depth++) {
      seen.add(frame);
      frames.push(frame);
      let bytes = mem.bytes(frame, size);
      if (!bytes) {
        let copy = guessed.get(frame) ?? null;
        if (!copy) {
          reads++;
          copy = this.tryRead(frame, size);
        }
        if (!copy) {
          errors.push(`frame ${hex(frame)}: not readable`);
          break;
        }
        mem.add({ address: frame, bytes: copy });
        bytes = copy;
      }
      if (frame === base) break;
      frame = readPointer(bytes, L.frame.previous, P);
    }
    return { frames, reads };
  }

  /** What this copier remembers of a thread between copies. */
  /**
   * Should this thread's next copy be made with it stopped first? Where copies can be stopped
   * (adaptive), when its recent optimistic copies moved more often than STOP_FIRST_RATE — but
   * one copy in EXPLORE_EVERY is still tried optimistically, to notice when it calms down.
   */
  private stopsFirst(cache: ThreadCache): boolean {
    if (!this.stopper || this.allStopped || cache.movedRate <= STOP_FIRST_RATE || cache.nativeThreadId === 0n) return false;
    if (++cache.stoppedFirst % EXPLORE_EVERY === 0) return false;
    return true;
  }

  /**
   * May the thread be running Python code (it holds the GIL, or that cannot be told)? Only
   * such a thread can change its frames; the others wait for the GIL first. Told by the
   * thread state's holds_gil (3.15+, as the pass's first read found it) or the interpreter's
   * GIL holder (3.13+). A wrong answer costs a stop or a check, not a wrong copy: a copy that
   * is not stopped is checked.
   */
  private mayRunPython(tstate: bigint, prefetched: Prefetched | undefined, gilHolder: bigint | null): boolean {
    const off = this.layout.tstate.holdsGil;
    const ts = prefetched?.got[0];
    if (off !== null && ts && ts.length >= off + 4) return new DataView(ts.buffer, ts.byteOffset + off, 4).getInt32(0, true) !== 0;
    if (gilHolder !== null) return gilHolder === tstate;
    return true;
  }

  /** Fold an optimistic copy's outcome into the thread's recent rate of copies that moved. */
  private learn(tstate: bigint, moved: boolean): void {
    const cache = this.threads.get(tstate);
    if (!cache) return;
    // a copy tried while the thread is stopped first (one in EXPLORE_EVERY) stands for the
    // EXPLORE_EVERY copies it stands in for
    const weight = cache.movedRate > STOP_FIRST_RATE ? EXPLORE_WEIGHT : MOVED_RATE_WEIGHT;
    cache.movedRate += ((moved ? 1 : 0) - cache.movedRate) * weight;
  }

  private threadCache(tstate: bigint): ThreadCache {
    let c = this.threads.get(tstate);
    if (!c) {
      c = { tstateLength: this.layout.tstate.size, chunks: [], outside: [], codes: [], cframe: 0n, nativeThreadId: 0n, interp: 0n, live: false, movedRate: 0, stoppedFirst: 0, steady: null, steadySkip: 0, steadyFailures: 0, preread: null, steadyHooks: null };
      this.threads.set(tstate, c);
    }
    return c;
  }

  /**
   * The ranges a copy of a thread reads first: its thread state, the count of code-object
   * deaths, the _PyCFrame (3.11/3.12), the data-stack chunks and the frames outside them,
   * as its previous copy found them — and, when the copy is to be checked, all of it again.
   */
  private planOf(tstate: bigint, interp: bigint, cache: ThreadCache, checking: boolean): Range[] {
    const L = this.layout;
    const plan: Range[] = [{ address: tstate, length: cache.tstateLength }];
    const genAt = this.generationRange(interp);
    if (genAt) plan.push(genAt);
    if (cache.cframe !== 0n && L.tstate.cframeCurrentFrame !== null) plan.push({ address: cache.cframe, length: L.tstate.cframeCurrentFrame + this.P });
    for (const c of cache.chunks) plan.push({ address: c.address, length: c.used });
    for (const f of cache.outside) plan.push({ address: f, length: L.frame.size });
    return [...plan, ...(checking ? plan : []), ...this.codeRanges(cache)];
  }

  /**
   * Without a count of code-object deaths (3.11–3.13) every copy checks its code objects
   * again: those the previous copy of the thread used are read with the first read.
   */
  private codeRanges(cache: ThreadCache): Range[] {
    return this.layout.interp.codeObjectGeneration === null ? this.codes.checkRanges(cache.codes) : [];
  }

  private planLength(cache: ThreadCache): number {
    return 1 + (this.layout.interp.codeObjectGeneration !== null ? 1 : 0) + (cache.cframe !== 0n && this.layout.tstate.cframeCurrentFrame !== null ? 1 : 0) + cache.chunks.length + cache.outside.length;
  }

  /** Where the interpreter's code-object death count is (null: this Python has none). */
  private generationRange(interp: bigint): Range | null {
    const off = this.layout.interp.codeObjectGeneration;
    return off === null ? null : { address: interp + BigInt(off), length: 8 };
  }
}

/**
 * A set of addresses that stays a list while small: a pass over an interpreter's threads
 * fills a few every tick, and a Set's clear() remakes its table each time.
 */
class AddressSet {
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

/** Thrown by a read of a copy processed after its stopped thread was let go (see stoppedCopy). */
const FROZEN = new Error('the copy needs a read while its thread runs');
const frozenRead = (): never => {
  throw FROZEN;
};

/** A data-stack chunk and how many bytes to read of it. */
interface ChunkGuess {
  address: bigint;
  used: number;
}

/** What the copier keeps of a thread between copies, so that the next one reads at once what it needs. */
interface ThreadCache {
  /** bytes of the thread state to read (through the base frame on 3.15) */
  tstateLength: number;
  /** the data-stack chunks, newest first, with the lengths to read */
  chunks: ChunkGuess[];
  /** the frames of the chain outside the chunks (generator frames, entry frames on the C stack) */
  outside: bigint[];
  /** the code objects of the chain */
  codes: bigint[];
  /** 3.11/3.12: the _PyCFrame holding the current frame pointer */
  cframe: bigint;
  nativeThreadId: bigint;
  /** its interpreter */
  interp: bigint;
  /** it was in its interpreter's thread list at the last pass: the next pass reads it at once */
  live: boolean;
  /** share of its recent optimistic copies that moved (an exponential moving average) */
  movedRate: number;
  /** copies made stopped first, in a row */
  stoppedFirst: number;
  /** the thread's steady copy (see steady-copy.ts), null until one is made */
  steady: SteadyCopy | null;
  /** general copies to make before a steady copy is tried again */
  steadySkip: number;
  /** steady copies that gave up in a row */
  steadyFailures: number;
  /** the steady copy's bytes, read with this pass (see passRead) */
  preread: Uint8Array | null;
  /** what its steady copy asks of the copier */
  steadyHooks: SteadyHooks | null;
}

/** See MemoryCopier.passRead. */
interface PassRead {
  read: PreparedRead;
  interps: bigint[];
  tstates: bigint[];
  steadies: SteadyCopy[];
  /** each steady copy's part of the read */
  slices: Uint8Array[];
  /** the list head, then each interpreter's fields */
  views: Uint8Array[];
}

/** A thread's first read, made together with the other threads' (see copyInterpreters). */
interface Prefetched {
  plan: Range[];
  got: (Uint8Array | null)[];
}

/** Bytes read past the top of the newest chunk, for a stack a little deeper at the next copy. */
const NEWEST_CHUNK_SLACK = 512;

/**
 * A thread whose optimistic copies moved more often than this is copied stopped first (see
 * stopsFirst); MOVED_RATE_WEIGHT is the weight of each new outcome in the moving average, and
 * one copy in EXPLORE_EVERY of such a thread is still tried optimistically.
 */
const STOP_FIRST_RATE = 0.1;
const MOVED_RATE_WEIGHT = 0.05;

const EXPLORE_EVERY = 16;
const EXPLORE_WEIGHT = 1 - (1 - MOVED_RATE_WEIGHT) ** EXPLORE_EVERY;

/** the code checks of a steady copy: none (every code object was confirmed already) */
const EMPTY_CODES: PendingCodes = new Map();

/** Code objects of a thread read with each copy where there is no count of their deaths (3.11–3.13). */
const RECENT_CODES = 64;

/** The bytes at [address, address+length) from a gathered read, or null if no range held them. */
function pick(ranges: readonly Range[], results: readonly (Uint8Array | null)[], address: bigint, length: number): Uint8Array | null {
  for (let i = 0; i < ranges.length; i++) {
    const r = ranges[i]!;
    const b = results[i];
    if (!b || address < r.address) continue;
    const off = address - r.address;
    if (off + BigInt(length) <= BigInt(b.length)) return b.subarray(Number(off), Number(off) + length);
  }
  return null;
}

/**
 * Zero what a sample does not need of its data-stack chunks: everything but each chunk's header
 * and the headers of the chain's frames — the frames' local variables and value stacks, and
 * the frames of other moments above and between. The walk reads nothing else, and consecutive
 * samples of a thread then differ only where the stack did (a loop counter in a local would
 * otherwise make every sample's chunk differ from the last).
 */
function maskChunks(mem: GrowingMemory, chain: readonly bigint[], frameSize: number, chunkHeader: number): void {
  for (const r of mem.chunks) {
    const end = r.address + BigInt(r.bytes.length);
    const keep = chain.filter((f) => f >= r.address && f < end).map((f) => Number(f - r.address)).sort((a, b) => a - b);
    let from = Math.min(chunkHeader, r.bytes.length);
    for (const at of keep) {
      if (at > from) r.bytes.fill(0, from, at);
      from = Math.max(from, at + frameSize);
    }
    if (from < r.bytes.length) r.bytes.fill(0, from);
  }
}

function sameField(a: Uint8Array, b: Uint8Array, offset: number, width: number): boolean {
  for (let i = offset; i < offset + width; i++) if (a[i] !== b[i]) return false;
  return true;
}

const u64 = (b: Uint8Array | null | undefined): bigint | null => (b && b.length >= 8 ? new DataView(b.buffer, b.byteOffset, 8).getBigUint64(0, true) : null);

/**
 * The regions of a copy in progress, added to as the copy goes. The caller's array keeps the
 * order they were copied in (the thread state first); lookups go through a sorted index.
 */
class GrowingMemory {
  /** the regions that are data-stack chunks */
  readonly chunks: Region[] = [];
  private readonly sorted: Region[] = [];

  constructor(
    private readonly regions: Region[],
    private readonly P: 4 | 8,
  ) {
    for (const r of regions) this.index(r);
  }

  /** every region, in the order copied (the thread state first) */
  all(): readonly Region[] {
    return this.regions;
  }

  add(r: Region, chunk = false): void {
    this.regions.push(r);
    this.index(r);
    if (chunk) this.chunks.push(r);
  }

  private index(r: Region): void {
    let lo = 0;
    let hi = this.sorted.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.sorted[mid]!.address <= r.address) lo = mid + 1;
      else hi = mid;
    }
    this.sorted.splice(lo, 0, r);
  }

  /** A view of [address, address+length) if one region holds all of it (the last one starting at or below it). */
  bytes(address: bigint, length: number): Uint8Array | null {
    let lo = 0;
    let hi = this.sorted.length - 1;
    let found = -1;
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1;
      if (this.sorted[mid]!.address <= address) {
        found = mid;
        lo = mid + 1;
      } else hi = mid - 1;
    }
    // overlapping regions are rare (a frame is only added when no region holds it): look back a little
    for (let i = found; i >= 0 && i > found - 4; i--) {
      const r = this.sorted[i]!;
      const off = address - r.address;
      if (off + BigInt(length) <= BigInt(r.bytes.length)) return r.bytes.subarray(Number(off), Number(off) + length);
    }
    return null;
  }

  contains(address: bigint, length: number): boolean {
    return this.bytes(address, length) !== null;
  }

  /** Is [address, address+length) inside a copied data-stack chunk? */
  inChunk(address: bigint, length: number): boolean {
    return this.chunks.some((r) => address >= r.address && address + BigInt(length) <= r.address + BigInt(r.bytes.length));
  }

  ptr(address: bigint): bigint | null {
    const b = this.bytes(address, this.P);
    return b ? readPointer(b, 0, this.P) : null;
  }
}
