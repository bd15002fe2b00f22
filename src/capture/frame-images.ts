// Frame images: the frame headers a block's samples hold, each distinct one stored once and
// referred to after (docs/capture-format.md, "Frames region"). A churning program pushes and pops
// the same few hundred frames — the same function called from the same place, at another
// depth — so a frame that is new to its sample's thread is most often one the block has seen.
//
// A frame's words that point inside its own region (its `previous`, its stack pointer) differ
// with the depth it was pushed at, so an image keeps them relative to the frame's address: an
// image is the frame's words with those made relative, and which words they are (its mask).
// Written out again at another address, the same image gives the frame pushed there. Both the
// encoder and the decoder make images from the raw bytes alone, the same way, so they agree on
// every image and its number without the image ever being written.
//
// Words are 4 or 8 bytes (the target's pointer size), little-endian; values are kept as
// unsigned 32-bit halves (lo, hi) so that no BigInt is made per frame.

import { MAX_FRAME_IMAGES, MAX_FRAME_WORDS } from './codes.js';

export { MAX_FRAME_IMAGES, MAX_FRAME_WORDS };

const STRIDE = MAX_FRAME_WORDS * 2;

/** Little-endian u32 at b[at]. */
export function u32At(b: Uint8Array, at: number): number {
  return (b[at]! | (b[at + 1]! << 8) | (b[at + 2]! << 16) | (b[at + 3]! << 24)) >>> 0;
}

function putU32(b: Uint8Array, at: number, v: number): void {
  b[at] = v;
  b[at + 1] = v >>> 8;
  b[at + 2] = v >>> 16;
  b[at + 3] = v >>> 24;
}

/** The bounds of the region a frame lies in, and the frame's address, as (lo, hi) halves. */
export interface FramePlace {
  aLo: number;
  aHi: number;
  /** region start */
  sLo: number;
  sHi: number;
  /** region end (exclusive; all ones when it would pass 2^64) */
  eLo: number;
  eHi: number;
}

export function framePlace(regionAddress: bigint, regionLength: number, offset: number): FramePlace {
  let e = regionAddress + BigInt(regionLength);
  if (e > 0xffff_ffff_ffff_ffffn) e = 0xffff_ffff_ffff_ffffn;
  const p = {
    aLo: 0,
    aHi: 0,
    sLo: Number(regionAddress & 0xffff_ffffn),
    sHi: Number(regionAddress >> 32n),
    eLo: Number(e & 0xffff_ffffn),
    eHi: Number(e >> 32n),
  };
  placeAt(p, offset);
  return p;
}

/** Moves a place to the frame `offset` bytes into its region (no BigInt: this is per frame). */
export function placeAt(p: FramePlace, offset: number): void {
  const lo = p.sLo + offset;
  p.aLo = lo % 0x1_0000_0000;
  p.aHi = (p.sHi + Math.floor(lo / 0x1_0000_0000)) >>> 0;
}

/** Is the 64-bit value (lo, hi) inside [start, end) of the place's region? */
function inside(p: FramePlace, lo: number, hi: number): boolean {
  const geStart = hi > p.sHi || (hi === p.sHi && lo >= p.sLo);
  const ltEnd = hi < p.eHi || (hi === p.eHi && lo < p.eLo);
  return geStart && ltEnd;
}

/**
 * The images of one block, in the order they were made. The encoder also indexes them by
 * content (to find a frame's image) and by first word (a frame's executable: the image to
 * write a new frame as changes to).
 */
export class FrameImages {
  count = 0;
  private words = new Uint32Array(64 * STRIDE);
  private masks = new Uint32Array(64);
  private hashes = new Int32Array(64);
  private firsts = new Float64Array(64);
  private shapes = new Uint8Array(64 * 2);
  private readonly byContent: Map<number, number | number[]> | null;
  private readonly byFirst: Map<number, number> | null;
  /** the normalized words of the frame looked up last (encoder) */
  private readonly scratch = new Uint32Array(STRIDE);
  private scratchMask = 0;
  private scratchHash = 0;

  constructor(indexed: boolean) {
    this.byContent = indexed ? new Map() : null;
    this.byFirst = indexed ? new Map() : null;
  }

  reset(): void {
    this.count = 0;
    this.byContent?.clear();
    this.byFirst?.clear();
  }

  wordBytes(e: number): number {
    return this.shapes[e * 2]!;
  }

  wordCount(e: number): number {
    return this.shapes[e * 2 + 1]!;
  }

  /** Writes image e as the frame at the place's address, into out[at..). */
  materialize(e: number, p: FramePlace, out: Uint8Array, at: number): void {
    const wb = this.shapes[e * 2]!;
    const n = this.shapes[e * 2 + 1]!;
    const w = this.words;
    const base = e * STRIDE;
    const mask = this.masks[e]!;
    for (let q = 0; q < n; q++) {
      let lo = w[base + 2 * q]!;
      let hi = w[base + 2 * q + 1]!;
      if ((mask >>> q) & 1) {
        const sum = lo + p.aLo;
        const carry = sum > 0xffff_ffff ? 1 : 0;
        lo = sum >>> 0;
        hi = (hi + p.aHi + carry) >>> 0;
      }
      putU32(out, at + q * wb, lo);
      if (wb === 8) putU32(out, at + q * wb + 4, hi);
    }
  }

  /**
   * Normalizes the frame bytes[at..at+wb*n) at the place into the scratch image (words inside
   * the region made relative to the frame's address) and hashes it.
   */
  private normalize(bytes: Uint8Array, at: number, wb: number, n: number, p: FramePlace): void {
    const s = this.scratch;
    let mask = 0;
    let h = (wb * 31 + n) | 0;
    for (let q = 0; q < n; q++) {
      let lo = u32At(bytes, at + q * wb);
      let hi = wb === 8 ? u32At(bytes, at + q * wb + 4) : 0;
      if (inside(p, lo, hi)) {
        mask |= 1 << q;
        const diff = lo - p.aLo;
        const borrow = diff < 0 ? 1 : 0;
        lo = diff >>> 0;
        hi = (hi - p.aHi - borrow) >>> 0;
      }
      s[2 * q] = lo;
      s[2 * q + 1] = hi;
      h = Math.imul(h ^ lo, 0x9e3779b1);
      h = Math.imul(h ^ hi, 0x85ebca77);
    }
    this.scratchMask = mask;
    this.scratchHash = (h ^ mask) | 0;
  }

  /** The image equal to the frame at the place (bytes[at..at+wb*n)), or -1. */
  find(bytes: Uint8Array, at: number, wb: number, n: number, p: FramePlace): number {
    this.normalize(bytes, at, wb, n, p);
    const found = this.byContent!.get(this.scratchHash);
    if (found === undefined) return -1;
    if (typeof found === 'number') return this.sameAsScratch(found, wb, n) ? found : -1;
    for (const e of found) if (this.sameAsScratch(e, wb, n)) return e;
    return -1;
  }

  private sameAsScratch(e: number, wb: number, n: number): boolean {
    if (this.shapes[e * 2] !== wb || this.shapes[e * 2 + 1] !== n || this.masks[e] !== this.scratchMask) return false;
    const w = this.words;
    const s = this.scratch;
    const base = e * STRIDE;
    for (let k = 0; k < 2 * n; k++) if (w[base + k] !== s[k]) return false;
    return true;
  }

  /** Is image e's first word (its code object, never relative) the frame's at bytes[at]? */
  firstWordEquals(e: number, bytes: Uint8Array, at: number, wb: number): boolean {
    if (this.shapes[e * 2] !== wb || (this.masks[e]! & 1) !== 0) return false;
    const base = e * STRIDE;
    return this.words[base] === u32At(bytes, at) && (wb === 4 || this.words[base + 1] === u32At(bytes, at + 4));
  }

  /** The latest image of this shape whose first word is the frame's (its executable), or -1. */
  similar(bytes: Uint8Array, at: number, wb: number, n: number): number {
    const e = this.byFirst!.get(this.firstKey(bytes, at, wb));
    return e !== undefined && this.shapes[e * 2] === wb && this.shapes[e * 2 + 1] === n ? e : -1;
  }

  private firstKey(bytes: Uint8Array, at: number, wb: number): number {
    // (a collision only picks a worse image to write changes to: any image serves)
    return u32At(bytes, at) + (wb === 8 ? (u32At(bytes, at + 4) & 0x1f_ffff) * 0x1_0000_0000 : 0);
  }

  /**
   * Adds the frame bytes[at..at+wb*n) at the place as the next image, if the block has room
   * for one (encoder and decoder both stop at MAX_FRAME_IMAGES). Returns its number, or -1.
   */
  add(bytes: Uint8Array, at: number, wb: number, n: number, p: FramePlace): number {
    if (this.count >= MAX_FRAME_IMAGES) return -1;
    // (the encoder has just normalized it, looking it up)
    if (!this.byContent) this.normalize(bytes, at, wb, n, p);
    const e = this.count++;
    if (e >= this.masks.length) this.grow();
    this.words.set(this.scratch.subarray(0, 2 * n), e * STRIDE);
    this.masks[e] = this.scratchMask;
    this.hashes[e] = this.scratchHash;
    this.shapes[e * 2] = wb;
    this.shapes[e * 2 + 1] = n;
    if (this.byContent) {
      const h = this.scratchHash;
      const had = this.byContent.get(h);
      if (had === undefined) this.byContent.set(h, e);
      else if (typeof had === 'number') this.byContent.set(h, [had, e]);
      else had.push(e);
      const first = this.firstKey(bytes, at, wb);
      this.firsts[e] = first;
      this.byFirst!.set(first, e);
    }
    return e;
  }

  private grow(): void {
    const cap = this.masks.length * 2;
    const words = new Uint32Array(cap * STRIDE);
    words.set(this.words);
    this.words = words;
    const masks = new Uint32Array(cap);
    masks.set(this.masks);
    this.masks = masks;
    const hashes = new Int32Array(cap);
    hashes.set(this.hashes);
    this.hashes = hashes;
    const firsts = new Float64Array(cap);
    firsts.set(this.firsts);
    this.firsts = firsts;
    const shapes = new Uint8Array(cap * 2);
    shapes.set(this.shapes);
    this.shapes = shapes;
  }

  /**
   * Forgets the images from `count` on (the encoder, when a sample it encoded is not written
   * after all: the decoder will never see them). An image forgotten may leave its first word
   * without a latest image: only a worse choice of image to write changes to, never a wrong one.
   */
  truncate(count: number): void {
    while (this.count > count) {
      const e = --this.count;
      if (!this.byContent) continue;
      const h = this.hashes[e]!;
      const had = this.byContent.get(h);
      if (typeof had === 'number') this.byContent.delete(h);
      else if (had) {
        had.splice(had.indexOf(e), 1);
        if (had.length === 0) this.byContent.delete(h);
      }
      const first = this.firsts[e]!;
      if (this.byFirst!.get(first) === e) this.byFirst!.delete(first);
    }
  }
}

/** A word of a frame, (lo, hi), plus a signed 64-bit change (as a BigInt), written back. */
export function addToWord(out: Uint8Array, at: number, wb: number, change: bigint): void {
  const old = BigInt(u32At(out, at)) + (wb === 8 ? BigInt(u32At(out, at + 4)) << 32n : 0n);
  const v = BigInt.asUintN(wb * 8, old + change);
  putU32(out, at, Number(v & 0xffff_ffffn));
  if (wb === 8) putU32(out, at + 4, Number(v >> 32n));
}

/** The change from word a (in a at ia) to word b (in b at ib), signed, of wb bytes. */
export function wordChange(a: Uint8Array, ia: number, b: Uint8Array, ib: number, wb: number): bigint {
  const va = BigInt(u32At(a, ia)) + (wb === 8 ? BigInt(u32At(a, ia + 4)) << 32n : 0n);
  const vb = BigInt(u32At(b, ib)) + (wb === 8 ? BigInt(u32At(b, ib + 4)) << 32n : 0n);
  return BigInt.asIntN(wb * 8, vb - va);
}
