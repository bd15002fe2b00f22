// The reference walker: the frame walk of assembly/kernel.ts written plainly in TypeScript,
// with exactly the same rules and results. Tests run both over every sample the suite makes
// and require identical output; it is also the walker for places without WebAssembly.

import { BOTTOM_CODE, checkParams, type WalkParams } from '../layout/walk-params.js';
import { instrPtrFits } from './instr-ptr.js';
import { lastAtOrBelow } from './region-index.js';
import { normalizeCodeRanges, sortRegions, U64_MASK } from './normalize.js';
import { statusName } from './status.js';
import type { CodeRange, Region, WalkFrame, WalkResult, WalkSample } from './types.js';

import {
  STATUS_COMPLETE as COMPLETE,
  STATUS_COMPLETE_UNVERIFIABLE as COMPLETE_UNVERIFIABLE,
  STATUS_CORRUPT as CORRUPT,
  STATUS_CYCLE as CYCLE,
  STATUS_DANGLING as DANGLING,
  STATUS_IDLE as IDLE,
  STATUS_INCOMPLETE as INCOMPLETE,
  STATUS_NO_THREAD_STATE as NO_THREAD_STATE,
  STATUS_TOO_DEEP as TOO_DEEP,
} from '../kernel/abi.js';

const LOC_MISSING = 1;
const LOC_CROSSES = 2;

class SampleMemory {
  private readonly starts: bigint[];
  constructor(
    private readonly regions: Region[],
    private readonly pointerSize: 4 | 8,
  ) {
    this.starts = regions.map((r) => r.address);
  }

  /** the region holding [addr, addr+len) (its index, bytes and the offset), or a LOC_* failure code */
  locate(addr: bigint, len: number): { index: number; bytes: Uint8Array; offset: number } | typeof LOC_MISSING | typeof LOC_CROSSES {
    const found = lastAtOrBelow(this.starts, addr);
    if (found < 0) return LOC_MISSING;
    const r = this.regions[found]!;
    const off = addr - r.address;
    const length = BigInt(r.bytes.length);
    if (off >= length) return LOC_MISSING;
    if (off + BigInt(len) > length) return LOC_CROSSES;
    return { index: found, bytes: r.bytes, offset: Number(off) };
  }

  field(at: { bytes: Uint8Array; offset: number }, off: number): bigint {
    const dv = new DataView(at.bytes.buffer, at.bytes.byteOffset + at.offset + off, this.pointerSize);
    return this.pointerSize === 8 ? dv.getBigUint64(0, true) : BigInt(dv.getUint32(0, true));
  }

  ptr(addr: bigint): bigint | null {
    const at = this.locate(addr, this.pointerSize);
    return typeof at === 'number' ? null : this.field(at, 0);
  }
}

const inMask = (mask: number, owner: number): boolean => owner < 32 && ((mask >>> owner) & 1) !== 0;

export class ReferenceWalker {
  readonly kind = 'reference';

  /** Walk every sample; results in input order. */
  walk(params: WalkParams, codeRanges: Iterable<CodeRange>, samples: readonly WalkSample[]): WalkResult[] {
    const bad = checkParams(params);
    if (bad) throw new RangeError(`walk parameters: ${bad}`);
    const codes = normalizeCodeRanges(codeRanges);
    const codeMap = new Map<bigint, CodeRange>();
    for (const c of codes) codeMap.set(c.address, c);
    return samples.map((s) => walkOne(params, codeMap, s));
  }
}

function walkOne(p: WalkParams, codes: Map<bigint, CodeRange>, sample: WalkSample): WalkResult {
  const mem = new SampleMemory(sortRegions(sample.regions), p.pointerSize);
  const frames: WalkFrame[] = [];
  let visited = 0;
  let last = 0n;
  const done = (code: number, fail = 0n): WalkResult => ({
    status: statusName(code),
    frames,
    visited,
    lastFrame: last,
    failAddress: fail,
  });

  const tstate = sample.threadStateAddress & U64_MASK;
  if (tstate === 0n) return done(NO_THREAD_STATE);
  const ts = mem.locate(tstate, p.tstateNeed);
  if (typeof ts === 'number') return done(NO_THREAD_STATE, tstate);
  let frame = mem.field(ts, p.tstateCurrentFrame);
  // 3.11, 3.12: the current frame of the eval loop that called the running one (0n: not known)
  let enteredFrom = 0n;
  if (p.cframeCurrentFrame >= 0) {
    const cframe = frame;
    if (cframe === 0n) return done(CORRUPT, tstate);
    const f = mem.ptr((cframe + BigInt(p.cframeCurrentFrame)) & U64_MASK);
    if (f === null) return done(DANGLING, cframe);
    frame = f;
    if (p.cframePrevious >= 0) {
      const outer = mem.ptr((cframe + BigInt(p.cframePrevious)) & U64_MASK) ?? 0n;
      if (outer !== 0n) enteredFrom = mem.ptr((outer + BigInt(p.cframeCurrentFrame)) & U64_MASK) ?? 0n;
    }
  }
  let base = 0n;
  if (p.tstateBaseFrame >= 0) {
    base = mem.field(ts, p.tstateBaseFrame);
    if (base === 0n) return done(CORRUPT, tstate);
  }

  const align = BigInt(p.pointerSize - 1);
  const tagMask = BigInt(p.tagMask);
  let lastOwner = -1;
  let lastIsEntry = 0;
  // 3.11, 3.12, in an eval loop called from C: its entry frame not met yet
  let entryPending = enteredFrom !== 0n;
  // C code lies between the last Python frame and the next one (see WalkFrame.callsThroughC)
  let throughC = false;
  let tortoise = frame;
  let power = 1;
  let lam = 0;
  // the frame visited just before, when it was a Python frame on the data stack (0n if not),
  // and its region: its caller, in the same chunk, must end exactly where it begins
  let callee = 0n;
  let calleeRegion = -1;

  while (frame !== 0n) {
    if (visited >= p.maxDepth) return done(TOO_DEEP, frame);
    if ((frame & align) !== 0n) return done(CORRUPT, frame);
    const at = mem.locate(frame, p.frameSize);
    if (at === LOC_MISSING) return done(DANGLING, frame);
    if (at === LOC_CROSSES) return done(CORRUPT, frame);
    const owner = at.bytes[at.offset + p.frameOwner]!;
    const prev = mem.field(at, p.framePrevious);
    let nextCallee = 0n;
    if (inMask(p.ownerPythonMask, owner)) {
      const code = mem.field(at, p.frameExecutable) & ~tagMask;
      // A NULL executable is a frame that was popped (3.14+ clear it) or is being set up: as
      // the current frame, the copy caught it in between (skipped: its caller's stack is of
      // that moment); below another frame, it is a caller read after it returned — frames of
      // different moments (docs/validation.md)
      if (code === 0n && visited !== 0) return done(CORRUPT, frame);
      if (code !== 0n) {
        const ip = mem.field(at, p.frameInstrPtr);
        const range = codes.get(code);
        if (range === undefined) return done(CORRUPT, code);
        if (!instrPtrFits(ip, range.bytecodeStart, range.bytecodeEnd, p.instrPtrIsPrevious)) {
          return done(CORRUPT, ip === 0n ? frame : ip);
        }
        // a frame pushed by its caller on the data stack sits right after the caller's frame
        // (co_framesize words): frames from different moments glued together do not
        if (owner === p.ownerThread && callee !== 0n && calleeRegion === at.index && range.frameSize !== 0 && ((frame + BigInt(range.frameSize)) & U64_MASK) !== callee) {
          return done(CORRUPT, callee);
        }
        if (owner === p.ownerThread) nextCallee = frame;
        frames.push({ frame, code, instrPtr: ip, callsThroughC: throughC });
      }
    } else if (!inMask(p.ownerSkipMask, owner) || mem.field(at, p.frameExecutable) === 0n) {
      // (an entry frame — the eval loop's, the 3.15 base frame — always names its executable:
      // None, or the interpreter's trampoline code; a NULL one is bytes of another frame read
      // as a frame header, e.g. a thread state of one moment over frames of another)
      return done(CORRUPT, frame);
    }
    callee = nextCallee;
    calleeRegion = at.index;
    last = frame;
    lastOwner = owner;
    lastIsEntry = p.frameIsEntry >= 0 ? at.bytes[at.offset + p.frameIsEntry]! : 0;
    // 3.11: C code calling Python pushes the callee's frame (is_entry 0), links it, and only
    // then does the new eval loop set is_entry. A current frame whose caller is the calling
    // eval loop's current frame is that entry, in that window too.
    if (p.frameIsEntry >= 0 && lastIsEntry === 0 && visited === 0 && enteredFrom !== 0n && prev === enteredFrom && inMask(p.ownerPythonMask, owner)) lastIsEntry = 1;
    // 3.11, 3.12: the running eval loop's entry frame (3.11: the Python frame it marks is_entry;
    // 3.12: its own entry frame, on the C stack) leads to the calling loop's current frame. The
    // loop marks it an entry and makes it current before it links it there (the compiler orders
    // those stores as it likes: seen at the interrupt on 3.11, an entry frame whose `previous`
    // is still 0); and a _PyCFrame caught before its current frame is set points at a stale
    // one. A walk whose first entry frame does not lead there is of no one moment.
    if ((p.frameIsEntry >= 0 ? lastIsEntry !== 0 : inMask(p.ownerSkipMask, owner)) && entryPending) {
      entryPending = false;
      if (prev !== enteredFrom) return done(INCOMPLETE, frame);
    }
    throughC = inMask(p.ownerPythonMask, owner) ? lastIsEntry !== 0 : true;
    visited++;
    frame = prev;
    lam++;
    if (frame !== 0n && frame === tortoise) return done(CYCLE, frame);
    if (lam === power) {
      tortoise = frame;
      power *= 2;
      lam = 0;
    }
  }

  if (p.bottom === BOTTOM_CODE['base-frame']) {
    if (last !== base) return done(INCOMPLETE, last);
    return done(frames.length > 0 ? COMPLETE : IDLE);
  }
  if (visited === 0) return done(IDLE);
  const bottomOk = p.bottom === BOTTOM_CODE['entry-frame'] ? lastOwner >= 0 && inMask(p.ownerSkipMask, lastOwner) : p.bottom === BOTTOM_CODE['is-entry-flag'] && lastIsEntry !== 0;
  if (!bottomOk) return done(INCOMPLETE, last);
  return done(frames.length > 0 ? COMPLETE_UNVERIFIABLE : IDLE);
}
