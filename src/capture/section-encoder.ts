// Writes the samples of a section block (format 1.4; docs/capture-format.md, "Section block").
// Each field of a sample goes to the section of its kind; a sample is written against its
// thread's previous sample in the block, as three kinds of region:
//
// - a *stack* region (a data-stack chunk, a frame outside the chunks: a region holding frames of
//   the thread's chain, as the recorder's hint says): the frames it keeps of the previous sample's
//   (from the outermost), then each other frame as an operation — the image the frame below was
//   last followed by, an image of the block, the previous sample's frame there run on (a few
//   words changed), … — at its offset predicted from the frame below; its length predicted from
//   its innermost frame; then whatever other words changed (the chunk's header);
// - a *words* region (the thread state, anything else seen before at its address): the 4-byte
//   words that changed, each as a change from its old value or from one of the sample's
//   references — the ends of its stack regions and their frames, which the thread state's
//   `current_frame`, `datastack_top` and profiler anchor point at;
// - a *literal* region: its bytes.
//
// The encoder keeps, per thread, what the decoder will have of its previous sample (the regions'
// bytes, and each stack region's frames and their images), and the block's images with their
// children and strides (stack-model.ts), updated in the same order as the decoder does.

import {
  LIST_EXPLICIT,
  LIST_SAME,
  LIST_UNCHANGED,
  OP_CHILD,
  OP_CHILD_CHANGED,
  OP_IMAGE,
  OP_IMAGE_CHANGED,
  OP_LITERAL,
  OP_RAN,
  REGION_LITERAL,
  REGION_STACK,
  REGION_WORDS,
  SECTIONS_KNOWN,
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
  SEC_REGISTERS,
  SEC_SHAPE,
  SEC_STATUS,
  SEC_STRIDE,
  SEC_THREAD,
  SEC_TIME,
  SEC_WORD_COUNT,
  SEC_WORD_DELTA,
  SEC_WORD_GAP,
  SEC_WORD_REF,
  ID_INTERPRETER,
  ID_NATIVE,
  ID_THREAD,
} from './codes.js';
import { ByteWriter, RECORDER_STATUS_CODE } from './format.js';
import { framePlace, placeAt } from './frame-images.js';
import { frameOffsets, wordsOf } from './patch.js';
import { Refs, StackModel, halves, u32, zig32 } from './stack-model.js';
import { writeSectionRegisters } from './registers.js';
import type { Region, SampleRecord } from './types.js';
import type { NativeRegisters } from '../native/unwind.js';

/** A stack region's frames, as the decoder will know them: offsets ascending, and each one's image (-1: none). */
export interface FrameList {
  offsets: Int32Array;
  images: Int32Array;
}

/** What the encoder keeps of a thread's previous sample in the block. */
interface Thread {
  slot: number;
  interpreterId: bigint;
  threadId: bigint;
  nativeThreadId: bigint;
  flags: number;
  regions: Region[];
  /** per region, its frames if it was a stack region (null otherwise) */
  frames: (FrameList | null)[];
  registers: NativeRegisters | undefined;
}

const EMPTY = new Int32Array(0);

export class SectionEncoder {
  readonly sections: ByteWriter[] = Array.from({ length: SECTIONS_KNOWN }, () => new ByteWriter(1024));
  /** a sample of the block has registers: the block lists section 25 (else only 1.4's sections) */
  private registers = false;
  /** region bytes the decoder makes anew for the sample encoded last (what it charges against MAX_BLOCK_SAMPLE_BYTES) */
  private charged = 0;
  private readonly model = new StackModel(true);
  private readonly threads = new Map<bigint, Thread>();
  private slots = 0;
  private lastTime = 0;
  private readonly refs = new Refs();
  /** the word size and words of the block's frames (0: none written yet) */
  private readonly shape = { wordBytes: 0, words: 0 };
  private made = new Uint8Array(4096);
  private readonly changed: number[] = [];

  /** raw bytes of the sample sections so far (the records section is the writer's) */
  get rawBytes(): number {
    let n = 0;
    for (const s of this.sections) n += s.length;
    return n;
  }

  /** The block's sections as its table lists them: 1.4's, and section 25 when a sample has registers. */
  parts(): Uint8Array[] {
    return this.sections.slice(0, this.registers ? SECTIONS_KNOWN : SECTION_COUNT).map((w) => w.view());
  }

  /** A new block: no thread, no image, every section empty. */
  reset(): void {
    this.registers = false;
    for (const s of this.sections) s.reset();
    this.model.reset();
    this.threads.clear();
    this.slots = 0;
    this.lastTime = 0;
    this.shape.wordBytes = this.shape.words = 0;
  }

  /**
   * Writes `rec` and makes it its thread's previous sample. Its bytes are kept as they are when
   * `immutable` (the caller never changes them), else copied. Returns the region bytes the decoder
   * makes anew for it (regions it shares with the thread's previous sample cost none), at most
   * the sample's region bytes.
   */
  encode(rec: SampleRecord, immutable: boolean): number {
    const S = this.sections;
    this.charged = 0;
    const tsa = rec.threadStateAddress;
    const th = this.threads.get(tsa);
    if (!th) {
      S[SEC_THREAD]!.uint(this.slots);
      S[SEC_IDS]!.big(tsa);
      S[SEC_IDS]!.big(rec.interpreterId);
      S[SEC_IDS]!.big(rec.threadId);
      S[SEC_IDS]!.big(rec.nativeThreadId);
    } else {
      S[SEC_THREAD]!.uint(th.slot);
      const mask = (rec.interpreterId !== th.interpreterId ? ID_INTERPRETER : 0) | (rec.threadId !== th.threadId ? ID_THREAD : 0) | (rec.nativeThreadId !== th.nativeThreadId ? ID_NATIVE : 0);
      S[SEC_IDS]!.u8(mask);
      if (mask & ID_INTERPRETER) S[SEC_IDS]!.big(rec.interpreterId);
      if (mask & ID_THREAD) S[SEC_IDS]!.big(rec.threadId);
      if (mask & ID_NATIVE) S[SEC_IDS]!.big(rec.nativeThreadId);
    }
    S[SEC_TIME]!.sint(rec.time - this.lastTime);
    this.lastTime = rec.time;
    S[SEC_FLAGS]!.uint(th && th.flags === rec.flags ? 0 : rec.flags + 1);
    S[SEC_STATUS]!.u8(RECORDER_STATUS_CODE[rec.recorderStatus]);
    S[SEC_COPY]!.uint(rec.copyMicros);
    S[SEC_ERRORS]!.uint(rec.errors.length);
    for (const e of rec.errors) S[SEC_ERRORS]!.string(e);
    // (format 1.5; the block lists the section only when some sample has them)
    writeSectionRegisters(S[SEC_REGISTERS]!, rec.registers, th?.registers);
    if (rec.registers) this.registers = true;

    const regions = rec.regions;
    const count = regions.length;
    const base = th?.regions;
    // each region's base region in the thread's previous sample: the same one when both list
    // the same addresses in the same order (a thread's samples nearly always do)
    let aligned = base !== undefined && base.length === count;
    for (let k = 0; aligned && k < count; k++) aligned = regions[k]!.address === base![k]!.address;
    const baseOf = new Int32Array(count).fill(-1);
    if (aligned) for (let k = 0; k < count; k++) baseOf[k] = k;
    else if (base) {
      const byAddress = new Map<bigint, number[]>();
      base.forEach((r, j) => {
        const list = byAddress.get(r.address);
        if (list) list.push(j);
        else byAddress.set(r.address, [j]);
      });
      for (let k = 0; k < count; k++) baseOf[k] = byAddress.get(regions[k]!.address)?.shift() ?? -1;
    }
    const frames: (FrameList | null)[] = new Array<FrameList | null>(count).fill(null);
    if (aligned && regions.every((r, k) => sameRegion(r.bytes, base![k]!.bytes))) {
      // nothing changed: the regions, and the frames known in them, are the previous sample's
      S[SEC_REGIONS]!.uint(LIST_UNCHANGED);
      this.commit(rec, th!.slot, th!.regions, th!.frames);
      return 0;
    }
    if (aligned) S[SEC_REGIONS]!.uint(LIST_SAME);
    else {
      S[SEC_REGIONS]!.uint(LIST_EXPLICIT + count);
      for (let k = 0; k < count; k++) {
        S[SEC_REGIONS]!.uint(baseOf[k]! + 1);
        if (baseOf[k]! < 0) S[SEC_ADDRESSES]!.big(regions[k]!.address);
      }
    }
    // the kinds: a region holding frames of the chain is a stack region, the thread state and
    // anything else seen before at its address a words region, the rest literal
    const hinted = frameOffsets(rec, this.shape);
    const kinds = new Uint8Array(count);
    for (let k = 0; k < count; k++) {
            kinds[k] = hinted[k] && regions[k]!.address !== tsa ? REGION_STACK : baseOf[k]! >= 0 ? REGION_WORDS : REGION_LITERAL;
      S[SEC_KINDS]!.u8(kinds[k]!);
    }
    this.refs.clear();
    for (let k = 0; k < count; k++) {
      if (kinds[k] !== REGION_STACK) continue;
      if (this.shape.wordBytes === 0) throw new Error('internal: a stack region without the frames shape');
      const j = baseOf[k]!;
      frames[k] = this.encodeStack(regions[k]!, j >= 0 ? base![j]! : null, j >= 0 ? th!.frames[j]! : null, hinted[k]!);
    }
    for (let k = 0; k < count; k++) {
      const r = regions[k]!;
      if (kinds[k] === REGION_WORDS) {
        const from = base![baseOf[k]!]!.bytes;
        S[SEC_LENGTHS]!.sint(r.bytes.length - from.length);
        // (the decoder shares the base's bytes when none changed at its length)
        if (this.words(from, r.bytes, r.address, from.length) > 0 || r.bytes.length !== from.length) this.charged += r.bytes.length;
      } else if (kinds[k] === REGION_LITERAL) {
        S[SEC_LENGTHS]!.uint(r.bytes.length);
        S[SEC_BYTES]!.bytes(r.bytes);
        this.charged += r.bytes.length;
      }
    }
    const kept = immutable ? regions : regions.map((r) => ({ address: r.address, bytes: r.bytes.slice() }));
    this.commit(rec, th ? th.slot : this.slots++, kept, frames);
    return this.charged;
  }

  private commit(rec: SampleRecord, slot: number, regions: Region[], frames: (FrameList | null)[]): void {
    this.threads.set(rec.threadStateAddress, {
      slot,
      interpreterId: rec.interpreterId,
      threadId: rec.threadId,
      nativeThreadId: rec.nativeThreadId,
      flags: rec.flags,
      regions,
      frames,
      registers: rec.registers,
    });
  }

  /** A stack region (its frames at `offsets`, ascending), against its base region and that one's frames. */
  private encodeStack(r: Region, base: Region | null, baseFrames: FrameList | null, offsets: Int32Array): FrameList {
    const S = this.sections;
    const wb = this.shape.wordBytes;
    const nw = this.shape.words;
    if (S[SEC_SHAPE]!.length === 0) {
      S[SEC_SHAPE]!.uint(wb);
      S[SEC_SHAPE]!.uint(nw);
    }
    const size = wb * nw;
    const bytes = r.bytes;
    const n = bytes.length;
    const old = base ? base.bytes : null;
    const bOffs = baseFrames ? baseFrames.offsets : EMPTY;
    const bImgs = baseFrames ? baseFrames.images : EMPTY;
    const bc = bOffs.length;
    const fc = offsets.length;
    // the frames kept: the base's from the outermost, at the same place with the same bytes
    let keep = 0;
    while (keep < fc && keep < bc && offsets[keep] === bOffs[keep] && offsets[keep]! + size <= old!.length && sameRange(bytes, old!, offsets[keep]!, size)) keep++;
    S[SEC_POP]!.uint(bc - keep);
    S[SEC_PUSH]!.uint(fc - keep);
    const ids = new Int32Array(fc);
    ids.set(bImgs.subarray(0, keep));
    const model = this.model;
    const images = model.images;
    const place = framePlace(r.address, n, 0);
    const made = this.scratch(n);
    for (let i = keep; i < fc; i++) {
      const off = offsets[i]!;
      const below = i > 0 ? ids[i - 1]! : -1;
      const belowAt = i > 0 ? offsets[i - 1]! : 0;
      const stride = model.strideOf(below);
      const predicted = i > 0 ? belowAt + (stride >= 0 ? stride : 0) : bc > 0 ? bOffs[0]! : 0;
      S[SEC_STRIDE]!.sint(off - predicted);
      placeAt(place, off);
      const found = images.find(bytes, off, wb, nw, place);
      const child = model.childOf(below);
      let id: number;
      if (found >= 0) {
        if (found === child) S[SEC_OP]!.uint(OP_CHILD);
        else {
          S[SEC_OP]!.uint(OP_IMAGE);
          S[SEC_IMAGE]!.uint(found);
        }
        id = found;
      } else {
        // the frame as changes to a frame like it — the base's frame here (the same call run on),
        // the child of the frame below, the latest image of its code object — or as its bytes
        let op = OP_LITERAL;
        let from = -1;
        if (i === keep && keep < bc && bOffs[keep] === off && off + size <= old!.length && sameRange(bytes, old!, off, wb)) {
          op = OP_RAN;
          from = bImgs[keep]!;
          made.set(old!.subarray(off, off + size), off);
        } else if (child >= 0 && firstWordIs(images, child, bytes, off, wb)) {
          op = OP_CHILD_CHANGED;
          from = child;
          images.materialize(child, place, made, off);
        } else {
          const like = images.similar(bytes, off, wb, nw);
          if (like >= 0) {
            op = OP_IMAGE_CHANGED;
            from = like;
            images.materialize(like, place, made, off);
          }
        }
        let mask = 0;
        let changedWords = 0;
        if (op !== OP_LITERAL) {
          for (let q = 0; q < nw; q++) {
            if (sameRange(made, bytes, off + q * wb, wb)) continue;
            mask = (mask | (1 << q)) >>> 0;
            changedWords++;
          }
          // (a change costs about three bytes: the frame's bytes are cheaper past that)
          if (3 * changedWords >= size) op = OP_LITERAL;
        }
        if (op !== OP_LITERAL && mask === 0 && op !== OP_RAN) {
          // the same bytes as an image whose words are relative where this region's are not
          // (another region's bounds): that image, as it is
          if (op === OP_CHILD_CHANGED) S[SEC_OP]!.uint(OP_CHILD);
          else {
            S[SEC_OP]!.uint(OP_IMAGE);
            S[SEC_IMAGE]!.uint(from);
          }
          ids[i] = from;
          if (i > 0) model.above(below, from, off - belowAt);
          continue;
        }
        if (op === OP_RAN && mask === 0) op = OP_LITERAL;
        S[SEC_OP]!.uint(op);
        if (op === OP_LITERAL) {
          from = -1;
          S[SEC_BYTES]!.range(bytes, off, off + size);
        } else {
          if (op === OP_IMAGE_CHANGED) S[SEC_IMAGE]!.uint(from);
          S[SEC_MASK]!.uint(mask);
          for (let q = 0; q < nw; q++) if ((mask >>> q) & 1) writeDelta(S[SEC_DELTA]!, made, bytes, off + q * wb, wb);
        }
        id = model.made(from);
        // (find() left the frame's image ready to add)
        if (images.add(bytes, off, wb, nw, place) !== id) throw new Error('internal: frame images out of step');
      }
      ids[i] = id;
      if (i > 0) model.above(below, id, off - belowAt);
    }
    // the region's length, from its innermost frame and that one's stride
    const last = fc - 1;
    const lastStride = last >= 0 ? model.strideOf(ids[last]!) : -1;
    const predictedLength = lastStride >= 0 ? offsets[last]! + lastStride : old ? old.length : 0;
    S[SEC_LENGTHS]!.sint(n - predictedLength);
    // what the decoder makes: the base's bytes, cut or zero-extended — where frames changed, up
    // to the kept frames' end (to the first frame without any), zeros after —; the frames written;
    // then the words that still differ
    const upTo = keep === bc && keep === fc ? n : keep > 0 ? offsets[keep - 1]! + size : fc > 0 ? offsets[0]! : n;
    const from = old ? Math.min(upTo, old.length, n) : 0;
    if (from > 0) made.set(old!.subarray(0, from));
    made.fill(0, from, n);
    for (let i = keep; i < fc; i++) made.set(bytes.subarray(offsets[i]!, offsets[i]! + size), offsets[i]!);
    const [lo, hi] = halves(r.address);
    this.refs.addRegion(lo, hi, n, offsets, fc);
    const changedWords = this.words(made, bytes, r.address, n);
    // (the decoder shares the base's bytes when no frame was popped or written, no word changed, at its length)
    if (!old || keep !== bc || keep !== fc || n !== old.length || changedWords > 0) this.charged += n;
    return { offsets, images: ids };
  }

  /** The 4-byte words of `cur` that differ from `old` (zeros past its length), as (gap, reference, change); returns how many. */
  private words(old: Uint8Array, cur: Uint8Array, address: bigint, oldLength: number): number {
    const S = this.sections;
    const changed = this.changed;
    changed.length = 0;
    const n = cur.length;
    // (what the decoder starts from: the old bytes cut or zero-extended to n)
    oldLength = Math.min(oldLength, n);
    const full = oldLength & ~3;
    // (a word at a time where both start 4-byte aligned: most words are the same)
    const ow = wordsOf(old);
    const cw = ow && wordsOf(cur);
    if (ow && cw) {
      const oo = old.byteOffset >>> 2;
      const co = cur.byteOffset >>> 2;
      for (let w = 0, end = full >>> 2; w < end; w++) if (ow[oo + w] !== cw[co + w]) changed.push(w << 2);
    } else {
      for (let at = 0; at < full; at += 4) {
        if (cur[at] !== old[at] || cur[at + 1] !== old[at + 1] || cur[at + 2] !== old[at + 2] || cur[at + 3] !== old[at + 3]) changed.push(at);
      }
    }
    for (let at = full; at < n; at += 4) if (wordOf(cur, at, n) !== wordOf(old, at, oldLength)) changed.push(at);
    S[SEC_WORD_COUNT]!.uint(changed.length);
    const refs = this.refs;
    const P = this.shape.wordBytes === 4 ? 4 : 8;
    const addressLo = Number(address & 0xffff_ffffn);
    let next = 0;
    for (const at of changed) {
      // (a last word cut by the region's end counts its bytes there, zeros after)
      const c = wordOf(cur, at, n);
      let best = zig32(wordOf(old, at, oldLength), c);
      let ref = 0;
      const wordLo = (addressLo + at) >>> 0;
      for (let k = 0; k < refs.count && best !== 0; k++) {
        const z = zig32(refs.half(k, wordLo, P), c);
        if (z < best) {
          best = z;
          ref = k + 1;
        }
      }
      S[SEC_WORD_GAP]!.uint((at >>> 2) - next);
      S[SEC_WORD_REF]!.uint(ref);
      S[SEC_WORD_DELTA]!.uint(best);
      next = (at >>> 2) + 1;
    }
    return changed.length;
  }

  private scratch(n: number): Uint8Array {
    if (this.made.length < n) this.made = new Uint8Array(Math.max(n, this.made.length * 2));
    return this.made.subarray(0, n);
  }
}

/** The 4-byte word at `at` of bytes of which only the first `length` count (zeros after). */
function wordOf(b: Uint8Array, at: number, length: number): number {
  if (at + 4 <= length) return u32(b, at);
  let v = 0;
  for (let i = 0; i < 4; i++) if (at + i < length) v |= b[at + i]! << (8 * i);
  return v >>> 0;
}

function sameRange(a: Uint8Array, b: Uint8Array, at: number, n: number): boolean {
  for (let i = at; i < at + n; i++) if (a[i] !== b[i]) return false;
  return true;
}

function sameRegion(a: Uint8Array, b: Uint8Array): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  // (a word at a time where both start 4-byte aligned: a native stack of a thread that waits is
  // hundreds of KB, all the same)
  const aw = wordsOf(a);
  const bw = aw && wordsOf(b);
  if (aw && bw) {
    const ao = a.byteOffset >>> 2;
    const bo = b.byteOffset >>> 2;
    const whole = a.length >>> 2;
    for (let w = 0; w < whole; w++) if (aw[ao + w] !== bw[bo + w]) return false;
    return sameRange(a, b, whole << 2, a.length - (whole << 2));
  }
  return sameRange(a, b, 0, a.length);
}

/** Does image e's first word (its code object) equal the frame's at bytes[off]? */
function firstWordIs(images: StackModel['images'], e: number, bytes: Uint8Array, off: number, wb: number): boolean {
  return images.firstWordEquals(e, bytes, off, wb);
}

/** The change from word a[at] to b[at] of wb bytes, signed, modulo 2^(8 wb), zigzag. */
function writeDelta(w: ByteWriter, a: Uint8Array, b: Uint8Array, at: number, wb: number): void {
  const aLo = u32(a, at);
  const bLo = u32(b, at);
  if (wb === 4) {
    w.uint(zig32(aLo, bLo));
    return;
  }
  const aHi = u32(a, at + 4);
  const bHi = u32(b, at + 4);
  const lo = (bLo - aLo) >>> 0;
  const hi = (bHi - aHi - (bLo < aLo ? 1 : 0)) | 0;
  // a change within ±2^52 as a number; larger ones (rare: a pointer swapped for an unrelated one) as a bigint
  if (hi >= -0x10_0000 && hi < 0x10_0000) {
    w.sint(hi * 0x1_0000_0000 + lo);
    return;
  }
  const d = BigInt.asIntN(64, (BigInt(hi >>> 0) << 32n) | BigInt(lo));
  w.big(d >= 0n ? d << 1n : (-d << 1n) - 1n);
}
