// The memory of one thread's copy while it is being made, and the small byte helpers the copy
// and its checks share.

import { readPointer } from '../../walk/region-memory.js';
import { lastAtOrBelow } from '../../walk/region-index.js';
import type { Region } from '../../walk/types.js';
import type { Range } from '../linux/native.js';

/**
 * The regions of a copy in progress, added to as the copy goes. The caller's array keeps the
 * order they were copied in (the thread state first); lookups go through a sorted index.
 */
export class GrowingMemory {
  /** the regions that are data-stack chunks */
  readonly chunks: Region[] = [];
  private readonly sorted: Region[] = [];
  private readonly starts: bigint[] = [];

  constructor(
    private readonly regions: Region[],
    private readonly P: 4 | 8,
  ) {
    for (const r of regions) this.index(r);
  }

  /** every region, in the order copied (the thread state first) */
  all(): readonly Region[] {
    return this.regions;
  }

  add(r: Region, chunk = false): void {
    this.regions.push(r);
    this.index(r);
    if (chunk) this.chunks.push(r);
  }

  private index(r: Region): void {
    // after every region starting at or below it
    const at = lastAtOrBelow(this.starts, r.address) + 1;
    this.sorted.splice(at, 0, r);
    this.starts.splice(at, 0, r.address);
  }

  /** A view of [address, address+length) if one region holds all of it (the last one starting at or below it). */
  bytes(address: bigint, length: number): Uint8Array | null {
    const found = lastAtOrBelow(this.starts, address);
    // overlapping regions are rare (a frame is only added when no region holds it): look back a little
    for (let i = found; i >= 0 && i > found - 4; i--) {
      const r = this.sorted[i]!;
      const off = address - r.address;
      if (off + BigInt(length) <= BigInt(r.bytes.length)) return r.bytes.subarray(Number(off), Number(off) + length);
    }
    return null;
  }

  contains(address: bigint, length: number): boolean {
    return this.bytes(address, length) !== null;
  }

  /** Is [address, address+length) inside a copied data-stack chunk? */
  inChunk(address: bigint, length: number): boolean {
    return this.chunks.some((r) => address >= r.address && address + BigInt(length) <= r.address + BigInt(r.bytes.length));
  }

  ptr(address: bigint): bigint | null {
    const b = this.bytes(address, this.P);
    return b ? readPointer(b, 0, this.P) : null;
  }
}

/** The bytes at [address, address+length) from a gathered read, or null if no range held them. */
export function pick(ranges: readonly Range[], results: readonly (Uint8Array | null)[], address: bigint, length: number): Uint8Array | null {
  for (let i = 0; i < ranges.length; i++) {
    const r = ranges[i]!;
    const b = results[i];
    if (!b || address < r.address) continue;
    const off = address - r.address;
    if (off + BigInt(length) <= BigInt(b.length)) return b.subarray(Number(off), Number(off) + length);
  }
  return null;
}

/**
 * Zero what a sample does not need of its data-stack chunks and of the frames outside them: of
 * a chunk, everything but its header and the headers of the chain's frames — the frames' local
 * variables and value stacks, and the frames of other moments above and between; of a frame
 * outside the chunks, everything after its header. The walk reads nothing else, and consecutive
 * samples of a thread then differ only where the stack did (a loop counter in a local would
 * otherwise make every sample's chunk differ from the last). A header is kept up to where the
 * frame's local variables begin (`headerBytes`: the layout's `localsplus`), not to the frame
 * struct's size, which counts its first local too: a recursion's argument there made each
 * level's frame differ from every other, and the capture stored each again (format 1.3's frame
 * images: recursion's captures 3.4× smaller without it).
 */
export function maskFrames(mem: GrowingMemory, chain: readonly bigint[], headerBytes: number, chunkHeader: number): void {
  // a frame outside the chunks (a generator's, an entry frame on the C stack) is a region of its
  // own, read from its address for the frame struct's size: it keeps its header likewise, not its
  // first local (an entry frame's changed at nearly every sample, and the capture stored it again)
  const chainSet = new Set(chain);
  for (const r of mem.all()) {
    if (r.bytes.length > headerBytes && chainSet.has(r.address) && !mem.chunks.includes(r)) r.bytes.fill(0, headerBytes);
  }
  for (const r of mem.chunks) {
    const end = r.address + BigInt(r.bytes.length);
    const keep = chain.filter((f) => f >= r.address && f < end).map((f) => Number(f - r.address)).sort((a, b) => a - b);
    let from = Math.min(chunkHeader, r.bytes.length);
    for (const at of keep) {
      if (at > from) r.bytes.fill(0, from, at);
      from = Math.max(from, at + headerBytes);
    }
    if (from < r.bytes.length) r.bytes.fill(0, from);
  }
}

export function sameField(a: Uint8Array, b: Uint8Array, offset: number, width: number): boolean {
  for (let i = offset; i < offset + width; i++) if (a[i] !== b[i]) return false;
  return true;
}

export const u64 = (b: Uint8Array | null | undefined): bigint | null => (b && b.length >= 8 ? new DataView(b.buffer, b.byteOffset, 8).getBigUint64(0, true) : null);

export const hex = (a: bigint): string => `0x${a.toString(16)}`;
