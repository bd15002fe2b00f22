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
import type { MemorySource } from './source.js';

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
   * The stack moved while it was copied: re-read after the copy, the thread's current frame
   * (or its data-stack top) was not what the copy started from.
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
 * How a copy is checked for having moved under the copier:
 * - `anchor` (CPython 3.15+; writes one word into the target): the thread's profiler anchor
 *   (`last_profiled_frame`) is set to the current frame before the copy; the interpreter moves
 *   it, and bumps `last_profiled_frame_seq`, when that frame is popped or suspended. Anchor and
 *   sequence unchanged after the copy prove that nothing at or below the current frame changed.
 * - `reread` (read-only; every version): after the copy, the current frame, the data-stack top
 *   and the current frame's own code and caller are read again and must be unchanged. A frame
 *   popped and another pushed at the same address, with the same code and caller, passes.
 */
export type Consistency = 'anchor' | 'reread';

/** Stops and resumes the whole target (every thread), for copies that must not move. */
export interface Stopper {
  /** stop every thread of the target; true when every thread was seen stopped */
  stop(): boolean;
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
  /** thread state address → bytes to read for it (through the base frame on 3.15) */
  private readonly tstateLength = new Map<bigint, number>();
  /** chunk address → used bytes seen in the previous copy: read at once, checked after */
  private readonly chunkUsed = new Map<bigint, number>();
  /** code objects reached by the stacks of the last copyAll() */
  readonly used = new Set<bigint>();
  /**
   * The caller has stopped the target for this copyAll (blocking): every copy is of one
   * moment, whatever its check says.
   */
  private allStopped = false;
  /** how copies are checked; falls back to `reread` if writing the anchor fails */
  consistency: Consistency;
  /** why writing the anchor failed, if it did */
  writeFailure: string | null = null;
  private readonly retries: number;
  private readonly stopper: Stopper | null;
  /** thread states whose anchor this copier has set (cleared by clearAnchors) */
  private readonly anchored = new Set<bigint>();
  /** what the end-of-copy check reads, in one read: [lo, hi) of the thread state */
  private readonly checkSpan: { lo: number; hi: number };

  constructor(
    private readonly source: MemorySource,
    options: CopierOptions = {},
  ) {
    this.layout = source.layout;
    this.P = this.layout.pointerSize;
    this.maxFrames = options.maxFrames ?? 8192;
    this.codes = new CodeCache(source, this.layout);
    const t = this.layout.tstate;
    const canAnchor = t.lastProfiledFrame !== null && t.lastProfiledFrameSeq !== null && typeof source.write === 'function';
    this.consistency = options.consistency ?? (canAnchor ? 'anchor' : 'reread');
    if (this.consistency === 'anchor' && !canAnchor) {
      throw new Error(
        t.lastProfiledFrame === null
          ? `${source.description}: this Python has no profiler anchor (CPython 3.15+); use the read-only check`
          : `${source.description}: the memory source cannot write the profiler anchor`,
      );
    }
    this.retries = options.retries ?? 1;
    this.stopper = options.stopper ?? null;
    const fields = [t.currentFrame, t.datastackTop, t.datastackChunk];
    if (this.consistency === 'anchor') fields.push(t.lastProfiledFrame!, t.lastProfiledFrameSeq!);
    this.checkSpan = { lo: Math.min(...fields), hi: Math.max(...fields) + this.P };
  }

  /**
   * Copy every thread of every interpreter. `stopped`: the caller has stopped the target
   * (every thread) for the whole call, so no copy can have moved.
   */
  copyAll(options: { stopped?: boolean } = {}): ThreadSnapshot[] {
    this.allStopped = options.stopped ?? false;
    try {
      return this.copyInterpreters();
    } finally {
      this.allStopped = false;
    }
  }

  private copyInterpreters(): ThreadSnapshot[] {
    const L = this.layout;
    const P = this.P;
    const source = this.source;
    this.used.clear();
    const threads: ThreadSnapshot[] = [];
    let interp = readPointer(source.read(source.runtimeAddress + BigInt(L.runtime.interpretersHead), P), 0, P);
    const seenInterps = new Set<bigint>();
    const f = L.interp;
    // one read per interpreter covers every field needed from it
    const fields: [number, number][] = [
      [f.id, 8],
      [f.next, P],
      [f.threadsHead, P],
    ];
    if (f.threadsMain !== null) fields.push([f.threadsMain, P]);
    const lo = Math.min(...fields.map(([o]) => o));
    const hi = Math.max(...fields.map(([o, n]) => o + n));
    for (let i = 0; interp !== 0n && i < MAX_INTERPRETERS && !seenInterps.has(interp); i++) {
      seenInterps.add(interp);
      const block = source.read(interp + BigInt(lo), hi - lo);
      const dv = new DataView(block.buffer, block.byteOffset, block.byteLength);
      const interpreterId = dv.getBigInt64(f.id - lo, true);
      const main = f.threadsMain !== null ? readPointer(block, f.threadsMain - lo, P) : 0n;
      let tstate = readPointer(block, f.threadsHead - lo, P);
      // The list is read while threads start and end. A thread state that is not one (freed
      // under us) ends this pass over the list, which starts again from the head, passing over
      // the threads already copied.
      const copied = new Set<bigint>();
      const visited = new Set<bigint>();
      let restarts = 0;
      for (let t = 0; tstate !== 0n && t < MAX_THREADS * (LIST_RESTARTS + 1) && !visited.has(tstate); t++) {
        visited.add(tstate);
        let next: bigint | null;
        if (copied.has(tstate)) {
          const b = this.source.tryRead(tstate + BigInt(L.tstate.next), P);
          next = b ? readPointer(b, 0, P) : null;
        } else {
          const { snap, entry } = this.thread(interp, interpreterId, tstate);
          next = entry === 'stale' ? null : readPointer(snap.regions[0]!.bytes, L.tstate.next, P);
          if (entry === 'thread') {
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
    return threads;
  }

  /** The copy recorded for a code object (null: the address is not a known code object). */
  codeObject(address: bigint): CodeObjectSnapshot | null {
    return this.codes.snapshot(address);
  }

  /**
   * Copy one thread: tried again at once if the copy moved, and — with a stopper — copied with
   * the target stopped if it still moves.
   */
  private thread(interp: bigint, interpreterId: bigint, tstate: bigint): { snap: ThreadSnapshot; entry: ListEntry } {
    let attempt = this.copyThread(interp, interpreterId, tstate);
    if (attempt.entry !== 'thread') return attempt;
    let attempts = 1;
    if (this.allStopped) this.settle(attempt.snap);
    while (attempt.snap.moved && attempts <= this.retries) {
      attempt = this.copyThread(interp, interpreterId, tstate);
      attempts++;
    }
    if (attempt.snap.moved && this.stopper) {
      let stopped = false;
      try {
        stopped = this.stopper.stop();
        attempt = this.copyThread(interp, interpreterId, tstate);
      } finally {
        this.stopper.resume();
      }
      attempts++;
      if (stopped) this.settle(attempt.snap);
    }
    const snap = attempt.snap;
    snap.attempts = attempts;
    // what was read of code objects in a window that moved may be a successor's or garbage
    if (!snap.moved) {
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

  private copyThread(interp: bigint, interpreterId: bigint, tstate: bigint): Attempt {
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

    // one read: the length learned from this thread's previous copy covers the base frame
    const known = this.tstateLength.get(tstate) ?? L.tstate.size;
    let ts = this.source.tryRead(tstate, known);
    if (!ts && known !== L.tstate.size) ts = this.source.tryRead(tstate, L.tstate.size);
    if (!ts || readPointer(ts, L.tstate.interp, P) !== interp) {
      attempt.entry = 'stale';
      return attempt;
    }
    // 3.15: the base frame sits inside _PyThreadStateImpl, past thread_state.size; copy the
    // thread state through its end in the same region
    if (L.tstate.baseFrame !== null) {
      const base = readPointer(ts, L.tstate.baseFrame, P);
      const end = base + BigInt(L.frame.size);
      if (base >= tstate + BigInt(L.tstate.size) && end - tstate <= BigInt(L.tstate.size + MAX_TSTATE_TAIL)) {
        const need = Number(end - tstate);
        if (ts.length < need) {
          const whole = this.source.tryRead(tstate, need);
          if (whole) ts = whole;
          else errors.push(`base frame ${hex(base)}: not readable`);
        }
        this.tstateLength.set(tstate, need);
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
      if (cframe !== 0n) {
        const field = cframe + BigInt(L.tstate.cframeCurrentFrame);
        if (!mem.contains(field, P)) {
          const bytes = this.source.tryRead(cframe, L.tstate.cframeCurrentFrame + P);
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
    // the anchor: set it to the current frame, then confirm it is still current and take the
    // sequence (read after the anchor was seen in place)
    let seq: bigint | null = null;
    let anchoring = this.consistency === 'anchor' && frame !== 0n && frame !== base;
    if (anchoring) {
      const anchorAt = tstate + BigInt(L.tstate.lastProfiledFrame!);
      // little-endian: a 4-byte pointer is the low half of the 8-byte word
      const word = new Uint8Array(8);
      new DataView(word.buffer).setBigUint64(0, frame, true);
      try {
        this.source.write!(anchorAt, word.subarray(0, P));
        this.anchored.add(tstate);
      } catch (e) {
        // the target cannot be written after all: check copies by re-reading from now on
        this.consistency = 'reread';
        this.writeFailure = (e as Error).message;
        anchoring = false;
      }
    }
    if (anchoring) {
      const now = this.readCheck(tstate);
      if (!now || now.current !== frame || now.anchor !== frame) {
        // the stack moved before the copy began: try again
        snap.moved = true;
        snap.copyMicros = Math.round((performance.now() - started) * 1000);
        return attempt;
      }
      seq = now.seq;
    }

    const generation = this.codeGeneration(interp);
    this.copyChunks(ts, mem, errors);
    const chain = this.followFrames(frame, base, mem, errors);
    // the chain's code objects, inside the window (see code-cache.ts)
    const codes = this.codesOf(chain, mem);
    for (const c of codes) this.used.add(c);
    this.codes.check(codes, interp, generation, attempt.codes);
    snap.moved = anchoring ? this.anchorMoved(tstate, ts, frame, seq!, mem) : this.movedSince(tstate, ts, cframe, frame, mem, chain);
    if (!snap.moved && !anchoring) {
      // The re-read cannot see a frame popped and pushed again at the same place with the same
      // code address — which is what a function dropped and compiled again looks like, its
      // new code object at the dead one's address. Where code objects were read then, they may
      // be of the dead one. With the death counter (3.14+), a death during the window makes
      // the copy count as moved; without it, so does any code object that the check found new
      // or changed, when the target can be stopped to copy it for sure.
      if (generation !== null) snap.moved = this.codeGeneration(interp) !== generation;
      else if (this.stopper && this.codes.changes(attempt.codes)) snap.moved = true;
    }
    // Without the anchor, frames read on their own after the chunks (generator and coroutine
    // frames, entry frames on the C stack) are where torn copies slip through the re-read
    // (measured: about 1 in 10,000 churn samples). When the target can be stopped, such a copy
    // is made again stopped rather than trusted.
    if (!snap.moved && !anchoring && this.stopper && this.offChunkLink(chain, mem)) snap.moved = true;
    snap.copyMicros = Math.round((performance.now() - started) * 1000);
    return attempt;
  }

  /** The interpreter's count of code-object deaths, now (null: this Python has none, or unreadable). */
  private codeGeneration(interp: bigint): bigint | null {
    const off = this.layout.interp.codeObjectGeneration;
    if (off === null) return null;
    const b = this.source.tryRead(interp + BigInt(off), 8);
    return b ? new DataView(b.buffer, b.byteOffset, 8).getBigUint64(0, true) : null;
  }

  /** The code objects of the chain's Python frames. */
  private codesOf(chain: bigint[], mem: GrowingMemory): bigint[] {
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
   * Does the chain link Python frames through a frame read outside the chunks (a generator
   * frame, or an entry frame with Python frames below it)? Entry frames below the outermost
   * Python frame are not: nothing is found through them.
   */
  private offChunkLink(chain: bigint[], mem: GrowingMemory): boolean {
    const L = this.layout;
    let deepestPython = -1;
    chain.forEach((f, i) => {
      const owner = mem.bytes(f + BigInt(L.frame.owner), 1)?.[0];
      if (owner === L.owners.thread || owner === L.owners.generator) deepestPython = i;
    });
    for (let i = 0; i < deepestPython; i++) if (!mem.inChunk(chain[i]!, L.frame.size)) return true;
    return false;
  }

  /** One read of the thread-state fields the checks compare. */
  private readCheck(tstate: bigint): { current: bigint; top: bigint; chunk: bigint; anchor: bigint; seq: bigint } | null {
    const L = this.layout;
    const P = this.P;
    const { lo, hi } = this.checkSpan;
    const b = this.source.tryRead(tstate + BigInt(lo), hi - lo);
    if (!b) return null;
    const at = (off: number | null): bigint => (off === null ? 0n : readPointer(b, off - lo, P));
    return {
      current: at(L.tstate.currentFrame),
      top: at(L.tstate.datastackTop),
      chunk: at(L.tstate.datastackChunk),
      anchor: this.consistency === 'anchor' ? at(L.tstate.lastProfiledFrame) : 0n,
      seq: this.consistency === 'anchor' ? at(L.tstate.lastProfiledFrameSeq) : 0n,
    };
  }

  /**
   * After an anchored copy: the anchor still on the frame the copy started from, with the same
   * sequence, and the same newest data-stack chunk. An anchor on an entry frame proves nothing
   * (the interpreter pops entry frames without moving it), so such a copy counts as moved.
   */
  private anchorMoved(tstate: bigint, ts: Uint8Array, frame: bigint, seq: bigint, mem: GrowingMemory): boolean {
    const now = this.readCheck(tstate);
    if (!now || now.anchor !== frame || now.seq !== seq) return true;
    if (now.chunk !== readPointer(ts, this.layout.tstate.datastackChunk, this.P)) return true;
    const owner = mem.bytes(frame + BigInt(this.layout.frame.owner), 1)?.[0];
    return owner === undefined || (owner !== this.layout.owners.thread && owner !== this.layout.owners.generator);
  }

  /**
   * Read-only check, after the copy: the current frame (through the cframe on 3.11/3.12), the
   * data-stack top and chunk, and every frame of the chain (its code, caller and owner) must be
   * what the copy saw. What it cannot see: changes undone before the second read (a frame
   * popped and the same function called again from the same place) — the copy then shows a
   * stack the program had, but not a proof that it had it at one instant.
   */
  private movedSince(tstate: bigint, ts: Uint8Array, cframe: bigint, frame: bigint, mem: GrowingMemory, chain: bigint[]): boolean {
    const L = this.layout;
    const P = this.P;
    const now = this.readCheck(tstate);
    if (!now) return true;
    if (now.top !== readPointer(ts, L.tstate.datastackTop, P) || now.chunk !== readPointer(ts, L.tstate.datastackChunk, P)) return true;
    if (L.tstate.cframeCurrentFrame === null) {
      if (now.current !== frame) return true;
    } else {
      if (now.current !== cframe) return true;
      if (cframe !== 0n) {
        const again = this.source.tryRead(cframe + BigInt(L.tstate.cframeCurrentFrame), P);
        if (!again || readPointer(again, 0, P) !== frame) return true;
      }
    }
    if (frame === 0n) return false;
    return this.chainChanged(chain, mem, ts);
  }

  /**
   * Read the chain's frames again — the newest chunk in one read, each frame outside it on its
   * own — and compare what makes the chain: each frame's code, caller and owner.
   */
  private chainChanged(chain: bigint[], mem: GrowingMemory, ts: Uint8Array): boolean {
    const L = this.layout;
    const P = this.P;
    const chunk = readPointer(ts, L.tstate.datastackChunk, P);
    const top = readPointer(ts, L.tstate.datastackTop, P);
    const again = top > chunk && top - chunk <= BigInt(MAX_CHUNK_BYTES) ? this.source.tryRead(chunk, Number(top - chunk)) : null;
    const fields: [number, number][] = [
      [L.frame.previous, P],
      [L.frame.executable, P],
      [L.frame.owner, 1],
    ];
    // below the innermost frame, every frame waits in a call: its instruction pointer stands
    // still while the chain does (a frame popped and pushed again between the two reads comes
    // back at its first instruction, not at the call it was in)
    const waiting: [number, number][] = [...fields, [L.frame.instrPtr, P]];
    for (const [k, frame] of chain.entries()) {
      const copied = mem.bytes(frame, L.frame.size);
      if (!copied) return true;
      let live: Uint8Array | null;
      if (again && frame >= chunk && frame + BigInt(L.frame.size) <= top) {
        const off = Number(frame - chunk);
        live = again.subarray(off, off + L.frame.size);
      } else {
        live = this.source.tryRead(frame, L.frame.size);
      }
      if (!live) return true;
      for (const [off, width] of k === 0 ? fields : waiting) {
        for (let i = off; i < off + width; i++) if (copied[i] !== live[i]) return true;
      }
    }
    return false;
  }

  /** The used part of every data-stack chunk: [chunk, datastack_top) for the newest, [chunk, data + top) below. */
  private copyChunks(ts: Uint8Array, mem: GrowingMemory, errors: string[]): void {
    const L = this.layout;
    const P = this.P;
    let chunk = readPointer(ts, L.tstate.datastackChunk, P);
    const top = readPointer(ts, L.tstate.datastackTop, P);
    const header = L.chunk.data;
    for (let i = 0; chunk !== 0n && i < MAX_CHUNKS; i++) {
      let used: bigint;
      let bytes: Uint8Array | null;
      if (i === 0 && top > chunk && top - chunk <= BigInt(MAX_CHUNK_BYTES)) {
        used = top - chunk;
        bytes = this.source.tryRead(chunk, Number(used));
      } else {
        // an older chunk: its used part (data + top slots) is frozen while newer ones are in
        // use. Read as much as the previous copy found, in one read, then check its header.
        const guess = this.chunkUsed.get(chunk);
        const first = guess !== undefined ? this.source.tryRead(chunk, guess) : null;
        const head = first ?? this.source.tryRead(chunk, header);
        if (!head) {
          errors.push(`data-stack chunk ${hex(chunk)}: not readable`);
          return;
        }
        const slots = readPointer(head, L.chunk.top, P);
        const size = readPointer(head, L.chunk.size, P);
        used = BigInt(header) + slots * BigInt(P);
        if (used > size || used > BigInt(MAX_CHUNK_BYTES)) {
          errors.push(`data-stack chunk ${hex(chunk)}: top ${slots} is past its size ${size}`);
          mem.add({ address: chunk, bytes: head.subarray(0, header) }, true);
          chunk = readPointer(head, L.chunk.previous, P);
          continue;
        }
        bytes = used <= BigInt(head.length) ? head.subarray(0, Number(used)) : this.source.tryRead(chunk, Number(used));
        if (bytes) this.chunkUsed.set(chunk, Number(used));
      }
      if (!bytes) {
        errors.push(`data-stack chunk ${hex(chunk)} (${used} bytes): not readable`);
        return;
      }
      mem.add({ address: chunk, bytes }, true);
      chunk = readPointer(bytes, L.chunk.previous, P);
    }
  }

  /**
   * Follow the chain from the current frame, copying each frame that is not in memory yet
   * (generator/coroutine frames, entry frames on the C stack); returns the chain.
   */
  private followFrames(frame: bigint, base: bigint, mem: GrowingMemory, errors: string[]): bigint[] {
    const L = this.layout;
    const P = this.P;
    const size = L.frame.size;
    const seen = new Set<bigint>();
    const chain: bigint[] = [];
    for (let depth = 0; frame !== 0n && depth < this.maxFrames && !seen.has(frame); depth++) {
      seen.add(frame);
      chain.push(frame);
      let bytes = mem.bytes(frame, size);
      if (!bytes) {
        const copy = this.source.tryRead(frame, size);
        if (!copy) {
          errors.push(`frame ${hex(frame)}: not readable`);
          return chain;
        }
        mem.add({ address: frame, bytes: copy });
        bytes = copy;
      }
      if (frame === base) return chain;
      frame = readPointer(bytes, L.frame.previous, P);
    }
    return chain;
  }

}

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
