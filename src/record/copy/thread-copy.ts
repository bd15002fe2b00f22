// The general copy of one thread: what every copy can fall back to, on every version.
//
// Everything the previous copy of the thread needed — the thread state, the data-stack chunks,
// the frames outside them, the _PyCFrame on 3.11/3.12 (and on 3.11 the calling eval loop's),
// the count of code-object deaths — is
// read in one gathered read, and (unless the target is stopped) read again at once in the same
// call, to be compared (consistency.ts). What the previous copy did not foresee (a deeper
// stack, a new chunk, a code object to check) is read after, and then all of it is read again
// and compared. The copy does not judge the stack — the walk does, over exactly these bytes.

import type { Layout } from '../../layout/layout.js';
import { readPointer } from '../../walk/region-memory.js';
import type { Region } from '../../walk/types.js';
import type { CodeCache, PendingCodes } from './code-cache.js';
import { aboveAnchorWalks, agrees, anchorPlace, anchorProves, cStackOf, gilProves, onCStack, sameFields, tstateCopyEnd, type Consistency, type CStack, type Seen } from './consistency.js';
import { GrowingMemory, hex, maskFrames, pick, u64 } from './copy-memory.js';
import type { Range } from '../linux/native.js';
import { readMany, type MemorySource } from './source.js';
import { instrPtrFits } from '../../walk/instr-ptr.js';
import type { ChunkGuess, ThreadCache } from './thread-cache.js';
import type { ListEntry } from './thread-list.js';
import { emptySnapshot, type ThreadSnapshot } from './thread-snapshot.js';
import { handlingException, holdsGilField } from './thread-facts.js';

// Bounds on what a (possibly corrupt) target can make the copy do.
const MAX_CHUNKS = 4096;
const MAX_CHUNK_BYTES = 64 << 20;
const MAX_TSTATE_TAIL = 64 << 10;

/** Bytes read past the top of the newest chunk, for a stack a little deeper at the next copy. */
const NEWEST_CHUNK_SLACK = 512;

/** Code objects of a thread read with each copy where there is no count of their deaths (3.11–3.13). */
const RECENT_CODES = 64;

/** What a copy of a thread needs of the copier making it. */
export interface CopyContext {
  readonly source: MemorySource;
  readonly layout: Layout;
  readonly codes: CodeCache;
  /** frames followed per thread while looking for frames outside the chunks */
  readonly maxFrames: number;
  /** bytes of every thread state to copy at least (CopierOptions.tstateMin; ≥ thread_state.size) */
  readonly tstateMin: number;
  /** thread-state fields a copy's second reading must show unchanged too (CopierOptions.tstateCheck) */
  readonly tstateCheck: readonly number[];
  /** how copies are checked now */
  readonly consistency: Consistency;
  /** the copy's thread runs again after a stopped read: the copy may read nothing more */
  readonly frozen: boolean;
  /** a copy can be made again with the target stopped */
  readonly canStop: boolean;
  /**
   * keep a copy that nothing proves when its readings agree (`--copy optimistic` without the
   * anchor: not exact, see consistency.ts); else such a copy was not proven
   */
  readonly trustAgreement: boolean;
  /** the fields of the GIL interpreter `interp` runs under, to read around a copy (null: no GIL proof there) */
  gilRange(interp: bigint): Range | null;
  /** the code objects a copy's stack reached */
  reached(codes: readonly bigint[]): void;
  /** set the thread's profiler anchor */
  writeAnchor(tstate: bigint, target: bigint, below: Iterable<number>): void;
}

/** A thread's copy in progress: the snapshot, the code checks made in its window, and what it is. */
export interface Attempt {
  snap: ThreadSnapshot;
  codes: PendingCodes;
  entry: ListEntry;
}

/** A thread's first read, made together with the other threads' (see MemoryCopier.copyInterpreters). */
export interface Prefetched {
  plan: Range[];
  got: (Uint8Array | null)[];
  /** where the thread state is in `plan` (after the GIL's fields, where they are read) */
  tstateAt: number;
}

/** Thrown by a read of a copy processed after its stopped thread was let go (see MemoryCopier.stoppedCopy). */
export const FROZEN = new Error('the copy needs a read while its thread runs');
const frozenRead = (): never => {
  throw FROZEN;
};

/**
 * One copy of a thread (see the top of this file). The copy is the first reading; it did not
 * move if the second shows the same stack (consistency.ts). The window a change can slip
 * through is one system call (a few microseconds), and a change confined to the innermost
 * frames that undoes itself within it can only show a stack the program had. `stopped`: the
 * thread cannot run meanwhile, nothing is read twice. `released` is called once the target's
 * memory has been read, before the code checks (see MemoryCopier.stoppedCopy).
 */
export function copyThread(
  ctx: CopyContext,
  cache: ThreadCache,
  interp: bigint,
  interpreterId: bigint,
  tstate: bigint,
  stopped: boolean,
  prefetched?: Prefetched,
  replanned = false,
  released?: () => void,
): Attempt {
  const L = ctx.layout;
  const P = L.pointerSize;
  const started = performance.now();
  const errors: string[] = [];
  const regions: Region[] = [];
  const snap = emptySnapshot(interpreterId, tstate, regions, errors);
  const attempt: Attempt = { snap, codes: new Map(), entry: 'thread' };
  const checking = !stopped;
  const tryRead = (address: bigint, length: number): Uint8Array | null => (ctx.frozen ? frozenRead() : ctx.source.tryRead(address, length));

  // the first read, and (checking) the same ranges again: read now, or with the others
  // (prefetched) when they were planned alike
  const gilAt = checking ? ctx.gilRange(interp) : null;
  const at = planIndex(L, cache, gilAt !== null);
  const n = at.length;
  let whole: Range[];
  let got: (Uint8Array | null)[];
  const codeAt = (checking ? 2 : 1) * n;
  // What was read with the pass is used only if it is this plan, range for range: the bytes are
  // taken by their place in it (planIndex), so a plan that changed since — another copy of the
  // thread in this pass learned other frames outside its chunks, as many as before — would
  // give one frame's bytes to another address. (Seen on 3.13 with --copy interrupt: a copy
  // proven off its CPU failed, the copy after it used the pass's read, and a generator's frame
  // got the bytes of the thread's bottom entry frame — a chain cut to one frame, accepted.)
  const planned = planOf(ctx, tstate, interp, cache, checking);
  if (prefetched && samePlan(prefetched.plan, planned)) {
    whole = prefetched.plan;
    got = prefetched.got;
  } else {
    whole = planned;
    got = ctx.frozen ? frozenRead() : readMany(ctx.source, whole);
  }
  const plan = whole.slice(0, n);
  const again = checking ? got.slice(n, 2 * n) : null;
  const codeRangesRead = whole.slice(codeAt);
  const codeData = got.slice(codeAt);
  const genAt = generationRange(L, interp);
  /** what the first read got of a _PyCFrame it planned, at `address` (null: not planned there) */
  const plannedCframe = (address: bigint): Uint8Array | null => {
    for (let i = at.cframes; i < at.chunks; i++) if (plan[i]!.address === address) return got[i] ?? null;
    return null;
  };

  let ts = got[at.tstate] ?? null;
  // the thread state was read on its own, after the rest of the first read (the anchor proves
  // only what was read after it: see consistency.ts)
  let tsLate = false;
  let extra = 0; // reads after the first one
  if (!ts && cache.tstateLength !== L.tstate.size) {
    extra++;
    ts = tryRead(tstate, L.tstate.size);
  }
  if (!ts || readPointer(ts, L.tstate.interp, P) !== interp) {
    attempt.entry = 'stale';
    return attempt;
  }
  const generation = genAt ? u64(got[at.generation]) : null;
  // 3.15: the base frame sits inside _PyThreadStateImpl, past thread_state.size; copy the
  // thread state through its end in the same region
  if (L.tstate.baseFrame !== null) {
    const base = readPointer(ts, L.tstate.baseFrame, P);
    // (and the C stack's fields after it: consistency.ts, CStack)
    const end = base >= tstate ? tstate + BigInt(tstateCopyEnd(L, Number(base - tstate))) : base + BigInt(L.frame.size);
    if (base >= tstate + BigInt(L.tstate.size) && end - tstate <= BigInt(L.tstate.size + MAX_TSTATE_TAIL)) {
      const need = Math.max(Number(end - tstate), ctx.tstateMin);
      if (ts.length < need) {
        extra++;
        const whole = tryRead(tstate, need);
        if (whole) {
          ts = whole;
          tsLate = true;
        }
        else errors.push(`base frame ${hex(base)}: not readable`);
      }
      cache.tstateLength = need;
    }
  }
  regions.push({ address: tstate, bytes: ts });
  snap.threadId = readPointer(ts, L.tstate.threadId, P);
  snap.nativeThreadId = readPointer(ts, L.tstate.nativeThreadId, P);
  const tsView = new DataView(ts.buffer, ts.byteOffset, ts.byteLength);
  snap.holdsGil = holdsGilField(L.tstate, tsView, 0) ?? false;
  snap.handlingException = handlingException(L.tstate, tsView, 0, P);
  const mem = new GrowingMemory(regions, P);

  const cframe = L.tstate.cframeCurrentFrame !== null ? readPointer(ts, L.tstate.currentFrame, P) : 0n;
  let frame = readPointer(ts, L.tstate.currentFrame, P);
  // 3.11, 3.12: the calling eval loop's _PyCFrame and its current frame, as copied (0n: none)
  let outerCframe = 0n;
  let enteredFrom = 0n;
  /** the _PyCFrame at `address` into the copy, `length` bytes (planned, or read now); false: not readable */
  const copyCframe = (address: bigint, length: number): boolean => {
    if (mem.contains(address, length)) return true;
    let bytes = plannedCframe(address);
    if (!bytes || bytes.length < length) {
      extra++;
      bytes = tryRead(address, length);
    }
    if (bytes) mem.add({ address, bytes });
    return bytes !== null;
  };
  if (L.tstate.cframeCurrentFrame !== null) {
    // 3.11/3.12: tstate->cframe->current_frame; root_cframe is inside the thread state, a
    // running eval loop's _PyCFrame is on the C stack
    frame = 0n;
    cache.cframe = cframe;
    cache.outerCframe = 0n;
    if (cframe !== 0n) {
      if (!copyCframe(cframe, cframeLength(L))) errors.push(`cframe ${hex(cframe)}: not readable`);
      frame = mem.ptr(cframe + BigInt(L.tstate.cframeCurrentFrame)) ?? 0n;
      // the calling eval loop's _PyCFrame too, whose current frame is what the running loop's
      // entry frame leads to (reference-walker.ts); not readable: the walk goes without it, as
      // before those were copied
      const outer = readsOuterCframe(L) ? (mem.ptr(cframe + BigInt(L.tstate.cframePrevious!)) ?? 0n) : 0n;
      cache.outerCframe = outer;
      if (outer !== 0n && copyCframe(outer, L.tstate.cframeCurrentFrame + P)) {
        enteredFrom = mem.ptr(outer + BigInt(L.tstate.cframeCurrentFrame)) ?? 0n;
        if (enteredFrom !== 0n) outerCframe = outer;
      }
    }
  }

  const base = L.tstate.baseFrame !== null ? readPointer(ts, L.tstate.baseFrame, P) : 0n;
  if ((frame === 0n || frame === base) && (snap.threadId === 0n || (ctx.source.nativeThreadIds === true && snap.nativeThreadId === 0n))) {
    attempt.entry = 'unborn';
    return attempt;
  }
  cache.nativeThreadId = snap.nativeThreadId;

  const guessedOutside = new Map<bigint, Uint8Array>();
  cache.outside.forEach((f, i) => {
    const b = got[at.outside + i];
    if (b) guessedOutside.set(f, b);
  });
  extra += copyChunks(L, ts, mem, errors, cache, got.slice(at.chunks, at.outside), tryRead);
  const chain = followFrames(L, ctx.maxFrames, frame, base, mem, errors, guessedOutside, tryRead);
  extra += chain.reads;
  // (the base frame lies in the thread state's own read: not read again on its own)
  const tsEnd = tstate + BigInt(ts.length);
  cache.outside = chain.frames.filter((f) => !mem.inChunk(f, L.frame.size) && !(f >= tstate && f + BigInt(L.frame.size) <= tsEnd));
  // the chain's code objects, inside the window (see code-cache.ts)
  const codes = codesOf(L, chain.frames, mem);
  ctx.reached(codes);
  released?.();
  const before = attempt.codes.size;
  // (counting what the check reads for itself: the names and line table of a code object
  // first seen are read after the readings, and must be brought inside the window below)
  let codeLiveReads = 0;
  const codeReader = ctx.frozen
    ? frozenRead
    : (a: bigint, len: number): Uint8Array | null => {
        codeLiveReads++;
        return ctx.source.tryRead(a, len);
      };
  ctx.codes.check(codes, interp, generation, attempt.codes, (a, len) => pick(codeRangesRead, codeData, a, len), codeReader);
  // the code objects it used lately, most recent first, to read with the next copy
  cache.codes = [...new Set([...codes, ...cache.codes])].slice(0, RECENT_CODES);
  // code objects checked with what the first read brought along cost no read of their own
  const codeReads = attempt.codes.size - before;
  if (codeReads > 0 && codes.some((c) => !codeRangesRead.some((r) => r.address === c))) extra += codeReads;

  if (checking) {
    // the first read did not bring everything (a deeper stack, a new chunk or code object):
    // once, copy again with the plan this copy learned, for a window of one call again
    if (extra > 0 && !replanned) return copyThread(ctx, cache, interp, interpreterId, tstate, stopped, undefined, true);
    const seen: Seen = { tstate, ts, cframe, outerCframe, enteredFrom, frame, chain: chain.frames, mem, generation, generationAt: genAt };
    // the second reading: the planned ranges read again in the same call — or, when the copy
    // needed reads of its own, what it ended up using, read again now (the GIL's fields first)
    let now: (address: bigint, length: number) => Uint8Array | null;
    let gilAfter: Uint8Array | null = null;
    if (extra === 0) {
      now = (a, len) => pick(plan, again!, a, len);
      if (gilAt) gilAfter = again![at.gil] ?? null;
    } else {
      const used: Range[] = [];
      if (gilAt) used.push(gilAt);
      used.push({ address: tstate, length: ts.length });
      if (genAt) used.push(genAt);
      for (const r of mem.all()) if (r.address !== tstate) used.push({ address: r.address, length: r.bytes.length });
      const second = readMany(ctx.source, used);
      now = (a, len) => pick(used, second, a, len);
      if (gilAt) gilAfter = second[0] ?? null;
    }
    snap.unproven = !(proven(ctx, cache, seen, tsLate, gilAt ? (got[at.gil] ?? null) : null, gilAfter, now) || (ctx.trustAgreement && agrees(L, seen, now, ctx.tstateCheck)));
    // The copy held, but a code object's names and line table were read after its readings:
    // had its frame returned and the function been dropped meanwhile, they would be freed
    // memory, and the record would not decode (the sample then rejected as corrupt: seen
    // under load on 3.14 in test/code-reuse.test.ts). The death count read once more closes
    // the window around those reads: a code object that died since the readings unproves it.
    if (!snap.unproven && extra === 0 && codeLiveReads > 0 && genAt && generation !== null) {
      const now = ctx.source.tryRead(genAt.address, genAt.length);
      if (!now || u64(now) !== generation) snap.unproven = true;
    }
    // Without the death counter (3.11–3.13), a code object read in the window may still be
    // of a function dropped and compiled again at the same address within it (the readings
    // cannot see a frame popped and pushed again there): a copy that found a code object
    // new or changed is made again with the target stopped, where it can be.
    if (!snap.unproven && generation === null && codeReads > 0 && ctx.canStop && ctx.codes.changes(attempt.codes)) snap.unproven = true;
    // the innermost frame's instruction pointer, not compared (it runs), must fit its code:
    // else the copy caught the frame being set up (instr-ptr.ts)
    if (!snap.unproven && !innermostFits(L, chain.frames[0], mem, (code) => ctx.codes.bytecodeRange(code, attempt.codes))) snap.unproven = true;
  }
  // (after every copy, stopped or not: where the next copy will look for it)
  if (ctx.consistency === 'anchor') placeAnchor(ctx, cache, tstate, ts, chain.frames, mem);
  maskFrames(mem, chain.frames, L.frame.localsplus, L.chunk.data);
  snap.frames = { addresses: chain.frames.map(Number), size: L.frame.size, wordBytes: L.pointerSize };
  snap.copyMicros = Math.round((performance.now() - started) * 1000);
  return attempt;
}

/** A Python frame of the copy (owned by a thread or a generator), off the C stack `c` (consistency.ts, CStack)? */
function isPythonFrame(L: Layout, mem: GrowingMemory, frame: bigint, c: CStack | null): boolean {
  const owner = mem.bytes(frame + BigInt(L.frame.owner), 1)?.[0];
  return (owner === L.owners.thread || owner === L.owners.generator) && !onCStack(c, Number(frame));
}

/**
 * Is the copy proven of one moment (consistency.ts): by the profiler anchor, or by the GIL
 * (`gilBefore`: its fields as read first, `gilAfter`: as read after the copy's reads; null
 * where not read) — with the thread-state fields the recording also checks (tstateCheck) the
 * same in the second reading (`now`).
 */
function proven(
  ctx: CopyContext,
  cache: ThreadCache,
  seen: Seen,
  tsLate: boolean,
  gilBefore: Uint8Array | null,
  gilAfter: Uint8Array | null,
  now: (address: bigint, length: number) => Uint8Array | null,
): boolean {
  const L = ctx.layout;
  const P = L.pointerSize;
  if (!sameFields(L, seen, ctx.tstateCheck, now)) return false;
  if (gilBefore && gilAfter) {
    const switches = L.gil!.switchNumber - L.gil!.lastHolder;
    if (gilProves(seen.tstate, readPointer(gilBefore, 0, P), readPointer(gilBefore, switches, P), readPointer(gilAfter, switches, P))) return true;
  }
  if (ctx.consistency !== 'anchor' || tsLate) return false;
  const T = L.tstate;
  const anchor = Number(readPointer(seen.ts, T.lastProfiledFrame!, P));
  const fields = T.lastProfiledFrameSeq !== null ? [T.lastProfiledFrame!, T.lastProfiledFrameSeq] : [T.lastProfiledFrame!];
  const chain = seen.chain;
  const at = chain.findIndex((f) => Number(f) === anchor);
  const current = chain.length > 0 ? Number(chain[0]!) : 0;
  const c = cStackOf(L, seen.ts, seen.tstate);
  const above = at !== 1 || aboveAnchorWalks(c, current, seen.mem.bytes(chain[0]! + BigInt(L.frame.owner), 1)?.[0], L);
  const ok = anchorProves(at, at >= 0 && isPythonFrame(L, seen.mem, chain[at]!, c), cache.anchor.trusts(anchor, current), sameFields(L, seen, fields, now), above);
  cache.anchor.saw(anchor, current, chain.length > 1 ? Number(chain[1]!) : 0, c);
  return ok;
}

/** Leave the profiler anchor where it proves the next copy of the thread (consistency.ts anchorPlace). */
function placeAnchor(ctx: CopyContext, cache: ThreadCache, tstate: bigint, ts: Uint8Array, chain: readonly bigint[], mem: GrowingMemory): void {
  const L = ctx.layout;
  const anchor = readPointer(ts, L.tstate.lastProfiledFrame!, L.pointerSize);
  const c = cStackOf(L, ts, tstate);
  const k = anchorPlace(chain.length, chain.indexOf(anchor), cache.anchor.trusts(Number(anchor), chain.length > 0 ? Number(chain[0]!) : 0), (j) => isPythonFrame(L, mem, chain[j]!, c));
  if (k !== null) ctx.writeAnchor(tstate, chain[k]!, chain.slice(k + 1).map(Number));
}

/**
 * Does the innermost frame's instruction pointer fit its code object's bytecode (true when it
 * is not a Python frame, or its code object is not known: nothing to judge by)?
 */
export function innermostFits(L: Layout, frame: bigint | undefined, mem: GrowingMemory, bytecode: (code: bigint) => [bigint, bigint] | null): boolean {
  const bytes = frame === undefined ? null : mem.bytes(frame, L.frame.size);
  if (!bytes || (bytes[L.frame.owner] !== L.owners.thread && bytes[L.frame.owner] !== L.owners.generator)) return true;
  const code = readPointer(bytes, L.frame.executable, L.pointerSize) & ~BigInt(L.executableTagMask);
  const range = code === 0n ? null : bytecode(code);
  return range === null || instrPtrFits(readPointer(bytes, L.frame.instrPtr, L.pointerSize), range[0], range[1], L.frame.instrPtrIsPrevious);
}

/** The code objects of the chain's Python frames. */
export function codesOf(L: Layout, chain: readonly bigint[], mem: GrowingMemory): bigint[] {
  const tag = BigInt(L.executableTagMask);
  const out: bigint[] = [];
  for (const f of chain) {
    const bytes = mem.bytes(f, L.frame.size);
    if (!bytes) continue;
    const owner = bytes[L.frame.owner]!;
    if (owner !== L.owners.thread && owner !== L.owners.generator) continue;
    const code = readPointer(bytes, L.frame.executable, L.pointerSize) & ~tag;
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
function copyChunks(
  L: Layout,
  ts: Uint8Array,
  mem: GrowingMemory,
  errors: string[],
  cache: ThreadCache,
  guessed: (Uint8Array | null)[],
  tryRead: (address: bigint, length: number) => Uint8Array | null,
): number {
  const P = L.pointerSize;
  let chunk = readPointer(ts, L.tstate.datastackChunk, P);
  const top = readPointer(ts, L.tstate.datastackTop, P);
  const header = L.chunk.data;
  const found: ChunkGuess[] = [];
  let reads = 0;
  const read = (address: bigint, length: number): Uint8Array | null => {
    reads++;
    return tryRead(address, length);
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
export function followFrames(
  L: Layout,
  maxFrames: number,
  frame: bigint,
  base: bigint,
  mem: GrowingMemory,
  errors: string[],
  guessed: Map<bigint, Uint8Array>,
  tryRead: (address: bigint, length: number) => Uint8Array | null,
): { frames: bigint[]; reads: number } {
  const size = L.frame.size;
  const seen = new Set<bigint>();
  const frames: bigint[] = [];
  let reads = 0;
  for (let depth = 0; frame !== 0n && depth < maxFrames && !seen.has(frame); depth++) {
    seen.add(frame);
    frames.push(frame);
    let bytes = mem.bytes(frame, size);
    if (!bytes) {
      let copy = guessed.get(frame) ?? null;
      if (!copy) {
        reads++;
        copy = tryRead(frame, size);
      }
      if (!copy) {
        errors.push(`frame ${hex(frame)}: not readable`);
        break;
      }
      mem.add({ address: frame, bytes: copy });
      bytes = copy;
    }
    if (frame === base) break;
    frame = readPointer(bytes, L.frame.previous, L.pointerSize);
  }
  return { frames, reads };
}

/** The same ranges in the same order. */
function samePlan(a: readonly Range[], b: readonly Range[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i]!.address !== b[i]!.address || a[i]!.length !== b[i]!.length) return false;
  return true;
}

/**
 * The ranges a copy of a thread reads first: the fields of the GIL it runs under (to prove the
 * copy, consistency.ts gilProves), its thread state, the count of code-object deaths, the
 * _PyCFrame (3.11/3.12), the data-stack chunks and the frames outside them, as its previous
 * copy found them — and, when the copy is to be checked, all of it again. (The GIL's fields
 * are read only for a copy that is checked, and come first in each reading.)
 */
export function planOf(ctx: CopyContext, tstate: bigint, interp: bigint, cache: ThreadCache, checking: boolean): Range[] {
  const L = ctx.layout;
  const plan: Range[] = [];
  const gil = checking ? ctx.gilRange(interp) : null;
  if (gil) plan.push(gil);
  plan.push({ address: tstate, length: cache.tstateLength });
  const genAt = generationRange(L, interp);
  if (genAt) plan.push(genAt);
  plan.push(...cframeRanges(L, cache));
  for (const c of cache.chunks) plan.push({ address: c.address, length: c.used });
  for (const f of cache.outside) plan.push({ address: f, length: L.frame.size });
  return [...plan, ...(checking ? plan : []), ...codeRanges(ctx, cache)];
}

/** Where each part of a reading is in planOf's ranges (`length`: ranges in one reading). */
function planIndex(L: Layout, cache: ThreadCache, gil: boolean): { gil: number; tstate: number; generation: number; cframes: number; chunks: number; outside: number; length: number } {
  const tstate = gil ? 1 : 0;
  const generation = tstate + 1;
  const cframes = generation + (L.interp.codeObjectGeneration !== null ? 1 : 0);
  const chunks = cframes + cframeRanges(L, cache).length;
  const outside = chunks + cache.chunks.length;
  return { gil: 0, tstate, generation, cframes, chunks, outside, length: outside + cache.outside.length };
}

/**
 * Without a count of code-object deaths (3.11–3.13) every copy checks its code objects
 * again: those the previous copy of the thread used are read with the first read. With it,
 * only the bytecode due for a refresh (see code-cache.ts) is.
 */
function codeRanges(ctx: CopyContext, cache: ThreadCache): Range[] {
  return ctx.codes.checkRanges(cache.codes, ctx.layout.interp.codeObjectGeneration === null);
}

/** The _PyCFrames the previous copy found (3.11/3.12: the running eval loop's and the calling one's), to read with the first read. */
function cframeRanges(L: Layout, cache: ThreadCache): Range[] {
  if (L.tstate.cframeCurrentFrame === null) return [];
  const out: Range[] = [];
  if (cache.cframe !== 0n) out.push({ address: cache.cframe, length: cframeLength(L) });
  if (cache.outerCframe !== 0n && readsOuterCframe(L)) out.push({ address: cache.outerCframe, length: L.tstate.cframeCurrentFrame + L.pointerSize });
  return out;
}

/** 3.11, 3.12 (eval loops with a _PyCFrame each): the copy takes the calling eval loop's _PyCFrame too. */
export function readsOuterCframe(L: Layout): boolean {
  return L.tstate.cframeCurrentFrame !== null && L.tstate.cframePrevious !== null;
}

/** Bytes of a _PyCFrame to copy: through current_frame, and through previous where that is read. */
export function cframeLength(L: Layout): number {
  const cur = L.tstate.cframeCurrentFrame! + L.pointerSize;
  return readsOuterCframe(L) ? Math.max(cur, L.tstate.cframePrevious! + L.pointerSize) : cur;
}

/** Where the interpreter's code-object death count is (null: this Python has none). */
function generationRange(L: Layout, interp: bigint): Range | null {
  const off = L.interp.codeObjectGeneration;
  return off === null ? null : { address: interp + BigInt(off), length: 8 };
}
