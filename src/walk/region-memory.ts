// Reads of copied target memory: a set of regions (address, bytes) sorted by address, looked
// up by binary search. Every read is bounds-checked: a read that is not wholly inside one
// region returns null (or throws from the `*OrThrow` helpers), never garbage.

import { lastAtOrBelow } from './region-index.js';
import type { Region } from './types.js';

export class RegionMemory {
  /** regions sorted by address */
  readonly regions: readonly Region[];
  readonly pointerSize: 4 | 8;
  private readonly starts: bigint[];

  constructor(regions: Iterable<Region>, pointerSize: 4 | 8) {
    this.regions = [...regions].sort((a, b) => (a.address < b.address ? -1 : a.address > b.address ? 1 : 0));
    this.starts = this.regions.map((r) => r.address);
    this.pointerSize = pointerSize;
  }

  /** The region containing [address, address+length), and the offset of address in it. */
  locate(address: bigint, length: number): { region: Region; offset: number } | null {
    const found = lastAtOrBelow(this.starts, address);
    if (found < 0) return null;
    const region = this.regions[found]!;
    const offset = address - region.address;
    if (offset + BigInt(length) > BigInt(region.bytes.length)) return null;
    return { region, offset: Number(offset) };
  }

  contains(address: bigint, length: number): boolean {
    return this.locate(address, length) !== null;
  }

  /** A view (not a copy) of `length` bytes at `address`, or null. */
  bytes(address: bigint, length: number): Uint8Array | null {
    const at = this.locate(address, length);
    return at ? at.region.bytes.subarray(at.offset, at.offset + length) : null;
  }

  private view(address: bigint, length: number): DataView | null {
    const at = this.locate(address, length);
    if (!at) return null;
    const b = at.region.bytes;
    return new DataView(b.buffer, b.byteOffset + at.offset, length);
  }

  u8(address: bigint): number | null {
    return this.view(address, 1)?.getUint8(0) ?? null;
  }

  u16(address: bigint): number | null {
    return this.view(address, 2)?.getUint16(0, true) ?? null;
  }

  u32(address: bigint): number | null {
    return this.view(address, 4)?.getUint32(0, true) ?? null;
  }

  i32(address: bigint): number | null {
    return this.view(address, 4)?.getInt32(0, true) ?? null;
  }

  u64(address: bigint): bigint | null {
    return this.view(address, 8)?.getBigUint64(0, true) ?? null;
  }

  i64(address: bigint): bigint | null {
    return this.view(address, 8)?.getBigInt64(0, true) ?? null;
  }

  /** A pointer-sized unsigned value (4 or 8 bytes, by the target's pointer width). */
  ptr(address: bigint): bigint | null {
    if (this.pointerSize === 8) return this.u64(address);
    const v = this.u32(address);
    return v === null ? null : BigInt(v);
  }

  /** A pointer-sized signed value (Py_ssize_t). */
  ssize(address: bigint): bigint | null {
    if (this.pointerSize === 8) return this.i64(address);
    const v = this.i32(address);
    return v === null ? null : BigInt(v);
  }
}

/** Read a pointer-sized value from a byte array at `offset` (little-endian). */
export function readPointer(bytes: Uint8Array, offset: number, pointerSize: 4 | 8): bigint {
  // (from the bytes, without a DataView: the recorder reads pointers for every thread of
  // every tick, and a view per read is most of a read's cost)
  if (offset < 0 || offset + pointerSize > bytes.length) throw new RangeError(`pointer at ${offset} is outside ${bytes.length} bytes`);
  const lo = (bytes[offset]! | (bytes[offset + 1]! << 8) | (bytes[offset + 2]! << 16) | (bytes[offset + 3]! << 24)) >>> 0;
  if (pointerSize === 4) return BigInt(lo);
  const hi = (bytes[offset + 4]! | (bytes[offset + 5]! << 8) | (bytes[offset + 6]! << 16) | (bytes[offset + 7]! << 24)) >>> 0;
  return hi === 0 ? BigInt(lo) : (BigInt(hi) << 32n) | BigInt(lo);
}
