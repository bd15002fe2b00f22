// The native object record (record type 4, format 1.5; docs/capture-format.md, "Native object
// record"): a mapped object as the capture keeps it for native stacks — its executable mapping,
// load bias, path and build id, its unwind table and its function symbols — so that a capture
// is unwound and named offline with no file of the recording machine at hand.
//
// The table and the symbols are written column by column, each column among its own kind: the
// table's distinct rules once (an object of 65,000 rows has ~300: a function's prologue and
// epilogue take the same few everywhere), then every row's start as a gap from the previous row's,
// then every row's rule as its number in that list (this took 27–31% fewer deflated bytes than
// the five fields of every row, on python3.11, libcrypto and libc); symbols' starts as gaps,
// sizes, and names front-coded against the previous name. python3.11's executable (65,847 rows,
// 1,473 symbols) makes a record of ~200 KB raw, ~75 KB deflated.
//
// Everything read here is untrusted: every count is bounded by the bytes left, and by a budget
// of the block's object records (NativeBudget), before anything is allocated for it: a row
// of two bytes read becomes 28 bytes of table, a name of a few bytes can share a long prefix.

import { ByteReader, ByteWriter, DecodeError, MAX_BLOCK_RAW, checkU64 } from './format.js';
import type { NativeObject, NativeSymbols } from '../native/objects.js';
import { ROW_FIELDS, type UnwindTable } from '../native/unwind-table.js';

/**
 * Rows of the tables of a block's object records, in all (so also of one object): python3.11 has
 * 66,000, libcrypto 87,000; the largest libraries a few million. With the symbols' limits, they
 * bound what decoding one block's object records allocates (~120 MB for the rows at most).
 */
export const MAX_NATIVE_ROWS = 1 << 22;
/** Symbols of a block's object records, in all. */
export const MAX_NATIVE_SYMBOLS = 1 << 22;
/** UTF-8 bytes of one symbol name (mangled C++ names reach a few KB). */
export const MAX_SYMBOL_NAME = 1 << 16;
/** UTF-8 bytes of the names of a block's object records, in all, as made (front-coding lets a few bytes stand for a long name). */
export const MAX_SYMBOL_BYTES = MAX_BLOCK_RAW;

/** What a block's object records have made so far, against the limits above (a reader makes one per block). */
export class NativeBudget {
  rows = 0;
  symbols = 0;
  nameBytes = 0;

  charge(what: 'rows' | 'symbols' | 'nameBytes', n: number, at: number): void {
    this[what] += n;
    const limit = what === 'rows' ? MAX_NATIVE_ROWS : what === 'symbols' ? MAX_NATIVE_SYMBOLS : MAX_SYMBOL_BYTES;
    if (this[what] > limit) throw new DecodeError(`the block's native object records hold more than ${limit} ${what === 'rows' ? 'unwind rows' : what === 'symbols' ? 'symbols' : 'bytes of symbol names'}`, at);
  }

  /** Would an object of these sizes pass the limits? (the writer ends a block before one would) */
  fits(o: NativeObject): boolean {
    return this.rows + o.table.starts.length <= MAX_NATIVE_ROWS && this.symbols + o.symbols.starts.length <= MAX_NATIVE_SYMBOLS && this.nameBytes + nameBytes(o) <= MAX_SYMBOL_BYTES;
  }

  add(o: NativeObject): void {
    this.rows += o.table.starts.length;
    this.symbols += o.symbols.starts.length;
    this.nameBytes += nameBytes(o);
  }
}

/** UTF-8 bytes of an object's symbol names. */
function nameBytes(o: NativeObject): number {
  let n = 0;
  for (const name of o.symbols.names) n += utf8Length(name);
  return n;
}

const U64_MAX = (1n << 64n) - 1n;
const I64_MIN = -(1n << 63n);
const I64_MAX = (1n << 63n) - 1n;
const textEncoder = new TextEncoder();
const textDecoder = new TextDecoder();

/** Checks an object from the recorder, so that what is written reads back as the same object. */
export function checkNativeObject(o: NativeObject): void {
  checkU64(o?.start, 'native object start');
  checkU64(o.end, 'native object end');
  if (o.end <= o.start) throw new RangeError(`native object ${String(o.path)}: end 0x${o.end.toString(16)} is not past start 0x${o.start.toString(16)}`);
  if (typeof o.bias !== 'bigint' || o.bias < I64_MIN || o.bias > I64_MAX) throw new RangeError(`native object bias must be a bigint in [-2^63, 2^63) (got ${String(o.bias)})`);
  if (typeof o.path !== 'string') throw new TypeError('native object path must be a string');
  if (o.buildId !== null && typeof o.buildId !== 'string') throw new TypeError('native object buildId must be a string or null');
  const t = o.table;
  if (!(t?.starts instanceof BigUint64Array) || !(t.rules instanceof Int32Array)) throw new TypeError('native object table must be {starts: BigUint64Array, rules: Int32Array}');
  const rows = t.starts.length;
  if (t.rules.length !== rows * ROW_FIELDS) throw new RangeError(`native object table: ${rows} starts but ${t.rules.length} rule fields (${ROW_FIELDS} a row)`);
  if (rows > MAX_NATIVE_ROWS) throw new RangeError(`native object table: ${rows} rows, more than a block may hold (${MAX_NATIVE_ROWS})`);
  for (let i = 1; i < rows; i++) if (t.starts[i]! < t.starts[i - 1]!) throw new RangeError(`native object table: row ${i} starts below row ${i - 1} (rows must be sorted)`);
  const s = o.symbols;
  if (!(s?.starts instanceof BigUint64Array) || !(s.sizes instanceof Uint32Array) || !Array.isArray(s.names)) throw new TypeError('native object symbols must be {starts: BigUint64Array, sizes: Uint32Array, names: string[]}');
  const count = s.starts.length;
  if (s.sizes.length !== count || s.names.length !== count) throw new RangeError(`native object symbols: ${count} starts, ${s.sizes.length} sizes, ${s.names.length} names`);
  if (count > MAX_NATIVE_SYMBOLS) throw new RangeError(`native object symbols: ${count}, more than a block may hold (${MAX_NATIVE_SYMBOLS})`);
  for (let i = 1; i < count; i++) if (s.starts[i]! < s.starts[i - 1]!) throw new RangeError(`native object symbols: symbol ${i} starts below symbol ${i - 1} (symbols must be sorted)`);
  let total = 0;
  for (let i = 0; i < count; i++) {
    const name = s.names[i];
    if (typeof name !== 'string') throw new TypeError(`native object symbols: name ${i} is not a string`);
    const n = utf8Length(name);
    if (n > MAX_SYMBOL_NAME) throw new RangeError(`native object symbols: name ${i} is ${n} bytes, more than ${MAX_SYMBOL_NAME}`);
    total += n;
  }
  if (total > MAX_SYMBOL_BYTES) throw new RangeError(`native object symbols: ${total} bytes of names, more than ${MAX_SYMBOL_BYTES}`);
}

/** Bytes of a string's UTF-8, as TextEncoder writes it (a lone surrogate: U+FFFD, 3 bytes). */
function utf8Length(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c < 0xdc00 && i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      n += 4;
      i++;
    } else n += 3;
  }
  return n;
}

/** zigzag of a signed 64-bit value, as a varint */
function writeSigned64(w: ByteWriter, v: bigint): void {
  w.big(v >= 0n ? v << 1n : (-v << 1n) - 1n);
}

function readSigned64(r: ByteReader, what: string): bigint {
  const z = r.big(what);
  return z & 1n ? -((z + 1n) >> 1n) : z >> 1n;
}

/** Starts ascending, as gaps from the previous (the first from 0). */
function writeStarts(w: ByteWriter, starts: BigUint64Array): void {
  let prev = 0n;
  for (let i = 0; i < starts.length; i++) {
    const v = starts[i]!;
    w.big(v - prev);
    prev = v;
  }
}

function readStarts(r: ByteReader, count: number, what: string): BigUint64Array {
  const out = new BigUint64Array(count);
  let prev = 0n;
  for (let i = 0; i < count; i++) {
    const at = r.pos;
    const v = prev + r.big(`${what} ${i} start`);
    if (v > U64_MAX) throw new DecodeError(`${what} ${i} starts past 2^64`, at);
    out[i] = v;
    prev = v;
  }
  return out;
}

export function writeNativeObjectRecord(w: ByteWriter, o: NativeObject): void {
  w.big(o.start);
  w.big(o.end);
  writeSigned64(w, o.bias);
  w.string(o.path);
  if (o.buildId === null) w.u8(0);
  else {
    w.u8(1);
    w.string(o.buildId);
  }
  const t = o.table;
  const rows = t.starts.length;
  // the distinct rules, numbered in order of first use
  const numbers = new Map<string, number>();
  const index = new Uint32Array(rows);
  const distinct: number[] = [];
  for (let i = 0; i < rows; i++) {
    const at = i * ROW_FIELDS;
    const key = `${t.rules[at]},${t.rules[at + 1]},${t.rules[at + 2]},${t.rules[at + 3]},${t.rules[at + 4]}`;
    let k = numbers.get(key);
    if (k === undefined) {
      k = numbers.size;
      numbers.set(key, k);
      distinct.push(i);
    }
    index[i] = k;
  }
  w.uint(rows);
  w.uint(distinct.length);
  for (const i of distinct) for (let f = 0; f < ROW_FIELDS; f++) w.sint(t.rules[i * ROW_FIELDS + f]!);
  writeStarts(w, t.starts);
  for (let i = 0; i < rows; i++) w.uint(index[i]!);
  const s = o.symbols;
  const count = s.starts.length;
  w.uint(count);
  writeStarts(w, s.starts);
  for (let i = 0; i < count; i++) w.uint(s.sizes[i]!);
  let prev = new Uint8Array(0);
  for (let i = 0; i < count; i++) {
    const name = textEncoder.encode(s.names[i]!);
    let shared = 0;
    const most = Math.min(prev.length, name.length);
    while (shared < most && prev[shared] === name[shared]) shared++;
    w.uint(shared);
    w.uint(name.length - shared);
    w.bytes(name.subarray(shared));
    prev = name;
  }
}

/** The object record in `r` (its body); `budget`: what the block's earlier object records made. */
export function readNativeObjectRecord(r: ByteReader, budget: NativeBudget = new NativeBudget()): NativeObject {
  const rangeAt = r.pos;
  const start = r.big('object start');
  const end = r.big('object end');
  if (end <= start) throw new DecodeError(`object end 0x${end.toString(16)} is not past its start 0x${start.toString(16)}`, rangeAt);
  const bias = readSigned64(r, 'object bias');
  const path = r.string('object path');
  const idAt = r.pos;
  const hasId = r.u8('object build id marker');
  if (hasId > 1) throw new DecodeError(`object build id marker ${hasId} (0 or 1)`, idAt);
  const buildId = hasId ? r.string('object build id') : null;

  // a row takes at least 2 bytes (its start's gap, its rule's number), a distinct rule 5, a symbol
  // 4 (start, size, shared, suffix length)
  const rowsAt = r.pos;
  const rows = r.count('unwind rows', 2);
  budget.charge('rows', rows, rowsAt);
  const distinctAt = r.pos;
  const distinct = r.count('unwind rules', ROW_FIELDS);
  if (distinct > rows) throw new DecodeError(`${distinct} distinct unwind rules for ${rows} rows`, distinctAt);
  const list = new Int32Array(distinct * ROW_FIELDS);
  for (let k = 0; k < list.length; k++) {
    const at = r.pos;
    const v = r.sint('unwind rule field');
    if (v < -0x8000_0000 || v > 0x7fff_ffff) throw new DecodeError(`unwind rule ${Math.floor(k / ROW_FIELDS)} field ${k % ROW_FIELDS}: ${v} is not a 32-bit value`, at);
    list[k] = v;
  }
  const starts = readStarts(r, rows, 'unwind row');
  const rules = new Int32Array(rows * ROW_FIELDS);
  for (let i = 0; i < rows; i++) {
    const at = r.pos;
    const k = r.uint('unwind row rule');
    if (k >= distinct) throw new DecodeError(`unwind row ${i}: rule ${k} of ${distinct}`, at);
    rules.set(list.subarray(k * ROW_FIELDS, (k + 1) * ROW_FIELDS), i * ROW_FIELDS);
  }
  const table: UnwindTable = { starts, rules };

  const countAt = r.pos;
  const count = r.count('symbols', 4);
  budget.charge('symbols', count, countAt);
  const symStarts = readStarts(r, count, 'symbol');
  const sizes = new Uint32Array(count);
  for (let i = 0; i < count; i++) {
    const at = r.pos;
    const v = r.uint('symbol size');
    if (v > 0xffff_ffff) throw new DecodeError(`symbol ${i}: size ${v} past 2^32`, at);
    sizes[i] = v;
  }
  const names: string[] = new Array(count);
  let prev = new Uint8Array(0);
  for (let i = 0; i < count; i++) {
    const at = r.pos;
    const shared = r.uint('symbol name shared bytes');
    if (shared > prev.length) throw new DecodeError(`symbol ${i}: shares ${shared} bytes of a previous name of ${prev.length}`, at);
    const suffix = r.bytes(r.uint('symbol name length'), 'symbol name');
    const n = shared + suffix.length;
    if (n > MAX_SYMBOL_NAME) throw new DecodeError(`symbol ${i}: a name of ${n} bytes, more than ${MAX_SYMBOL_NAME}`, at);
    budget.charge('nameBytes', n, at);
    const name = new Uint8Array(n);
    name.set(prev.subarray(0, shared));
    name.set(suffix, shared);
    names[i] = textDecoder.decode(name);
    prev = name;
  }
  const symbols: NativeSymbols = { starts: symStarts, sizes, names };
  // bytes left in the body: fields of a later minor version, ignored
  return { start, end, bias, path, buildId, table, symbols };
}

/** Do [a.start, a.end) and [b.start, b.end) share an address? */
export function objectsOverlap(a: { start: bigint; end: bigint }, b: { start: bigint; end: bigint }): boolean {
  return a.start < b.end && b.start < a.end;
}

/**
 * The objects in force after `added` (docs/capture-format.md: a later object record replaces
 * every earlier one whose range overlaps it — a library unloaded, another mapped there): the
 * current ones it does not overlap, and it; sorted by start.
 */
export function replaceObjects(current: readonly NativeObject[], added: NativeObject): NativeObject[] {
  const out = current.filter((o) => !objectsOverlap(o, added));
  out.push(added);
  out.sort((a, b) => (a.start < b.start ? -1 : a.start > b.start ? 1 : 0));
  return out;
}
