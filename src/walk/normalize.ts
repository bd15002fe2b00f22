// Both walkers see their inputs in one canonical order, so that even malformed inputs
// (overlapping regions, repeated code addresses) give the same answer from both.

import type { CodeRange, Region } from './types.js';

export const U64_MASK = (1n << 64n) - 1n;

const byAddress = <T extends { address: bigint }>(a: T, b: T): number =>
  a.address < b.address ? -1 : a.address > b.address ? 1 : 0;

/**
 * Regions sorted by address (as unsigned 64-bit values); ties keep their input order
 * (Array.prototype.sort is stable).
 */
export function sortRegions(regions: readonly Region[]): Region[] {
  return regions.map((r) => (r.address >= 0n && r.address <= U64_MASK ? r : { address: r.address & U64_MASK, bytes: r.bytes })).sort(byAddress);
}

/** Code ranges as unsigned 64-bit values, sorted by address, the first of any repeated address kept. */
export function normalizeCodeRanges(ranges: Iterable<CodeRange>): CodeRange[] {
  const sorted = [...ranges]
    .map((r) => ({
      address: r.address & U64_MASK,
      bytecodeStart: r.bytecodeStart & U64_MASK,
      bytecodeEnd: r.bytecodeEnd & U64_MASK,
      // a u32 in the kernel's table
      frameSize: Number.isInteger(r.frameSize) && r.frameSize > 0 && r.frameSize <= 0xffff_ffff ? r.frameSize : 0,
    }))
    .sort(byAddress);
  const out: CodeRange[] = [];
  for (const r of sorted) if (out.length === 0 || out[out.length - 1]!.address !== r.address) out.push(r);
  return out;
}

