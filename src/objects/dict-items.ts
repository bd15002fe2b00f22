// A dict's (key, value) pairs, read out of a target's memory: combined tables (keys and values in
// the entries) and split ones (the values apart, the keys shared by a type's instances), as
// ThreadNamesLayout places them per version. Everything read is untrusted: a table of an
// unexpected shape or size gives null, never a guess.

import type { ThreadNamesLayout } from '../layout/layout.js';
import type { MemorySource } from '../record/copy/source.js';

/** Dicts with more slots than 2^this are not read (sys.modules of a huge program: 2^17 slots hold 87k modules). */
export const MAX_LOG2_SLOTS = 17;

export interface Item {
  key: bigint;
  value: bigint;
}

export interface KeysShape {
  /** DICT_KEYS_GENERAL 0, UNICODE 1, SPLIT 2 */
  kind: number;
  /** entries in use (dk_nentries) */
  n: number;
  log2Index: number;
  /** an entry's size and where its key and value are in it */
  size: number;
  keyAt: number;
  valueAt: number;
}

/** A keys object's header, checked: its kind, entries in use and the entry layout; null when it is not one. */
export function keysShape(h: Uint8Array, N: ThreadNamesLayout): KeysShape | null {
  const log2 = h[N.keysLog2Size]!;
  const log2Index = h[N.keysLog2IndexBytes]!;
  const kind = h[N.keysKind]!;
  const used = BigInt.asIntN(64, word(h, N.keysNentries));
  // index bytes 1, 2, 4 or 8 per slot
  if (log2 < 3 || log2 > MAX_LOG2_SLOTS || log2Index < log2 || log2Index > log2 + 3 || kind > 2) return null;
  if (used < 0n || used > BigInt(((2 << log2) / 3) | 0) + 1n) return null;
  const general = kind === 0;
  return {
    kind,
    n: Number(used),
    log2Index,
    size: general ? N.entrySize : N.unicodeEntrySize,
    keyAt: general ? N.entryKey : N.unicodeEntryKey,
    valueAt: general ? N.entryValue : N.unicodeEntryValue,
  };
}

/**
 * The (key, value) pairs of the dict at `address`, in insertion order (deleted entries left
 * out); null when it does not look like a dict.
 */
export function dictItems(source: MemorySource, N: ThreadNamesLayout, address: bigint): Item[] | null {
  if (!aligned(address)) return null;
  const P = 8;
  const d = source.tryRead(address, Math.max(N.dictKeys, N.dictValues) + P);
  if (!d) return null;
  const keys = word(d, N.dictKeys);
  const values = word(d, N.dictValues);
  if (!aligned(keys) || (values !== 0n && !aligned(values))) return null;
  const h = source.tryRead(keys, N.keysIndices);
  if (!h) return null;
  const shape = keysShape(h, N);
  // a split dict (its values apart from its keys) has split keys, and only it
  if (!shape || (values !== 0n) !== (shape.kind === 2)) return null;
  let n = shape.n;
  let vals: Uint8Array | null = null;
  if (values !== 0n) {
    if (N.valuesCapacity !== null) {
      // 3.13+: the values say how many they hold
      const pre = source.tryRead(values, N.valuesValues);
      if (!pre) return null;
      n = Math.min(n, pre[N.valuesCapacity]!);
    }
    vals = n === 0 ? new Uint8Array(0) : source.tryRead(values + BigInt(N.valuesValues), n * P);
    if (!vals) return null;
  }
  if (n === 0) return [];
  const entries = source.tryRead(keys + BigInt(N.keysIndices + (1 << shape.log2Index)), n * shape.size);
  if (!entries) return null;
  const items: Item[] = [];
  for (let i = 0; i < n; i++) {
    const key = word(entries, i * shape.size + shape.keyAt);
    const value = vals ? word(vals, i * P) : word(entries, i * shape.size + shape.valueAt);
    if (aligned(key) && aligned(value)) items.push({ key, value });
  }
  return items;
}

function word(b: Uint8Array, at: number): bigint {
  return new DataView(b.buffer, b.byteOffset, b.byteLength).getBigUint64(at, true);
}

/** A plausible object address: not NULL, 8-byte aligned, in the user half of the address space. */
export function aligned(a: bigint): boolean {
  return a > 0xfffn && (a & 7n) === 0n && a < 1n << 63n;
}
