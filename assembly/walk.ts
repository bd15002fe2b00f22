// The frame walk itself: follows a CPython frame chain through one sample's copied regions,
// with every load bounds-checked against the memory size. Shared by the batch entry point
// (kernel.ts `walk`) and the block engine (engine.ts). src/walk/reference-walker.ts has exactly
// the same semantics in TypeScript — change both together.

import {
  BOTTOM_BASE_FRAME,
  BOTTOM_ENTRY_FRAME,
  BOTTOM_IS_ENTRY_FLAG,
  CODE_ADDRESS,
  CODE_END,
  CODE_FRAME_SIZE,
  CODE_SIZE,
  CODE_START,
  FRAME_ADDRESS,
  FRAME_CALLS_THROUGH_C,
  FRAME_CODE,
  FRAME_FLAGS,
  FRAME_IP,
  FRAME_SIZE,
  P_BOTTOM,
  P_CFRAME_CURRENT,
  P_CFRAME_PREVIOUS,
  P_COUNT,
  P_FR_EXECUTABLE,
  P_FR_INSTR_PTR,
  P_FR_IS_ENTRY,
  P_FR_OWNER,
  P_FR_PREVIOUS,
  P_FR_SIZE,
  P_IP_PREVIOUS,
  P_MAX_DEPTH,
  P_OWNER_PYTHON,
  P_OWNER_SKIP,
  P_OWNER_THREAD,
  P_PTR_SIZE,
  P_TAG_MASK,
  P_TS_BASE_FRAME,
  P_TS_CURRENT_FRAME,
  P_TS_NEED,
  REGION_ADDRESS,
  REGION_DATA,
  REGION_LENGTH,
  REGION_SIZE,
  STATUS_COMPLETE as COMPLETE,
  STATUS_COMPLETE_UNVERIFIABLE as COMPLETE_UNVERIFIABLE,
  STATUS_CORRUPT as CORRUPT,
  STATUS_CYCLE as CYCLE,
  STATUS_DANGLING as DANGLING,
  STATUS_IDLE as IDLE,
  STATUS_INCOMPLETE as INCOMPLETE,
  STATUS_NO_THREAD_STATE as NO_THREAD_STATE,
  STATUS_TOO_DEEP as TOO_DEEP,
  TRACE_BYTES_AT,
  TRACE_FRAME,
  TRACE_PY,
  TRACE_SIZE,
} from '../src/kernel/abi';

// ---- parameters of the current batch ----
export let ptrSize: u32 = 8;
let tsNeed: u32 = 0;
let tsCurrentFrame: u32 = 0;
let cframeCurrent: i32 = -1;
let tsBaseFrame: i32 = -1;
export let frSize: u32 = 0;
let frPrevious: u32 = 0;
let frExecutable: u32 = 0;
let frInstrPtr: u32 = 0;
let frOwner: u32 = 0;
let frIsEntry: i32 = -1;
let tagMask: u64 = 0;
let ownerPython: u32 = 0;
let ownerSkip: u32 = 0;
let bottom: i32 = 0;
let ipPrevious: u32 = 0;
export let maxDepth: u32 = 0;
let ownerThread: u32 = 0;
let cframePrevious: i32 = -1;

// ---- current sample ----
let regTable: u32 = 0;
let regCount: u32 = 0;
let codeTable: u32 = 0;
let codeCount: u32 = 0;

// result of the last `locate`: the linear-memory offset of the address and the region it is in
let locOffset: u32 = 0;
let locRegion: i32 = -1;
const LOC_OK: i32 = 0;
const LOC_MISSING: i32 = 1; // no region contains the address
const LOC_CROSSES: i32 = 2; // a region starts at or before the address but ends inside [address, address+len)

const NO_SPLICE: u32 = 0xffffffff;

// result of the last pointer read
let readOk: bool = false;

@inline function memSize(): u64 {
  return (<u64>memory.size()) << 16;
}

/** Is [off, off+len) inside linear memory? Computed in u64 so it cannot wrap. */
@inline export function inMemory(off: u64, len: u64): bool {
  return off + len <= memSize();
}

/**
 * Find the region of the current sample holding [addr, addr+len): the last region whose start
 * is <= addr (binary search over the sorted table), which must then contain the whole range.
 */
function locate(addr: u64, len: u32): i32 {
  let lo: i32 = 0;
  let hi: i32 = <i32>regCount - 1;
  let found: i32 = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1;
    const start = load<u64>(regTable + <u32>mid * REGION_SIZE, REGION_ADDRESS);
    if (start <= addr) {
      found = mid;
      lo = mid + 1;
    } else {
      hi = mid - 1;
    }
  }
  if (found < 0) return LOC_MISSING;
  const entry = regTable + <u32>found * REGION_SIZE;
  const start = load<u64>(entry, REGION_ADDRESS);
  const length = <u64>load<u32>(entry, REGION_LENGTH);
  const data = <u64>load<u32>(entry, REGION_DATA);
  const off = addr - start;
  if (off >= length) return LOC_MISSING;
  if (off + <u64>len > length) return LOC_CROSSES;
  // the host checked every region's bytes lie in memory; checking again keeps the kernel
  // safe even if it did not
  if (!inMemory(data + off, <u64>len)) return LOC_MISSING;
  locOffset = <u32>(data + off);
  locRegion = found;
  return LOC_OK;
}

/** A pointer-sized little-endian value at `addr` in the sample's regions; sets readOk. */
function readPtr(addr: u64): u64 {
  if (locate(addr, ptrSize) != LOC_OK) {
    readOk = false;
    return 0;
  }
  readOk = true;
  return ptrSize == 8 ? load<u64>(locOffset) : <u64>load<u32>(locOffset);
}

/** Pointer-sized field at byte `off` of a block already located at linear offset `base`. */
@inline function fieldPtr(base: u32, off: u32): u64 {
  return ptrSize == 8 ? load<u64>(base + off) : <u64>load<u32>(base + off);
}

// code lookup result
let codeStart: u64 = 0;
let codeEnd: u64 = 0;
let codeFrameSize: u64 = 0;

/** Exact-match binary search of the sorted code table; sets codeStart/codeEnd. */
function findCode(addr: u64): bool {
  let lo: i32 = 0;
  let hi: i32 = <i32>codeCount - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1;
    const entry = codeTable + <u32>mid * CODE_SIZE;
    const a = load<u64>(entry, CODE_ADDRESS);
    if (a == addr) {
      codeStart = load<u64>(entry, CODE_START);
      codeEnd = load<u64>(entry, CODE_END);
      codeFrameSize = <u64>load<u32>(entry, CODE_FRAME_SIZE);
      return true;
    }
    if (a < addr) lo = mid + 1;
    else hi = mid - 1;
  }
  return false;
}

@inline function ownerIn(mask: u32, owner: u32): bool {
  return owner < 32 && ((mask >>> owner) & 1) != 0;
}

export function loadParams(p: u32): bool {
  if (!inMemory(<u64>p, <u64>P_COUNT * 4)) return false;
  ptrSize = load<u32>(p + P_PTR_SIZE * 4);
  if (ptrSize != 4 && ptrSize != 8) return false;
  tsNeed = load<u32>(p + P_TS_NEED * 4);
  tsCurrentFrame = load<u32>(p + P_TS_CURRENT_FRAME * 4);
  cframeCurrent = load<i32>(p + P_CFRAME_CURRENT * 4);
  tsBaseFrame = load<i32>(p + P_TS_BASE_FRAME * 4);
  frSize = load<u32>(p + P_FR_SIZE * 4);
  frPrevious = load<u32>(p + P_FR_PREVIOUS * 4);
  frExecutable = load<u32>(p + P_FR_EXECUTABLE * 4);
  frInstrPtr = load<u32>(p + P_FR_INSTR_PTR * 4);
  frOwner = load<u32>(p + P_FR_OWNER * 4);
  frIsEntry = load<i32>(p + P_FR_IS_ENTRY * 4);
  tagMask = <u64>load<u32>(p + P_TAG_MASK * 4);
  ownerPython = load<u32>(p + P_OWNER_PYTHON * 4);
  ownerSkip = load<u32>(p + P_OWNER_SKIP * 4);
  bottom = load<i32>(p + P_BOTTOM * 4);
  ipPrevious = load<u32>(p + P_IP_PREVIOUS * 4);
  maxDepth = load<u32>(p + P_MAX_DEPTH * 4);
  ownerThread = load<u32>(p + P_OWNER_THREAD * 4);
  cframePrevious = load<i32>(p + P_CFRAME_PREVIOUS * 4);
  // every field read from a frame must lie inside the frame size, which is what locate checks
  if (frSize == 0 || frSize > 4096) return false;
  if (frPrevious + ptrSize > frSize || frExecutable + ptrSize > frSize) return false;
  if (frInstrPtr + ptrSize > frSize || frOwner + 1 > frSize) return false;
  if (frIsEntry >= 0 && <u32>frIsEntry + 1 > frSize) return false;
  if (tsNeed > 1 << 20 || tsCurrentFrame + ptrSize > tsNeed) return false;
  if (tsBaseFrame >= 0 && <u32>tsBaseFrame + ptrSize > tsNeed) return false;
  if (cframeCurrent > 4096) return false;
  if (cframePrevious < -1 || cframePrevious > 4096 || (cframePrevious >= 0 && cframeCurrent < 0)) return false;
  // as the host's checkParams (src/layout/walk-params.ts): a rule, tag and limits both walkers read alike
  if (bottom != BOTTOM_BASE_FRAME && bottom != BOTTOM_ENTRY_FRAME && bottom != BOTTOM_IS_ENTRY_FLAG) return false;
  if (tagMask >= <u64>ptrSize) return false;
  if (maxDepth < 1 || maxDepth > 1 << 24) return false;
  if (ownerThread > 255) return false;
  if (<i32>tsCurrentFrame < 0 || tsBaseFrame < -1 || cframeCurrent < -1 || frIsEntry < -1) return false;
  return true;
}

// ---- splice (the block engine): a walk may end by reusing the previous walk of the same image ----
// The previous walk's trace: per frame visited, TRACE_SIZE bytes (u64 frame address, u32 linear
// offset of its bytes, u32 Python frames emitted up to and including it). When the new walk has
// fully processed a frame that is the previous walk's frame j, and the bytes of frames j.. of
// that walk did not change since (the engine checks, and the region table is the same), the
// rest of the walk would visit exactly those frames again with the same outcome — so their
// results are taken as they are. The combined chain cannot hold a cycle (the old one ended at
// NULL and each frame's `previous` is its own unchanged bytes); a combined chain longer than
// maxDepth is walked in full instead, so statuses are exactly those of a full walk.
/** how far past the first clean frame the new walk looks for the frame to splice at */
const SPLICE_WINDOW: u32 = 4;

let traceOut: u32 = 0;
let spliceOld: u32 = 0;
let spliceCount: u32 = 0;
let spliceFrom: u32 = 0;
let spliceOldPyCount: u32 = 0;
let spliceLast: u64 = 0;
let spliceLastOwner: u32 = 0;
let spliceLastIsEntry: u32 = 0;
let spliceLimit: u32 = 0;

/** Where walkOne writes each visited frame's trace entry (0: nowhere). Room for maxDepth entries. */
export function setTrace(out: u32): void {
  traceOut = out;
}

/**
 * The previous walk of this image, to splice from (old = 0: none): its trace of `count`
 * frames, of which frames `from`.. are unchanged, its number of Python frames, how it ended,
 * and the longest walk a splice may make (the caller keeps spliced walks whole up to that).
 */
export function setSplice(old: u32, count: u32, from: u32, oldPyCount: u32, last: u64, lastOwner: u32, lastIsEntry: u32, limit: u32): void {
  spliceOld = old;
  spliceCount = count;
  spliceFrom = from;
  spliceOldPyCount = oldPyCount;
  spliceLast = last;
  spliceLastOwner = lastOwner;
  spliceLastIsEntry = lastIsEntry;
  spliceLimit = limit < maxDepth ? limit : maxDepth;
}

// A spliced walk wrote only the frames it visited itself (outSpliceVisited trace entries,
// outSplicePy Python frames); the rest are the previous walk's from its entry outSpliceAt + 1
// (and its Python frame at that entry's count) on. The outputs below count them all.
export let outSpliceAt: u32 = 0;
export let outSpliceVisited: u32 = 0;
export let outSplicePy: u32 = 0;

// per-sample output of walkOne
/** the walk followed the chain to its NULL end (its status then comes from the bottom check) */
export let outEnded: bool = false;
export let outLastOwner: u32 = 0;
export let outLastIsEntry: u32 = 0;
/** the walk was spliced (for the engine's statistics) */
export let outSpliced: bool = false;
/** the current frame was taken for its eval loop's entry from the calling eval loop (3.11): not a walk to splice onto */
export let outEnteredByCframe: bool = false;
export let outStatus: u32 = 0;
export let outVisited: u32 = 0;
export let outLast: u64 = 0;
export let outFail: u64 = 0;
export let outFrames: u32 = 0;

/** Walk one sample, writing its Python frames at `frames` (room for maxDepth). */
export function walkOne(tstate: u64, frames: u32): void {
  outEnded = false;
  outSpliced = false;
  outEnteredByCframe = false;
  outVisited = 0;
  outLast = 0;
  outFail = 0;
  outFrames = 0;
  if (tstate == 0) {
    outStatus = NO_THREAD_STATE;
    return;
  }
  if (locate(tstate, tsNeed) != LOC_OK) {
    outStatus = NO_THREAD_STATE;
    outFail = tstate;
    return;
  }
  const ts = locOffset;
  let frame: u64 = fieldPtr(ts, tsCurrentFrame);
  // 3.11, 3.12: the current frame of the eval loop that called the running one (0: not known)
  let enteredFrom: u64 = 0;
  if (cframeCurrent >= 0) {
    // 3.11/3.12: tstate->cframe->current_frame
    const cframe = frame;
    if (cframe == 0) {
      outStatus = CORRUPT;
      outFail = tstate;
      return;
    }
    frame = readPtr(cframe + <u64>cframeCurrent);
    if (!readOk) {
      outStatus = DANGLING;
      outFail = cframe;
      return;
    }
    if (cframePrevious >= 0) {
      const outer = readPtr(cframe + <u64>cframePrevious);
      if (readOk && outer != 0) {
        enteredFrom = readPtr(outer + <u64>cframeCurrent);
        if (!readOk) enteredFrom = 0;
      }
    }
  }
  let base: u64 = 0;
  if (tsBaseFrame >= 0) {
    base = fieldPtr(ts, <u32>tsBaseFrame);
    if (base == 0) {
      outStatus = CORRUPT;
      outFail = tstate;
      return;
    }
  }

  let visited: u32 = 0;
  let pyCount: u32 = 0;
  let last: u64 = 0;
  let lastOwner: u32 = 0xffffffff;
  let lastIsEntry: u32 = 0;
  // 3.11, 3.12, in an eval loop called from C: its entry frame not met yet
  let entryPending = enteredFrom != 0;
  // 1 when C code lies between the last Python frame and the next one: an entry frame (3.12+:
  // owned by the C stack / the interpreter) was visited since, or (3.11) that frame is_entry
  let throughC: u32 = 0;
  // Brent's cycle detection: O(1) state, finds any cycle within a bounded number of steps
  let tortoise: u64 = frame;
  let power: u32 = 1;
  let lam: u32 = 0;
  const align: u64 = <u64>ptrSize - 1;
  // the frame visited just before, when it was a Python frame on the data stack (0 if not),
  // and the region it was in: its caller, in the same chunk, must end exactly where it begins
  let callee: u64 = 0;
  let calleeRegion: i32 = -1;

  while (frame != 0) {
    if (visited >= maxDepth) {
      outStatus = TOO_DEEP;
      outFail = frame;
      outVisited = visited;
      outLast = last;
      outFrames = pyCount;
      return;
    }
    let fail: u32 = 0xffffffff;
    if ((frame & align) != 0) {
      fail = CORRUPT;
    } else {
      const loc = locate(frame, frSize);
      if (loc == LOC_MISSING) fail = DANGLING;
      else if (loc == LOC_CROSSES) fail = CORRUPT;
    }
    if (fail != 0xffffffff) {
      outStatus = fail;
      outFail = frame;
      outVisited = visited;
      outLast = last;
      outFrames = pyCount;
      return;
    }
    const f = locOffset;
    const region = locRegion;
    const owner = <u32>load<u8>(f + frOwner);
    const prev = fieldPtr(f, frPrevious);
    let nextCallee: u64 = 0;
    if (ownerIn(ownerPython, owner)) {
      const code = fieldPtr(f, frExecutable) & ~tagMask;
      // A NULL executable is a frame that was popped (3.14+ clear it) or is being set up: as
      // the current frame, the copy caught it in between (skipped: its caller's stack is of
      // that moment); below another frame, it is a caller read after it returned — frames of
      // different moments (docs/validation.md)
      if (code == 0 && visited != 0) {
        outStatus = CORRUPT;
        outFail = frame;
        outVisited = visited;
        outLast = last;
        outFrames = pyCount;
        return;
      }
      if (code != 0) {
        const ip = fieldPtr(f, frInstrPtr);
        let bad: u64 = 0;
        if (!findCode(code)) {
          bad = code;
        } else {
          // 3.11/3.12 prev_instr is one code unit before the first instruction until the
          // frame starts; instr_ptr (3.13+) is always inside the bytecode
          const low = ipPrevious != 0 && codeStart >= 2 ? codeStart - 2 : codeStart;
          if (ip < low || ip >= codeEnd || ((ip ^ codeStart) & 1) != 0) bad = ip == 0 ? frame : ip;
        }
        // a frame pushed by its caller on the data stack sits right after the caller's frame
        // (co_framesize words): frames from different moments glued together do not
        if (bad == 0 && owner == ownerThread && callee != 0 && calleeRegion == region && codeFrameSize != 0 && frame + codeFrameSize != callee) {
          bad = callee;
        }
        if (bad != 0) {
          outStatus = CORRUPT;
          outFail = bad;
          outVisited = visited;
          outLast = last;
          outFrames = pyCount;
          return;
        }
        if (owner == ownerThread) nextCallee = frame;
        const out = frames + pyCount * FRAME_SIZE;
        store<u64>(out, frame, FRAME_ADDRESS);
        store<u64>(out, code, FRAME_CODE);
        store<u64>(out, ip, FRAME_IP);
        store<u32>(out, throughC, FRAME_FLAGS);
        store<u32>(out, 0, FRAME_FLAGS + 4);
        pyCount++;
      }
    } else if (!ownerIn(ownerSkip, owner) || fieldPtr(f, frExecutable) == 0) {
      // (an entry frame — the eval loop's, the 3.15 base frame — always names its executable:
      // None, or the interpreter's trampoline code; a NULL one is bytes of another frame read
      // as a frame header, e.g. a thread state of one moment over frames of another)
      outStatus = CORRUPT;
      outFail = frame;
      outVisited = visited;
      outLast = last;
      outFrames = pyCount;
      return;
    }
    callee = nextCallee;
    calleeRegion = region;
    last = frame;
    lastOwner = owner;
    lastIsEntry = frIsEntry >= 0 ? <u32>load<u8>(f + <u32>frIsEntry) : 0;
    // 3.11: a frame C code calls is linked before its eval loop sets is_entry (see the
    // reference walker): the current frame whose caller is the calling eval loop's is that entry
    if (frIsEntry >= 0 && lastIsEntry == 0 && visited == 0 && enteredFrom != 0 && prev == enteredFrom && ownerIn(ownerPython, owner)) {
      lastIsEntry = 1;
      outEnteredByCframe = true;
      // (its caller's flag then depends on more than the frame: no splice onto an older walk)
      spliceOld = 0;
    }
    // 3.11, 3.12: the running eval loop's entry frame (3.11: marked is_entry; 3.12: a frame of
    // its own) leads to the calling loop's current frame (see the reference walker): a walk
    // whose first entry frame does not is of no one moment
    if ((frIsEntry >= 0 ? lastIsEntry != 0 : ownerIn(ownerSkip, owner)) && entryPending) {
      entryPending = false;
      if (prev != enteredFrom) {
        outStatus = INCOMPLETE;
        outFail = frame;
        outVisited = visited;
        outLast = last;
        outFrames = pyCount;
        return;
      }
    }
    // (a function of this frame alone, so a walk spliced onto an older one after it agrees)
    throughC = ownerIn(ownerPython, owner) ? (lastIsEntry != 0 ? FRAME_CALLS_THROUGH_C : 0) : FRAME_CALLS_THROUGH_C;
    visited++;
    if (traceOut != 0) {
      const t = traceOut + (visited - 1) * TRACE_SIZE;
      store<u64>(t, frame, TRACE_FRAME);
      store<u32>(t, f, TRACE_BYTES_AT);
      store<u32>(t, pyCount, TRACE_PY);
    }
    // (no splice onto an older walk before the entry frame is checked: that walk's was checked
    // against its own calling loop)
    if (spliceOld != 0 && !entryPending) {
      const hi = spliceFrom + SPLICE_WINDOW < spliceCount ? spliceFrom + SPLICE_WINDOW : spliceCount;
      let at: u32 = NO_SPLICE;
      for (let j = spliceFrom; j < hi; j++) {
        if (load<u64>(spliceOld + j * TRACE_SIZE, TRACE_FRAME) == frame) {
          at = j;
          break;
        }
      }
      if (at != NO_SPLICE) {
        const rest = spliceCount - at - 1;
        if (<u64>visited + <u64>rest > <u64>spliceLimit) {
          // longer than a splice may be (or than maxDepth: then the full walk finds too-deep)
          spliceOld = 0;
        } else {
          const pyAt = load<u32>(spliceOld + at * TRACE_SIZE, TRACE_PY);
          outSpliceAt = at;
          outSpliceVisited = visited;
          outSplicePy = pyCount;
          if (rest > 0) {
            last = spliceLast;
            lastOwner = spliceLastOwner;
            lastIsEntry = spliceLastIsEntry;
          }
          visited += rest;
          pyCount += spliceOldPyCount - pyAt;
          outSpliced = true;
          break;
        }
      }
    }
    frame = prev;
    lam++;
    if (frame != 0 && frame == tortoise) {
      outStatus = CYCLE;
      outFail = frame;
      outVisited = visited;
      outLast = last;
      outFrames = pyCount;
      return;
    }
    if (lam == power) {
      tortoise = frame;
      power <<= 1;
      lam = 0;
    }
  }

  outEnded = true;
  outLastOwner = lastOwner;
  outLastIsEntry = lastIsEntry;
  outVisited = visited;
  outLast = last;
  outFrames = pyCount;
  if (bottom == BOTTOM_BASE_FRAME) {
    if (last != base) {
      outStatus = INCOMPLETE;
      outFail = last;
    } else {
      outStatus = pyCount > 0 ? COMPLETE : IDLE;
    }
    return;
  }
  if (visited == 0) {
    outStatus = IDLE;
    return;
  }
  let bottomOk = false;
  if (bottom == BOTTOM_ENTRY_FRAME) bottomOk = ownerIn(ownerSkip, lastOwner);
  else if (bottom == BOTTOM_IS_ENTRY_FLAG) bottomOk = lastIsEntry != 0;
  if (!bottomOk) {
    outStatus = INCOMPLETE;
    outFail = last;
    return;
  }
  outStatus = pyCount > 0 ? COMPLETE_UNVERIFIABLE : IDLE;
}


/** The sorted region table of the sample walkOne walks next (entries of REGION_SIZE bytes). */
export function setRegions(table: u32, count: u32): void {
  regTable = table;
  regCount = count;
}

/** The sorted code table every walk checks code pointers against (entries of CODE_SIZE bytes). */
export function setCodes(table: u32, count: u32): void {
  codeTable = table;
  codeCount = count;
}
