// Samples from copies made in the kernel at the interrupt (record --copy interrupt:
// bpf/copier.bpf.c, src/record/linux/kernel-copier.ts).
//
// A record is one moment of a thread that was running: the timer interrupted it on its CPU and
// the BPF program copied its thread state, the top of its data stack (with the chunks before
// it) and the headers of the frames of its chain outside them, while it could not run. Nothing
// here reads its frames again: the sample's regions are the record's, and the walk judges them
// as it judges any copy.
//
// What the kernel does not copy is read here, later: the code objects the frames refer to
// (code-cache.ts, shared with the recorder's own copies, so that each is recorded once). A
// code object is read a few milliseconds after the tick, not inside a copy window, so the
// frame that held it may be gone by then and its address reused. On 3.14+ the record carries
// the interpreter's count of code-object deaths at the tick: a record whose count is still the
// count around the reads is proven (no code object died in between: each read is the frame's
// own), and a batch of records made at one count at which every code object they refer to was
// confirmed needs no read at all (none died between the confirmation and the ticks). Where it
// moved (a program that compiles and drops code: exec, namedtuple, dataclasses),
// the record's code objects are read again and compared with the copies recorded for their
// addresses (the header, then the qualname's text: the check every copy gets where there is no
// such count); a record keeps its proof if each was known before and is unchanged, and is
// `torn` (counted, never profiled) otherwise. 3.13 has no such count: its code objects are
// always checked that way — the one thing a 3.13 record does not prove.
//
// The thread's ids, interpreter and main-thread fact come from the recorder's pass over the
// thread lists (know), which is also what tells the kernel which thread state each thread has.

import type { GilLayout, Layout } from '../../layout/layout.js';
import { readPointer } from '../../walk/region-memory.js';
import type { KernelRecord } from '../linux/kernel-copier.js';
import type { MemorySource } from './source.js';
import type { Region } from '../../walk/types.js';
import type { MemoryCopier } from './copier.js';
import { tstateCopyEnd } from './consistency.js';
import { GrowingMemory, maskFrames, u64 } from './copy-memory.js';
import { handlingException, holdsGilField } from './thread-facts.js';
import { codesOf, followFrames, innermostFits } from './thread-copy.js';
import { liveThreadStates } from './thread-list.js';
import { emptySnapshot, type ThreadSnapshot } from './thread-snapshot.js';

/** frames followed per record (the BPF program follows at most 2048) */
const MAX_FRAMES = 8192;

/** How long a thread's confirmed code objects stand for its next records at the same count, ms (KernelSamples.confirmed). */
const CONFIRMED_FOR_MS = 10;

/** What the recorder's last pass told of a thread the kernel copies. */
interface Known {
  threadStateAddress: bigint;
  interpreterId: bigint;
  mainThread: boolean;
}

/** A record made into a thread's copy, with the time the kernel took it. */
export interface KernelSnapshot {
  snap: ThreadSnapshot;
  timeNs: bigint;
  /** the thread's kernel id */
  tid: number;
  /** the ranges the recorder named for the thread, as the kernel copied them at the tick (KernelCopier.setReads) */
  reads: readonly Region[];
  /** the interpreter's count of code-object deaths at the tick (3.14+; null: none) */
  tickGeneration: bigint | null;
  /** the interpreter's address */
  interp: bigint;
}

/**
 * The bytes of each thread state the kernel copies: as the recorder's copier takes it — on
 * 3.15 through the base frame (inside _PyThreadStateImpl, past thread_state.size) and the C
 * stack's fields after it; before, thread_state.size. Read off the target's first thread state.
 */
export function kernelTstateSize(source: MemorySource): number {
  const L = source.layout;
  if (L.tstate.baseFrame === null) return L.tstate.size;
  const [first] = liveThreadStates(source, L);
  const ts = first === undefined ? null : source.tryRead(first, L.tstate.size);
  if (!ts) return L.tstate.size;
  const base = readPointer(ts, L.tstate.baseFrame, L.pointerSize);
  const at = base - first!;
  return at >= BigInt(L.tstate.size) && at < 1n << 16n ? Math.max(L.tstate.size, tstateCopyEnd(L, Number(at))) : L.tstate.size;
}

export class KernelSamples {
  private readonly L: Layout;
  private known = new Map<number, Known>();
  /** records that were not of the thread the recorder knew at that address (exited, or its state reused) */
  stale = 0;
  /** each thread's last record whose code objects were all confirmed at its count of code-object deaths: that count, and them */
  private readonly confirmed = new Map<number, { interp: bigint; generation: bigint; codes: bigint[]; at: number }>();

  constructor(
    private readonly source: MemorySource,
    private readonly copier: MemoryCopier,
  ) {
    this.L = source.layout;
  }

  /**
   * Learn the threads from the recorder's pass (every thread, the ones it left to the kernel
   * too): the thread-state address of each kernel thread id, for the kernel to copy.
   */
  know(threads: readonly ThreadSnapshot[]): Map<number, bigint> {
    const known = new Map<number, Known>();
    const states = new Map<number, bigint>();
    for (const t of threads) {
      if (t.nativeThreadId <= 0n || t.nativeThreadId > 0xffffffffn) continue;
      const tid = Number(t.nativeThreadId);
      known.set(tid, { threadStateAddress: t.threadStateAddress, interpreterId: t.interpreterId, mainThread: t.mainThread });
      states.set(tid, t.threadStateAddress);
    }
    this.known = known;
    // (the threads gone are forgotten here too)
    for (const tid of this.confirmed.keys()) if (!known.has(tid)) this.confirmed.delete(tid);
    return states;
  }

  /**
   * The copies of a batch of records, oldest first; the code objects they reach are checked
   * (and recorded: in the first copy's `codes`, to be written before it). A record of a thread
   * the recorder does not know at that address any more is dropped (`stale`).
   */
  take(records: readonly KernelRecord[]): KernelSnapshot[] {
    const L = this.L;
    const now = performance.now();
    const P = L.pointerSize;
    const out: KernelSnapshot[] = [];
    const byInterp = new Map<
      bigint,
      { codes: Set<bigint>; made: { snap: ThreadSnapshot; mem: GrowingMemory; first: bigint | undefined; codes: bigint[]; tickGeneration: bigint | null; tid: number; again: boolean }[] }
    >();
    for (const r of records) {
      const known = this.known.get(r.tid);
      const ts = r.regions[0];
      if (!known || known.threadStateAddress !== r.threadStateAddress || !ts || ts.address !== r.threadStateAddress || ts.bytes.length < L.tstate.size) {
        this.stale++;
        continue;
      }
      const tsb = ts.bytes;
      const nativeThreadId = readPointer(tsb, L.tstate.nativeThreadId, P);
      const threadId = readPointer(tsb, L.tstate.threadId, P);
      if (nativeThreadId !== BigInt(r.tid) || threadId === 0n) {
        this.stale++;
        continue;
      }
      const interp = readPointer(tsb, L.tstate.interp, P);
      const regions = r.regions.slice();
      const errors: string[] = [];
      const snap = emptySnapshot(known.interpreterId, r.threadStateAddress, regions, errors);
      snap.threadId = threadId;
      snap.nativeThreadId = nativeThreadId;
      snap.mainThread = known.mainThread;
      const dv = new DataView(tsb.buffer, tsb.byteOffset, tsb.byteLength);
      // (3.15: the thread state says; 3.13, 3.14: the GIL's fields copied at the tick — taken,
      // and this thread state its last holder)
      snap.holdsGil = holdsGilField(L.tstate, dv, 0) ?? (r.gil !== undefined && L.gil !== null && gilHeldBy(r.gil.bytes, L.gil, r.threadStateAddress, P));
      snap.handlingException = handlingException(L.tstate, dv, 0, P);
      // interrupted on its CPU: it was running
      snap.onCpu = true;
      if (r.native) snap.native = r.native;
      // (the data stack's top — the region that ends at datastack_top — and the chunks before
      // it: chunks, for maskFrames)
      const top = readPointer(tsb, L.tstate.datastackTop, P);
      const mem = new GrowingMemory([], P);
      for (const region of r.regions) mem.add(region, region !== ts && (region.chunk || region.address + BigInt(region.bytes.length) === top));
      // (3.11, 3.12: the thread state's pointer is to the running eval loop's _PyCFrame, which
      // the kernel copied with it, and the frame is its current_frame)
      const pointer = readPointer(tsb, L.tstate.currentFrame, P);
      const frame = L.tstate.cframeCurrentFrame === null || pointer === 0n ? pointer : (mem.ptr(pointer + BigInt(L.tstate.cframeCurrentFrame)) ?? 0n);
      const base = L.tstate.baseFrame !== null ? readPointer(tsb, L.tstate.baseFrame, P) : 0n;
      // (what the kernel did not copy is not read now: it would be of another moment)
      const chain = followFrames(L, MAX_FRAMES, frame, base, mem, errors, new Map(), () => null);
      // the collector running, in the thread holding the GIL
      const gcAt = L.interp.gcCollecting;
      const gc = gcAt === null ? null : mem.bytes(interp + BigInt(gcAt), 4);
      snap.inGc = gc !== null && new DataView(gc.buffer, gc.byteOffset, 4).getInt32(0, true) !== 0 && snap.holdsGil;
      const genAt = L.interp.codeObjectGeneration;
      const tickGeneration = genAt === null ? null : u64(mem.bytes(interp + BigInt(genAt), 8));
      let group = byInterp.get(interp);
      if (!group) byInterp.set(interp, (group = { codes: new Set(), made: [] }));
      // as every copy keeps them: frame headers only, the rest zeros (the capture stores each
      // frame image once), and where the frames are, for the writer
      maskFrames(mem, chain.frames, L.frame.localsplus, L.chunk.data);
      snap.frames = { addresses: chain.frames.map(Number), size: L.frame.size, wordBytes: P };
      const codes = codesOf(L, chain.frames, mem);
      // (a record whose code objects are its thread's last record's, confirmed at this same
      // count — a stack that repeats, the common case — needs none of them looked up again:
      // hashing and looking up bigints per record cost more than comparing them; for
      // CONFIRMED_FOR_MS only, as a code object's bytecode is read again when it is due, which
      // only a look-up finds)
      const had = this.confirmed.get(r.tid);
      const again =
        tickGeneration !== null && had !== undefined && had.interp === interp && had.generation === tickGeneration && now - had.at < CONFIRMED_FOR_MS && sameCodes(had.codes, codes);
      if (!again) for (const c of codes) group.codes.add(c);
      group.made.push({ snap, mem, first: chain.frames[0], codes, tickGeneration, tid: r.tid, again });
      out.push({ snap, timeNs: r.timeNs, tid: r.tid, reads: r.reads ?? [], tickGeneration, interp });
    }
    for (const [interp, group] of byInterp) {
      // 3.14+, the common case: every record of the batch made at one count of code-object
      // deaths, at which each of their code objects was confirmed — none died between its
      // confirmation and the ticks, so each is the frame's own and nothing is read now
      const tickGeneration = group.made[0]!.tickGeneration;
      if (tickGeneration !== null && group.made.every((m) => m.tickGeneration === tickGeneration) && this.copier.codesConfirmed(group.codes, interp, tickGeneration)) {
        for (const m of group.made) {
          if (!innermostFits(L, m.first, m.mem, (c) => this.copier.bytecodeOf(c))) m.snap.unproven = true;
          if (!m.again) this.confirmed.set(m.tid, { interp, generation: tickGeneration, codes: m.codes, at: now });
        }
        continue;
      }
      // (below, every code object of the batch is looked at)
      for (const m of group.made) this.confirmed.delete(m.tid);
      // 3.14+: a code object died between a record's tick and the reads (or during them): the
      // one read at an address may be another's — a record whose count moved keeps its proof
      // only if each of its code objects was known before and is unchanged, and is torn
      // otherwise (MemoryCopier.recordCodesAtTicks)
      const { fresh, replaced, proven } = this.copier.recordCodesAtTicks(
        interp,
        group.made.map((m) => ({ codes: m.codes, generation: m.tickGeneration })),
      );
      group.made.forEach((m, i) => {
        if (!proven[i]) m.snap.unproven = true;
        // the innermost frame caught being set up (its instruction pointer not yet in its code)
        else if (!innermostFits(L, m.first, m.mem, (c) => this.copier.bytecodeOf(c))) m.snap.unproven = true;
      });
      if (fresh.length === 0 && !replaced) continue;
      // (before the interpreter's first sample of the batch: the samples are written in order)
      const into = group.made[0]!.snap;
      into.codes = fresh;
      into.codeReplaced = replaced;
    }
    return out;
  }
}

/** Do the GIL's fields (from `last_holder` on) say it is taken, by thread state `tstate`? */
function gilHeldBy(fields: Uint8Array, G: GilLayout, tstate: bigint, P: Layout['pointerSize']): boolean {
  const lockedAt = G.locked - G.lastHolder;
  if (fields.length < P || lockedAt < 0 || lockedAt + 4 > fields.length) return false;
  return readPointer(fields, 0, P) === tstate && new DataView(fields.buffer, fields.byteOffset + lockedAt, 4).getInt32(0, true) !== 0;
}

/** The same code objects, in the same order? */
function sameCodes(a: readonly bigint[], b: readonly bigint[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
