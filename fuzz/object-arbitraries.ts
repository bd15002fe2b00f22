// Hostile object memory for the object decoder (src/objects/): a heap of objects whose types are
// real type objects (tp_name "int", "str", "dict", … and some not), with random bytes after the
// header, words that point at other objects of the heap (cycles, self-references, deep nesting),
// and a frame with a code object whose local names and kinds are such objects too. What the
// decoder must do with any of it: return, bounded in time and in what it shows, never throw.

import fc from 'fast-check';
import type { Layout } from '../src/layout/layout.js';
import type { MemorySource } from '../src/record/copy/source.js';

const TYPE_NAMES = ['int', 'bool', 'float', 'str', 'bytes', 'tuple', 'list', 'dict', 'NoneType', 'cell', 'Thing', 'a'.repeat(70)];
const HEAP = 0x7f0000000000n;
const OBJECT_BYTES = 192;
const TYPE_BYTES = 256;

export interface ObjectHeap {
  source: MemorySource;
  /** the objects' addresses (the first is the one decoded) */
  objects: bigint[];
  /** a frame and its code object, among the heap */
  frame: bigint;
  code: bigint;
}

interface HeapSpec {
  objects: { type: number; bytes: Uint8Array; links: { at: number; to: number; tag: number }[]; size: number | null }[];
  heapTypes: boolean[];
  frame: Uint8Array;
  code: Uint8Array;
  codeLinks: { at: number; to: number }[];
}

const spec = fc.record({
  objects: fc.array(
    fc.record({
      type: fc.nat({ max: TYPE_NAMES.length }),
      bytes: fc.uint8Array({ minLength: OBJECT_BYTES, maxLength: OBJECT_BYTES }),
      links: fc.array(fc.record({ at: fc.nat({ max: OBJECT_BYTES / 8 - 1 }), to: fc.nat({ max: 15 }), tag: fc.nat({ max: 3 }) }), { maxLength: 12 }),
      // a small size word (a str's length, a container's count, an int's digits) reaches the decoding
      size: fc.option(fc.integer({ min: -3, max: 12 })),
    }),
    { minLength: 1, maxLength: 16 },
  ),
  heapTypes: fc.array(fc.boolean(), { minLength: TYPE_NAMES.length, maxLength: TYPE_NAMES.length }),
  frame: fc.uint8Array({ minLength: 512, maxLength: 512 }),
  code: fc.uint8Array({ minLength: 256, maxLength: 256 }),
  codeLinks: fc.array(fc.record({ at: fc.nat({ max: 31 }), to: fc.nat({ max: 15 }) }), { maxLength: 8 }),
});

/** A heap of hostile objects laid out for `layout` (64-bit). */
export function objectHeap(layout: Layout): fc.Arbitrary<ObjectHeap> {
  return spec.map((s) => build(layout, s));
}

function build(L: Layout, s: HeapSpec): ObjectHeap {
  const regions: { address: bigint; bytes: Uint8Array }[] = [];
  const put64 = (b: Uint8Array, at: number, v: bigint): void => {
    if (at >= 0 && at + 8 <= b.length) new DataView(b.buffer, b.byteOffset, b.byteLength).setBigUint64(at, v, true);
  };
  // the types, each with its name after it
  const typeAt = (i: number): bigint => HEAP + BigInt(i) * 0x1000n;
  TYPE_NAMES.forEach((name, i) => {
    const t = new Uint8Array(TYPE_BYTES + 128);
    put64(t, L.type.tpName, typeAt(i) + BigInt(TYPE_BYTES));
    put64(t, L.type.tpFlags, s.heapTypes[i] ? 1n << 9n : 0n);
    t.set(new TextEncoder().encode(name), TYPE_BYTES);
    regions.push({ address: typeAt(i), bytes: t });
  });
  const objectAt = (j: number): bigint => HEAP + 0x100000n + BigInt(j) * 0x1000n;
  const n = s.objects.length;
  s.objects.forEach((o, j) => {
    const b = o.bytes.slice();
    // a type of the list, or (past its end) an address that is none
    put64(b, L.object.obType, o.type < TYPE_NAMES.length ? typeAt(o.type) : 0x1234n);
    if (o.size !== null) put64(b, L.object.obSize, BigInt.asUintN(64, BigInt(o.size)));
    for (const l of o.links) put64(b, l.at * 8, objectAt(l.to % n) | BigInt(l.tag));
    regions.push({ address: objectAt(j), bytes: b });
  });
  const frame = HEAP + 0x200000n;
  const code = HEAP + 0x201000n;
  const c = s.code.slice();
  for (const l of s.codeLinks) put64(c, l.at * 8, objectAt(l.to % n));
  regions.push({ address: frame, bytes: s.frame.slice() }, { address: code, bytes: c });
  regions.sort((a, b) => (a.address < b.address ? -1 : 1));
  const tryRead = (address: bigint, length: number): Uint8Array | null => {
    for (const r of regions) {
      if (address >= r.address && address + BigInt(length) <= r.address + BigInt(r.bytes.length)) {
        const at = Number(address - r.address);
        return r.bytes.slice(at, at + length);
      }
    }
    return null;
  };
  const source: MemorySource = {
    description: 'hostile heap',
    runtimeAddress: 0n,
    layout: L,
    read: (a, len) => {
      const got = tryRead(a, len);
      if (!got) throw new Error('unreadable');
      return got;
    },
    tryRead,
    close: () => undefined,
  };
  return { source, objects: s.objects.map((_, j) => objectAt(j)), frame, code };
}
