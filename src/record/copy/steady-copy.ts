// The steady copy: a thread's copy made again exactly as its previous copy was planned, with
// nothing allocated but the copy itself.
//
// Most samples of a thread find what the previous one found: the same thread state, the same
// data-stack chunks, the same frames outside them, code objects already confirmed. For those,
// the general copier (copier.ts) does more than is needed — it plans its reads anew, carves a
// result array per range, follows the chain through 64-bit integers and a region index. The
// steady copy makes the same gathered read (every range, then every range again — five times
// in all, see READINGS — in one system call) into a buffer kept between samples, follows the
// chain with plain numbers over that buffer, applies the same check of one reading against
// the next, and copies out the sample's bytes once. Whenever a copy finds anything its plan did not foresee — a new
// chunk, a frame outside the plan, a code object not confirmed at this code_object_generation,
// a pointer that is not a user-space address, a chain that does not run down the stack — it
// gives up (returns null) and the general copier makes the copy, with its own reads and rules.
// So this path decides nothing the general one would decide otherwise; it only does less work
// when there is nothing new.
//
// Used where the layout has code_object_generation (3.14+: a confirmed code object stays
// confirmed until a death is counted) and no _PyCFrame, with 8-byte pointers.

import type { Layout } from '../../layout/layout.js';
import type { Region } from '../../walk/types.js';
import { aboveAnchorWalks, anchorPlace, anchorProves, cStackFrom, gilProves, onCStack, tstateCopyEnd, type AnchorTrust, type CStack } from './consistency.js';
import type { PreparedRead } from '../linux/native.js';
import type { MemorySource } from './source.js';
import { handlingException, holdsGilField } from './thread-facts.js';
import { instrPtrFitsNumber } from '../../walk/instr-ptr.js';

/** What the copy reads, as the previous copy of the thread found it. */
export interface SteadyPlan {
  tstateLength: number;
  chunks: readonly { address: bigint; used: number }[];
  outside: readonly bigint[];
}

/** A copy of the thread (what copier.ts makes a ThreadSnapshot of). */
export interface SteadyResult {
  threadId: bigint;
  nativeThreadId: bigint;
  holdsGil: boolean;
  handlingException: boolean;
  regions: Region[];
  /** the chain's frames' addresses, innermost first (the frame headers the regions keep) */
  frames: Float64Array;
  unproven: boolean;
  /** the code objects of the chain's Python frames (each confirmed) */
  codes: readonly bigint[];
}

export interface SteadyHooks {
  /** is the code object at this address confirmed for this interpreter at this generation (and its bytecode not due for a refresh) */
  confirmed(address: bigint, interp: bigint, generation: bigint): boolean;
  /** the bytecode [start, end) of a confirmed code object (null: not known) */
  bytecodeRange(address: bigint): [bigint, bigint] | null;
  /** the code cache's refresh round: the confirmations a copy remembers hold within one (code-cache.ts) */
  refreshRound(): number;
  /** leave the profiler anchor on this frame (`below`: the frames under it in the chain: AnchorTrust) */
  placeAnchor(target: bigint, below: Iterable<number>): void;
  /** what the copier knows of the thread's anchor (consistency.ts) */
  readonly anchor: AnchorTrust;
  /**
   * keep a copy that nothing proves when its readings agree (CopyContext.trustAgreement);
   * else such a copy was not proven
   */
  readonly trustAgreement: boolean;
}

const TWO32 = 4294967296;
/** above this high word an address is not a user-space one (and would not fit a double exactly) */
const HI_LIMIT = 0x200000;

/**
 * Readings of the plan in each read. A copy is the first reading, checked against the second;
 * when they differ (a call or return fell between them: 2-5 % of copies of a steady program),
 * the second reading checked against the third is the copy instead, and so on: the copy is the
 * first reading the next one agrees with. That is a retry made a microsecond later in the same
 * system call, not a new read after the fact: measured on hotcold.py, a retry made a separate
 * read later (a few microseconds) biased the profile by 1-3 points, because which retries
 * succeed then depends on how long frames live; within one call the retry is as close to the
 * tick as the copy itself. Only a copy none of whose readings holds is "unproven"
 * (and, in the adaptive mode, made again with the thread stopped).
 *
 * Why five: a call and a return often come in pairs a few hundred nanoseconds apart (a
 * function returns, its caller calls the next one), about as far apart as two readings, so
 * with three readings 4-5 % of the copies of hotcold.py had all three differ — and were made
 * stopped, at 130 µs each. With five, 0.0-0.3 %. A reading of a 32-frame stack (6 KB) costs
 * ~0.35 µs in the call (measured: 1 reading 3.4 µs, 3 readings 4.8, 5 readings 5.5).
 */
const READINGS = 5;
/** the count of code-object deaths, read before the readings and after them */
const GENERATION_BYTES = 8;
/** A plan whose one reading is larger than this is read three times (each reading costs its bytes' copy). */
const FEWER_READINGS_ABOVE = 32 << 10;

/** Readings made of a plan whose one reading has `bytes` bytes. */
export function readingsOf(bytes: number): number {
  return bytes > FEWER_READINGS_ABOVE ? 3 : READINGS;
}

/** The 8-byte word at `o` as a number (exact below 2^53: addresses, counts; -1 above). */
function word(dv: DataView, o: number): number {
  const hi = dv.getUint32(o + 4, true);
  return hi >= HI_LIMIT ? -1 : hi * TWO32 + dv.getUint32(o, true);
}

/** Zero bytes [from, to) of `out`, which starts at word `base` of `words`. */
function zero(out: Uint8Array, words: Int32Array, base: number, from: number, to: number): void {
  if (((from | to) & 3) !== 0) {
    out.fill(0, from, to);
    return;
  }
  for (let w = base + (from >>> 2), end = base + (to >>> 2); w < end; w++) words[w] = 0;
}

/**
 * Copies are carved out of shared slabs rather than each made its own ArrayBuffer: a new
 * buffer is allocated outside the JavaScript heap and tracked by the collector, which costs
 * more than the copy of a shallow stack. A slab lives as long as any copy carved from it.
 */
const SLAB_BYTES = 256 << 10;
const slab = { bytes: new Uint8Array(0), words: new Int32Array(0), at: 0 };

/** Room for `n` bytes in a slab, 8-byte aligned: the slab, with `slab.at` past the room. */
function carve(n: number): number {
  const need = (n + 7) & ~7;
  if (slab.at + need > slab.bytes.length) {
    slab.bytes = new Uint8Array(Math.max(SLAB_BYTES, need));
    slab.words = new Int32Array(slab.bytes.buffer);
    slab.at = 0;
  }
  const at = slab.at;
  slab.at += need;
  return at;
}

export class SteadyCopy {
  /** what the copy reads: every range of the plan, `readings` times over */
  readonly ranges: readonly { address: bigint; length: number }[];
  /** bytes of `ranges` */
  readonly length: number;
  /** times the plan is read in each read (see READINGS) */
  readonly readings: number;
  /** its own read, made when a copy is not read along with others (see copy) */
  private read: PreparedRead | null = null;
  /** the whole read: the death count, the readings, the death count again */
  private boundTo: Uint8Array | null = null;
  private whole!: DataView;
  /** the death count of this read */
  private readGenLo = 0;
  private readGenHi = 0;
  /** the readings (each `half` long) */
  private bytes!: Uint8Array;
  private dv!: DataView;
  /** the first reading of `bytes`, where the copy is taken from */
  private firstReading!: Uint8Array;
  /** bytes of one reading (each of the others follows at this distance) */
  private readonly half: number;
  /** bytes before the first reading: the death count, and the GIL's fields where read */
  private readonly lead: number;
  /** where the GIL's fields are in a reading (-1: not read) */
  private readonly gilOff: number;
  /** the GIL's last holder and count of hand-overs read before the reading being looked at */
  private gilHolderBefore = 0;
  private gilSwitchesBefore = 0;
  private readonly tstateNum: number;
  private readonly chunkAddr: number[];
  private readonly chunkRead: number[];
  private readonly chunkOff: number[];
  private readonly chunkBig: bigint[];
  private readonly used: number[];
  private readonly lastInChunk: number[];
  private readonly outAddr: number[];
  private readonly outOff: number[];
  private readonly outBig: bigint[];
  private readonly outSeen: Uint32Array;
  private stamp = 0;
  private chainAddr = new Float64Array(256);
  private chainOff = new Int32Array(256);
  /** where each chain frame is: chunk index (≥ 0), -1 the thread state, -2-j outside frame j */
  private chainWhere = new Int32Array(256);
  private readonly codes: bigint[] = [];
  /** code objects confirmed at `generation`: address → its bigint */
  private readonly confirmed = new Map<number, bigint>();
  /** the confirmed code object last seen at each depth of the chain (-1: none), and its bigint */
  private readonly codeAt = new Float64Array(64).fill(-1);
  private readonly codeBigAt: bigint[] = new Array<bigint>(64).fill(0n);
  /** the innermost frame's code object last judged, and its bytecode [start, end) (-1: not known) */
  private innerCode = -1;
  private innerStart = -1;
  private innerEnd = -1;
  private genLo = -1;
  private genHi = -1;
  private generation = 0n;
  /** the refresh round the confirmations were made in */
  private round = -1;
  private interpLo: number;
  private interpHi: number;
  /** thread_id and native_thread_id of the last copy, as 32-bit words */
  private readonly idWords = new Float64Array([-1, -1, -1, -1]);
  private lastThreadId: bigint = 0n;
  private lastNativeId: bigint = 0n;

  constructor(
    private readonly source: MemorySource & { prepareRead(ranges: readonly { address: bigint; length: number }[]): PreparedRead },
    private readonly layout: Layout,
    readonly tstate: bigint,
    readonly interp: bigint,
    generationAddress: bigint,
    readonly plan: SteadyPlan,
    private readonly anchored: boolean,
    private readonly maxFrames: number,
    /** the thread state is copied through at least this many bytes (CopierOptions.tstateMin) */
    private readonly tstateMin: number = layout.tstate.size,
    /** thread-state fields the check compares too (CopierOptions.tstateCheck) */
    private readonly tstateCheck: readonly number[] = [],
    /**
     * the fields of the GIL the thread runs under (CopyContext.gilRange: its last holder first,
     * its count of hand-overs `gilSwitches` bytes in), read before the first reading and after
     * each one, to prove a reading by the GIL (null: not read)
     */
    readonly gil: { address: bigint; length: number } | null = null,
    private readonly gilSwitches = 0,
  ) {
    const ranges: { address: bigint; length: number }[] = [{ address: tstate, length: plan.tstateLength }];
    let o = plan.tstateLength;
    this.chunkAddr = [];
    this.chunkRead = [];
    this.chunkOff = [];
    this.chunkBig = [];
    for (const c of plan.chunks) {
      ranges.push({ address: c.address, length: c.used });
      this.chunkAddr.push(Number(c.address));
      this.chunkBig.push(c.address);
      this.chunkRead.push(c.used);
      this.chunkOff.push(o);
      o += c.used;
    }
    this.outAddr = [];
    this.outOff = [];
    this.outBig = [];
    for (const f of plan.outside) {
      ranges.push({ address: f, length: layout.frame.size });
      this.outAddr.push(Number(f));
      this.outBig.push(f);
      this.outOff.push(o);
      o += layout.frame.size;
    }
    // the GIL's fields close each reading
    this.gilOff = gil ? o : -1;
    if (gil) {
      ranges.push(gil);
      o += gil.length;
    }
    this.half = o;
    this.used = plan.chunks.map(() => 0);
    this.lastInChunk = plan.chunks.map(() => 0);
    this.outSeen = new Uint32Array(plan.outside.length);
    this.readings = readingsOf(o);
    // the count of code-object deaths before the first reading and after the last: it only
    // grows, so the same count at both ends is the count of every reading (two words read
    // instead of one per reading: each range read costs a fraction of a microsecond)
    const generation = { address: generationAddress, length: 8 };
    this.lead = GENERATION_BYTES + (gil ? gil.length : 0);
    this.ranges = [generation, ...(gil ? [gil] : []), ...Array.from({ length: this.readings }, () => ranges).flat(), generation];
    this.length = this.lead + this.readings * o + GENERATION_BYTES;
    this.tstateNum = Number(tstate);
    this.interpLo = Number(interp & 0xffffffffn);
    this.interpHi = Number(interp >> 32n);
  }

  /** Does the plan still say what the thread's copy should read? */
  matches(plan: SteadyPlan, interp: bigint, anchored: boolean, gil: { address: bigint } | null): boolean {
    // (called for every copy: compares in place, allocates nothing)
    const p = this.plan;
    if (interp !== this.interp || anchored !== this.anchored || (gil?.address ?? null) !== (this.gil?.address ?? null) || plan.tstateLength !== p.tstateLength || plan.chunks.length !== p.chunks.length || plan.outside.length !== p.outside.length) return false;
    for (let i = 0; i < p.chunks.length; i++) if (plan.chunks[i]!.address !== p.chunks[i]!.address || plan.chunks[i]!.used !== p.chunks[i]!.used) return false;
    for (let i = 0; i < p.outside.length; i++) if (plan.outside[i] !== p.outside[i]) return false;
    return true;
  }

  /** A pointer at `o` as a number; -1 if it is not a user-space address. */
  private ptr(o: number): number {
    const hi = this.dv.getUint32(o + 4, true);
    if (hi >= HI_LIMIT) return -1;
    return hi * TWO32 + this.dv.getUint32(o, true);
  }

  /** The 8 bytes at `o` are the same in this reading and the next (`half` further on). */
  private same8(o: number): boolean {
    const dv = this.dv;
    const h = this.half;
    return dv.getUint32(o, true) === dv.getUint32(o + h, true) && dv.getUint32(o + 4, true) === dv.getUint32(o + h + 4, true);
  }

  /**
   * Where `address` (of the thread state, a chunk or a frame outside them) is in reading `k`
   * of the read's bytes; -1 if the plan does not read it.
   */
  at(k: number, address: bigint): number {
    if (k < 0 || k >= this.readings) return -1;
    const base = this.lead + k * this.half;
    if (address >= this.tstate && address < this.tstate + BigInt(this.plan.tstateLength)) return base + Number(address - this.tstate);
    for (let i = 0; i < this.chunkBig.length; i++) {
      const a = this.chunkBig[i]!;
      if (address >= a && address < a + BigInt(this.chunkRead[i]!)) return base + this.chunkOff[i]! + Number(address - a);
    }
    for (let j = 0; j < this.outBig.length; j++) {
      const f = this.outBig[j]!;
      if (address >= f && address < f + BigInt(this.layout.frame.size)) return base + this.outOff[j]! + Number(address - f);
    }
    return -1;
  }

  private isPython(off: number): boolean {
    const owner = this.bytes[off + this.layout.frame.owner];
    return owner === this.layout.owners.thread || owner === this.layout.owners.generator;
  }

  /** The chain's k-th frame is a Python frame off the C stack (consistency.ts, CStack). */
  private isPythonAt(k: number): boolean {
    return this.isPython(this.chainOff[k]!) && !onCStack(this.cStack, this.chainAddr[k]!);
  }

  /** the C stack as the last look's thread state gave it */
  private cStack: CStack | null = null;

  private bindTo(whole: Uint8Array): void {
    this.boundTo = whole;
    this.whole = new DataView(whole.buffer, whole.byteOffset, whole.byteLength);
    this.bytes = whole.subarray(this.lead, this.lead + this.readings * this.half);
    this.firstReading = this.bytes.subarray(0, this.half);
    this.dv = new DataView(this.bytes.buffer, this.bytes.byteOffset, this.bytes.byteLength);
  }

  /**
   * One copy; null when it needs the general copier. `preread`: the copy's bytes (`length` of
   * them, laid out as `ranges`), read just now along with others; else it makes its own read.
   */
  copy(hooks: SteadyHooks, preread: Uint8Array | null = null): SteadyResult | null {
    if (preread) {
      if (this.boundTo !== preread) this.bindTo(preread);
    } else {
      if (!this.read) {
        this.read = this.source.prepareRead(this.ranges);
        this.bindTo(this.read.bytes);
      } else if (this.boundTo !== this.read.bytes) this.bindTo(this.read.bytes);
      if (this.read.read() !== this.read.length) return null;
    }
    // a code object died during the read (rare): which readings it came before is not known
    const w = this.whole;
    const last = this.length - GENERATION_BYTES;
    this.readGenLo = w.getUint32(0, true);
    this.readGenHi = w.getUint32(4, true);
    if (w.getUint32(last, true) !== this.readGenLo || w.getUint32(last + 4, true) !== this.readGenHi) return null;
    // the first reading, judged with the one after it; if it does not hold — or it is no
    // stack the plan foresaw, which a call or return during it can also make — the second,
    // read a fraction of a microsecond later in the same call, and so on (see READINGS); each
    // look is of the reading shifted to offset 0 and the one after it
    if (this.gil) {
      this.gilHolderBefore = word(w, GENERATION_BYTES);
      this.gilSwitchesBefore = word(w, GENERATION_BYTES + this.gilSwitches);
    }
    let unproven = this.look(hooks);
    for (let r = 1; unproven !== false && r < this.readings - 1; r++) {
      // (the GIL's fields that closed this reading open the next one)
      if (this.gil) {
        this.gilHolderBefore = word(this.dv, this.gilOff);
        this.gilSwitchesBefore = word(this.dv, this.gilOff + this.gilSwitches);
      }
      this.bytes.copyWithin(0, this.half, (this.readings - r + 1) * this.half);
      unproven = this.look(hooks);
    }
    if (unproven === null) return null;
    return this.finish(hooks, unproven);
  }

  // what look() found, for finish()
  private n = 0;
  private anchorAt = -1;
  private threadLo = 0;
  private threadHi = 0;

  /**
   * Follow the chain in the first reading at offset 0, against the plan, and compare it with
   * the second at `half`: whether nothing proves it; null when it needs the general copier.
   */
  private look(hooks: SteadyHooks): boolean | null {
    const L = this.layout;
    const T = L.tstate;
    const F = L.frame;
    const fs = F.size;
    const dv = this.dv;
    // the thread state: still of this interpreter, a thread that has started, the base frame
    // where the plan put the end of the read
    if (dv.getUint32(T.interp, true) !== this.interpLo || dv.getUint32(T.interp + 4, true) !== this.interpHi) return null;
    const tsLen = this.plan.tstateLength;
    const base = T.baseFrame !== null ? this.ptr(T.baseFrame) : 0;
    if (base < 0 || (T.baseFrame !== null && Math.max(tstateCopyEnd(L, base - this.tstateNum), this.tstateMin) !== tsLen)) return null;
    // the thread's C stack (consistency.ts, CStack), from the fields after the base frame
    const cEnd = base - this.tstateNum + fs;
    this.cStack = T.cStack !== null && T.baseFrame !== null ? cStackFrom(this.ptr(cEnd + T.cStack.top), this.ptr(cEnd + T.cStack.softLimit), this.ptr(cEnd + T.cStack.hardLimit)) : null;
    let frame = this.ptr(T.currentFrame);
    if (frame <= 0 || frame === base) return null;
    const threadLo = dv.getUint32(T.threadId, true);
    const threadHi = dv.getUint32(T.threadId + 4, true);
    if (threadLo === 0 && threadHi === 0) return null;
    this.threadLo = threadLo;
    this.threadHi = threadHi;
    // the chunks, newest first, as the plan has them
    let chunk = this.ptr(T.datastackChunk);
    const top = this.ptr(T.datastackTop);
    const C = L.chunk;
    const nChunks = this.chunkAddr.length;
    for (let i = 0; i < nChunks; i++) {
      if (chunk !== this.chunkAddr[i]) return null;
      const off = this.chunkOff[i]!;
      let used: number;
      if (i === 0) {
        if (!(top > chunk)) return null;
        used = top - chunk;
      } else {
        const slots = this.ptr(off + C.top);
        const size = this.ptr(off + C.size);
        if (slots < 0 || size < 0) return null;
        used = C.data + slots * 8;
        if (used > size) return null;
      }
      if (used > this.chunkRead[i]! || used < C.data) return null;
      this.used[i] = used;
      this.lastInChunk[i] = Infinity;
      chunk = this.ptr(off + C.previous);
    }
    if (chunk !== 0) return null;
    // the chain: every frame where the plan has it, each chunk's frames going down the stack
    // (so the chain cannot loop), the frames outside the chunks each once
    const stamp = ++this.stamp;
    let n = 0;
    while (frame !== 0 && n < this.maxFrames) {
      let where = -3;
      let off = -1;
      for (let i = 0; i < nChunks; i++) {
        const a = this.chunkAddr[i]!;
        if (frame >= a && frame + fs <= a + this.used[i]!) {
          if (frame >= this.lastInChunk[i]!) return null;
          this.lastInChunk[i] = frame;
          where = i;
          off = this.chunkOff[i]! + (frame - a);
          break;
        }
      }
      if (off < 0) {
        if (frame === base) {
          where = -1;
          off = frame - this.tstateNum;
        } else if (frame + fs > this.tstateNum && frame < this.tstateNum + tsLen) {
          return null; // a frame in the thread state other than the base frame: not a plan's case
        } else {
          const j = this.outAddr.indexOf(frame);
          if (j < 0 || this.outSeen[j] === stamp) return null;
          this.outSeen[j] = stamp;
          where = -2 - j;
          off = this.outOff[j]!;
        }
      }
      if (n === this.chainOff.length) this.grow();
      this.chainAddr[n] = frame;
      this.chainOff[n] = off;
      this.chainWhere[n] = where;
      n++;
      if (frame === base) break;
      frame = this.ptr(off + F.previous);
      if (frame < 0) return null;
    }
    // the code objects: each confirmed at this generation, or the general copier checks them
    const genLo = this.readGenLo;
    const genHi = this.readGenHi;
    const round = hooks.refreshRound();
    if (genLo !== this.genLo || genHi !== this.genHi || round !== this.round) {
      this.genLo = genLo;
      this.genHi = genHi;
      this.round = round;
      this.generation = (BigInt(genHi) << 32n) | BigInt(genLo);
      this.confirmed.clear();
      this.codeAt.fill(-1);
      this.innerCode = -1;
    }
    const tagMask = L.executableTagMask;
    const codes = this.codes;
    codes.length = 0;
    for (let k = 0; k < n; k++) {
      const off = this.chainOff[k]!;
      if (!this.isPython(off)) continue;
      const hi = dv.getUint32(off + F.executable + 4, true);
      if (hi >= HI_LIMIT) return null;
      const code = hi * TWO32 + ((dv.getUint32(off + F.executable, true) & ~tagMask) >>> 0);
      if (code === 0) continue;
      // (most frames run the code the frame at their depth ran in the previous copy)
      if (this.codeAt[k] === code) {
        codes.push(this.codeBigAt[k]!);
        continue;
      }
      let big = this.confirmed.get(code);
      if (big === undefined) {
        big = BigInt(code);
        if (!hooks.confirmed(big, this.interp, this.generation)) return null;
        this.confirmed.set(code, big);
      }
      if (k < this.codeAt.length) {
        this.codeAt[k] = code;
        this.codeBigAt[k] = big;
      }
      codes.push(big);
    }
    // the proof (consistency.ts), with the fields the recording also checks the same in the
    // next reading; else, where the mode keeps agreeing readings, the agreement
    let checked = true;
    for (const o of this.tstateCheck) if (!this.same8(o)) checked = false;
    let anchorAt = -1;
    let proven = false;
    if (this.gil && checked) {
      proven = gilProves(this.tstateNum, this.gilHolderBefore, this.gilSwitchesBefore, word(dv, this.gilOff + this.gilSwitches));
    }
    if (this.anchored) {
      const anchor = this.ptr(T.lastProfiledFrame!);
      if (anchor > 0) for (let k = 0; k < n; k++) if (this.chainAddr[k] === anchor) {
        anchorAt = k;
        break;
      }
      const trust = hooks.anchor;
      const unmoved = this.same8(T.lastProfiledFrame!) && (T.lastProfiledFrameSeq === null || this.same8(T.lastProfiledFrameSeq));
      const above = anchorAt !== 1 || aboveAnchorWalks(this.cStack, this.chainAddr[0]!, this.bytes[this.chainOff[0]! + F.owner], L);
      if (!proven && checked) proven = anchorProves(anchorAt, anchorAt >= 0 && this.isPythonAt(anchorAt), trust.trusts(anchor, this.chainAddr[0]!), unmoved, above);
      trust.saw(anchor, this.chainAddr[0]!, n > 1 ? this.chainAddr[1]! : 0, this.cStack);
    }
    let unproven = !proven;
    if (unproven && hooks.trustAgreement && checked) {
      // the agreement (as consistency.ts's `agrees`): the next reading shows the same stack
      unproven = !(this.same8(T.currentFrame) && this.same8(T.datastackTop) && this.same8(T.datastackChunk));
      const h = this.half;
      const bytes = this.bytes;
      for (let k = 0; k < n && !unproven; k++) {
        const off = this.chainOff[k]!;
        if (!this.same8(off + F.previous) || !this.same8(off + F.executable) || bytes[off + F.owner] !== bytes[off + h + F.owner] || (k > 0 && !this.same8(off + F.instrPtr))) unproven = true;
      }
    }
    // the innermost frame's instruction pointer, not compared (it runs), must fit its code:
    // else the copy caught the frame being set up (instr-ptr.ts)
    if (!unproven && n > 0 && codes.length > 0 && !this.innermostFits(hooks)) unproven = true;
    this.n = n;
    this.anchorAt = anchorAt;
    return unproven;
  }

  /** Does the innermost frame's instruction pointer fit its code object (true: not a Python frame, or nothing to judge by)? */
  private innermostFits(hooks: SteadyHooks): boolean {
    const off = this.chainOff[0]!;
    if (!this.isPython(off)) return true;
    const F = this.layout.frame;
    const code = this.ptr(off + F.executable);
    if (code <= 0) return true;
    const address = code - (code % (this.layout.executableTagMask + 1)); // (the tag bits cleared: the mask is 2^k - 1)
    if (address !== this.innerCode) {
      const range = hooks.bytecodeRange(BigInt(address));
      this.innerCode = address;
      this.innerStart = range ? Number(range[0]) : -1;
      this.innerEnd = range ? Number(range[1]) : -1;
    }
    if (this.innerStart < 0) return true;
    const ip = this.ptr(off + F.instrPtr);
    return ip >= 0 && instrPtrFitsNumber(ip, this.innerStart, this.innerEnd, F.instrPtrIsPrevious);
  }

  /** The copy of the first reading (as look() left it), the anchor left where it vouches next. */
  private finish(hooks: SteadyHooks, unproven: boolean): SteadyResult {
    const L = this.layout;
    const T = L.tstate;
    const fs = L.frame.size;
    // of a frame in a chunk, its header up to its local variables (see copy-memory.ts maskFrames)
    const kept = L.frame.localsplus;
    const C = L.chunk;
    const dv = this.dv;
    const h = this.half;
    const n = this.n;
    const anchorAt = this.anchorAt;
    const tsLen = this.plan.tstateLength;
    const nChunks = this.chunkAddr.length;
    const threadLo = this.threadLo;
    const threadHi = this.threadHi;
    // the copy: the first reading, once; each chunk's unused part and everything but the
    // chain's frame headers zeroed (as copy-memory.ts's maskFrames)
    const carved = carve(h);
    const out = slab.bytes.subarray(carved, carved + h);
    out.set(this.firstReading);
    // (zeroed a word at a time where the stretch allows: a fill() per gap between frames costs
    // more than the loop, there being a gap per frame)
    const words = slab.words;
    const base = carved >>> 2;
    const regions: Region[] = [{ address: this.tstate, bytes: out.subarray(0, tsLen) }];
    for (let i = 0; i < nChunks; i++) {
      const off = this.chunkOff[i]!;
      const used = this.used[i]!;
      regions.push({ address: this.chunkBig[i]!, bytes: out.subarray(off, off + used) });
      // the chain's frames in this chunk, lowest address first
      let from = off + C.data;
      for (let k = n - 1; k >= 0; k--) {
        if (this.chainWhere[k] !== i) continue;
        const at = this.chainOff[k]!;
        if (at > from) zero(out, words, base, from, at);
        from = Math.max(from, at + kept);
      }
      if (from < off + used) zero(out, words, base, from, off + used);
    }
    for (let k = 0; k < n; k++) {
      const w = this.chainWhere[k]!;
      if (w <= -2) {
        const off = this.outOff[-2 - w]!;
        // (a frame outside the chunks keeps its header only, as a chunk's frames do)
        if (kept < fs) zero(out, words, base, off + kept, off + fs);
        regions.push({ address: this.outBig[-2 - w]!, bytes: out.subarray(off, off + fs) });
      }
    }
    if (this.anchored) {
      const anchor = this.ptr(T.lastProfiledFrame!);
      const k = anchorPlace(n, anchorAt, hooks.anchor.trusts(anchor, n > 0 ? this.chainAddr[0]! : 0), (j) => this.isPythonAt(j));
      if (k !== null) hooks.placeAnchor(BigInt(this.chainAddr[k]!), this.chainAddr.subarray(k + 1, n));
    }
    // the ids as bigints, made again only when they change
    if (threadLo !== this.idWords[0] || threadHi !== this.idWords[1]) {
      this.idWords[0] = threadLo;
      this.idWords[1] = threadHi;
      this.lastThreadId = (BigInt(threadHi) << 32n) | BigInt(threadLo);
    }
    const nLo = dv.getUint32(T.nativeThreadId, true);
    const nHi = dv.getUint32(T.nativeThreadId + 4, true);
    if (nLo !== this.idWords[2] || nHi !== this.idWords[3]) {
      this.idWords[2] = nLo;
      this.idWords[3] = nHi;
      this.lastNativeId = (BigInt(nHi) << 32n) | BigInt(nLo);
    }
    return {
      threadId: this.lastThreadId,
      nativeThreadId: this.lastNativeId,
      holdsGil: holdsGilField(T, dv, 0) ?? false,
      handlingException: handlingException(T, dv, 0, L.pointerSize),
      regions,
      frames: this.chainAddr.slice(0, n),
      unproven,
      codes: this.codes,
    };
  }

  private grow(): void {
    const n = this.chainOff.length * 2;
    const a = new Float64Array(n);
    a.set(this.chainAddr);
    this.chainAddr = a;
    const o = new Int32Array(n);
    o.set(this.chainOff);
    this.chainOff = o;
    const w = new Int32Array(n);
    w.set(this.chainWhere);
    this.chainWhere = w;
  }
}

