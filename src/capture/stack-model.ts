// What the encoder and the decoder of a section block (format 1.4; docs/capture-format.md,
// "Section block") both keep while they go through its samples, so that they predict alike: the
// block's frame images, and per image the image that was last written above it (its child) and
// how far above it that frame was (its stride: the frame's size on the data stack, as far as its
// code object goes); and a sample's references — the addresses a changed word's value may be
// taken from (the ends of its stack regions, and their frames, innermost first).

import { MAX_FRAME_IMAGES, MAX_REFS } from './codes.js';
import { FrameImages } from './frame-images.js';

export { MAX_REFS };

const NONE = -1;

/**
 * The block's frame images with, per image, its child and its stride (-1: none known). An image
 * is numbered when a frame makes it (`made`), which the decoder does before it has the region's
 * length, so before the image's words are known (`images.add`, in the same order, after).
 */
export class StackModel {
  readonly images: FrameImages;
  /** images numbered: those made, the words of some of which may be still to come (decoder) */
  count = 0;
  private child = new Int32Array(256);
  private stride = new Int32Array(256);

  constructor(indexed: boolean) {
    this.images = new FrameImages(indexed);
  }

  reset(): void {
    this.images.reset();
    this.count = 0;
  }

  /** the image last written above image e, or -1 */
  childOf(e: number): number {
    return e >= 0 && e < this.count ? this.child[e]! : NONE;
  }

  /** the distance from a frame of image e to the frame written above it, or -1 */
  strideOf(e: number): number {
    return e >= 0 && e < this.count ? this.stride[e]! : NONE;
  }

  /**
   * A frame made the next image (none once the block has MAX_FRAME_IMAGES: -1), from image
   * `from` (-1: from its bytes): it takes that one's child and stride, being of the same code
   * object. Returns its number.
   */
  made(from: number): number {
    if (this.count >= MAX_FRAME_IMAGES) return NONE;
    const e = this.count++;
    if (e >= this.child.length) this.grow(e + 1);
    this.child[e] = from >= 0 && from < e ? this.child[from]! : NONE;
    this.stride[e] = from >= 0 && from < e ? this.stride[from]! : NONE;
    return e;
  }

  /** A frame of image `e` was written `stride` bytes above a frame of image `below`. */
  above(below: number, e: number, stride: number): void {
    if (below < 0) return;
    if (e >= 0) this.child[below] = e;
    this.stride[below] = stride;
  }

  private grow(n: number): void {
    let cap = this.child.length;
    while (cap < n) cap *= 2;
    const child = new Int32Array(cap);
    child.set(this.child);
    this.child = child;
    const stride = new Int32Array(cap);
    stride.set(this.stride);
    this.stride = stride;
  }
}

/** A sample's references, as 32-bit halves (lo, hi) of each address. */
export class Refs {
  readonly lo = new Uint32Array(MAX_REFS);
  readonly hi = new Uint32Array(MAX_REFS);
  count = 0;

  clear(): void {
    this.count = 0;
  }

  /** Adds an address given as (lo, hi), while there is room. */
  add(lo: number, hi: number): void {
    if (this.count >= MAX_REFS) return;
    this.lo[this.count] = lo >>> 0;
    this.hi[this.count] = hi >>> 0;
    this.count++;
  }

  /**
   * Adds a stack region's references: its end, then its frames from the innermost (the highest
   * offset) down. `lo`, `hi`: the region's address.
   */
  addRegion(lo: number, hi: number, length: number, offsets: ArrayLike<number>, count: number): void {
    this.addAt(lo, hi, length);
    for (let i = count - 1; i >= 0 && this.count < MAX_REFS; i--) this.addAt(lo, hi, offsets[i]!);
  }

  private addAt(lo: number, hi: number, offset: number): void {
    const sum = lo + offset;
    this.add(sum >>> 0, hi + Math.floor(sum / 0x1_0000_0000));
  }

  /** The 32-bit half of reference k (0-based) that a word at address (lo of it) takes: the high half where a 64-bit word's upper half is. */
  half(k: number, wordLo: number, pointerSize: number): number {
    return pointerSize === 8 && (wordLo & 4) !== 0 ? this.hi[k]! : this.lo[k]!;
  }
}

/** Little-endian u32 at b[at]. */
export function u32(b: Uint8Array, at: number): number {
  return (b[at]! | (b[at + 1]! << 8) | (b[at + 2]! << 16) | (b[at + 3]! << 24)) >>> 0;
}

export function putU32(b: Uint8Array, at: number, v: number): void {
  b[at] = v;
  b[at + 1] = v >>> 8;
  b[at + 2] = v >>> 16;
  b[at + 3] = v >>> 24;
}

/** zigzag of a 32-bit change from a to b (modulo 2^32) */
export function zig32(a: number, b: number): number {
  const d = (b - a) | 0;
  return ((d << 1) ^ (d >> 31)) >>> 0;
}

/** b from a and the zigzag of its change */
export function unzig32(a: number, z: number): number {
  const d = (z >>> 1) ^ -(z & 1);
  return (a + d) >>> 0;
}

/** An address's 32-bit halves. */
export function halves(a: bigint): [number, number] {
  return [Number(a & 0xffff_ffffn), Number((a >> 32n) & 0xffff_ffffn)];
}
