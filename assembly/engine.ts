// The block engine: turns a capture block's records into counted stacks without the host
// touching a sample. The host inflates a block into this module's memory and calls
// `engineRun`; the engine decodes each sample record (docs/capture-format.md), keeps each
// thread's memory image and patches it in place (a sample costs what changed in it), and walks
// it (walk.ts): a sample whose memory did not change since its thread's previous one is a
// counter bump, and a walk that reaches a frame of the thread's previous walk from which
// nothing was patched takes the rest of that walk (splicing, walk.ts). Stacks are interned as
// tree nodes — (caller's node, code, instruction) per thread — so a spliced walk interns only
// its new frames. Out come, at each harvest: one slot per thread (ids, time span, name time,
// counts per status), the nodes made since the last one, and the nodes samples ended on with
// their counts. Slots and nodes outlive harvests and blocks (until the host resets the tree:
// its tables full, a code address given another code object, a block given up on), so the host
// names and interns each node once, and touches per harvest only what it counted.
//
// The engine takes only blocks it decodes exactly as the reference reader does
// (src/capture/patch.ts); at anything else — a malformed record, an unknown record type, a
// patch without a base, a base region used twice, the block's byte budget passed — it stops
// with STOP_MALFORMED before changing anything for that record, and the host processes the
// whole block on the reference path instead (which reports what is wrong). Its outputs for
// that block are then dropped: the host resets the tree.
//
// Memory: the host lays out the areas (see src/kernel/block-engine.ts) and passes them in a config
// block of u32 slots; every load and store is checked against the memory size, and every
// area against its capacity, so no input can make the engine trap or write outside them.

import {
  inMemory,
  loadParams,
  frSize,
  maxDepth,
  outEnded,
  outFrames,
  outLast,
  outLastIsEntry,
  outLastOwner,
  outSpliceAt,
  outSplicePy,
  outSpliceVisited,
  outSpliced,
  outEnteredByCframe,
  outStatus,
  outVisited,
  setCodes,
  setRegions,
  setSplice,
  setTrace,
  walkOne,
} from './walk';
import {
  COPY_BUCKETS,
  C_COPY_HIST,
  C_COPY_TOUCHED,
  C_COUNT,
  C_DESCS,
  C_DESCS_SIZE,
  C_FILTER,
  C_FILTER_HI,
  C_FILTER_LO,
  C_FRAMES,
  C_GC_LEAF,
  C_KEEP_FLAGS,
  C_UNKNOWN_FLAGS,
  C_NATIVE,
  C_SLOTS,
  C_SLOTS_CAP,
  C_THREADS,
  C_THREADS_CAP,
  C_TRACE,
  DESC_SIZE,
  FRAME_ADDRESS,
  FRAME_CALLS_THROUGH_C,
  FRAME_CODE,
  FRAME_FLAGS,
  FRAME_IP,
  FRAME_SIZE,
  REGION_ADDRESS,
  REGION_DATA,
  REGION_LENGTH,
  GC_CODE_LO,
  NATIVE_CODE_LO,
  KEY_SIZE,
  K_CODE,
  K_FRAME,
  K_IP,
  NODE_CHUNK_BITS,
  NODE_SIZE,
  N_FANOUT,
  N_FIRST,
  N_FRAME,
  N_NEXT,
  N_STACK,
  N_PARENT,
  N_SLOT,
  N_WEIGHT,
  PSEUDO_CODE_HI,
  REGION_ADDRESS,
  REGION_DATA,
  REGION_LENGTH,
  REGION_SIZE,
  SLOT_SIZE,
  STATUS_COMPLETE as COMPLETE,
  STATUS_COMPLETE_UNVERIFIABLE as COMPLETE_UNVERIFIABLE,
  STATUS_COUNT,
  STATUS_IDLE as IDLE,
  STATUS_TORN,
  STOP_CODE,
  STOP_END,
  STOP_FULL,
  STOP_MALFORMED,
  S_COUNTS,
  TREE_HASH,
  TREE_KEYS,
  TREE_NODES,
  TREE_SLOTS,
  S_FIRST,
  S_INTERP,
  S_LAST,
  S_MAIN_TIME,
  S_NTID,
  S_TID,
  S_TSA,
  THREAD_SIZE,
  TRACE_BYTES_AT,
  TRACE_PY,
  TRACE_SIZE,
} from '../src/kernel/abi';
import {
  FLAG_GC,
  FLAG_MAIN,
  FLAG_RETRIED,
  FLAG_STOPPED,
  FORM_PATCH,
  FORM_WHOLE,
  ID_INTERPRETER,
  ID_NATIVE,
  ID_THREAD,
  FRAME_CHANGED,
  FRAME_IMAGE,
  FRAME_LITERAL,
  KIND_FRAMES,
  KIND_LITERAL,
  KIND_PATCH,
  MAX_FRAME_IMAGES,
  MAX_FRAME_WORDS,
  MAX_BLOCK_RAW,
  RECORD_CODE,
  RECORD_SAMPLE,
  RECORD_THREAD_NAME,
} from '../src/capture/codes';

export { STOP_CODE, STOP_END, STOP_FULL, STOP_MALFORMED };

/** the engine's pseudo-codes: a <GC> node, and a <native> node (PSEUDO_CODE_HI, GC_CODE_LO / NATIVE_CODE_LO) */
const GC_CODE: u64 = (<u64>PSEUDO_CODE_HI << 32) | <u64>GC_CODE_LO;
const NATIVE_CODE: u64 = (<u64>PSEUDO_CODE_HI << 32) | <u64>NATIVE_CODE_LO;
export const MAX_BLOCK_SAMPLE_BYTES: u64 = 64 << 20;
const MAX_SAFE: u64 = 0x1fffffffffffff;

// ---- the engine's own tables (the host only sizes them: THREAD_SIZE, DESC_SIZE) ----
// thread image: tsa, ids, time, region list and its sorted table, last result
export const T_TSA = 0;
export const T_INTERP = 8;
export const T_TID = 16;
export const T_NTID = 24;
export const T_TIME = 32;
export const T_COUNT = 40; // regions in the current sample
export const T_DESCS = 44; // region list, DESC_SIZE each, in sample order
export const T_CAP = 48; // capacity of the list and of the sorted table
export const T_SORTED = 52; // sorted region table (walk.ts REGION_SIZE entries)
export const T_SORTED_OK = 56; // the sorted table matches the list
export const T_SLOT = 60;
export const T_LAST_STATUS = 64; // the walk's status of the thread's previous sample (0xffffffff: none)
export const T_LAST_STACK = 68;
export const T_USED = 72; // region descriptors used by this sample (scratch)
// the thread's last walk, kept for splicing (walk.ts): its trace and Python frames
export const T_TRACE = 76; // buffer in the data arena (0: none yet): SPLICE_MAX trace entries, then SPLICE_MAX frames
export const T_TRACE_N = 80; // frames in the trace (NONE: no usable last walk)
export const T_TRACE_PY = 84; // Python frames of it
export const T_TRACE_LAST = 88; // u64: its last frame
export const T_TRACE_OWNER = 96; // owner of its last frame
export const T_TRACE_ENTRY = 100; // is-entry flag of its last frame
export const T_NODES_OK = 104; // the buffer's node of each Python frame is current (same slot, outputs not cleared)
export const T_FLAGS = 108; // (section blocks) the flags of the thread's previous sample
/** walks longer than this are not kept for splicing */
const SPLICE_MAX: u32 = 1024;
// the buffer: SPLICE_MAX trace entries, SPLICE_MAX Python frames, SPLICE_MAX u32 nodes (node k:
// the stack of Python frames k.. of the walk, k = 0 the innermost)
const BUF_PY: u32 = SPLICE_MAX * TRACE_SIZE;
const BUF_NODES: u32 = BUF_PY + SPLICE_MAX * FRAME_SIZE;
export const TRACE_BYTES: u32 = BUF_NODES + SPLICE_MAX * 4;
/** patched stretches of one sample's image, [lo, hi) linear offsets, one per patched region */
const HULLS_MAX: u32 = 32;
const hulls = memory.data(HULLS_MAX * 8, 8);
let hullCount: u32 = 0;
export const NONE: u32 = 0xffffffff;
/** children a node keeps in its list before they go to the hash */
const FANOUT_LISTED: u32 = 8;

// ---- frame keys: (code, instruction) → the host's frame number ----
// A node is (caller, slot, frame): the frame the host names a (code, instruction) as — its
// function, file and line (and instruction, with opcodes) — so that two instructions of one line
// are one node, and each node is exactly one stack of the profile: the host appends the nodes
// made since its last harvest to its stack tables as they are, none looked up. The host names a
// (code, instruction) when a walk first meets it, through the one call this module makes out;
// the keys are kept in a dense list, found by a hash of their numbers (NONE: empty), at most
// half full, until the host clears them (an address given another code object).

/** The host's number for the frame at (code, instruction): called once per key until the keys are cleared. */
@external("env", "nameFrame")
declare function hostNameFrame(codeLo: u32, codeHi: u32, ipLo: u32, ipHi: u32): u32;

let keys: u32 = 0;
let keysCap: u32 = 0;
let keyCount: u32 = 0;
let keyHash: u32 = 0;
let keyHashCap: u32 = 0;

@inline function keyHashOf(code: u64, ip: u64): u32 {
  let h: u64 = (code ^ 0x9e3779b97f4a7c15) * 0xff51afd7ed558ccd;
  h = (h ^ ip ^ (h >>> 29)) * 0xc4ceb9fe1a85ec53;
  return <u32>(h ^ (h >>> 32));
}

/** The frame number of (code, instruction): kept, or asked of the host (room was checked: engineTreeNeed). */
function frameKey(code: u64, ip: u64): u32 {
  const mask = keyHashCap - 1;
  let h = keyHashOf(code, ip) & mask;
  for (let e = load<u32>(keyHash + h * 4); e != NONE; e = load<u32>(keyHash + h * 4)) {
    const k = keys + e * KEY_SIZE;
    if (load<u64>(k, K_CODE) == code && load<u64>(k, K_IP) == ip) return load<u32>(k, K_FRAME);
    h = (h + 1) & mask;
  }
  const frame = hostNameFrame(<u32>code, <u32>(code >>> 32), <u32>ip, <u32>(ip >>> 32));
  const k = keys + keyCount * KEY_SIZE;
  store<u64>(k, code, K_CODE);
  store<u64>(k, ip, K_IP);
  store<u32>(k, frame, K_FRAME);
  store<u32>(keyHash + h * 4, keyCount);
  keyCount++;
  return frame;
}

/**
 * The keys' list at [at, at + cap × KEY_SIZE) and their hash at [hashAt, hashAt + hashCap × 4),
 * each bigger than before (the list's keys copied by the host first, when `copy`): every key is
 * put in the new hash. False if they do not fit memory or cannot hold the keys.
 */
export function engineSetKeys(at: u32, cap: u32, hashAt: u32, hashCapNew: u32, copy: bool): bool {
  if (hashCapNew == 0 || (hashCapNew & (hashCapNew - 1)) != 0) return false;
  if (!inMemory(<u64>at, <u64>cap * KEY_SIZE) || !inMemory(<u64>hashAt, <u64>hashCapNew * 4)) return false;
  const count = copy ? keyCount : 0;
  if (<u64>count > <u64>cap || <u64>count * 2 > <u64>hashCapNew) return false;
  keys = at;
  keysCap = cap;
  keyHash = hashAt;
  keyHashCap = hashCapNew;
  keyCount = count;
  memory.fill(keyHash, 0xff, keyHashCap * 4);
  const mask = keyHashCap - 1;
  for (let e: u32 = 0; e < keyCount; e++) {
    const k = keys + e * KEY_SIZE;
    let h = keyHashOf(load<u64>(k, K_CODE), load<u64>(k, K_IP)) & mask;
    while (load<u32>(keyHash + h * 4) != NONE) h = (h + 1) & mask;
    store<u32>(keyHash + h * 4, e);
  }
  return true;
}

export function engineKeyCount(): u32 {
  return keyCount;
}

@inline function nodeAt(i: u32): u32 {
  return load<u32>(nodeChunks + (i >>> NODE_CHUNK_BITS) * 4) + (i & CHUNK_MASK) * NODE_SIZE;
}

@inline function weightedAt(k: u32): u32 {
  return load<u32>(weightedChunks + (k >>> NODE_CHUNK_BITS) * 4) + (k & CHUNK_MASK) * 4;
}
// region descriptor: address, length, capacity of its bytes, where its bytes are
export const D_ADDR = 0;
export const D_LEN = 8;
export const D_CAP = 12;
export const D_DATA = 16;
export const D_USED = 20; // scratch: taken as a base by the sample being decoded
// (section blocks) a stack region's frames: where its list is, how many, and room for how many —
// entries of u32 offset in the region and i32 image
export const D_FRAMES = 24;
export const D_FCOUNT = 28;
export const D_FCAP = 32;
// slots (one thread's counts in this block) and nodes (a stack as a tree node): SLOT_SIZE,
// NODE_SIZE, S_*, N_* in src/kernel/abi.ts, which the host reads them by

// ---- engine state ----
let cfg: u32 = 0;
let threads: u32 = 0;
let threadsCap: u32 = 0;
let threadCount: u32 = 0;
let descs: u32 = 0;
let descsEnd: u32 = 0;
let descsUsed: u32 = 0;
// the data arena: segments the host adds (engineAddSegment), used from the first again each
// block; `data`, `dataEnd` and `dataUsed` are the segment in use
const MAX_SEGMENTS: u32 = 64;
const segments = memory.data(MAX_SEGMENTS * 8, 8);
let segmentCount: u32 = 0;
let segment: u32 = 0;
let segmentBytes: u64 = 0;
let data: u32 = 0;
let dataEnd: u32 = 0;
let dataUsed: u32 = 0;
/** bytes the sample that stopped the engine for room wanted from one segment (engineDataNeed) */
let dataNeed: u32 = 0;
let slots: u32 = 0;
let slotsCap: u32 = 0;
let slotCount: u32 = 0;
// the tree: nodes in chunks of NODE_CHUNK the host adds (engineAddNodeChunk), each with its part
// of the weighted list; nothing moves as it grows
const NODE_CHUNK: u32 = 1 << NODE_CHUNK_BITS;
const CHUNK_MASK: u32 = NODE_CHUNK - 1;
const MAX_NODE_CHUNKS: u32 = 256;
const nodeChunks = memory.data(MAX_NODE_CHUNKS * 4, 4);
const weightedChunks = memory.data(MAX_NODE_CHUNKS * 4, 4);
let chunkCount: u32 = 0;
let nodesCap: u32 = 0;
let nodeCount: u32 = 0;
let copyTouched: u32 = 0;
let touchedCount: u32 = 0;
/** the nodes whose weight is not 0, in the order they got it (in the chunks' weighted lists) */
let weightedCount: u32 = 0;
// the nodes a caller's child list does not find (roots, and the children of a caller with more
// than FANOUT_LISTED): an open-addressing table of node numbers (NONE: empty), at most half full
let hash: u32 = 0;
let hashCap: u32 = 0;
let tabled: u32 = 0;
let frames: u32 = 0;
let trace: u32 = 0;
/** walks that were spliced, and walks in all (engineSpliced / engineWalks) */
let spliced: u32 = 0;
let walks: u32 = 0;
let filterKind: u32 = 0;
let filterValue: u64 = 0;
let keepFlags: u32 = 0;
let unknownFlags: u32 = 0;
let gcLeaf: u32 = 0;
let nativeNodes: u32 = 0;
let copyHist: u32 = 0;
let blockBytes: u64 = 0;
// of the counted samples (those the filter keeps): copy times' sum and max, and flags
let counted: u32 = 0;
let copySum: u64 = 0;
let copyMax: u32 = 0;
let stoppedCount: u32 = 0;
let retriedCount: u32 = 0;

// per block, reported to the host
let samplesSeen: u32 = 0;
// samples the mode left out whose fact the recorder could not tell (C_UNKNOWN_FLAGS)
let undetermined: u32 = 0;
let ticks: u32 = 0;
let lastTime: u64 = NONE;
let firstBlockTime: u64 = 0;
let stopAt: u32 = 0;

// parser state
let pos: u32 = 0;
let limit: u32 = 0;
let bad: bool = false;

// ---- frame images (format 1.3 frames regions; src/capture/frame-images.ts is the twin) ----
// An image: u32 mask of the words made relative to the frame's address, 4 bytes unused, then
// MAX_FRAME_WORDS u64 words (the first `shapeN` used). Images live in pages of the data arena,
// allocated as the block needs them; the page table is static.
const IMG_STRIDE: u32 = 8 + MAX_FRAME_WORDS * 8;
const IMG_PER_PAGE: u32 = 256;
const IMG_PAGE_BYTES: u32 = IMG_PER_PAGE * IMG_STRIDE;
const imgPages = memory.data((MAX_FRAME_IMAGES / IMG_PER_PAGE) * 4, 4);
let imageCount: u32 = 0;
/** the word size and words of the block's frames (0: no frames region yet) */
let shapeWb: u32 = 0;
let shapeN: u32 = 0;

@inline function imageAt(e: u32): u32 {
  return load<u32>(imgPages + (e / IMG_PER_PAGE) * 4) + (e % IMG_PER_PAGE) * IMG_STRIDE;
}

/** Writes image e as the frame at `addr`, at linear offset `out`. */
export function materialize(e: u32, addr: u64, out: u32): void {
  const img = imageAt(e);
  const mask = load<u32>(img);
  for (let q: u32 = 0; q < shapeN; q++) {
    let v = load<u64>(img + 8 + q * 8);
    if (((mask >>> q) & 1) != 0) v += addr;
    if (shapeWb == 8) store<u64>(out + q * 8, v);
    else store<u32>(out + q * 4, <u32>v);
  }
}

/** The frame at `out` (address `addr`, in a region [lo, hi)) becomes the block's next image, if there is room. */
function addImage(out: u32, addr: u64, lo: u64, hi: u64): void {
  if (imageCount >= <u32>MAX_FRAME_IMAGES) return;
  if (imageCount % IMG_PER_PAGE == 0) {
    // (the first pass reserved the arena bytes)
    store<u32>(imgPages + (imageCount / IMG_PER_PAGE) * 4, data + dataUsed);
    dataUsed += IMG_PAGE_BYTES;
  }
  writeImage(out, addr, lo, hi);
}

/** Writes the frame at `out` as the next image (its page is there), words in [lo, hi) made relative to `addr`. */
function writeImage(out: u32, addr: u64, lo: u64, hi: u64): void {
  const img = imageAt(imageCount);
  let mask: u32 = 0;
  for (let q: u32 = 0; q < shapeN; q++) {
    let w: u64 = shapeWb == 8 ? load<u64>(out + q * 8) : <u64>load<u32>(out + q * 4);
    if (w >= lo && w < hi) {
      mask |= (<u32>1) << q;
      w -= addr;
    }
    store<u64>(img + 8 + q * 8, w);
  }
  store<u32>(img, mask);
  imageCount++;
}

/** Arena bytes for the pages of `more` images added to the block's. */
function imagePagesBytes(more: u64): u64 {
  let total = <u64>imageCount + more;
  if (total > <u64>MAX_FRAME_IMAGES) total = <u64>MAX_FRAME_IMAGES;
  const pagesNow = (<u64>imageCount + IMG_PER_PAGE - 1) / IMG_PER_PAGE;
  const pagesThen = (total + IMG_PER_PAGE - 1) / IMG_PER_PAGE;
  return (pagesThen - pagesNow) * <u64>IMG_PAGE_BYTES;
}

/** The exclusive end of a region, all ones when it would pass 2^64 (as frame-images.ts's framePlace). */
@inline export function regionEnd(addr: u64, len: u64): u64 {
  const e = addr + len;
  return e < addr ? <u64>-1 : e;
}

// ---- reading (every read bounded by `limit`; a bad read sets `bad`) ----

@inline function byte(): u32 {
  if (pos >= limit) {
    bad = true;
    return 0;
  }
  return <u32>load<u8>(pos++);
}

/** Unsigned LEB128, at most 10 bytes and below 2^64 (the format's rule). */
function varint(): u64 {
  let v: u64 = 0;
  let shift: u64 = 0;
  for (let i = 0; i < 10; i++) {
    const b = byte();
    if (bad) return 0;
    if (i == 9 && b > 1) {
      bad = true;
      return 0;
    }
    v |= (<u64>(b & 0x7f)) << shift;
    if ((b & 0x80) == 0) return v;
    shift += 7;
  }
  bad = true;
  return 0;
}

/** A varint documented as a number: below 2^53. */
function number(): u64 {
  const v = varint();
  if (v > MAX_SAFE) bad = true;
  return v;
}

/** Zigzag svarint, documented as a number. */
function snumber(): i64 {
  const v = varint();
  const s: i64 = <i64>(v >>> 1) ^ -(<i64>(v & 1));
  if (s > <i64>MAX_SAFE || s < -<i64>MAX_SAFE) bad = true;
  return s;
}

// ---- setup ----

/** Take the config block and the walk parameters; false if either does not fit memory. */
export function engineInit(config: u32, params: u32): bool {
  if (!inMemory(<u64>config, <u64>C_COUNT * 4)) return false;
  if (!loadParams(params)) return false;
  cfg = config;
  threads = load<u32>(cfg + C_THREADS * 4);
  threadsCap = load<u32>(cfg + C_THREADS_CAP * 4);
  descs = load<u32>(cfg + C_DESCS * 4);
  descsEnd = descs + load<u32>(cfg + C_DESCS_SIZE * 4);
  slots = load<u32>(cfg + C_SLOTS * 4);
  slotsCap = load<u32>(cfg + C_SLOTS_CAP * 4);
  copyTouched = load<u32>(cfg + C_COPY_TOUCHED * 4);
  frames = load<u32>(cfg + C_FRAMES * 4);
  filterKind = load<u32>(cfg + C_FILTER * 4);
  filterValue = (<u64>load<u32>(cfg + C_FILTER_LO * 4)) | ((<u64>load<u32>(cfg + C_FILTER_HI * 4)) << 32);
  keepFlags = load<u32>(cfg + C_KEEP_FLAGS * 4);
  unknownFlags = load<u32>(cfg + C_UNKNOWN_FLAGS * 4);
  gcLeaf = load<u32>(cfg + C_GC_LEAF * 4);
  nativeNodes = load<u32>(cfg + C_NATIVE * 4);
  copyHist = load<u32>(cfg + C_COPY_HIST * 4);
  trace = load<u32>(cfg + C_TRACE * 4);
  if (!inMemory(<u64>copyHist, <u64>COPY_BUCKETS * 4)) return false;
  if (!inMemory(<u64>trace, <u64>maxDepth * TRACE_SIZE)) return false;
  if (!inMemory(<u64>frames, <u64>maxDepth * FRAME_SIZE)) return false;
  if (!inMemory(<u64>threads, <u64>threadsCap * THREAD_SIZE)) return false;
  if (!inMemory(<u64>descs, <u64>(descsEnd - descs)) || descsEnd < descs) return false;
  if (!inMemory(<u64>slots, <u64>slotsCap * SLOT_SIZE)) return false;
  if (!inMemory(<u64>copyTouched, <u64>COPY_BUCKETS * 4)) return false;
  return true;
}

/** Another segment of the data arena, [at, at + size); false if it does not fit memory or there are enough. */
export function engineAddSegment(at: u32, size: u32): bool {
  if (segmentCount >= MAX_SEGMENTS || !inMemory(<u64>at, <u64>size) || (at & 7) != 0) return false;
  store<u32>(segments + segmentCount * 8, at);
  store<u32>(segments + segmentCount * 8, size, 4);
  if (segmentCount == 0) useSegment(0);
  segmentCount++;
  segmentBytes += size;
  return true;
}

/** bytes of the data arena's segments */
export function engineDataBytes(): u64 {
  return segmentBytes;
}

/** bytes the sample that stopped the engine for room needs from one segment (a new segment must be this big) */
export function engineDataNeed(): u32 {
  return dataNeed;
}

function useSegment(k: u32): void {
  segment = k;
  data = load<u32>(segments + k * 8);
  dataEnd = data + load<u32>(segments + k * 8, 4);
  dataUsed = 0;
}

/** Room for `need` more bytes in the segment in use, or in a later one (then in use); false if none has it. */
function dataRoom(need: u64): bool {
  if (segmentCount == 0) return false;
  if (<u64>dataUsed + need <= <u64>(dataEnd - data)) return true;
  for (let k = segment + 1; k < segmentCount; k++) {
    if (need <= <u64>load<u32>(segments + k * 8, 4)) {
      useSegment(k);
      return true;
    }
  }
  return false;
}

/** Another chunk of NODE_CHUNK nodes, at `nodesAt`, with its weighted list at `weightedAt`; false if it does not fit memory or there are enough. */
export function engineAddNodeChunk(nodesAt: u32, weightedAt: u32): bool {
  if (chunkCount >= MAX_NODE_CHUNKS) return false;
  if (!inMemory(<u64>nodesAt, <u64>NODE_CHUNK * NODE_SIZE) || !inMemory(<u64>weightedAt, <u64>NODE_CHUNK * 4)) return false;
  store<u32>(nodeChunks + chunkCount * 4, nodesAt);
  store<u32>(weightedChunks + chunkCount * 4, weightedAt);
  chunkCount++;
  nodesCap = chunkCount * NODE_CHUNK;
  return true;
}

/**
 * The hash at [at, at + cap × 4), cap a power of two: every node the child lists do not find is
 * put in it (at the start, and when the old one is too full: engineTreeNeed). False if it does
 * not fit memory or cannot hold them at most half full.
 */
export function engineSetHash(at: u32, cap: u32): bool {
  if (cap == 0 || (cap & (cap - 1)) != 0 || !inMemory(<u64>at, <u64>cap * 4)) return false;
  if (<u64>tabled * 2 > <u64>cap) return false;
  hash = at;
  hashCap = cap;
  memory.fill(hash, 0xff, hashCap * 4);
  tabled = 0;
  for (let i: u32 = 0; i < nodeCount; i++) {
    const parent = load<u32>(nodeAt(i), N_PARENT);
    if (parent == NONE || load<u32>(nodeAt(parent), N_FANOUT) > FANOUT_LISTED) table(i);
  }
  return true;
}

/** The code table walks check code pointers against (sorted; walk.ts CODE_SIZE entries). */
export function engineSetCodes(table: u32, count: u32): void {
  setCodes(table, count);
}


/** A new block: no thread has an image, nothing is counted (slots and nodes stay). */
export function engineBeginBlock(): void {
  threadCount = 0;
  imageCount = 0;
  shapeWb = 0;
  shapeN = 0;
  descsUsed = 0;
  if (segmentCount != 0) useSegment(0);
  blockBytes = 0;
  samplesSeen = 0;
  undetermined = 0;
  ticks = 0;
  lastTime = NONE;
  firstBlockTime = 0;
  engineClearOutputs();
}

/**
 * Forget what was counted (the host has harvested it, or dropped it): the slots' counts and the
 * nodes' weights. The slots and nodes themselves stay, and so do thread images.
 */
export function engineClearOutputs(): void {
  for (let s: u32 = 0; s < slotCount; s++) {
    const sl = slots + s * SLOT_SIZE;
    store<u64>(sl, <u64>-1, S_FIRST);
    store<u64>(sl, 0, S_LAST);
    store<i64>(sl, -1, S_MAIN_TIME);
    memory.fill(sl + S_COUNTS, 0, STATUS_COUNT * 4);
  }
  for (let i: u32 = 0; i < weightedCount; i++) store<u32>(nodeAt(load<u32>(weightedAt(i))), 0, N_WEIGHT);
  weightedCount = 0;
  counted = 0;
  copySum = 0;
  copyMax = 0;
  stoppedCount = 0;
  retriedCount = 0;
  for (let i: u32 = 0; i < touchedCount; i++) store<u32>(copyHist + load<u32>(copyTouched + i * 4) * 4, 0);
  touchedCount = 0;
}

/**
 * Forget the slots and the nodes too (after a harvest, or dropping what was counted): the tables
 * are full, or the host's names of nodes no longer hold. Thread images stay, without their walk's
 * node.
 */
export function engineResetTree(): void {
  engineClearOutputs();
  slotCount = 0;
  nodeCount = 0;
  tabled = 0;
  if (hashCap != 0) memory.fill(hash, 0xff, hashCap * 4);
  for (let t: u32 = 0; t < threadCount; t++) {
    const th = threads + t * THREAD_SIZE;
    store<u32>(th, NONE, T_SLOT);
    store<u32>(th, 0, T_NODES_OK);
    store<u32>(th, NONE, T_LAST_STACK);
    store<u32>(th, NONE, T_LAST_STATUS);
  }
}

/**
 * Which of the tree's tables is too full for another sample (STOP_FULL then wants it made bigger,
 * or a harvest and a reset): TREE_SLOTS, TREE_NODES (a chunk), TREE_HASH (a bigger one), or 0.
 */
export function engineTreeNeed(): u32 {
  if (slotCount >= slotsCap) return TREE_SLOTS;
  const most = <u64>nodesPerSample() + 1;
  if (<u64>nodeCount + most > <u64>nodesCap) return TREE_NODES;
  // (a sample's frames may each be a new key)
  if (<u64>keyCount + most > <u64>keysCap || (<u64>keyCount + most) * 2 > <u64>keyHashCap) return TREE_KEYS;
  // (a sample's nodes each go to the hash at most once, and at most two of them move a caller's
  // children there: the first new node of its walk and a <GC> node)
  if ((<u64>tabled + most + 2 * (FANOUT_LISTED + 1)) * 2 > <u64>hashCap) return TREE_HASH;
  return 0;
}

export function engineTreeFull(): bool {
  return engineTreeNeed() != 0;
}

/** Where node i is (the host reads nodes, and the weighted list, through the chunks it added). */
export function engineNodeCapacity(): u32 {
  return nodesCap;
}

export function engineStopAt(): u32 {
  return stopAt;
}
export function engineSamples(): u32 {
  return samplesSeen;
}
export function engineTicks(): u32 {
  return ticks;
}
/** samples of the block the mode left out because the recorder could not tell whether its fact held */
export function engineUndetermined(): u32 {
  return undetermined;
}
export function engineFirstTime(): u64 {
  return firstBlockTime;
}
export function engineLastTime(): u64 {
  return lastTime;
}
export function engineSlotCount(): u32 {
  return slotCount;
}
export function engineNodeCount(): u32 {
  return nodeCount;
}
export function engineTouchedCount(): u32 {
  return touchedCount;
}
export function engineWeightedCount(): u32 {
  return weightedCount;
}
/** counted samples (those the filter keeps) since the outputs were cleared */
export function engineCounted(): u32 {
  return counted;
}
export function engineCopySum(): u64 {
  return copySum;
}
export function engineCopyMax(): u32 {
  return copyMax;
}
export function engineStopped(): u32 {
  return stoppedCount;
}
export function engineRetried(): u32 {
  return retriedCount;
}
/** walks made since the module was instantiated, and how many of them were spliced */
export function engineWalks(): u32 {
  return walks;
}
export function engineSpliced(): u32 {
  return spliced;
}

// ---- threads and slots ----

export function findThread(tsa: u64): u32 {
  for (let t: u32 = 0; t < threadCount; t++) {
    const th = threads + t * THREAD_SIZE;
    if (load<u64>(th, T_TSA) == tsa) return th;
  }
  return 0;
}

/** The slot for these ids (a thread state whose ids change gets another), or 0 when full. */
function slotFor(tsa: u64, interp: u64, tid: u64, ntid: u64): u32 {
  for (let s: u32 = 0; s < slotCount; s++) {
    const sl = slots + s * SLOT_SIZE;
    if (load<u64>(sl, S_TSA) == tsa && load<u64>(sl, S_INTERP) == interp && load<u64>(sl, S_TID) == tid && load<u64>(sl, S_NTID) == ntid) return sl;
  }
  if (slotCount >= slotsCap) return 0;
  const sl = slots + slotCount * SLOT_SIZE;
  slotCount++;
  store<u64>(sl, tsa, S_TSA);
  store<u64>(sl, interp, S_INTERP);
  store<u64>(sl, tid, S_TID);
  store<u64>(sl, ntid, S_NTID);
  store<u64>(sl, <u64>-1, S_FIRST);
  store<u64>(sl, 0, S_LAST);
  store<i64>(sl, -1, S_MAIN_TIME);
  memory.fill(sl + S_COUNTS, 0, STATUS_COUNT * 4);
  return sl;
}

// ---- stacks ----

/** Where a node's key starts its probe in the hash. */
@inline function nodeHash(parent: u32, slot: u32, frame: u32): u32 {
  let h: u64 = ((<u64>parent << 32) | <u64>slot) * 0x9e3779b97f4a7c15;
  h = (h ^ (h >>> 31) ^ <u64>frame) * 0xbf58476d1ce4e5b9;
  return <u32>(h ^ (h >>> 32));
}

/** Puts node i in the hash (which has room). */
function table(i: u32): void {
  const n = nodeAt(i);
  const mask = hashCap - 1;
  let h = nodeHash(load<u32>(n, N_PARENT), load<u32>(n, N_SLOT), load<u32>(n, N_FRAME)) & mask;
  while (load<u32>(hash + h * 4) != NONE) h = (h + 1) & mask;
  store<u32>(hash + h * 4, i);
  tabled++;
}

@inline function sameNode(n: u32, parent: u32, slot: u32, frame: u32): bool {
  return load<u32>(n, N_FRAME) == frame && load<u32>(n, N_PARENT) == parent && load<u32>(n, N_SLOT) == slot;
}

/**
 * The node for (caller node, slot, frame): found, or made (the caller checked there is room:
 * engineTreeNeed). A caller's children are a list, newest first — a stack that moved at its top
 * mostly grows again the way it was, and a deep stack that churns makes long chains of nodes with
 * one child each, which a list finds or makes without a hash probe (a cache miss in a table as
 * big as the tree). Roots, and the children of a caller with more than FANOUT_LISTED, are found
 * in the hash.
 */
function internNode(parent: u32, slot: u32, frame: u32): u32 {
  let p: u32 = 0;
  let listed = false;
  if (parent != NONE) {
    p = nodeAt(parent);
    // the newest child first, then (while the caller has few) the others
    const first = load<u32>(p, N_FIRST);
    if (first != NONE && sameNode(nodeAt(first), parent, slot, frame)) return first;
    listed = load<u32>(p, N_FANOUT) <= FANOUT_LISTED;
    if (listed) {
      for (let c = first != NONE ? load<u32>(nodeAt(first), N_NEXT) : NONE; c != NONE; c = load<u32>(nodeAt(c), N_NEXT)) {
        if (sameNode(nodeAt(c), parent, slot, frame)) return c;
      }
    }
  }
  let h: u32 = 0;
  if (!listed) {
    const mask = hashCap - 1;
    h = nodeHash(parent, slot, frame) & mask;
    for (let e = load<u32>(hash + h * 4); e != NONE; e = load<u32>(hash + h * 4)) {
      if (sameNode(nodeAt(e), parent, slot, frame)) {
        if (parent != NONE) store<u32>(p, e, N_FIRST);
        return e;
      }
      h = (h + 1) & mask;
    }
  }
  const i = nodeCount++;
  const m = nodeAt(i);
  store<u32>(m, parent, N_PARENT);
  store<u32>(m, slot, N_SLOT);
  store<u32>(m, frame, N_FRAME);
  store<u32>(m, 0, N_WEIGHT);
  store<u32>(m, NONE, N_FIRST);
  store<u32>(m, 0, N_FANOUT);
  store<u32>(m, NONE, N_STACK);
  if (parent != NONE) {
    store<u32>(m, load<u32>(p, N_FIRST), N_NEXT);
    store<u32>(p, i, N_FIRST);
    const fan = load<u32>(p, N_FANOUT);
    if (fan <= FANOUT_LISTED) store<u32>(p, fan + 1, N_FANOUT);
  } else {
    store<u32>(m, NONE, N_NEXT);
  }
  if (!listed) {
    store<u32>(hash + h * 4, i);
    tabled++;
  } else if (load<u32>(p, N_FANOUT) > FANOUT_LISTED) {
    // one child too many for a list: the caller's children go to the hash (room was checked
    // for a whole walk's nodes, and these are at most FANOUT_LISTED + 1 of them)
    for (let c = i; c != NONE; c = load<u32>(nodeAt(c), N_NEXT)) table(c);
  }
  return i;
}

// ---- samples ----

/** Did this sample's patches write anywhere in [lo, hi) (linear offsets)? */
/** Bytes [lo, hi) of the sample's image were written (past HULLS_MAX only counted: no splice then). */
@inline export function addHull(lo: u32, hi: u32): void {
  if (hullCount < HULLS_MAX) {
    store<u32>(hulls + hullCount * 8, lo);
    store<u32>(hulls + hullCount * 8, hi, 4);
  }
  hullCount++;
}

/** where the runs applyRuns copied began (NONE: there were none) */
let runsFirst: u32 = NONE;

/** Copies `runs` runs (gap, length, bytes) at pos into buf; returns where the last ended (0: none). */
function applyRuns(buf: u32, runs: u32): u32 {
  let at: u32 = 0;
  runsFirst = NONE;
  for (let k: u32 = 0; k < runs; k++) {
    const start = at + <u32>number();
    const len = <u32>number();
    memory.copy(buf + start, pos, len);
    pos += len;
    at = start + len;
    if (runsFirst == NONE) runsFirst = start;
  }
  return at;
}

function patched(lo: u32, hi: u32): bool {
  for (let i: u32 = 0; i < hullCount; i++) {
    const h = hulls + i * 8;
    if (lo < load<u32>(h, 4) && load<u32>(h) < hi) return true;
  }
  return false;
}

/**
 * Decode one sample record body [pos, end), apply it to its thread's image and count it.
 * Returns STOP_END when done, STOP_MALFORMED or STOP_FULL before changing anything.
 */
function sample(end: u32): i32 {
  limit = end;
  const tsa = varint();
  const form = byte();
  if (bad) return STOP_MALFORMED;
  let th = findThread(tsa);
  let time: u64 = 0;
  let interp: u64 = 0;
  let tid: u64 = 0;
  let ntid: u64 = 0;
  if (form == FORM_WHOLE) {
    time = number();
    interp = varint();
    tid = varint();
    ntid = varint();
  } else if (form == FORM_PATCH) {
    // a patch needs its thread's previous sample in this block
    if (th == 0) return STOP_MALFORMED;
    const t = <i64>load<u64>(th, T_TIME) + snumber();
    if (t < 0 || t > <i64>MAX_SAFE) bad = true;
    time = <u64>t;
    const mask = byte();
    if ((mask & ~(ID_INTERPRETER | ID_THREAD | ID_NATIVE)) != 0) bad = true;
    interp = (mask & ID_INTERPRETER) != 0 ? varint() : load<u64>(th, T_INTERP);
    tid = (mask & ID_THREAD) != 0 ? varint() : load<u64>(th, T_TID);
    ntid = (mask & ID_NATIVE) != 0 ? varint() : load<u64>(th, T_NTID);
  } else {
    return STOP_MALFORMED;
  }
  const flags = <u32>number();
  const recorderStatus = byte();
  if (recorderStatus > 1) bad = true;
  const copyMicros = number();
  const errorCount = number();
  if (bad) return STOP_MALFORMED;
  for (let e: u64 = 0; e < errorCount; e++) {
    const n = number();
    if (bad || <u64>pos + n > <u64>limit) return STOP_MALFORMED;
    pos += <u32>n;
  }
  const regionCount = <u32>number();
  if (bad || regionCount > (limit - pos) / 3) return STOP_MALFORMED;

  // First pass: check every region and what it needs, before anything changes.
  const baseCount = th != 0 ? load<u32>(th, T_COUNT) : 0;
  const baseDescs = th != 0 ? load<u32>(th, T_DESCS) : 0;
  if (th != 0) for (let j: u32 = 0; j < baseCount; j++) store<u32>(baseDescs + j * DESC_SIZE, 0, D_USED);
  const regionsAt = pos;
  let need: u64 = 0; // new arena bytes
  let newImages: u64 = 0; // frame images the sample adds
  let budget: u64 = blockBytes;
  let changed = form == FORM_WHOLE || regionCount != baseCount;
  for (let i: u32 = 0; i < regionCount; i++) {
    const kind = byte();
    if (kind == KIND_LITERAL) {
      varint(); // address
      const n = number();
      if (bad || n > <u64>MAX_BLOCK_RAW || <u64>pos + n > <u64>limit) return STOP_MALFORMED;
      pos += <u32>n;
      need += (n + 7) & ~7;
      budget += n;
      changed = true;
    } else if (kind == KIND_PATCH && form == FORM_PATCH) {
      const j = <u32>number();
      if (bad || j >= baseCount) return STOP_MALFORMED;
      const base = baseDescs + j * DESC_SIZE;
      // each base region once: the engine patches it in place
      if (load<u32>(base, D_USED) != 0) return STOP_MALFORMED;
      store<u32>(base, 1, D_USED);
      const baseLen = <u64>load<u32>(base, D_LEN);
      const n = number();
      if (bad || n > <u64>MAX_BLOCK_RAW) return STOP_MALFORMED;
      budget += n;
      const runs = number();
      if (bad) return STOP_MALFORMED;
      if (runs == 0 && n > baseLen) return STOP_MALFORMED;
      let at: u64 = 0;
      for (let k: u64 = 0; k < runs; k++) {
        const start = at + number();
        const len = number();
        if (bad || start + len > n || <u64>pos + len > <u64>limit) return STOP_MALFORMED;
        if (start > at && start > baseLen) return STOP_MALFORMED;
        pos += <u32>len;
        at = start + len;
      }
      if (n > (at > baseLen ? at : baseLen)) return STOP_MALFORMED;
      if (n > <u64>load<u32>(base, D_CAP)) need += (n + 7) & ~7;
      if (runs != 0 || n != baseLen || j != i) changed = true;
    } else if (kind == KIND_FRAMES) {
      const jp = number();
      if (bad) return STOP_MALFORMED;
      let baseLen: u64 = 0;
      let cap: u64 = 0;
      if (jp == 0) {
        varint(); // address
        changed = true;
      } else {
        // (a whole sample has no base, even where its thread had an earlier sample in the block)
        if (form != FORM_PATCH || jp > <u64>baseCount) return STOP_MALFORMED;
        const base = baseDescs + (<u32>jp - 1) * DESC_SIZE;
        if (load<u32>(base, D_USED) != 0) return STOP_MALFORMED;
        store<u32>(base, 1, D_USED);
        baseLen = <u64>load<u32>(base, D_LEN);
        cap = <u64>load<u32>(base, D_CAP);
        if (<u32>jp - 1 != i) changed = true;
      }
      const n = number();
      const wb = number();
      const nw = number();
      const keepEnd = number();
      const count = number();
      if (bad || n > <u64>MAX_BLOCK_RAW || (wb != 4 && wb != 8) || nw < 1 || nw > <u64>MAX_FRAME_WORDS) return STOP_MALFORMED;
      if (shapeWb == 0) {
        shapeWb = <u32>wb;
        shapeN = <u32>nw;
      } else if (<u64>shapeWb != wb || <u64>shapeN != nw) return STOP_MALFORMED;
      if (keepEnd > n || keepEnd > baseLen || count > <u64>(limit - pos) / 2) return STOP_MALFORMED;
      budget += n;
      const S: u64 = wb * nw;
      let end: u64 = keepEnd;
      for (let k: u64 = 0; k < count; k++) {
        const off = end + number();
        if (bad || off + S > n) return STOP_MALFORMED;
        end = off + S;
        const op = number();
        if (bad) return STOP_MALFORMED;
        if (op == FRAME_LITERAL) {
          if (<u64>pos + S > <u64>limit) return STOP_MALFORMED;
          pos += <u32>S;
          newImages++;
        } else if (op == FRAME_IMAGE || op == FRAME_CHANGED) {
          // images this sample adds before the frame count too
          const e = number();
          const made = <u64>imageCount + newImages;
          if (bad || e >= (made < <u64>MAX_FRAME_IMAGES ? made : <u64>MAX_FRAME_IMAGES)) return STOP_MALFORMED;
          if (op == FRAME_CHANGED) {
            const mask = number();
            if (bad || mask == 0 || mask >= (<u64>1) << nw) return STOP_MALFORMED;
            for (let q: u64 = 0; q < nw; q++) {
              if (((mask >>> q) & 1) == 0) continue;
              const z = varint();
              if (bad || (wb == 4 && z >= (<u64>1) << 33)) return STOP_MALFORMED;
            }
            newImages++;
          }
        } else {
          return STOP_MALFORMED;
        }
      }
      const runs = number();
      if (bad) return STOP_MALFORMED;
      let at: u64 = 0;
      for (let k: u64 = 0; k < runs; k++) {
        const start = at + number();
        const len = number();
        if (bad || start + len > n || <u64>pos + len > <u64>limit) return STOP_MALFORMED;
        pos += <u32>len;
        at = start + len;
      }
      if (n > cap) need += (n + 7) & ~7;
      if (count != 0 || runs != 0 || n != baseLen || keepEnd != n) changed = true;
    } else {
      return STOP_MALFORMED;
    }
    if (budget > MAX_BLOCK_SAMPLE_BYTES) return STOP_MALFORMED;
  }
  if (bad) return STOP_MALFORMED;
  need += imagePagesBytes(newImages);
  // (bytes left in the body: fields of a later minor version, ignored)
  // the thread's splice buffer, on its first sample in the block
  if (th == 0 || load<u32>(th, T_TRACE) == 0) need += TRACE_BYTES;

  // Room: a new thread's entry and lists, new region bytes, a slot and a stack for the count.
  const listCap = th != 0 && regionCount <= load<u32>(th, T_CAP) ? 0 : (regionCount < 8 ? 8 : regionCount * 2);
  const listBytes = listCap * (DESC_SIZE + REGION_SIZE) + regionCount * DESC_SIZE;
  if (th == 0 && threadCount >= threadsCap) return STOP_FULL;
  if (!dataRoom(need)) {
    dataNeed = need > <u64>0xffffffff ? 0xffffffff : <u32>need;
    return STOP_FULL;
  }
  if (<u64>descsUsed + <u64>listBytes > <u64>(descsEnd - descs)) return STOP_FULL;
  // (so that interning this sample's stack cannot fail once its image has changed)
  // (a whole walk, and the <GC> node above it)
  if (engineTreeFull()) return STOP_FULL;

  // Second pass: apply. New descriptors go to scratch first (a patch reads its base's).
  blockBytes = budget;
  if (th == 0) {
    th = threads + threadCount * THREAD_SIZE;
    threadCount++;
    store<u64>(th, tsa, T_TSA);
    store<u32>(th, 0, T_COUNT);
    store<u32>(th, 0, T_CAP);
    store<u32>(th, NONE, T_SLOT);
    store<u32>(th, NONE, T_LAST_STATUS);
    store<u32>(th, NONE, T_LAST_STACK);
    store<u32>(th, 0, T_SORTED_OK);
    store<u32>(th, 0, T_TRACE);
    store<u32>(th, NONE, T_TRACE_N);
    store<u32>(th, 0, T_NODES_OK);
  }
  if (load<u32>(th, T_TRACE) == 0) {
    store<u32>(th, data + dataUsed, T_TRACE);
    dataUsed += TRACE_BYTES;
  }
  hullCount = 0;
  const scratch = descs + descsUsed;
  pos = regionsAt;
  let addressesChanged = form == FORM_WHOLE || regionCount != baseCount;
  let lengthsChanged = false;
  for (let i: u32 = 0; i < regionCount; i++) {
    const kind = byte();
    const d = scratch + i * DESC_SIZE;
    if (kind == KIND_LITERAL) {
      const addr = varint();
      const n = <u32>number();
      const at = data + dataUsed;
      memory.copy(at, pos, n);
      pos += n;
      dataUsed += (n + 7) & ~7;
      store<u64>(d, addr, D_ADDR);
      store<u32>(d, n, D_LEN);
      store<u32>(d, (n + 7) & ~7, D_CAP);
      store<u32>(d, at, D_DATA);
      addressesChanged = true;
    } else if (kind == KIND_FRAMES) {
      const jp = <u32>number();
      let addr: u64 = 0;
      let buf: u32 = 0;
      let cap: u32 = 0;
      let baseLen: u32 = 0;
      if (jp == 0) {
        addr = varint();
        addressesChanged = true;
      } else {
        const base = baseDescs + (jp - 1) * DESC_SIZE;
        addr = load<u64>(base, D_ADDR);
        buf = load<u32>(base, D_DATA);
        cap = load<u32>(base, D_CAP);
        baseLen = load<u32>(base, D_LEN);
        if (jp - 1 != i) addressesChanged = true;
      }
      const n = <u32>number();
      number(); // word size (checked: the block's)
      number(); // words
      const keepEnd = <u32>number();
      const count = <u32>number();
      if (n > cap) {
        // a bigger buffer, with the base's bytes it keeps
        const at = data + dataUsed;
        if (keepEnd != 0) memory.copy(at, buf, keepEnd);
        dataUsed += (n + 7) & ~7;
        buf = at;
        cap = (n + 7) & ~7;
        addressesChanged = true;
      }
      // the base's bytes up to keepEnd, zeros after; then the frames
      if (n > keepEnd) memory.fill(buf + keepEnd, 0, n - keepEnd);
      const S: u32 = shapeWb * shapeN;
      const lo = addr;
      const hi = regionEnd(addr, <u64>n);
      let end: u32 = keepEnd;
      for (let k: u32 = 0; k < count; k++) {
        const off = end + <u32>number();
        end = off + S;
        const fa = addr + <u64>off;
        const op = <u32>number();
        if (op == FRAME_LITERAL) {
          memory.copy(buf + off, pos, S);
          pos += S;
        } else {
          materialize(<u32>number(), fa, buf + off);
          if (op == FRAME_IMAGE) continue;
          const mask = <u32>number();
          for (let q: u32 = 0; q < shapeN; q++) {
            if (((mask >>> q) & 1) == 0) continue;
            const z = varint();
            const change: i64 = <i64>(z >>> 1) ^ -(<i64>(z & 1));
            const w = buf + off + q * shapeWb;
            if (shapeWb == 8) store<u64>(w, load<u64>(w) + <u64>change);
            else store<u32>(w, load<u32>(w) + <u32>change);
          }
        }
        addImage(buf + off, fa, lo, hi);
      }
      const runs = <u32>number();
      const runEnd = applyRuns(buf, runs);
      // what changed: from keepEnd (or the first run below it) to the end of the bytes, old or
      // new — nothing but a cut end where nothing was rewritten
      const from = keepEnd >= n && runs == 0 ? n : keepEnd < runsFirst ? keepEnd : runsFirst;
      let to = n > baseLen ? n : baseLen;
      if (runEnd > to) to = runEnd;
      if (from < to) addHull(buf + from, buf + to);
      store<u64>(d, addr, D_ADDR);
      store<u32>(d, n, D_LEN);
      store<u32>(d, cap, D_CAP);
      store<u32>(d, buf, D_DATA);
      if (!addressesChanged && n != baseLen) lengthsChanged = true;
    } else {
      const j = <u32>number();
      const base = baseDescs + j * DESC_SIZE;
      const n = <u32>number();
      const runs = <u32>number();
      let buf = load<u32>(base, D_DATA);
      let cap = load<u32>(base, D_CAP);
      const baseLen = load<u32>(base, D_LEN);
      if (n > cap) {
        // grows past its buffer: a bigger one, with the base's bytes
        const at = data + dataUsed;
        memory.copy(at, buf, baseLen);
        dataUsed += (n + 7) & ~7;
        buf = at;
        cap = (n + 7) & ~7;
      }
      const at = applyRuns(buf, runs);
      // what changed in this region's bytes (a region that grows changes the addresses: no splice)
      if (runs != 0) addHull(buf + runsFirst, buf + at);
      store<u64>(d, load<u64>(base, D_ADDR), D_ADDR);
      store<u32>(d, n, D_LEN);
      store<u32>(d, cap, D_CAP);
      store<u32>(d, buf, D_DATA);
      if (j != i || buf != load<u32>(base, D_DATA)) {
        addressesChanged = true;
      } else if (n != baseLen) {
        // the same bytes in the same place, cut or grown at the end (a stack that moved): the
        // walk's table takes the new length, and a splice may still take the frames below.
        // Bytes it no longer holds count as patched, so no spliced frame lies past its end
        // (grown bytes are in the runs).
        lengthsChanged = true;
        if (n < baseLen) addHull(buf + n, buf + baseLen);
      }
    }
  }
  // the sample's list becomes the thread's
  let list = load<u32>(th, T_DESCS);
  if (listCap != 0) {
    list = descs + descsUsed + regionCount * DESC_SIZE;
    descsUsed += listCap * (DESC_SIZE + REGION_SIZE) + regionCount * DESC_SIZE;
    store<u32>(th, list, T_DESCS);
    store<u32>(th, listCap, T_CAP);
    store<u32>(th, list + listCap * DESC_SIZE, T_SORTED);
  }
  memory.copy(list, scratch, regionCount * DESC_SIZE);
  store<u32>(th, regionCount, T_COUNT);
  if (addressesChanged || lengthsChanged || listCap != 0) store<u32>(th, 0, T_SORTED_OK);
  const idsChanged = form == FORM_WHOLE || interp != load<u64>(th, T_INTERP) || tid != load<u64>(th, T_TID) || ntid != load<u64>(th, T_NTID);
  store<u64>(th, interp, T_INTERP);
  store<u64>(th, tid, T_TID);
  store<u64>(th, ntid, T_NTID);
  store<u64>(th, time, T_TIME);
  // the thread's last walk can be spliced from if this sample changed bytes, not addresses;
  // an image that changed without a walk leaves no last walk to splice from
  const spliceOk = load<u32>(th, T_TRACE_N) != NONE && !addressesChanged && listCap == 0 && hullCount <= HULLS_MAX;
  return countSample(th, tsa, time, interp, tid, ntid, flags, recorderStatus, copyMicros, regionCount, changed, idsChanged, spliceOk);
}

/**
 * The rest of a sample, whatever block it came in: its image (the thread's regions, their list
 * and sorted table) is in place. Counts its tick, and — unless the filter leaves it out — its
 * status and stack: the thread's last walk where nothing it read changed, else a walk (spliced
 * onto the last one where `spliceOk`: only bytes changed, in the hulls recorded).
 */
export function countSample(th: u32, tsa: u64, time: u64, interp: u64, tid: u64, ntid: u64, flags: u32, recorderStatus: u32, copyMicros: u64, regionCount: u32, changed: bool, idsChanged: bool, spliceOk: bool): i32 {
  const traceN = load<u32>(th, T_TRACE_N);
  const list = load<u32>(th, T_DESCS);
  if (changed) store<u32>(th, NONE, T_TRACE_N);

  // a tick samples every thread at one time: its samples share it, and follow each other
  if (samplesSeen == 0) firstBlockTime = time;
  if (time != lastTime) ticks++;
  lastTime = time;
  samplesSeen++;

  // a sample left out (another thread, or without the mode's flag) is not counted, but its
  // image stands: what the thread's next sample reuses must be of this image, and its slot of these ids
  const otherThread = filterKind == 1 && ntid != filterValue && tid != filterValue;
  if (otherThread || (keepFlags != 0 && (flags & keepFlags) == 0)) {
    if (!otherThread && (flags & unknownFlags) != 0) undetermined++;
    if (changed || idsChanged) {
      store<u32>(th, NONE, T_LAST_STATUS);
      store<u32>(th, NONE, T_LAST_STACK);
    }
    if (idsChanged) store<u32>(th, NONE, T_SLOT);
    return STOP_END;
  }
  counted++;
  copySum += copyMicros;
  if (copyMicros > <u64>copyMax) copyMax = <u32>(copyMicros > 0xffffffff ? 0xffffffff : copyMicros);
  const bucket = copyHist + <u32>(copyMicros < <u64>COPY_BUCKETS ? copyMicros : <u64>(COPY_BUCKETS - 1)) * 4;
  const had = load<u32>(bucket);
  if (had == 0) {
    store<u32>(copyTouched + touchedCount * 4, (bucket - copyHist) / 4);
    touchedCount++;
  }
  store<u32>(bucket, had + 1);
  if ((flags & FLAG_STOPPED) != 0) stoppedCount++;
  if ((flags & FLAG_RETRIED) != 0) retriedCount++;

  // count it; the previous walk stands for this sample only if nothing it read changed
  if (changed || idsChanged || load<u32>(th, T_SLOT) == NONE) {
    store<u32>(th, NONE, T_LAST_STATUS);
    store<u32>(th, NONE, T_LAST_STACK);
  }
  let sl = load<u32>(th, T_SLOT);
  if (idsChanged || sl == NONE) {
    const s = slotFor(tsa, interp, tid, ntid);
    sl = (s - slots) / SLOT_SIZE;
    if (sl != load<u32>(th, T_SLOT)) store<u32>(th, 0, T_NODES_OK);
    store<u32>(th, sl, T_SLOT);
  }
  const slot = slots + sl * SLOT_SIZE;
  if (time < load<u64>(slot, S_FIRST)) store<u64>(slot, time, S_FIRST);
  if (time > load<u64>(slot, S_LAST)) store<u64>(slot, time, S_LAST);
  if ((flags & FLAG_MAIN) != 0 && <i64>time > load<i64>(slot, S_MAIN_TIME)) store<i64>(slot, <i64>time, S_MAIN_TIME);

  let status: u32;
  let stack: u32 = NONE;
  if (recorderStatus == 1) {
    status = STATUS_TORN;
  } else if (load<u32>(th, T_LAST_STATUS) != NONE) {
    // the memory the walk reads is as it was: so is the walk
    status = load<u32>(th, T_LAST_STATUS);
    stack = load<u32>(th, T_LAST_STACK);
  } else {
    const n = regionCount;
    const sorted = load<u32>(th, T_SORTED);
    if (load<u32>(th, T_SORTED_OK) == 0) {
      // the walk's region table: sorted by address (insertion sort: a sample has a few regions)
      for (let i: u32 = 0; i < n; i++) {
        const d = list + i * DESC_SIZE;
        const addr = load<u64>(d, D_ADDR);
        let k = i;
        while (k > 0 && load<u64>(sorted + (k - 1) * REGION_SIZE, REGION_ADDRESS) > addr) {
          memory.copy(sorted + k * REGION_SIZE, sorted + (k - 1) * REGION_SIZE, REGION_SIZE);
          k--;
        }
        const e = sorted + k * REGION_SIZE;
        store<u64>(e, addr, REGION_ADDRESS);
        store<u32>(e, load<u32>(d, D_LEN), REGION_LENGTH);
        store<u32>(e, load<u32>(d, D_DATA), REGION_DATA);
      }
      store<u32>(th, 1, T_SORTED_OK);
    }
    // (else the same regions at the same places with the same lengths: only bytes changed)
    setRegions(sorted, n);
    const buf = load<u32>(th, T_TRACE);
    const bufPy = buf + BUF_PY;
    const bufNodes = buf + BUF_NODES;
    if (spliceOk) {
      // the first frame from which every frame of the last walk is unchanged
      let from = traceN;
      while (from > 0) {
        const d = load<u32>(buf + (from - 1) * TRACE_SIZE, TRACE_BYTES_AT);
        if (patched(d, d + frSize)) break;
        from--;
      }
      setSplice(buf, traceN, from, load<u32>(th, T_TRACE_PY), load<u64>(th, T_TRACE_LAST), load<u32>(th, T_TRACE_OWNER), load<u32>(th, T_TRACE_ENTRY), SPLICE_MAX);
    }
    setTrace(trace);
    walkOne(tsa, frames);
    setSplice(0, 0, 0, 0, 0, 0, 0, 0);
    walks++;
    const pyCount = outFrames;
    // where the walk's Python frames can be read whole, and how many of them, from the
    // outermost, already have their node
    let chain = frames;
    let known: u32 = 0;
    if (outSpliced) {
      // the new frames are in the trace and frames areas, the rest in the buffer, where the last
      // walk left them: move that part to follow the new frames, then put the new ones before it
      spliced++;
      const head = outSpliceVisited;
      const at = outSpliceAt;
      const headPy = outSplicePy;
      const pyAt = load<u32>(buf + at * TRACE_SIZE, TRACE_PY);
      const rest = traceN - at - 1;
      const pyRest = pyCount - headPy;
      if (head != at + 1) memory.copy(buf + head * TRACE_SIZE, buf + (at + 1) * TRACE_SIZE, rest * TRACE_SIZE);
      if (headPy != pyAt) {
        memory.copy(bufPy + headPy * FRAME_SIZE, bufPy + pyAt * FRAME_SIZE, pyRest * FRAME_SIZE);
        memory.copy(bufNodes + headPy * 4, bufNodes + pyAt * 4, pyRest * 4);
        for (let k: u32 = 0; k < rest; k++) {
          const e = buf + (head + k) * TRACE_SIZE;
          store<u32>(e, load<u32>(e, TRACE_PY) - pyAt + headPy, TRACE_PY);
        }
      }
      memory.copy(buf, trace, head * TRACE_SIZE);
      memory.copy(bufPy, frames, headPy * FRAME_SIZE);
      chain = bufPy;
      known = load<u32>(th, T_NODES_OK) != 0 ? pyRest : 0;
    } else if (outEnded && outVisited <= SPLICE_MAX) {
      // the outermost frames this walk shares with the thread's last one keep their nodes
      // (a node is its caller's node, the frame's code and instruction, and the <native>
      // after it): a stack that moved at its top interns only its new frames
      if (load<u32>(th, T_NODES_OK) != 0) {
        const oldPy = load<u32>(th, T_TRACE_PY);
        const most = oldPy < pyCount ? oldPy : pyCount;
        const flagMask: u32 = nativeNodes != 0 ? FRAME_CALLS_THROUGH_C : 0;
        while (known < most) {
          const a = frames + (pyCount - 1 - known) * FRAME_SIZE;
          const b = bufPy + (oldPy - 1 - known) * FRAME_SIZE;
          if (load<u64>(a, FRAME_CODE) != load<u64>(b, FRAME_CODE) || load<u64>(a, FRAME_IP) != load<u64>(b, FRAME_IP)) break;
          if (((load<u32>(a, FRAME_FLAGS) ^ load<u32>(b, FRAME_FLAGS)) & flagMask) != 0) break;
          known++;
        }
        if (known > 0 && oldPy != pyCount) memory.copy(bufNodes + (pyCount - known) * 4, bufNodes + (oldPy - known) * 4, known * 4);
      }
      memory.copy(buf, trace, outVisited * TRACE_SIZE);
      memory.copy(bufPy, frames, pyCount * FRAME_SIZE);
      chain = bufPy;
    }
    if (chain == bufPy) {
      store<u32>(th, outVisited, T_TRACE_N);
      store<u32>(th, pyCount, T_TRACE_PY);
      store<u64>(th, outLast, T_TRACE_LAST);
      store<u32>(th, outLastOwner, T_TRACE_OWNER);
      store<u32>(th, outLastIsEntry, T_TRACE_ENTRY);
      if (outEnteredByCframe) store<u32>(th, NONE, T_TRACE_N);
    }
    store<u32>(th, 0, T_NODES_OK);
    status = outStatus;
    if ((status == COMPLETE || status == COMPLETE_UNVERIFIABLE) && pyCount > 0) {
      // the stack's node, from the outermost frame in (room was checked before the image changed)
      let node = known > 0 ? load<u32>(bufNodes + (pyCount - known) * 4) : NONE;
      for (let k = <i32>(pyCount - known) - 1; k >= 0; k--) {
        const f = chain + <u32>k * FRAME_SIZE;
        node = internNode(node, sl, frameKey(load<u64>(f, FRAME_CODE), load<u64>(f, FRAME_IP)));
        // (kept in the frame's node: the frame and its flag come back together in a spliced walk)
        if (nativeNodes != 0 && (load<u32>(f, FRAME_FLAGS) & FRAME_CALLS_THROUGH_C) != 0) node = internNode(node, sl, frameKey(NATIVE_CODE, 0));
        if (chain == bufPy) store<u32>(bufNodes + <u32>k * 4, node);
      }
      if (chain == bufPy) store<u32>(th, 1, T_NODES_OK);
      stack = node;
    }
    store<u32>(th, status, T_LAST_STATUS);
    store<u32>(th, stack, T_LAST_STACK);
  }
  const counts = slot + S_COUNTS + status * 4;
  store<u32>(counts, load<u32>(counts) + 1);
  // the collector ran in this thread: counted above its stack (the walk's stack stays the thread's last)
  if (stack != NONE && gcLeaf != 0 && (flags & FLAG_GC) != 0) stack = internNode(stack, sl, frameKey(GC_CODE, 0));
  if (stack != NONE) {
    const n = nodeAt(stack);
    const w = load<u32>(n, N_WEIGHT);
    if (w == 0) {
      store<u32>(weightedAt(weightedCount), stack);
      weightedCount++;
    }
    store<u32>(n, w + 1, N_WEIGHT);
  }
  return STOP_END;
}

/** The most nodes one sample can add: its frames, a <native> after each, and a <GC>. */
@inline function nodesPerSample(): u32 {
  return nativeNodes != 0 ? maxDepth * 2 + 1 : maxDepth + 1;
}

/**
 * Process the records of a block payload [start, end) (linear-memory offsets). Returns why it
 * stopped: STOP_END (all done), STOP_CODE (a code or thread-name record at engineStopAt(): the
 * host decodes it and calls again after it), STOP_MALFORMED (process the block on the reference path), or
 * STOP_FULL (at engineStopAt(): harvest the outputs, or grow the data arena, and call again
 * from there).
 */
export function engineRun(start: u32, end: u32): i32 {
  if (!inMemory(<u64>start, <u64>(end - start)) || end < start) return STOP_MALFORMED;
  pos = start;
  while (pos < end) {
    const recordAt = pos;
    bad = false;
    limit = end;
    const type = byte();
    const n = varint();
    if (bad || <u64>pos + n > <u64>end) return STOP_MALFORMED;
    const bodyEnd = pos + <u32>n;
    // (a thread-name record, too, is the host's: it collects the names)
    if (type == RECORD_CODE || type == RECORD_THREAD_NAME) {
      stopAt = recordAt;
      return STOP_CODE;
    }
    if (type != RECORD_SAMPLE) return STOP_MALFORMED;
    const r = sample(bodyEnd);
    if (r != STOP_END) {
      stopAt = recordAt;
      return r;
    }
    pos = bodyEnd;
  }
  stopAt = end;
  return STOP_END;
}

// ---- what section blocks (sections.ts) use of the engine's state ----

/** The data arena's next `n` bytes (8-aligned), or 0 when no segment has room (engineDataNeed then says how much). */
export function allocData(n: u32): u32 {
  const need = (<u64>n + 7) & ~7;
  if (!dataRoom(need)) {
    dataNeed = need > <u64>0xffffffff ? 0xffffffff : <u32>need;
    return 0;
  }
  const at = data + dataUsed;
  dataUsed += <u32>need;
  return at;
}

/** Thread k of the block (k < threadCount). */
export function threadAt(k: u32): u32 {
  return threads + k * THREAD_SIZE;
}

export function threadTotal(): u32 {
  return threadCount;
}

/** A new thread image for the block's next slot, with its splice buffer; 0 when the table or the arena is full. */
export function addThread(tsa: u64): u32 {
  if (threadCount >= threadsCap) return 0;
  const buf = allocData(TRACE_BYTES);
  if (buf == 0) return 0;
  const th = threads + threadCount * THREAD_SIZE;
  threadCount++;
  store<u64>(th, tsa, T_TSA);
  store<u32>(th, 0, T_COUNT);
  store<u32>(th, 0, T_CAP);
  store<u32>(th, NONE, T_SLOT);
  store<u32>(th, NONE, T_LAST_STATUS);
  store<u32>(th, NONE, T_LAST_STACK);
  store<u32>(th, 0, T_SORTED_OK);
  store<u32>(th, buf, T_TRACE);
  store<u32>(th, NONE, T_TRACE_N);
  store<u32>(th, 0, T_NODES_OK);
  return th;
}

export function clearHulls(): void {
  hullCount = 0;
}

export function hullTotal(): u32 {
  return hullCount;
}

export function imageTotal(): u32 {
  return imageCount;
}

/** The block's frames: wb-byte words, n of them (a section block says so once). */
export function setShape(wb: u32, n: u32): void {
  shapeWb = wb;
  shapeN = n;
}

export function shapeKnown(): bool {
  return shapeWb != 0;
}

/** Adds the frame at `out` (address `addr`, in a region [lo, hi)) as the block's next image, its page taken from the arena; false when the arena is full. */
export function addImageFrom(out: u32, addr: u64, lo: u64, hi: u64): bool {
  if (imageCount >= <u32>MAX_FRAME_IMAGES) return true;
  if (imageCount % IMG_PER_PAGE == 0) {
    const page = allocData(IMG_PAGE_BYTES);
    if (page == 0) return false;
    store<u32>(imgPages + (imageCount / IMG_PER_PAGE) * 4, page);
  }
  writeImage(out, addr, lo, hi);
  return true;
}

/** Region bytes made anew by a section block's sample, against the block's budget; false past it. */
export function chargeBlock(n: u64): bool {
  blockBytes += n;
  return blockBytes <= MAX_BLOCK_SAMPLE_BYTES;
}
