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
// per address, and copied again only when the address has been reused by another code object.

import type { Layout } from '../layout/layout.js';
import { pyBytesExtent, pyBytesHeaderSize, pyStringExtent, pyStringHeaderSize } from '../symbols/strings.js';
import { readPointer } from '../walk/region-memory.js';
import type { Region } from '../walk/types.js';
import type { MemorySource } from './source.js';

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
}

export interface CodeObjectSnapshot {
  address: bigint;
  /** the code object header, and its qualname, name, filename and location-table objects */
  regions: Region[];
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
const MAX_OBJECT_BYTES = 64 << 20;

const hex = (a: bigint): string => `0x${a.toString(16)}`;

interface CodeEntry {
  snapshot: CodeObjectSnapshot | null;
  /** the fields that identify the object (type, names, line table, first line, size) */
  identity: Uint8Array | null;
  /** code_object_generation of its interpreter when last confirmed, or the pass number */
  confirmed: bigint;
}

export class MemoryCopier {
  private readonly P: 4 | 8;
  private readonly layout: Layout;
  private readonly maxFrames: number;
  private readonly codes = new Map<bigint, CodeEntry>();
  /** type object address → is it the code type (checked once by tp_name) */
  private readonly codeTypes = new Map<bigint, boolean>();
  /** thread state address → bytes to read for it (through the base frame on 3.15) */
  private readonly tstateLength = new Map<bigint, number>();
  /** chunk address → used bytes seen in the previous copy: read at once, checked after */
  private readonly chunkUsed = new Map<bigint, number>();
  /** code objects copied (or copied again) since the last takeNewCodes() */
  private fresh: CodeObjectSnapshot[] = [];
  private replaced = false;
  /** code objects reached by the stacks of the last copyAll() */
  readonly used = new Set<bigint>();
  /** counts a copyAll pass; stands in for code_object_generation where there is none */
  private pass = 0n;
  private generation = 0n;
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

  /** Copy every thread of every interpreter. */
  copyAll(): ThreadSnapshot[] {
    const L = this.layout;
    const P = this.P;
    const source = this.source;
    this.pass++;
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
    if (f.codeObjectGeneration !== null) fields.push([f.codeObjectGeneration, 8]);
    const lo = Math.min(...fields.map(([o]) => o));
    const hi = Math.max(...fields.map(([o, n]) => o + n));
    for (let i = 0; interp !== 0n && i < MAX_INTERPRETERS && !seenInterps.has(interp); i++) {
      seenInterps.add(interp);
      const block = source.read(interp + BigInt(lo), hi - lo);
      const dv = new DataView(block.buffer, block.byteOffset, block.byteLength);
      const interpreterId = dv.getBigInt64(f.id - lo, true);
      const main = f.threadsMain !== null ? readPointer(block, f.threadsMain - lo, P) : 0n;
      // Where the interpreter counts code-object deaths, a cached code object needs checking
      // only after a death; elsewhere, once per pass.
      this.generation = f.codeObjectGeneration !== null ? dv.getBigUint64(f.codeObjectGeneration - lo, true) : this.pass;
      let tstate = readPointer(block, f.threadsHead - lo, P);
      const seenThreads = new Set<bigint>();
      for (let t = 0; tstate !== 0n && t < MAX_THREADS && !seenThreads.has(tstate); t++) {
        seenThreads.add(tstate);
        const thread = this.thread(interpreterId, tstate);
        thread.mainThread = main !== 0n && main === tstate;
        threads.push(thread);
        const ts = thread.regions[0];
        if (!ts || ts.address !== tstate) break;
        tstate = readPointer(ts.bytes, L.tstate.next, P);
      }
      interp = readPointer(block, f.next - lo, P);
    }
    return threads;
  }

  /** The code objects copied since the last call, and whether one of them replaced an older copy at the same address. */
  takeNewCodes(): { codes: CodeObjectSnapshot[]; replaced: boolean } {
    const out = { codes: this.fresh, replaced: this.replaced };
    this.fresh = [];
    this.replaced = false;
    return out;
  }

  /** The current copy of a code object (null: the address is not a code object). */
  codeObject(address: bigint): CodeObjectSnapshot | null {
    return this.codes.get(address)?.snapshot ?? null;
  }

  /**
   * Copy one thread: tried again at once if the copy moved, and — with a stopper — copied with
   * the target stopped if it still moves.
   */
  thread(interpreterId: bigint, tstate: bigint): ThreadSnapshot {
    let snap = this.copyThread(interpreterId, tstate);
    let attempts = 1;
    while (snap.moved && attempts <= this.retries) {
      snap = this.copyThread(interpreterId, tstate);
      attempts++;
    }
    if (snap.moved && this.stopper) {
      let stopped = false;
      try {
        stopped = this.stopper.stop();
        snap = this.copyThread(interpreterId, tstate);
      } finally {
        this.stopper.resume();
      }
      attempts++;
      if (stopped) {
        // nothing ran while it was copied (the anchor check may still say "moved" when the
        // current frame is an entry frame: that proves nothing either way here)
        snap.moved = false;
        snap.stopped = true;
      }
    }
    snap.attempts = attempts;
    return snap;
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

  private copyThread(interpreterId: bigint, tstate: bigint): ThreadSnapshot {
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
    };

    // one read: the length learned from this thread's previous copy covers the base frame
    const known = this.tstateLength.get(tstate) ?? L.tstate.size;
    let ts = this.source.tryRead(tstate, known);
    if (!ts && known !== L.tstate.size) ts = this.source.tryRead(tstate, L.tstate.size);
    if (!ts) {
      errors.push(`thread state ${hex(tstate)}: not readable`);
      return snap;
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
        return snap;
      }
      seq = now.seq;
    }

    this.copyChunks(ts, mem, errors);
    const chain = this.followFrames(frame, base, mem, errors);
    snap.moved = anchoring ? this.anchorMoved(tstate, ts, frame, seq!, mem) : this.movedSince(tstate, ts, cframe, frame, mem, chain);
    // Without the anchor, frames read on their own after the chunks (generator and coroutine
    // frames, entry frames on the C stack) are where torn copies slip through the re-read
    // (measured: about 1 in 10,000 churn samples). When the target can be stopped, such a copy
    // is made again stopped rather than trusted.
    if (!snap.moved && !anchoring && this.stopper && this.offChunkLink(chain, mem)) snap.moved = true;
    snap.copyMicros = Math.round((performance.now() - started) * 1000);
    // code objects are copied (or checked again) after the window the checks cover: their
    // reads would only lengthen it
    for (const code of this.codesOf(chain, mem)) this.code(code);
    return snap;
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
    for (const frame of chain) {
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
      for (const [off, width] of fields) {
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

  /**
   * Make sure the code object at `address` is copied and current: copied the first time it is
   * seen, and — after a code object may have died (the interpreter's code_object_generation
   * moved, or on every pass where there is no such counter) — checked again by the fields that
   * identify it, and copied again if another code object now lives at that address.
   */
  private code(address: bigint): void {
    if (this.used.has(address)) return;
    this.used.add(address);
    const entry = this.codes.get(address);
    if (entry && entry.confirmed === this.generation) return;
    const L = this.layout;
    const header = this.source.tryRead(address, L.code.size);
    const identity = header ? this.identity(header) : null;
    if (entry) {
      if (identity && entry.identity && equal(identity, entry.identity)) {
        entry.confirmed = this.generation;
        return;
      }
      this.replaced ||= entry.snapshot !== null;
    }
    const snapshot = header && this.isCodeType(readPointer(header, L.object.obType, this.P)) ? this.copyCode(address, header) : null;
    this.codes.set(address, { snapshot, identity, confirmed: this.generation });
    if (snapshot) this.fresh.push(snapshot);
  }

  /** The bytes of the fields that tell one code object from another at the same address. */
  private identity(header: Uint8Array): Uint8Array {
    const L = this.layout;
    const P = this.P;
    const parts = [
      [L.object.obType, P],
      [L.object.obSize, P],
      [L.code.qualname, P],
      [L.code.name, P],
      [L.code.filename, P],
      [L.code.linetable, P],
      [L.code.firstlineno, 4],
    ] as const;
    const out = new Uint8Array(parts.reduce((n, [, w]) => n + w, 0));
    let o = 0;
    for (const [off, w] of parts) {
      out.set(header.subarray(off, off + w), o);
      o += w;
    }
    return out;
  }

  private copyCode(address: bigint, header: Uint8Array): CodeObjectSnapshot {
    const L = this.layout;
    const regions: Region[] = [{ address, bytes: header }];
    const field = (off: number): bigint => readPointer(header, off, this.P);
    for (const s of [field(L.code.qualname), field(L.code.name), field(L.code.filename)]) this.object(s, 'str', regions);
    this.object(field(L.code.linetable), 'bytes', regions);
    return { address, regions };
  }

  /** Copy a str or bytes object with one read (two for long or out-of-line data). */
  private object(address: bigint, kind: 'str' | 'bytes', regions: Region[]): void {
    if (address === 0n || regions.some((r) => r.address === address)) return;
    const L = this.layout;
    const headerSize = kind === 'str' ? pyStringHeaderSize(L) : pyBytesHeaderSize(L);
    // most names are short: read a little more than the header so the data comes along
    const first = this.source.tryRead(address, headerSize + 64) ?? this.source.tryRead(address, headerSize);
    if (!first) return;
    let extent;
    try {
      extent = kind === 'str' ? pyStringExtent(first, L, address) : pyBytesExtent(first, L, address);
    } catch {
      return; // not a valid object: symbolization will say so
    }
    if (extent.dataAddress === null) {
      const total = extent.headerSize + extent.dataLength;
      if (total > MAX_OBJECT_BYTES) return;
      const bytes = total <= first.length ? first.subarray(0, Math.max(total, headerSize)) : this.source.tryRead(address, total);
      if (bytes) regions.push({ address, bytes });
    } else {
      regions.push({ address, bytes: first.subarray(0, Math.max(extent.headerSize, headerSize)) });
      if (extent.dataLength > MAX_OBJECT_BYTES) return;
      const data = this.source.tryRead(extent.dataAddress, extent.dataLength);
      if (data) regions.push({ address: extent.dataAddress, bytes: data });
    }
  }

  private isCodeType(type: bigint): boolean {
    const known = this.codeTypes.get(type);
    if (known !== undefined) return known;
    let ok = false;
    const t = this.source.tryRead(type + BigInt(this.layout.type.tpName), this.P);
    if (t) {
      const name = this.source.tryRead(readPointer(t, 0, this.P), 5);
      ok = !!name && name[0] === 0x63 && name[1] === 0x6f && name[2] === 0x64 && name[3] === 0x65 && name[4] === 0;
    }
    this.codeTypes.set(type, ok);
    return ok;
  }
}

function equal(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
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
