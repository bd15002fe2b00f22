// Section blocks (format 1.4) in the block engine: the twin of src/capture/section-decoder.ts,
// sample for sample. The host lays the block's unpacked payload into memory and gives the
// engine where each section is; the engine reads the sections side by side, a sample at a time,
// patches each thread's image in place — a stack region's frames kept, popped, written from the
// block's images; a words region's changed words — and hands the sample to the engine's count
// (engine.ts countSample: the walk, spliced where only bytes changed, and the stack's node).
//
// A sample is read in one pass. Before it, the tree must have room for it (else STOP_FULL, the
// sample untouched: the host makes room and resumes); the data arena running out inside it is
// STOP_RESTART (the host grows the arena and gives the block again from its start: the arena
// doubles, so a capture restarts a few blocks at most); anything the reference decoder would
// refuse is STOP_MALFORMED (the host processes the block on the reference path, which says why).
// Every read is bounded by its section's end; every write stays in a buffer the sample made room
// for.

import {
  D_ADDR,
  D_CAP,
  D_DATA,
  D_FCAP,
  D_FCOUNT,
  D_FRAMES,
  D_LEN,
  D_USED,
  NONE,
  T_CAP,
  T_COUNT,
  T_DESCS,
  T_FLAGS,
  T_INTERP,
  T_NTID,
  T_SORTED,
  T_SORTED_OK,
  T_TID,
  T_TRACE_N,
  addHull,
  addImageFrom,
  addThread,
  allocData,
  chargeBlock,
  clearHulls,
  countSample,
  engineBeginBlock,
  engineTreeFull,
  findThread,
  hullTotal,
  imageTotal,
  materialize,
  regionEnd,
  setShape,
  shapeKnown,
  threadAt,
  threadTotal,
} from './engine';
import { inMemory } from './walk';
import { DESC_SIZE, REGION_SIZE, STOP_END, STOP_FULL, STOP_MALFORMED, STOP_RESTART } from '../src/kernel/abi';
import {
  ID_INTERPRETER,
  ID_NATIVE,
  ID_THREAD,
  LIST_EXPLICIT,
  LIST_SAME,
  LIST_UNCHANGED,
  MAX_BLOCK_RAW,
  MAX_FRAME_IMAGES,
  MAX_FRAME_WORDS,
  MAX_REFS,
  OP_CHILD,
  OP_CHILD_CHANGED,
  OP_IMAGE,
  OP_IMAGE_CHANGED,
  OP_LITERAL,
  OP_RAN,
  REGION_LITERAL,
  REGION_STACK,
  REGION_WORDS,
  SECTION_COUNT,
  SEC_ADDRESSES,
  SEC_BYTES,
  SEC_COPY,
  SEC_DELTA,
  SEC_ERRORS,
  SEC_FLAGS,
  SEC_IDS,
  SEC_IMAGE,
  SEC_KINDS,
  SEC_LENGTHS,
  SEC_MASK,
  SEC_OP,
  SEC_POP,
  SEC_PUSH,
  SEC_REGIONS,
  SEC_SHAPE,
  SEC_STATUS,
  SEC_STRIDE,
  SEC_THREAD,
  SEC_TIME,
  SEC_WORD_COUNT,
  SEC_WORD_DELTA,
  SEC_WORD_GAP,
  SEC_WORD_REF,
} from '../src/capture/codes';

const MAX_SAFE: u64 = 0x1fffffffffffff;
/** regions a sample may have here (more: the reference path) */
const MAX_REGIONS: u32 = 1024;
/** frames one stack region of a sample may write here (more: the reference path) */
const MAX_WRITTEN: u32 = 8192;

// ---- the sections: a cursor and an end each ----
const cursors = memory.data(SECTION_COUNT * 4, 4);
const ends = memory.data(SECTION_COUNT * 4, 4);
let bad: bool = false;

@inline function posOf(k: u32): u32 {
  return load<u32>(cursors + k * 4);
}

@inline function endOf(k: u32): u32 {
  return load<u32>(ends + k * 4);
}

@inline function left(k: u32): u32 {
  return endOf(k) - posOf(k);
}

/** Skips n bytes of section k (false, and bad, if it has fewer). */
function skip(k: u32, n: u64): bool {
  const p = posOf(k);
  if (n > <u64>(endOf(k) - p)) {
    bad = true;
    return false;
  }
  store<u32>(cursors + k * 4, p + <u32>n);
  return true;
}

function byte(k: u32): u32 {
  const p = posOf(k);
  if (p >= endOf(k)) {
    bad = true;
    return 0;
  }
  store<u32>(cursors + k * 4, p + 1);
  return <u32>load<u8>(p);
}

/** Unsigned LEB128 of section k, at most 10 bytes and below 2^64. */
function varint(k: u32): u64 {
  let p = posOf(k);
  const end = endOf(k);
  let v: u64 = 0;
  let shift: u64 = 0;
  for (let i = 0; i < 10; i++) {
    if (p >= end) break;
    const b = <u32>load<u8>(p++);
    if (i == 9 && b > 1) break;
    v |= (<u64>(b & 0x7f)) << shift;
    if ((b & 0x80) == 0) {
      store<u32>(cursors + k * 4, p);
      return v;
    }
    shift += 7;
  }
  bad = true;
  return 0;
}

/** A varint read as a number (the reference reader's uint: below 2^53, at most 8 bytes). */
function number(k: u32): u64 {
  const start = posOf(k);
  const v = varint(k);
  if (v > MAX_SAFE || posOf(k) - start > 8) bad = true;
  return v;
}

/** Zigzag, as a number (the reference reader's sint: magnitude below 2^53). */
function snumber(k: u32): i64 {
  const v = varint(k);
  const s: i64 = <i64>(v >>> 1) ^ -(<i64>(v & 1));
  if (s > <i64>MAX_SAFE || s < -<i64>MAX_SAFE) bad = true;
  return s;
}

// ---- the block's model: images numbered, their children and strides ----
// (these and the scratch below are taken from the arena at the block's start: as static data
// they made the module 16 times larger)
let childs: u32 = 0;
let strides: u32 = 0;
let modelCount: u32 = 0;
let lastTime: u64 = 0;

@inline function childOf(e: i32): i32 {
  return e >= 0 && <u32>e < modelCount ? load<i32>(childs + <u32>e * 4) : -1;
}

@inline function strideOf(e: i32): i32 {
  return e >= 0 && <u32>e < modelCount ? load<i32>(strides + <u32>e * 4) : -1;
}

/** A frame makes the next image, from image `from` (-1: from its bytes); -1 once the block has MAX_FRAME_IMAGES. */
function made(from: i32): i32 {
  if (modelCount >= <u32>MAX_FRAME_IMAGES) return -1;
  const e = modelCount++;
  const ok = from >= 0 && <u32>from < e;
  store<i32>(childs + e * 4, ok ? load<i32>(childs + <u32>from * 4) : -1);
  store<i32>(strides + e * 4, ok ? load<i32>(strides + <u32>from * 4) : -1);
  return <i32>e;
}

@inline function above(below: i32, e: i32, stride: u32): void {
  if (below < 0) return;
  if (e >= 0) store<i32>(childs + <u32>below * 4, e);
  store<i32>(strides + <u32>below * 4, <i32>stride);
}

// ---- a sample's references: its stack regions' ends and frames, innermost first ----
const refLo = memory.data(MAX_REFS * 4, 4);
const refHi = memory.data(MAX_REFS * 4, 4);
let refCount: u32 = 0;

@inline function addRef(a: u64): void {
  if (refCount >= <u32>MAX_REFS) return;
  store<u32>(refLo + refCount * 4, <u32>a);
  store<u32>(refHi + refCount * 4, <u32>(a >>> 32));
  refCount++;
}

// ---- scratch ----
/** a sample's region list as it is made (an explicit list) */
let scratchDescs: u32 = 0;
let kinds: u32 = 0;
/** a stack region's frames written, as read before its length: offset, op, from, made, where its bytes or changes are, mask */
const W_OFF = 0;
const W_OP = 4;
const W_FROM = 8;
const W_MADE = 12;
const W_AT = 16;
const W_MASK = 20;
const W_SIZE = 24;
let written: u32 = 0;
/** the base region's frame a frame run on started from (before the region is rewritten) */
const ranBytes = memory.data(MAX_FRAME_WORDS * 8, 8);

// ---- per sample ----
let addressesChanged: bool = false;
let lengthsChanged: bool = false;
let changedAny: bool = false;
/** the data arena ran out: STOP_RESTART */
let full: bool = false;

/**
 * Process the section block whose sections the host described at `table` (SECTION_COUNT pairs of
 * u32 start and end), from its first sample. Returns STOP_END, STOP_FULL (the tree has no room for
 * the next sample: make it, then engineResumeSections), STOP_RESTART or STOP_MALFORMED.
 */
export function engineRunSections(table: u32): i32 {
  if (!inMemory(<u64>table, <u64>SECTION_COUNT * 8)) return STOP_MALFORMED;
  engineBeginBlock();
  for (let k: u32 = 0; k < <u32>SECTION_COUNT; k++) {
    const start = load<u32>(table + k * 8);
    const end = load<u32>(table + k * 8, 4);
    if (end < start || !inMemory(<u64>start, <u64>(end - start))) return STOP_MALFORMED;
    store<u32>(cursors + k * 4, start);
    store<u32>(ends + k * 4, end);
  }
  modelCount = 0;
  lastTime = 0;
  memory.fill(freeLists, 0, (MAX_CLASS + 1) * 4);
  childs = allocData(MAX_FRAME_IMAGES * 4);
  strides = allocData(MAX_FRAME_IMAGES * 4);
  scratchDescs = allocData(MAX_REGIONS * DESC_SIZE);
  kinds = allocData(MAX_REGIONS);
  written = allocData(MAX_WRITTEN * W_SIZE);
  if (childs == 0 || strides == 0 || scratchDescs == 0 || kinds == 0 || written == 0) return STOP_RESTART;
  wordBytes = 0;
  frameWords = 0;
  return engineResumeSections();
}

/** Go on with the block's samples from where the engine stopped for room (STOP_FULL). */
export function engineResumeSections(): i32 {
  while (left(SEC_THREAD) > 0) {
    // (the tree's room for a whole sample, before anything of it is read)
    if (engineTreeFull()) return STOP_FULL;
    bad = false;
    full = false;
    const r = sample();
    if (r != STOP_END) return r;
  }
  // every sample section read to its end (the reference reader says so otherwise)
  for (let k: u32 = 1; k < <u32>SECTION_COUNT; k++) if (left(k) != 0) return STOP_MALFORMED;
  return STOP_END;
}

@inline function stop(): i32 {
  return full ? STOP_RESTART : STOP_MALFORMED;
}

function sample(): i32 {
  const slot = number(SEC_THREAD);
  if (bad || slot > <u64>threadTotal()) return STOP_MALFORMED;
  let th: u32 = 0;
  let tsa: u64 = 0;
  let interp: u64 = 0;
  let tid: u64 = 0;
  let ntid: u64 = 0;
  let idsChanged = false;
  const fresh = slot == <u64>threadTotal();
  if (fresh) {
    tsa = varint(SEC_IDS);
    interp = varint(SEC_IDS);
    tid = varint(SEC_IDS);
    ntid = varint(SEC_IDS);
    if (bad || findThread(tsa) != 0) return STOP_MALFORMED;
    th = addThread(tsa);
    if (th == 0) {
      // (the thread table full: the reference path; the arena: room, and again)
      full = threadTotal() < 8192;
      return stop();
    }
    idsChanged = true;
  } else {
    th = threadAt(<u32>slot);
    tsa = load<u64>(th);
    const mask = byte(SEC_IDS);
    if ((mask & ~(ID_INTERPRETER | ID_THREAD | ID_NATIVE)) != 0) bad = true;
    interp = (mask & ID_INTERPRETER) != 0 ? varint(SEC_IDS) : load<u64>(th, T_INTERP);
    tid = (mask & ID_THREAD) != 0 ? varint(SEC_IDS) : load<u64>(th, T_TID);
    ntid = (mask & ID_NATIVE) != 0 ? varint(SEC_IDS) : load<u64>(th, T_NTID);
    idsChanged = interp != load<u64>(th, T_INTERP) || tid != load<u64>(th, T_TID) || ntid != load<u64>(th, T_NTID);
  }
  const t = <i64>lastTime + snumber(SEC_TIME);
  if (t < 0 || t > <i64>MAX_SAFE) bad = true;
  const time = <u64>t;
  lastTime = time;
  const flagsCode = number(SEC_FLAGS);
  if (flagsCode == 0 && fresh) bad = true;
  const flags: u32 = flagsCode == 0 ? load<u32>(th, T_FLAGS) : <u32>(flagsCode - 1);
  const status = byte(SEC_STATUS);
  if (status > 1) bad = true;
  const copyMicros = number(SEC_COPY);
  const errors = number(SEC_ERRORS);
  if (bad || errors > <u64>left(SEC_ERRORS)) return STOP_MALFORMED;
  for (let i: u64 = 0; i < errors; i++) {
    const n = number(SEC_ERRORS);
    if (bad || !skip(SEC_ERRORS, n)) return STOP_MALFORMED;
  }
  const list = number(SEC_REGIONS);
  if (bad) return STOP_MALFORMED;
  store<u64>(th, interp, T_INTERP);
  store<u64>(th, tid, T_TID);
  store<u64>(th, ntid, T_NTID);
  store<u32>(th, flags, T_FLAGS);
  clearHulls();
  addressesChanged = false;
  lengthsChanged = false;
  changedAny = false;
  if (list == <u64>LIST_UNCHANGED) {
    if (fresh) return STOP_MALFORMED;
    return countSample(th, tsa, time, interp, tid, ntid, flags, status, copyMicros, load<u32>(th, T_COUNT), false, idsChanged, load<u32>(th, T_TRACE_N) != NONE);
  }
  const baseCount = load<u32>(th, T_COUNT);
  const baseList = load<u32>(th, T_DESCS);
  let count: u32 = 0;
  let work: u32 = 0;
  if (list == <u64>LIST_SAME) {
    if (fresh) return STOP_MALFORMED;
    count = baseCount;
    work = baseList;
  } else {
    const c = list - <u64>LIST_EXPLICIT;
    if (c > <u64>left(SEC_REGIONS) || c > <u64>MAX_REGIONS) return STOP_MALFORMED;
    count = <u32>c;
    work = scratchDescs;
    for (let j: u32 = 0; j < baseCount; j++) store<u32>(baseList + j * DESC_SIZE, 0, D_USED);
    for (let k: u32 = 0; k < count; k++) {
      const j1 = number(SEC_REGIONS);
      if (bad || j1 > <u64>baseCount) return STOP_MALFORMED;
      const d = work + k * DESC_SIZE;
      if (j1 > 0) {
        const b = baseList + (<u32>j1 - 1) * DESC_SIZE;
        if (load<u32>(b, D_USED) != 0) return STOP_MALFORMED;
        store<u32>(b, 1, D_USED);
        memory.copy(d, b, DESC_SIZE);
      } else {
        // (no base: D_USED says so)
        memory.fill(d, 0, DESC_SIZE);
        store<u32>(d, 0xffffffff, D_USED);
      }
    }
    for (let k: u32 = 0; k < count; k++) {
      const d = work + k * DESC_SIZE;
      if (load<u32>(d, D_USED) == 0xffffffff) {
        store<u64>(d, varint(SEC_ADDRESSES), D_ADDR);
        if (bad) return STOP_MALFORMED;
      }
    }
    // the base regions the list leaves out: their buffers given up
    for (let j: u32 = 0; j < baseCount; j++) {
      const b = baseList + j * DESC_SIZE;
      if (load<u32>(b, D_USED) != 0) continue;
      giveBuffer(load<u32>(b, D_DATA), load<u32>(b, D_CAP));
      giveBuffer(load<u32>(b, D_FRAMES), load<u32>(b, D_FCAP) * 8);
    }
    addressesChanged = true;
  }
  for (let k: u32 = 0; k < count; k++) {
    const kind = byte(SEC_KINDS);
    const hasBase = list == <u64>LIST_SAME || load<u32>(work + k * DESC_SIZE, D_USED) != 0xffffffff;
    if (bad || kind > <u32>REGION_STACK || (kind == <u32>REGION_WORDS && !hasBase)) return STOP_MALFORMED;
    store<u8>(kinds + k, <u8>(kind | (hasBase ? 4 : 0)));
  }
  refCount = 0;
  for (let k: u32 = 0; k < count; k++) {
    const kb = <u32>load<u8>(kinds + k);
    if ((kb & 3) == <u32>REGION_STACK && !stack(work + k * DESC_SIZE, (kb & 4) != 0)) return stop();
  }
  for (let k: u32 = 0; k < count; k++) {
    const kb = <u32>load<u8>(kinds + k);
    const d = work + k * DESC_SIZE;
    if ((kb & 3) == <u32>REGION_WORDS) {
      if (!words(d)) return stop();
    } else if ((kb & 3) == <u32>REGION_LITERAL) {
      if (!literal(d, (kb & 4) != 0)) return stop();
    }
  }
  // an explicit list becomes the thread's (in its list, or a bigger one)
  if (work != baseList) {
    if (count > load<u32>(th, T_CAP)) {
      const cap = count < 8 ? 8 : count * 2;
      const at = allocData(cap * (DESC_SIZE + REGION_SIZE));
      if (at == 0) {
        full = true;
        return STOP_RESTART;
      }
      store<u32>(th, at, T_DESCS);
      store<u32>(th, cap, T_CAP);
      store<u32>(th, at + cap * DESC_SIZE, T_SORTED);
    }
    memory.copy(load<u32>(th, T_DESCS), work, count * DESC_SIZE);
  }
  store<u32>(th, count, T_COUNT);
  if (addressesChanged || lengthsChanged) store<u32>(th, 0, T_SORTED_OK);
  const spliceOk = load<u32>(th, T_TRACE_N) != NONE && !addressesChanged && hullTotal() <= 32;
  return countSample(th, tsa, time, interp, tid, ntid, flags, status, copyMicros, count, changedAny, idsChanged, spliceOk);
}

/**
 * A stack region (descriptor d; with its base's bytes and frames where `hasBase`): frames kept,
 * written, the length, the rest of its words. False on bad input (bad) or no room (full).
 */
function stack(d: u32, hasBase: bool): bool {
  if (!shapeKnown()) {
    const wb = number(SEC_SHAPE);
    const nw = number(SEC_SHAPE);
    if (bad || (wb != 4 && wb != 8) || nw < 1 || nw > <u64>MAX_FRAME_WORDS) {
      bad = true;
      return false;
    }
    setShape(<u32>wb, <u32>nw);
    wordBytes = <u32>wb;
    frameWords = <u32>nw;
  }
  const wb = wordBytes;
  const nw = frameWords;
  const size = wb * nw;
  const addr = load<u64>(d, D_ADDR);
  const baseLen = hasBase ? load<u32>(d, D_LEN) : 0;
  let buf = hasBase ? load<u32>(d, D_DATA) : 0;
  let cap = hasBase ? load<u32>(d, D_CAP) : 0;
  const bc = hasBase ? load<u32>(d, D_FCOUNT) : 0;
  let fl = load<u32>(d, D_FRAMES);
  const pop = number(SEC_POP);
  const push = number(SEC_PUSH);
  if (bad || pop > <u64>bc || push > <u64>left(SEC_OP) || push > <u64>MAX_WRITTEN) {
    bad = true;
    return false;
  }
  const keep = bc - <u32>pop;
  const fc = keep + <u32>push;
  // (read before the list is rewritten in place)
  const firstAt: u32 = bc > 0 ? load<u32>(fl) : 0;
  const baseAt: u32 = keep < bc ? load<u32>(fl + keep * 8) : NONE;
  const baseImage: i32 = keep < bc ? load<i32>(fl + keep * 8, 4) : -1;
  if (fc > (hasBase ? load<u32>(d, D_FCAP) : 0)) {
    const at = takeBuffer(fc * 8);
    if (at == 0) {
      full = true;
      return false;
    }
    if (keep > 0) memory.copy(at, fl, keep * 8);
    if (hasBase) giveBuffer(fl, load<u32>(d, D_FCAP) * 8);
    fl = at;
    store<u32>(d, fl, D_FRAMES);
    store<u32>(d, bufferRoom / 8, D_FCAP);
  }
  // the frames written, as read (their bytes come once the region's length is known)
  for (let i = keep; i < fc; i++) {
    const below: i32 = i > 0 ? load<i32>(fl + (i - 1) * 8, 4) : -1;
    const belowAt: u32 = i > 0 ? load<u32>(fl + (i - 1) * 8) : 0;
    const st = strideOf(below);
    const predicted: i64 = i > 0 ? <i64>belowAt + <i64>(st >= 0 ? st : 0) : <i64>firstAt;
    const off = predicted + snumber(SEC_STRIDE);
    const lowest: i64 = i > 0 ? <i64>belowAt + <i64>size : 0;
    const op = number(SEC_OP);
    if (bad || off < lowest || off > <i64>MAX_BLOCK_RAW) {
      bad = true;
      return false;
    }
    const w = written + (i - keep) * W_SIZE;
    let from: i32 = -1;
    let at: u32 = 0;
    let mask: u32 = 0;
    if (op == <u64>OP_CHILD || op == <u64>OP_CHILD_CHANGED) {
      from = childOf(below);
      if (from < 0) bad = true;
    } else if (op == <u64>OP_IMAGE || op == <u64>OP_IMAGE_CHANGED) {
      const e = number(SEC_IMAGE);
      if (bad || e >= <u64>modelCount) bad = true;
      else from = <i32>e;
    } else if (op == <u64>OP_RAN) {
      if (i != keep || keep >= bc || <i64>baseAt != off || off + <i64>size > <i64>baseLen) bad = true;
      from = baseImage;
    } else if (op == <u64>OP_LITERAL) {
      at = posOf(SEC_BYTES);
      skip(SEC_BYTES, <u64>size);
    } else {
      bad = true;
    }
    if (bad) return false;
    if (op == <u64>OP_RAN || op == <u64>OP_CHILD_CHANGED || op == <u64>OP_IMAGE_CHANGED) {
      const m = number(SEC_MASK);
      if (bad || m == 0 || m >= (<u64>1) << nw) {
        bad = true;
        return false;
      }
      mask = <u32>m;
      at = posOf(SEC_DELTA);
      for (let q: u32 = 0; q < nw; q++) {
        if (((mask >>> q) & 1) == 0) continue;
        const z = varint(SEC_DELTA);
        if (bad || (wb == 4 && z >= (<u64>1) << 33)) {
          bad = true;
          return false;
        }
      }
    }
    const makes = op != <u64>OP_CHILD && op != <u64>OP_IMAGE;
    const m = makes ? made(op == <u64>OP_LITERAL ? -1 : from) : -1;
    const id = makes ? m : from;
    store<u32>(fl + i * 8, <u32>off);
    store<i32>(fl + i * 8, id, 4);
    if (i > 0) above(below, id, <u32>off - belowAt);
    store<u32>(w, <u32>off, W_OFF);
    store<u32>(w, <u32>op, W_OP);
    store<i32>(w, from, W_FROM);
    store<i32>(w, m, W_MADE);
    store<u32>(w, at, W_AT);
    store<u32>(w, mask, W_MASK);
  }
  // the length, from the innermost frame and its stride
  const lastStride = fc > 0 ? strideOf(load<i32>(fl + (fc - 1) * 8, 4)) : -1;
  const predictedLength: i64 = lastStride >= 0 ? <i64>load<u32>(fl + (fc - 1) * 8) + <i64>lastStride : <i64>baseLen;
  const nn = predictedLength + snumber(SEC_LENGTHS);
  if (bad || nn < 0 || nn > <i64>MAX_BLOCK_RAW || (fc > 0 && <i64>load<u32>(fl + (fc - 1) * 8) + <i64>size > nn)) {
    bad = true;
    return false;
  }
  const n = <u32>nn;
  store<u32>(d, fc, D_FCOUNT);
  addRef(regionEnd(addr, <u64>n));
  for (let i = fc; i > 0 && refCount < <u32>MAX_REFS; i--) addRef(addr + <u64>load<u32>(fl + (i - 1) * 8));
  // unchanged: the base's bytes as they are
  if (hasBase && push == 0 && pop == 0 && n == baseLen && left(SEC_WORD_COUNT) > 0 && load<u8>(posOf(SEC_WORD_COUNT)) == 0) {
    skip(SEC_WORD_COUNT, 1);
    return true;
  }
  changedAny = true;
  if (!chargeBlock(<u64>n)) {
    bad = true;
    return false;
  }
  // the base's bytes, cut or zero-extended; where frames changed, none past the frames kept
  const upTo: u32 = pop == 0 && push == 0 ? n : keep > 0 ? load<u32>(fl + (keep - 1) * 8) + size : fc > 0 ? load<u32>(fl) : n;
  let keepTo = upTo < baseLen ? upTo : baseLen;
  if (keepTo > n) keepTo = n;
  if (push > 0 && load<u32>(written, W_OP) == <u32>OP_RAN) memory.copy(ranBytes, buf + load<u32>(written, W_OFF), size);
  if (n > cap) {
    const at = takeBuffer(n);
    if (at == 0) {
      full = true;
      return false;
    }
    if (keepTo > 0) memory.copy(at, buf, keepTo);
    giveBuffer(buf, cap);
    buf = at;
    cap = bufferRoom;
    addressesChanged = true;
  }
  if (n > keepTo) memory.fill(buf + keepTo, 0, n - keepTo);
  // the frames written
  const lo = addr;
  const hi = regionEnd(addr, <u64>n);
  for (let i: u32 = 0; i < <u32>push; i++) {
    const w = written + i * W_SIZE;
    const off = load<u32>(w, W_OFF);
    const op = load<u32>(w, W_OP);
    const from = load<i32>(w, W_FROM);
    const out = buf + off;
    if (op == <u32>OP_LITERAL) memory.copy(out, load<u32>(w, W_AT), size);
    else if (op == <u32>OP_RAN) memory.copy(out, ranBytes, size);
    else if (from >= 0 && <u32>from < imageTotal()) materialize(<u32>from, addr + <u64>off, out);
    else {
      // (an image the block could not keep: the reference reader refuses it)
      bad = true;
      return false;
    }
    const mask = load<u32>(w, W_MASK);
    if (mask != 0) {
      // the changes, read again from where they were
      const saved = posOf(SEC_DELTA);
      store<u32>(cursors + SEC_DELTA * 4, load<u32>(w, W_AT));
      for (let q: u32 = 0; q < nw; q++) {
        if (((mask >>> q) & 1) == 0) continue;
        const z = varint(SEC_DELTA);
        const change: i64 = <i64>(z >>> 1) ^ -(<i64>(z & 1));
        const p = out + q * wb;
        if (wb == 8) store<u64>(p, load<u64>(p) + <u64>change);
        else store<u32>(p, load<u32>(p) + <u32>change);
      }
      store<u32>(cursors + SEC_DELTA * 4, saved);
    }
    const m = load<i32>(w, W_MADE);
    if (m >= 0) {
      if (<u32>m != imageTotal()) {
        bad = true;
        return false;
      }
      if (!addImageFrom(out, addr + <u64>off, lo, hi)) {
        full = true;
        return false;
      }
    }
  }
  // what changed (for the walk's splice): the bytes rewritten from the frames kept to the end,
  // or cut or grown at the end; and the words changed
  const to: u32 = n > baseLen ? n : baseLen;
  let from: u32 = pop == 0 && push == 0 ? (n < baseLen ? n : baseLen) : keepTo;
  if (from < to) addHull(buf + from, buf + to);
  applyWords(buf, n, addr);
  if (bad) return false;
  if (wordsFirst < wordsEnd) addHull(buf + wordsFirst, buf + wordsEnd);
  if (n != baseLen) lengthsChanged = true;
  store<u32>(d, n, D_LEN);
  store<u32>(d, cap, D_CAP);
  store<u32>(d, buf, D_DATA);
  return true;
}

let wordBytes: u32 = 0;
let frameWords: u32 = 0;

// ---- buffers: a power of two of bytes each, those given up kept for the next of their size ----
// (a deep stack that moves grows its region again and again over a block: without reuse the
// block's buffers added up to many times what was alive, and the arena ran out)
const MIN_CLASS: u32 = 6;
const MAX_CLASS: u32 = 27;
const freeLists = memory.data((MAX_CLASS + 1) * 4, 4);

/** The size class of a buffer for n bytes: 2^c ≥ n. */
@inline function classOf(n: u32): u32 {
  if (n <= (<u32>1 << MIN_CLASS)) return MIN_CLASS;
  return <u32>(32 - clz<u32>(n - 1));
}

/** A buffer for n bytes (its room: bufferRoom), from those given up or the arena; 0 when the arena is full. */
function takeBuffer(n: u32): u32 {
  const c = classOf(n);
  if (c > MAX_CLASS) return 0;
  const head = load<u32>(freeLists + c * 4);
  if (head != 0) {
    store<u32>(freeLists + c * 4, load<u32>(head));
    bufferRoom = <u32>1 << c;
    return head;
  }
  const at = allocData(<u32>1 << c);
  bufferRoom = at == 0 ? 0 : <u32>1 << c;
  return at;
}
let bufferRoom: u32 = 0;

/** Gives up a buffer of `room` bytes (a power of two from takeBuffer; anything else is left). */
function giveBuffer(at: u32, room: u32): void {
  if (at == 0 || room < (<u32>1 << MIN_CLASS) || (room & (room - 1)) != 0) return;
  const c = <u32>(31 - clz<u32>(room));
  if (c > MAX_CLASS) return;
  store<u32>(at, load<u32>(freeLists + c * 4));
  store<u32>(freeLists + c * 4, at);
}

/** A words region: its base's bytes cut or zero-extended, then its changed words. */
function words(d: u32): bool {
  const baseLen = load<u32>(d, D_LEN);
  let buf = load<u32>(d, D_DATA);
  let cap = load<u32>(d, D_CAP);
  const nn = <i64>baseLen + snumber(SEC_LENGTHS);
  if (bad || nn < 0 || nn > <i64>MAX_BLOCK_RAW) {
    bad = true;
    return false;
  }
  const n = <u32>nn;
  store<u32>(d, 0, D_FCOUNT);
  if (n == baseLen && left(SEC_WORD_COUNT) > 0 && load<u8>(posOf(SEC_WORD_COUNT)) == 0) {
    skip(SEC_WORD_COUNT, 1);
    return true;
  }
  changedAny = true;
  if (!chargeBlock(<u64>n)) {
    bad = true;
    return false;
  }
  const keepTo = n < baseLen ? n : baseLen;
  if (n > cap) {
    const at = takeBuffer(n);
    if (at == 0) {
      full = true;
      return false;
    }
    if (keepTo > 0) memory.copy(at, buf, keepTo);
    giveBuffer(buf, cap);
    buf = at;
    cap = bufferRoom;
    addressesChanged = true;
  }
  if (n > keepTo) memory.fill(buf + keepTo, 0, n - keepTo);
  applyWords(buf, n, load<u64>(d, D_ADDR));
  if (bad) return false;
  if (wordsFirst < wordsEnd) addHull(buf + wordsFirst, buf + wordsEnd);
  if (n != baseLen) {
    addHull(buf + keepTo, buf + (n > baseLen ? n : baseLen));
    lengthsChanged = true;
  }
  store<u32>(d, n, D_LEN);
  store<u32>(d, cap, D_CAP);
  store<u32>(d, buf, D_DATA);
  return true;
}

/** A literal region: its bytes, in a buffer of their own (its base's given up). */
function literal(d: u32, hasBase: bool): bool {
  const n = number(SEC_LENGTHS);
  if (bad || n > <u64>MAX_BLOCK_RAW || !chargeBlock(n)) {
    bad = true;
    return false;
  }
  const src = posOf(SEC_BYTES);
  if (!skip(SEC_BYTES, n)) return false;
  changedAny = true;
  const at = takeBuffer(<u32>n);
  if (at == 0) {
    full = true;
    return false;
  }
  memory.copy(at, src, <u32>n);
  if (hasBase) giveBuffer(load<u32>(d, D_DATA), load<u32>(d, D_CAP));
  store<u32>(d, <u32>n, D_LEN);
  store<u32>(d, bufferRoom, D_CAP);
  store<u32>(d, at, D_DATA);
  store<u32>(d, 0, D_FCOUNT);
  addressesChanged = true;
  return true;
}

/** where applyWords changed words: [wordsFirst, wordsEnd) of the region (empty: none) */
let wordsFirst: u32 = 0;
let wordsEnd: u32 = 0;

/** The next changed words, applied to the region of n bytes at buf (address addr): wordsFirst, wordsEnd; bad on bad input. */
function applyWords(buf: u32, n: u32, addr: u64): void {
  wordsFirst = wordsEnd = 0;
  const count = number(SEC_WORD_COUNT);
  if (bad || count > <u64>left(SEC_WORD_GAP)) {
    bad = true;
    return;
  }
  let first: u32 = NONE;
  let end: u32 = 0;
  let next: u64 = 0;
  const addrLo = <u32>addr;
  const high = wordBytes == 4 ? false : true;
  for (let i: u64 = 0; i < count; i++) {
    const word = next + number(SEC_WORD_GAP);
    const ref = number(SEC_WORD_REF);
    const z = number(SEC_WORD_DELTA);
    if (bad || word * 4 >= <u64>n || ref > <u64>refCount || z > 0xffffffff) {
      bad = true;
      return;
    }
    const at = <u32>word * 4;
    const change: u32 = (<u32>z >>> 1) ^ -(<u32>z & 1);
    let old: u32 = 0;
    if (ref != 0) {
      const k = <u32>ref - 1;
      old = high && ((addrLo + at) & 4) != 0 ? load<u32>(refHi + k * 4) : load<u32>(refLo + k * 4);
    }
    if (at + 4 <= n) {
      if (ref == 0) old = load<u32>(buf + at);
      store<u32>(buf + at, old + change);
    } else {
      // a last word cut by the region's end: its bytes there, zeros after, which must stay zeros
      const have = n - at;
      if (ref == 0) for (let b: u32 = 0; b < have; b++) old |= (<u32>load<u8>(buf + at + b)) << (8 * b);
      const v = old + change;
      if ((v >>> (8 * have)) != 0) {
        bad = true;
        return;
      }
      for (let b: u32 = 0; b < have; b++) store<u8>(buf + at + b, <u8>(v >>> (8 * b)));
    }
    if (at < first) first = at;
    end = at + 4 < n ? at + 4 : n;
    next = word + 1;
  }
  if (first != NONE) {
    wordsFirst = first;
    wordsEnd = end;
  }
}
