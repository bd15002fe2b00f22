// Python objects read out of a target's memory (a live process or a core) for `dump --locals`:
// the values of the common built-in types — int, float, bool, None, str, bytes, and short
// tuples, lists and dicts of them — as Python's repr() writes them; anything else by its type's
// name and address.
//
// The memory is untrusted: a type is known only by its tp_name and by not being a heap type (a
// class named "int" is not int); every length and count is bounded (MAX_*), nesting stops at
// MAX_DEPTH, and one value reads at most MAX_OBJECTS objects. What does not look as it should is
// shown as unreadable, never guessed, and nothing here throws for what memory holds.

import type { Layout } from '../layout/layout.js';
import type { MemorySource } from '../record/copy/source.js';
import { RegionMemory } from '../walk/region-memory.js';
import { readPyString } from '../symbols/strings.js';
import { aligned, dictItems } from './dict-items.js';
import { bytesRepr, floatRepr, strRepr } from './repr.js';

/** characters of a str shown; a longer one is cut, and says so */
export const MAX_STR_CHARS = 200;
/** bytes of a bytes object shown */
export const MAX_BYTES = 64;
/** items of a tuple, list or dict shown */
export const MAX_ITEMS = 10;
/** containers inside containers: deeper ones are shown by type and address */
export const MAX_DEPTH = 2;
/** objects read for one value */
export const MAX_OBJECTS = 64;
/** 30-bit digits of an int decoded (about 600 decimal digits) */
const MAX_DIGITS = 64;
/** Py_TPFLAGS_HEAPTYPE: a class made at run time, never one of the built-in types */
const HEAPTYPE = 1n << 9n;
const TYPE_NAME_BYTES = 64;

/** A value as shown: its type's name, address, and repr where its type is decoded. */
export interface ObjectValue {
  type: string;
  address: bigint;
  /** Python's repr() of it (a container's items cut at MAX_ITEMS with "..."); null: not decoded */
  repr: string | null;
  /** the repr was cut (a long str or bytes, a container with more items, one too deep) */
  cut?: true;
}

export class ObjectReader {
  private readonly types = new Map<bigint, { name: string; builtin: boolean } | null>();
  private budget = 0;
  /** the text of the last str decoded */
  private lastText: string | null = null;

  constructor(
    private readonly source: MemorySource,
    private readonly L: Layout,
  ) {}

  /** The object at `address` (a PyObject *), or null when it cannot be read as one. */
  value(address: bigint): ObjectValue | null {
    this.budget = MAX_OBJECTS;
    return this.read(address, 0);
  }

  /** The text of the str at `address` (at most MAX_NAME_CHARS), or null: a name, not a value. */
  text(address: bigint): string | null {
    this.budget = 1;
    const t = this.read(address, 0);
    if (!t || t.type !== 'str' || t.repr === null || t.cut) return null;
    return this.lastText;
  }

  /** A small int the 3.14+ value stack keeps tagged in the pointer itself (low bits 3). */
  taggedInt(value: bigint): ObjectValue {
    return { type: 'int', address: 0n, repr: String(BigInt.asIntN(64, value) >> 2n) };
  }

  private read(address: bigint, depth: number): ObjectValue | null {
    if (!aligned(address) || this.budget-- <= 0) return null;
    const L = this.L;
    const head = this.source.tryRead(address, L.object.obSize + 16);
    if (!head) return null;
    const dv = new DataView(head.buffer, head.byteOffset, head.byteLength);
    const type = this.typeOf(dv.getBigUint64(L.object.obType, true));
    if (!type) return null;
    const v: ObjectValue = { type: type.name, address, repr: null };
    if (!type.builtin) return v;
    const word = (at: number): bigint => dv.getBigUint64(at, true);
    switch (type.name) {
      case 'NoneType':
        v.repr = 'None';
        break;
      case 'bool': {
        const n = this.int(address);
        v.repr = n === null ? null : n === 0n ? 'False' : 'True';
        break;
      }
      case 'int': {
        const n = this.int(address);
        v.repr = n === null ? null : n.toString();
        break;
      }
      case 'float': {
        const f = L.values ? this.source.tryRead(address + BigInt(L.values.floatValue), 8) : null;
        if (f) v.repr = floatRepr(new DataView(f.buffer, f.byteOffset, 8).getFloat64(0, true));
        break;
      }
      case 'str':
        this.str(address, v);
        break;
      case 'bytes':
        this.bytes(address, BigInt.asIntN(64, word(L.bytes.obSize)), v);
        break;
      case 'tuple':
      case 'list': {
        const size = BigInt.asIntN(64, word(L.object.obSize));
        if (size < 0n || size > 1n << 40n || !L.values) break;
        if (depth >= MAX_DEPTH) {
          v.cut = true;
          break;
        }
        const n = Math.min(Number(size), MAX_ITEMS);
        // a tuple's items follow its header; a list's are where ob_item points
        const items = type.name === 'tuple' ? (n === 0 ? new Uint8Array(0) : this.source.tryRead(address + BigInt(L.values.tupleItems), n * 8)) : this.listItems(address, n);
        if (!items) break;
        const parts: string[] = [];
        const idv = new DataView(items.buffer, items.byteOffset, items.byteLength);
        for (let i = 0; i < n; i++) parts.push(this.itemRepr(idv.getBigUint64(i * 8, true), depth, v));
        if (Number(size) > n) {
          parts.push('...');
          v.cut = true;
        }
        v.repr = type.name === 'tuple' ? `(${parts.join(', ')}${size === 1n ? ',' : ''})` : `[${parts.join(', ')}]`;
        break;
      }
      case 'dict': {
        const N = L.threadNames;
        if (!N) break;
        if (depth >= MAX_DEPTH) {
          v.cut = true;
          break;
        }
        const items = dictItems(this.source, N, address);
        if (!items) break;
        const parts: string[] = [];
        for (const it of items.slice(0, MAX_ITEMS)) parts.push(`${this.itemRepr(it.key, depth, v)}: ${this.itemRepr(it.value, depth, v)}`);
        if (items.length > MAX_ITEMS) {
          parts.push('...');
          v.cut = true;
        }
        v.repr = `{${parts.join(', ')}}`;
        break;
      }
    }
    return v;
  }

  private itemRepr(address: bigint, depth: number, parent: ObjectValue): string {
    const item = this.read(address, depth + 1);
    if (item?.cut) parent.cut = true;
    if (!item) return '<unreadable>';
    return item.repr ?? `<${item.type} object at 0x${item.address.toString(16)}>`;
  }

  private listItems(list: bigint, n: number): Uint8Array | null {
    if (n === 0) return new Uint8Array(0);
    const p = this.source.tryRead(list + BigInt(this.L.values!.listItems), 8);
    const items = p ? new DataView(p.buffer, p.byteOffset, 8).getBigUint64(0, true) : 0n;
    return aligned(items) ? this.source.tryRead(items, n * 8) : null;
  }

  /** The type's name, and whether it is a built-in (static) type; null: not a type as expected. */
  private typeOf(type: bigint): { name: string; builtin: boolean } | null {
    if (this.types.has(type)) return this.types.get(type)!;
    let got: { name: string; builtin: boolean } | null = null;
    if (aligned(type)) {
      const T = this.L.type;
      const t = this.source.tryRead(type, Math.max(T.tpName, T.tpFlags) + 8);
      if (t) {
        const dv = new DataView(t.buffer, t.byteOffset, t.byteLength);
        const name = this.cString(dv.getBigUint64(T.tpName, true));
        if (name !== null) got = { name, builtin: (dv.getBigUint64(T.tpFlags, true) & HEAPTYPE) === 0n };
      }
    }
    this.types.set(type, got);
    return got;
  }

  /** A type's tp_name: a C string of printable ASCII (a module-qualified name for an extension's types). */
  private cString(address: bigint): string | null {
    if (address < 0x1000n || address >= 1n << 63n) return null;
    // (the name may end near the end of its mapping: shorter reads then)
    for (const n of [TYPE_NAME_BYTES, 16, 8]) {
      const b = this.source.tryRead(address, n);
      if (!b) continue;
      const end = b.indexOf(0);
      if (end <= 0) return null;
      let s = '';
      for (let i = 0; i < end; i++) {
        if (b[i]! < 0x20 || b[i]! > 0x7e) return null;
        s += String.fromCharCode(b[i]!);
      }
      return s;
    }
    return null;
  }

  /** An int's value (3.11: signed digit count in ob_size; 3.12+: lv_tag), or null. */
  private int(address: bigint): bigint | null {
    const N = this.L.threadNames;
    if (!N) return null;
    const head = this.source.tryRead(address, N.longDigits);
    if (!head) return null;
    const tag = new DataView(head.buffer, head.byteOffset, head.byteLength).getBigUint64(N.longSize, true);
    let negative: boolean;
    let count: bigint;
    if (N.longTagShift === null) {
      const size = BigInt.asIntN(64, tag);
      negative = size < 0n;
      count = negative ? -size : size;
    } else {
      // the low bits: 0 positive, 1 zero, 2 negative
      const sign = tag & 3n;
      if (sign === 3n) return null;
      if (sign === 1n) return 0n;
      negative = sign === 2n;
      count = tag >> BigInt(N.longTagShift);
    }
    if (count > BigInt(MAX_DIGITS)) return null;
    const n = Number(count);
    if (n === 0) return 0n;
    const digits = this.source.tryRead(address + BigInt(N.longDigits), n * 4);
    if (!digits) return null;
    const dv = new DataView(digits.buffer, digits.byteOffset, digits.byteLength);
    let v = 0n;
    for (let i = n - 1; i >= 0; i--) {
      const d = dv.getUint32(i * 4, true);
      if (d >= 2 ** N.digitBits) return null;
      v = (v << BigInt(N.digitBits)) | BigInt(d);
    }
    return negative ? -v : v;
  }

  private str(address: bigint, v: ObjectValue): void {
    const u = this.L.unicode;
    const head = this.source.tryRead(address, u.state + 4);
    if (!head) return;
    const dv = new DataView(head.buffer, head.byteOffset, head.byteLength);
    const length = BigInt.asIntN(64, dv.getBigUint64(u.length, true));
    const state = dv.getUint32(u.state, true);
    if (length < 0n || ((state >>> u.compactBit) & 1) === 0) return;
    const ascii = ((state >>> u.asciiBit) & 1) === 1;
    const kind = (state >>> u.kindShift) & 7;
    if (kind !== 1 && kind !== 2 && kind !== 4) return;
    const shown = Number(length > BigInt(MAX_STR_CHARS) ? BigInt(MAX_STR_CHARS) : length);
    const at = ascii ? u.asciiSize : u.compactSize;
    const bytes = this.source.tryRead(address, at + shown * kind);
    if (!bytes) return;
    // readPyString decodes the whole length: a cut str is decoded from its first characters
    const whole = new Uint8Array(bytes.length);
    whole.set(bytes);
    new DataView(whole.buffer).setBigUint64(u.length, BigInt(shown), true);
    try {
      const s = readPyString(new RegionMemory([{ address, bytes: whole }], 8), this.L, address);
      this.lastText = s;
      v.repr = strRepr(s) + (BigInt(shown) < length ? '...' : '');
      if (BigInt(shown) < length) v.cut = true;
    } catch {
      // (not a str as its header says)
    }
  }

  private bytes(address: bigint, size: bigint, v: ObjectValue): void {
    if (size < 0n || size > 1n << 40n) return;
    const shown = Number(size > BigInt(MAX_BYTES) ? BigInt(MAX_BYTES) : size);
    const b = shown === 0 ? new Uint8Array(0) : this.source.tryRead(address + BigInt(this.L.bytes.obSval), shown);
    if (!b) return;
    v.repr = bytesRepr(b) + (BigInt(shown) < size ? '...' : '');
    if (BigInt(shown) < size) v.cut = true;
  }
}
