// Sample records, delta-coded. Consecutive samples of one thread share almost all their bytes
// (measured: 5.2 KB per sample raw, 18 B once each is stored as its difference from the
// thread's previous one), so within a block the first sample of a thread is stored whole and
// each later one as a patch against that thread's previous sample in the same block: per
// region, "the base sample's region number j, with this new length and these byte runs".
// A block never refers outside itself, so blocks stay independent.
//
// Decoding is copy-on-write per region: a region that did not change shares its bytes with
// the previous sample's (no copy); a changed region gets a fresh array (one copy of the region
// plus the runs). Decoded bytes are therefore shared between samples and must be treated as
// read-only. The cost of a sample is the size of its changed regions — a memcpy — not an
// inflate of the whole stack.

import { ID_INTERPRETER, ID_NATIVE, ID_THREAD } from './codes.js';
import { FrameImages, MAX_FRAME_WORDS, addToWord, framePlace, placeAt, wordChange, type FramePlace } from './frame-images.js';
import type { Region } from './types.js';
import {
  ByteReader,
  ByteWriter,
  FRAME_OP,
  MAX_BLOCK_RAW,
  RECORDER_STATUS_CODE,
  REGION_KIND,
  SAMPLE_FORM,
  bigSize,
  checkRegions,
  checkU64,
  checkUint,
  readLiteralRegion,
  uintSize,
  writeLiteralRegion,
} from './format.js';
import type { FrameHint, RecorderStatus, SampleRecord } from './types.js';
import { checkRegisters, readRecordRegisters, writeRecordRegisters } from './registers.js';

/**
 * A block's samples may hold at most this many region bytes in all (counting unchanged,
 * shared regions too). It bounds what decoding one block can allocate — a patch of a few
 * bytes can stand for a copy of a whole region — and what a consumer does per block. The
 * writer ends a block before it passes this; a reader rejects samples beyond it.
 */
export const MAX_BLOCK_SAMPLE_BYTES = 64 << 20;

/**
 * Equal stretches up to this long between two changed stretches are stored as changed: a new
 * run costs two varints (gap, length), so merging short gaps is smaller before compression and
 * gives deflate longer, more repetitive patches.
 */
const MERGE_GAP = 4;

/**
 * A region holding frames whose patch against its base is at most this many bytes is written as
 * that patch without trying a frames region, which could not be much smaller (a stack whose top
 * frame only ran on changes a few bytes of its instruction pointer).
 */
const SMALL_PATCH = 24;

const STATUS_NAMES: RecorderStatus[] = ['ok', 'torn'];

/** The id fields a patch sample repeats only when they differ from its base's (one bit each). */
const ID_BIT = { INTERPRETER: ID_INTERPRETER, THREAD: ID_THREAD, NATIVE_THREAD: ID_NATIVE } as const;

/** Total region bytes of a sample: what it weighs against MAX_BLOCK_SAMPLE_BYTES. */
export function sampleBytes(rec: SampleRecord): number {
  let n = 0;
  for (const r of rec.regions) n += r.bytes.length;
  return n;
}

/** Checks a record from the recorder so that what is written reads back as the same record. */
export function checkSampleRecord(rec: SampleRecord): void {
  checkUint(rec?.time, 'sample.time');
  checkU64(rec.interpreterId, 'sample.interpreterId');
  checkU64(rec.threadStateAddress, 'sample.threadStateAddress');
  checkU64(rec.threadId, 'sample.threadId');
  checkU64(rec.nativeThreadId, 'sample.nativeThreadId');
  checkUint(rec.flags, 'sample.flags');
  if (!(rec.recorderStatus in RECORDER_STATUS_CODE)) throw new RangeError(`sample.recorderStatus must be "ok" or "torn" (got ${String(rec.recorderStatus)})`);
  checkUint(rec.copyMicros, 'sample.copyMicros');
  if (!Array.isArray(rec.errors) || (rec.errors.length > 0 && rec.errors.some((e) => typeof e !== 'string'))) throw new TypeError('sample.errors must be an array of strings');
  checkRegions(rec.regions, 'sample.regions');
  if (rec.registers !== undefined) checkRegisters(rec.registers);
}

// ---------------------------------------------------------------------------------------
// Encoding

/**
 * 32-bit views of whole buffers, the last four asked for: a sample's regions share one buffer
 * (the recorder copies a thread in one piece), its base's regions another, and a frames region
 * is compared with a scratch buffer, so a view is made once per sample rather than per region.
 */
const views: { buffer: ArrayBufferLike | null; words: Int32Array }[] = Array.from({ length: 4 }, () => ({ buffer: null, words: new Int32Array(0) }));

/** The 32-bit view of a's whole buffer, or null when a does not start 4-byte aligned. */
export function wordsOf(a: Uint8Array): Int32Array | null {
  if (a.byteOffset & 3) return null;
  const buffer = a.buffer;
  for (let k = 0; k < views.length; k++) {
    const v = views[k]!;
    if (v.buffer !== buffer) continue;
    // (the one found moves to the front)
    for (let q = k; q > 0; q--) views[q] = views[q - 1]!;
    views[0] = v;
    return v.words;
  }
  const made = { buffer, words: new Int32Array(buffer, 0, buffer.byteLength >>> 2) };
  for (let q = views.length - 1; q > 0; q--) views[q] = views[q - 1]!;
  views[0] = made;
  return made.words;
}

/**
 * Index of the first differing byte of a and b in [from, end), or `end`. Equal stretches are
 * skipped four bytes at a time — sixteen per turn of the loop — when both start 4-byte
 * aligned (aw, bw: their buffers' word views, null otherwise): the writer compares every byte
 * of every sample, and most are equal.
 */
function nextDiff(a: Uint8Array, b: Uint8Array, aw: Int32Array | null, bw: Int32Array | null, from: number, end: number): number {
  let i = from;
  if (aw && bw) {
    while (i < end && i & 3) {
      if (a[i] !== b[i]) return i;
      i++;
    }
    const ao = a.byteOffset >>> 2;
    const bo = b.byteOffset >>> 2;
    const wordEnd = end >>> 2;
    let w = i >>> 2;
    while (w + 4 <= wordEnd && ((aw[ao + w]! ^ bw[bo + w]!) | (aw[ao + w + 1]! ^ bw[bo + w + 1]!) | (aw[ao + w + 2]! ^ bw[bo + w + 2]!) | (aw[ao + w + 3]! ^ bw[bo + w + 3]!)) === 0) w += 4;
    while (w < wordEnd && aw[ao + w] === bw[bo + w]) w++;
    i = Math.max(i, w << 2);
  }
  while (i < end && a[i] === b[i]) i++;
  return i;
}

/**
 * The changed stretches of `cur` against `base` as [start, end) pairs in `runs`, sorted and
 * disjoint; bytes past the base's length are always covered (the decoder insists).
 */
function diffRuns(base: Uint8Array, cur: Uint8Array, runs: number[]): void {
  runs.length = 0;
  const m = Math.min(base.length, cur.length);
  const bw = wordsOf(base);
  const cw = bw ? wordsOf(cur) : null;
  let i = nextDiff(base, cur, bw, cw, 0, m);
  while (i < m) {
    const start = i;
    let end = i + 1;
    for (;;) {
      while (end < m && base[end] !== cur[end]) end++;
      const next = nextDiff(base, cur, bw, cw, end, m);
      if (next < m && next - end <= MERGE_GAP) {
        end = next + 1;
        continue;
      }
      i = next;
      break;
    }
    runs.push(start, end);
  }
  if (cur.length > base.length) {
    const last = runs.length - 1;
    if (last > 0 && base.length - runs[last]! <= MERGE_GAP) runs[last] = cur.length;
    else runs.push(base.length, cur.length);
  }
}

function patchSize(j: number, length: number, runs: number[]): number {
  let n = 1 + uintSize(j) + uintSize(length) + uintSize(runs.length / 2);
  let pos = 0;
  for (let k = 0; k < runs.length; k += 2) {
    const start = runs[k]!;
    const end = runs[k + 1]!;
    n += uintSize(start - pos) + uintSize(end - start) + (end - start);
    pos = end;
  }
  return n;
}

/** What the encoder remembers of a thread's previous sample in the block. */
interface Base {
  time: number;
  interpreterId: bigint;
  threadId: bigint;
  nativeThreadId: bigint;
  regions: Region[];
  /** per region, the frames it was stored with as a frames region (null: none) */
  frames: (RegionFrames | null)[];
}

/** The frames of a region the encoder stored as a frames region: where, and as which image (-1: none). */
interface RegionFrames {
  offsets: Int32Array;
  images: Int32Array;
}

/**
 * Writes sample bodies for one block. `encode` changes nothing but the block's frame images:
 * the writer drops an encoding only to end the block (then `reset`), or — a record it cannot
 * write after all — after `rollback` to the mark taken before; `commit` then records the sample
 * as its thread's base.
 */
export class SampleEncoder {
  private readonly bases = new Map<bigint, Base>();
  private readonly runs: number[] = [];
  private readonly frameRuns: number[] = [];
  private readonly images = new FrameImages(true);
  /** the frames of each region of the sample encoded last, for `commit` */
  private lastFrames: (RegionFrames | null)[] = [];
  private scratch = new Uint8Array(4096);

  /** the word size and words of the block's frames regions (one shape per block; 0: none yet) */
  private readonly shape = { wordBytes: 0, words: 0 };

  /** A new block: every thread starts whole again, and the block's frame images are none. */
  reset(): void {
    this.bases.clear();
    this.images.reset();
    this.shape.wordBytes = this.shape.words = 0;
  }

  /** What to roll back to if the sample about to be encoded is not written. */
  mark(): number {
    return this.images.count;
  }

  rollback(mark: number): void {
    this.images.truncate(mark);
    if (mark === 0) this.shape.wordBytes = this.shape.words = 0;
  }

  encode(w: ByteWriter, rec: SampleRecord): void {
    const base = this.bases.get(rec.threadStateAddress);
    w.big(rec.threadStateAddress);
    if (!base) {
      w.u8(SAMPLE_FORM.WHOLE);
      w.uint(rec.time);
      w.big(rec.interpreterId);
      w.big(rec.threadId);
      w.big(rec.nativeThreadId);
    } else {
      w.u8(SAMPLE_FORM.PATCH);
      w.sint(rec.time - base.time);
      const mask =
        (rec.interpreterId !== base.interpreterId ? ID_BIT.INTERPRETER : 0) |
        (rec.threadId !== base.threadId ? ID_BIT.THREAD : 0) |
        (rec.nativeThreadId !== base.nativeThreadId ? ID_BIT.NATIVE_THREAD : 0);
      w.u8(mask);
      if (mask & ID_BIT.INTERPRETER) w.big(rec.interpreterId);
      if (mask & ID_BIT.THREAD) w.big(rec.threadId);
      if (mask & ID_BIT.NATIVE_THREAD) w.big(rec.nativeThreadId);
    }
    w.uint(rec.flags);
    w.u8(RECORDER_STATUS_CODE[rec.recorderStatus]);
    w.uint(rec.copyMicros);
    w.uint(rec.errors.length);
    for (const e of rec.errors) w.string(e);
    w.uint(rec.regions.length);
    const frames = frameOffsets(rec, this.shape);
    this.lastFrames = frames.map((o) => (o ? { offsets: o, images: new Int32Array(o.length).fill(-1) } : null));
    // a region's base is the base sample's first not-yet-used region at the same address —
    // region k of the base when both samples list the same addresses in the same order (a
    // thread's consecutive samples almost always do), found through an index otherwise
    let aligned = base !== undefined && rec.regions.length === base.regions.length;
    for (let k = 0; aligned && k < rec.regions.length; k++) aligned = rec.regions[k]!.address === base!.regions[k]!.address;
    let byAddress: Map<bigint, number[]> | null = null;
    if (base && !aligned) {
      byAddress = new Map();
      base.regions.forEach((r, j) => {
        const list = byAddress!.get(r.address);
        if (list) list.push(j);
        else byAddress!.set(r.address, [j]);
      });
    }
    const runs = this.runs;
    for (let k = 0; k < rec.regions.length; k++) {
      const r = rec.regions[k]!;
      const j = !base ? undefined : aligned ? k : byAddress!.get(r.address)?.shift();
      const offsets = frames[k];
      if (offsets) {
        // as frames, or as a patch where that is smaller (a shallow stack whose top frame only
        // ran on: a few bytes of its instruction pointer); the frames stay known either way
        const baseRegion = j === undefined ? null : base!.regions[j]!;
        let patch = Infinity;
        if (baseRegion) {
          diffRuns(baseRegion.bytes, r.bytes, runs);
          patch = patchSize(j!, r.bytes.length, runs);
          // (too small for frames to beat: not tried)
          if (patch <= SMALL_PATCH) {
            writePatch(w, j!, r.bytes, runs);
            continue;
          }
        }
        const at = w.length;
        const mark = this.images.count;
        this.encodeFrames(w, r, rec.frames!, this.lastFrames[k]!, j, baseRegion, j === undefined ? null : base!.frames[j] ?? null);
        if (patch < w.length - at) {
          w.length = at;
          this.images.truncate(mark);
          this.lastFrames[k]!.images.fill(-1);
          writePatch(w, j!, r.bytes, runs);
        }
        continue;
      }
      if (j !== undefined) {
        diffRuns(base!.regions[j]!.bytes, r.bytes, runs);
        const literal = 1 + bigSize(r.address) + uintSize(r.bytes.length) + r.bytes.length;
        if (patchSize(j, r.bytes.length, runs) <= literal) {
          writePatch(w, j, r.bytes, runs);
          continue;
        }
      }
      w.u8(REGION_KIND.LITERAL);
      writeLiteralRegion(w, r);
    }
    // (format 1.5: after the fields a 1.4 reader knows, which it reads to here and ignores the rest)
    writeRecordRegisters(w, rec.registers);
  }

  /**
   * A region holding frame headers (docs/capture-format.md, "Frames region"): the base region's
   * bytes up to the end of the frames it shares with it, zeros after; then the other frames,
   * each an image of the block, an image with words changed, or its bytes; then runs for
   * whatever still differs (the chunk's header, bytes between frames).
   */
  private encodeFrames(w: ByteWriter, r: Region, hint: FrameHint, frames: RegionFrames, j: number | undefined, baseRegion: Region | null, baseFrames: RegionFrames | null): void {
    const offsets = frames.offsets;
    const ids = frames.images;
    const S = hint.size;
    const wb = hint.wordBytes;
    const n = S / wb;
    const bytes = r.bytes;
    const length = bytes.length;
    w.u8(REGION_KIND.FRAMES);
    if (j === undefined) {
      w.uint(0);
      w.big(r.address);
    } else w.uint(j + 1);
    w.uint(length);
    w.uint(wb);
    w.uint(n);
    // the frames it shares with the base region, from the lowest: same place, same bytes
    let keep = 0;
    let keepEnd = 0;
    if (baseRegion) {
      const old = baseRegion.bytes;
      if (baseFrames) {
        const was = baseFrames.offsets;
        while (keep < offsets.length && keep < was.length && offsets[keep] === was[keep] && offsets[keep]! + S <= old.length && sameBytes(bytes, old, offsets[keep]!, S)) {
          ids[keep] = baseFrames.images[keep]!;
          keep++;
        }
      }
      keepEnd = keep > 0 ? offsets[keep - 1]! + S : 0;
      // and on while the bytes are the base's, up to the next frame: a region that did not
      // change keeps all of it, and the decoder sees it did not
      const limit = Math.min(keep < offsets.length ? offsets[keep]! : length, old.length);
      while (keepEnd < limit && bytes[keepEnd] === old[keepEnd]) keepEnd++;
    }
    w.uint(keepEnd);
    w.uint(offsets.length - keep);
    // what the decoder makes before the runs, to find them
    if (this.scratch.length < length) this.scratch = new Uint8Array(Math.max(length, this.scratch.length * 2));
    const made = this.scratch.subarray(0, length);
    if (baseRegion) made.set(baseRegion.bytes.subarray(0, keepEnd));
    made.fill(0, keepEnd);
    const images = this.images;
    const place = framePlace(r.address, length, 0);
    let end = keepEnd;
    for (let i = keep; i < offsets.length; i++) {
      const off = offsets[i]!;
      w.uint(off - end);
      end = off + S;
      placeAt(place, off);
      const e = images.find(bytes, off, wb, n, place);
      if (e >= 0) {
        w.uint(FRAME_OP.IMAGE);
        w.uint(e);
        ids[i] = e;
      } else {
        // the image to write it as changes to: the frame the base sample had here (most often
        // the same call, a few instructions on), else the latest of the same executable
        let like = -1;
        if (baseFrames) {
          const at = baseFrames.offsets.indexOf(off, Math.max(0, i - 1));
          const id = at >= 0 ? baseFrames.images[at]! : -1;
          if (id >= 0 && images.wordBytes(id) === wb && images.wordCount(id) === n && sameBytes(baseRegion!.bytes, bytes, off, wb)) like = id;
        }
        if (like < 0) like = images.similar(bytes, off, wb, n);
        let changed = 0;
        let cost = 0;
        if (like >= 0) {
          images.materialize(like, place, made, off);
          for (let q = 0; q < n; q++) {
            if (sameBytes(made, bytes, off + q * wb, wb)) continue;
            changed = (changed | (1 << q)) >>> 0;
            cost += 3;
          }
        }
        if (like >= 0 && changed === 0) {
          // the same bytes, with words made relative otherwise (region bounds differ)
          w.uint(FRAME_OP.IMAGE);
          w.uint(like);
          ids[i] = like;
          made.set(bytes.subarray(off, end), off);
          continue;
        }
        if (like >= 0 && cost < S) {
          w.uint(FRAME_OP.CHANGED);
          w.uint(like);
          w.uint(changed);
          for (let q = 0; q < n; q++) {
            if (!((changed >>> q) & 1)) continue;
            const d = wordChange(made, off + q * wb, bytes, off + q * wb, wb);
            w.big(BigInt.asUintN(64, (d << 1n) ^ (d < 0n ? -1n : 0n)));
          }
        } else {
          w.uint(FRAME_OP.LITERAL);
          w.range(bytes, off, end);
        }
        // (find() left this frame's image ready to add)
        ids[i] = images.add(bytes, off, wb, n, place);
      }
      made.set(bytes.subarray(off, end), off);
    }
    diffRuns(made, bytes, this.frameRuns);
    writeRuns(w, bytes, this.frameRuns);
  }

  /**
   * Makes `rec` its thread's base for the next patch. The bytes are copied unless the caller
   * says they never change (`immutable`): a caller may reuse its buffers, and a base that
   * changed under the encoder would make every later patch of the block silently wrong.
   */
  commit(rec: SampleRecord, immutable = false): void {
    this.bases.set(rec.threadStateAddress, {
      time: rec.time,
      interpreterId: rec.interpreterId,
      threadId: rec.threadId,
      nativeThreadId: rec.nativeThreadId,
      regions: immutable ? rec.regions : rec.regions.map((r) => ({ address: r.address, bytes: r.bytes.slice() })),
      frames: this.lastFrames,
    });
  }
}

function sameBytes(a: Uint8Array, b: Uint8Array, at: number, n: number): boolean {
  for (let i = at; i < at + n; i++) if (a[i] !== b[i]) return false;
  return true;
}

function writePatch(w: ByteWriter, j: number, bytes: Uint8Array, runs: number[]): void {
  w.u8(REGION_KIND.PATCH);
  w.uint(j);
  w.uint(bytes.length);
  writeRuns(w, bytes, runs);
}

function writeRuns(w: ByteWriter, bytes: Uint8Array, runs: number[]): void {
  w.uint(runs.length / 2);
  let pos = 0;
  for (let k = 0; k < runs.length; k += 2) {
    const start = runs[k]!;
    const end = runs[k + 1]!;
    w.uint(start - pos);
    w.uint(end - start);
    w.range(bytes, start, end);
    pos = end;
  }
}

/**
 * Per region of the record, the offsets of the hinted frames wholly inside it, ascending and
 * not overlapping (null where none, and for the thread state's region, which patches store
 * best, and for the native stack — the region holding rsp — whose frames are the C stack's: an
 * interpreter frame the C stack holds (3.11–3.13's entry frame) is stored where the recorder
 * copied it on its own, and the native stack's bytes as words). No hint, or one the format
 * cannot use: null everywhere.
 */
const MAX_SAFE_BIG = BigInt(Number.MAX_SAFE_INTEGER);
/** the hint's addresses, sorted (reused: frameOffsets runs for every sample the recorder writes) */
let sortedHint = new Float64Array(256);

export function frameOffsets(rec: SampleRecord, shape: { wordBytes: number; words: number }): (Int32Array | null)[] {
  const out: (Int32Array | null)[] = new Array<Int32Array | null>(rec.regions.length).fill(null);
  const hint = rec.frames;
  if (!hint) return out;
  const S = hint.size;
  const wb = hint.wordBytes;
  if ((wb !== 4 && wb !== 8) || !Number.isInteger(S) || S < wb || S % wb !== 0 || S / wb > MAX_FRAME_WORDS) return out;
  // a block's frames regions all have one shape: the first one's
  if (shape.wordBytes !== 0 && (shape.wordBytes !== wb || shape.words !== S / wb)) return out;
  const count = hint.addresses.length;
  if (sortedHint.length < count) sortedHint = new Float64Array(count * 2);
  for (let i = 0; i < count; i++) sortedHint[i] = hint.addresses[i]!;
  const sorted = sortedHint.subarray(0, count).sort();
  let found = 0;
  const rsp = rec.registers?.rsp;
  for (let k = 0; k < rec.regions.length; k++) {
    const r = rec.regions[k]!;
    if (r.address === rec.threadStateAddress || r.address > MAX_SAFE_BIG) continue;
    if (rsp !== undefined && rsp >= r.address && rsp - r.address < BigInt(r.bytes.length)) continue;
    const start = Number(r.address);
    const end = start + r.bytes.length;
    let lo = 0;
    let hi = count;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (sorted[mid]! < start) lo = mid + 1;
      else hi = mid;
    }
    // (first the count, then the offsets: one array per region)
    let n = 0;
    let free = start;
    for (let i = lo; i < count && sorted[i]! + S <= end; i++) {
      const a = sorted[i]!;
      if (a < free || !Number.isSafeInteger(a)) continue;
      n++;
      free = a + S;
    }
    if (n === 0) continue;
    const offsets = new Int32Array(n);
    n = 0;
    free = start;
    for (let i = lo; i < count && sorted[i]! + S <= end; i++) {
      const a = sorted[i]!;
      if (a < free || !Number.isSafeInteger(a)) continue;
      offsets[n++] = a - start;
      free = a + S;
    }
    out[k] = offsets;
    found++;
  }
  if (shape.wordBytes === 0 && found > 0) {
    shape.wordBytes = wb;
    shape.words = S / wb;
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// Decoding

/**
 * Reads the sample bodies of one block, in order. A sample that cannot be decoded leaves its
 * thread without a base, so the thread's later patches in the block are refused; a sample
 * whose thread cannot even be read leaves every thread without a base. A patch applied to the
 * wrong base would be silently wrong, which is worse than missing. Whole samples need no base
 * and are always decoded.
 */
export class SampleDecoder {
  private readonly bases = new Map<bigint, SampleRecord>();
  /** threads whose latest sample could not be decoded */
  private readonly broken = new Set<bigint>();
  /** a sample could not be attributed to a thread: any base from before it may be stale */
  private lostThread = false;
  /** set once the block's region bytes pass MAX_BLOCK_SAMPLE_BYTES: nothing more is decoded */
  private exhausted: string | null = null;
  private totalBytes = 0;
  /** the block's frame images, as its frames regions made them */
  private readonly images = new FrameImages(false);
  /** the word size and words of the block's frames (every frames region of a block has the same; 0: none yet) */
  private readonly shape = { wordBytes: 0, words: 0 };

  /**
   * Counts a region's bytes against the block's budget before anything is allocated for it;
   * past the budget the rest of the block is refused (each further patch could otherwise
   * make a large copy from a few payload bytes).
   */
  private readonly charge = (n: number, r: ByteReader, at: number): void => {
    this.totalBytes += n;
    if (this.totalBytes > MAX_BLOCK_SAMPLE_BYTES) {
      this.exhausted = `the block's samples hold more than ${MAX_BLOCK_SAMPLE_BYTES} region bytes`;
      r.fail(this.exhausted, at);
    }
  };

  decode(r: ByteReader): SampleRecord {
    if (this.exhausted) r.fail(this.exhausted);
    let tsa: bigint;
    try {
      tsa = r.big('thread state address');
    } catch (e) {
      this.lostThread = true;
      this.bases.clear();
      throw e;
    }
    try {
      const rec = this.decodeBody(r, tsa);
      this.bases.set(tsa, rec);
      this.broken.delete(tsa);
      return rec;
    } catch (e) {
      this.broken.add(tsa);
      this.bases.delete(tsa);
      throw e;
    }
  }

  private decodeBody(r: ByteReader, threadStateAddress: bigint): SampleRecord {
    const formAt = r.pos;
    const form = r.u8('sample form');
    let base: SampleRecord | undefined;
    let time: number;
    let interpreterId: bigint;
    let threadId: bigint;
    let nativeThreadId: bigint;
    if (form === SAMPLE_FORM.WHOLE) {
      time = r.uint('time');
      interpreterId = r.big('interpreter id');
      threadId = r.big('thread id');
      nativeThreadId = r.big('native thread id');
    } else if (form === SAMPLE_FORM.PATCH) {
      base = this.bases.get(threadStateAddress);
      if (!base) {
        const thread = `thread 0x${threadStateAddress.toString(16)}`;
        r.fail(
          this.broken.has(threadStateAddress)
            ? `a patch for ${thread}, whose previous sample could not be decoded`
            : this.lostThread
              ? `a patch for ${thread}, whose base may be a sample that could not be attributed to a thread`
              : `a patch for ${thread}, which has no earlier sample in this block`,
          formAt,
        );
      }
      const at = r.pos;
      time = base.time + r.sint('time delta');
      if (time < 0 || time > Number.MAX_SAFE_INTEGER) r.fail(`time ${time} out of range`, at);
      const maskAt = r.pos;
      const mask = r.u8('id mask');
      // a bit this reader does not know would be a field it cannot skip
      if (mask & ~(ID_BIT.INTERPRETER | ID_BIT.THREAD | ID_BIT.NATIVE_THREAD)) r.fail(`unknown id mask bits 0x${mask.toString(16)}`, maskAt);
      interpreterId = mask & ID_BIT.INTERPRETER ? r.big('interpreter id') : base.interpreterId;
      threadId = mask & ID_BIT.THREAD ? r.big('thread id') : base.threadId;
      nativeThreadId = mask & ID_BIT.NATIVE_THREAD ? r.big('native thread id') : base.nativeThreadId;
    } else {
      return r.fail(`unknown sample form ${form}`, formAt);
    }
    const flags = r.uint('flags');
    const statusAt = r.pos;
    const recorderStatus = STATUS_NAMES[r.u8('recorder status')] ?? r.fail('unknown recorder status code', statusAt);
    const copyMicros = r.uint('copy micros');
    const errorCount = r.count('error count', 1);
    const errors: string[] = new Array(errorCount);
    for (let i = 0; i < errorCount; i++) errors[i] = r.string(`error ${i}`);
    const regionCount = r.count('region count', 3);
    const regions: Region[] = new Array(regionCount);
    for (let i = 0; i < regionCount; i++) {
      const kindAt = r.pos;
      const kind = r.u8('region kind');
      if (kind === REGION_KIND.LITERAL) regions[i] = readLiteralRegion(r, `region ${i}`);
      else if (kind === REGION_KIND.PATCH && base) regions[i] = readPatchedRegion(r, base.regions, i, this.charge);
      else if (kind === REGION_KIND.FRAMES) regions[i] = readFramesRegion(r, base?.regions ?? [], i, this.images, this.charge, this.shape);
      else r.fail(kind === REGION_KIND.PATCH ? `region ${i} is a patch in a whole sample` : `region ${i}: unknown region kind ${kind}`, kindAt);
      if (kind === REGION_KIND.LITERAL) this.charge(regions[i]!.bytes.length, r, kindAt);
    }
    const rec: SampleRecord = { time, interpreterId, threadStateAddress, threadId, nativeThreadId, flags, recorderStatus, copyMicros, regions, errors };
    const registers = readRecordRegisters(r);
    if (registers) rec.registers = registers;
    // bytes left in the body: fields of a later minor version, ignored
    return rec;
  }
}

type Charge = (n: number, r: ByteReader, at: number) => void;

function readPatchedRegion(r: ByteReader, baseRegions: Region[], i: number, charge: Charge): Region {
  const jAt = r.pos;
  const j = r.uint(`region ${i} base index`);
  const from = baseRegions[j];
  if (!from) r.fail(`region ${i}: base region ${j} does not exist (the base sample has ${baseRegions.length})`, jAt);
  const base = from.bytes;
  const lengthAt = r.pos;
  const length = r.uint(`region ${i} length`);
  if (length > MAX_BLOCK_RAW) r.fail(`region ${i}: length ${length} exceeds ${MAX_BLOCK_RAW}`, lengthAt);
  charge(length, r, lengthAt);
  const runCount = r.count(`region ${i} run count`, 2);
  if (runCount === 0) {
    if (length > base.length) r.fail(`region ${i}: grows from ${base.length} to ${length} bytes without a run covering the new bytes`, lengthAt);
    // unchanged (or only cut short): share, no copy
    return { address: from.address, bytes: length === base.length ? base : base.subarray(0, length) };
  }
  const out = new Uint8Array(length);
  out.set(length >= base.length ? base : base.subarray(0, length));
  let pos = 0;
  for (let k = 0; k < runCount; k++) {
    const runAt = r.pos;
    const start = pos + r.uint('run gap');
    const n = r.uint('run length');
    if (start + n > length) r.fail(`region ${i}: run at ${start} + ${n} bytes passes the region's length ${length}`, runAt);
    // bytes past the base's end exist only in runs: a gap there would invent zeros
    if (start > pos && start > base.length) r.fail(`region ${i}: bytes ${Math.max(pos, base.length)}..${start} past the base's end are not covered by a run`, runAt);
    out.set(r.bytes(n, 'run bytes'), start);
    pos = start + n;
  }
  if (length > Math.max(pos, base.length)) r.fail(`region ${i}: bytes ${Math.max(pos, base.length)}..${length} past the base's end are not covered by a run`, lengthAt);
  return { address: from.address, bytes: out };
}

/** A frames region (format 1.3; docs/capture-format.md, "Frames region"). */
function readFramesRegion(r: ByteReader, baseRegions: Region[], i: number, images: FrameImages, charge: Charge, shape: { wordBytes: number; words: number }): Region {
  const what = `region ${i}`;
  const jAt = r.pos;
  const j = r.uint(`${what} base`);
  let from: Region | null = null;
  let address: bigint;
  if (j === 0) address = r.big(`${what} address`);
  else {
    from = baseRegions[j - 1] ?? r.fail(`${what}: base region ${j - 1} does not exist (the base sample has ${baseRegions.length})`, jAt);
    address = from.address;
  }
  const lengthAt = r.pos;
  const length = r.uint(`${what} length`);
  if (length > MAX_BLOCK_RAW) r.fail(`${what}: length ${length} exceeds ${MAX_BLOCK_RAW}`, lengthAt);
  charge(length, r, lengthAt);
  const shapeAt = r.pos;
  const wb = r.uint(`${what} word size`);
  const n = r.uint(`${what} frame words`);
  if ((wb !== 4 && wb !== 8) || n < 1 || n > MAX_FRAME_WORDS) r.fail(`${what}: frames of ${n} words of ${wb} bytes (words of 4 or 8 bytes, 1 to ${MAX_FRAME_WORDS} of them)`, shapeAt);
  if (shape.wordBytes === 0) {
    shape.wordBytes = wb;
    shape.words = n;
  } else if (shape.wordBytes !== wb || shape.words !== n) r.fail(`${what}: frames of ${n} words of ${wb} bytes in a block whose frames have ${shape.words} of ${shape.wordBytes}`, shapeAt);
  const S = wb * n;
  const keepAt = r.pos;
  const keepEnd = r.uint(`${what} bytes kept`);
  const baseLength = from ? from.bytes.length : 0;
  if (keepEnd > length || keepEnd > baseLength) r.fail(`${what}: keeps ${keepEnd} bytes of a base of ${baseLength} for a region of ${length}`, keepAt);
  const count = r.count(`${what} frame count`, 2);
  const out = new Uint8Array(length);
  if (from) out.set(from.bytes.subarray(0, keepEnd));
  const place = framePlace(address, length, 0);
  let end = keepEnd;
  for (let k = 0; k < count; k++) {
    const frameAt = r.pos;
    const off = end + r.uint('frame gap');
    if (off + S > length) r.fail(`${what}: a frame at ${off} passes the region's length ${length}`, frameAt);
    end = off + S;
    placeAt(place, off);
    const opAt = r.pos;
    const op = r.uint('frame kind');
    if (op === FRAME_OP.LITERAL) {
      out.set(r.bytes(S, 'frame bytes'), off);
    } else if (op === FRAME_OP.IMAGE || op === FRAME_OP.CHANGED) {
      const eAt = r.pos;
      const e = r.uint('frame image');
      if (e >= images.count) r.fail(`${what}: frame image ${e} does not exist (the block has ${images.count})`, eAt);
      images.materialize(e, place, out, off);
      if (op === FRAME_OP.IMAGE) continue;
      const maskAt = r.pos;
      const mask = r.uint('changed words');
      if (mask === 0 || mask >= 2 ** n) r.fail(`${what}: changed-word mask 0x${mask.toString(16)} for frames of ${n} words`, maskAt);
      for (let q = 0; q < n; q++) {
        if (!((mask >>> q) & 1)) continue;
        const changeAt = r.pos;
        const z = r.big('word change');
        if (wb === 4 && z >= 1n << 33n) r.fail(`${what}: a change of ${z} to a 4-byte word`, changeAt);
        addToWord(out, off + q * wb, wb, (z >> 1n) ^ -(z & 1n));
      }
    } else {
      r.fail(`${what}: unknown frame kind ${op}`, opAt);
    }
    images.add(out, off, wb, n, place);
  }
  const runCount = r.count(`${what} run count`, 2);
  if (from && count === 0 && runCount === 0 && keepEnd === length && length === baseLength) return { address, bytes: from.bytes };
  let pos = 0;
  for (let k = 0; k < runCount; k++) {
    const runAt = r.pos;
    const start = pos + r.uint('run gap');
    const len = r.uint('run length');
    if (start + len > length) r.fail(`${what}: run at ${start} + ${len} bytes passes the region's length ${length}`, runAt);
    out.set(r.bytes(len, 'run bytes'), start);
    pos = start + len;
  }
  return { address, bytes: out };
}
