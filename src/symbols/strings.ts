// Reading `str` and `bytes` objects out of copied target memory.
//
// A str is compact ASCII (1 byte per char right after PyASCIIObject), compact non-ASCII
// (latin-1, UCS-2 or UCS-4 right after PyCompactUnicodeObject), or non-compact ("legacy",
// e.g. str subclasses: a pointer at PyUnicodeObject.data to the characters). The header says
// which; everything about it is untrusted, so each claim is checked before it is used, and
// the character data must lie wholly inside the captured regions. There is no cap on length:
// a 100 KB qualname is read as it is.
//
// The *Extent functions answer the recorder's question "how many bytes does this object
// need?" from one read of the header, so a string costs one read when its data is inline and
// short enough to have come with the header, two otherwise.

import type { Layout } from '../layout/layout.js';
import type { RegionMemory } from '../walk/region-memory.js';
import { SymbolError, hex } from './location-table.js';

/** Where a str/bytes object's bytes are, as far as its header tells. */
export interface ObjectExtent {
  /**
   * Bytes of the object itself to copy from its address. For inline data this is where the
   * data starts (copy headerSize + dataLength bytes); for a legacy str it covers the data
   * pointer.
   */
  headerSize: number;
  /** null: the data is inline at address + headerSize; otherwise where it lives. */
  dataAddress: bigint | null;
  /** bytes of character/byte data (no terminating NUL) */
  dataLength: number;
}

/** Decoded PyASCIIObject header fields, checked for consistency. */
export interface StringHeader {
  length: number;
  kind: 1 | 2 | 4;
  compact: boolean;
  ascii: boolean;
}

function ptrSize(layout: Layout): number {
  return layout.pointerSize;
}

function readSsize(bytes: Uint8Array, offset: number, size: number): bigint {
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  return size === 8 ? dv.getBigInt64(offset, true) : BigInt(dv.getInt32(offset, true));
}

function readPtr(bytes: Uint8Array, offset: number, size: number): bigint {
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  return size === 8 ? dv.getBigUint64(offset, true) : BigInt(dv.getUint32(offset, true));
}

/**
 * Bytes a recorder must read at a str's address to call pyStringExtent on any str (compact or
 * legacy). Reading a little more lets short compact strings come along in the same read.
 */
export function pyStringHeaderSize(layout: Layout): number {
  const u = layout.unicode;
  return Math.max(u.length + ptrSize(layout), u.state + 4, u.asciiSize, u.compactSize, u.legacyData + ptrSize(layout));
}

/** Bytes a recorder must read at a bytes object's address to call pyBytesExtent. */
export function pyBytesHeaderSize(layout: Layout): number {
  return Math.max(layout.bytes.obSize + ptrSize(layout), layout.bytes.obSval);
}

/** Bytes needed to read length and state: the least any str header provides. */
function stringFieldsEnd(layout: Layout): number {
  return Math.max(layout.unicode.length + ptrSize(layout), layout.unicode.state + 4);
}

function where(address: bigint | undefined): string {
  return address === undefined ? 'str' : `str at ${hex(address)}`;
}

/** Decode and check the length and state fields of a str header. */
export function decodeStringHeader(header: Uint8Array, layout: Layout, address?: bigint): StringHeader {
  const u = layout.unicode;
  const need = stringFieldsEnd(layout);
  if (header.length < need) {
    throw new SymbolError(`${where(address)}: header has ${header.length} bytes, need ${need}`, address);
  }
  const lengthBig = readSsize(header, u.length, ptrSize(layout));
  const dv = new DataView(header.buffer, header.byteOffset, header.byteLength);
  const state = dv.getUint32(u.state, true);
  const kind = (state >>> u.kindShift) & 7;
  const compact = ((state >>> u.compactBit) & 1) === 1;
  const ascii = ((state >>> u.asciiBit) & 1) === 1;
  if (kind !== 1 && kind !== 2 && kind !== 4) {
    throw new SymbolError(`${where(address)}: kind ${kind} is not 1, 2 or 4 (state 0x${state.toString(16)})`, address);
  }
  if (ascii && kind !== 1) {
    throw new SymbolError(`${where(address)}: ascii flag set but kind is ${kind}, not 1 (state 0x${state.toString(16)})`, address);
  }
  if (lengthBig < 0n) throw new SymbolError(`${where(address)}: length ${lengthBig} is negative`, address);
  // Data must fit in a JS typed array view of the regions; anything beyond that cannot be in
  // a capture, so it is garbage, not a long string.
  if (lengthBig * BigInt(kind) > BigInt(Number.MAX_SAFE_INTEGER)) {
    throw new SymbolError(`${where(address)}: length ${lengthBig} × kind ${kind} bytes is not a size`, address);
  }
  return { length: Number(lengthBig), kind, compact, ascii };
}

/**
 * Where a str's characters are, from its header bytes (at least the length and state
 * fields; a legacy str also needs the data pointer — pyStringHeaderSize(layout) covers all).
 * Throws SymbolError if the header is inconsistent or too short.
 */
export function pyStringExtent(headerBytes: Uint8Array, layout: Layout, address?: bigint): ObjectExtent {
  const h = decodeStringHeader(headerBytes, layout, address);
  return extentOf(h, headerBytes, layout, address);
}

function extentOf(h: StringHeader, headerBytes: Uint8Array, layout: Layout, address: bigint | undefined): ObjectExtent {
  const u = layout.unicode;
  const dataLength = h.length * h.kind;
  if (h.compact) {
    return { headerSize: h.ascii ? u.asciiSize : u.compactSize, dataAddress: null, dataLength };
  }
  const end = u.legacyData + ptrSize(layout);
  if (headerBytes.length < end) {
    throw new SymbolError(
      `${where(address)}: non-compact str header has ${headerBytes.length} bytes, need ${end} for the data pointer`,
      address,
    );
  }
  const data = readPtr(headerBytes, u.legacyData, ptrSize(layout));
  if (data === 0n) {
    // 3.11 legacy strings that were never made "ready" have no data pointer yet.
    throw new SymbolError(`${where(address)}: non-compact str has a NULL data pointer`, address);
  }
  return { headerSize: end, dataAddress: data, dataLength };
}

/** Where a bytes object's data is, from its header bytes (pyBytesHeaderSize(layout) of them). */
export function pyBytesExtent(headerBytes: Uint8Array, layout: Layout, address?: bigint): ObjectExtent {
  const b = layout.bytes;
  const need = b.obSize + ptrSize(layout);
  const name = address === undefined ? 'bytes' : `bytes at ${hex(address)}`;
  if (headerBytes.length < need) {
    throw new SymbolError(`${name}: header has ${headerBytes.length} bytes, need ${need}`, address);
  }
  const size = readSsize(headerBytes, b.obSize, ptrSize(layout));
  if (size < 0n) throw new SymbolError(`${name}: ob_size ${size} is negative`, address);
  if (size > BigInt(Number.MAX_SAFE_INTEGER)) throw new SymbolError(`${name}: ob_size ${size} is not a size`, address);
  return { headerSize: b.obSval, dataAddress: null, dataLength: Number(size) };
}

function dataBytes(mem: RegionMemory, start: bigint, length: number, what: string, address: bigint): Uint8Array {
  const data = mem.bytes(start, length);
  if (data === null) {
    throw new SymbolError(
      `${what} at ${hex(address)}: ${length} data bytes at ${hex(start)}..${hex(start + BigInt(length))} are not in the captured regions`,
      address,
    );
  }
  return data;
}

// String.fromCharCode.apply takes its arguments on the stack: chunk to stay far below the limit.
const CHUNK = 8192;

function latin1(data: Uint8Array): string {
  let s = '';
  for (let i = 0; i < data.length; i += CHUNK) {
    s += String.fromCharCode.apply(null, data.subarray(i, i + CHUNK) as unknown as number[]);
  }
  return s;
}

function ucs2(data: Uint8Array): string {
  // Lone surrogates are valid in a Python str, so no UTF-16 decoder (it would replace them).
  const n = data.length >>> 1;
  const units = new Uint16Array(Math.min(n, CHUNK));
  let s = '';
  for (let i = 0; i < n; i += CHUNK) {
    const m = Math.min(CHUNK, n - i);
    for (let j = 0; j < m; j++) {
      const k = (i + j) * 2;
      units[j] = data[k]! | (data[k + 1]! << 8);
    }
    s += String.fromCharCode.apply(null, units.subarray(0, m) as unknown as number[]);
  }
  return s;
}

function ucs4(data: Uint8Array, address: bigint): string {
  const n = data.length >>> 2;
  const cps: number[] = [];
  let s = '';
  for (let i = 0; i < n; i++) {
    const k = i * 4;
    const cp = (data[k]! | (data[k + 1]! << 8) | (data[k + 2]! << 16) | (data[k + 3]! << 24)) >>> 0;
    if (cp > 0x10ffff) {
      throw new SymbolError(`str at ${hex(address)}: character ${i} is 0x${cp.toString(16)}, beyond U+10FFFF`, address);
    }
    cps.push(cp);
    if (cps.length === CHUNK) {
      s += String.fromCodePoint.apply(null, cps);
      cps.length = 0;
    }
  }
  if (cps.length) s += String.fromCodePoint.apply(null, cps);
  return s;
}

/**
 * The text of the str object at `address`. Throws SymbolError naming the address when the
 * header is not in the regions, the state bits are inconsistent, the length is negative, or
 * the `length × kind` data bytes are not wholly inside one captured region.
 */
export function readPyString(mem: RegionMemory, layout: Layout, address: bigint): string {
  if (address === 0n) throw new SymbolError('str at 0x0: NULL pointer', address);
  const fieldsEnd = stringFieldsEnd(layout);
  const fields = mem.bytes(address, fieldsEnd);
  if (fields === null) {
    throw new SymbolError(`str at ${hex(address)}: header (${fieldsEnd} bytes) is not in the captured regions`, address);
  }
  const h = decodeStringHeader(fields, layout, address);
  let header = fields;
  if (!h.compact) {
    const end = layout.unicode.legacyData + ptrSize(layout);
    const longer = mem.bytes(address, end);
    if (longer === null) {
      throw new SymbolError(
        `str at ${hex(address)}: data pointer of the non-compact str (${end} bytes of header) is not in the captured regions`,
        address,
      );
    }
    header = longer;
  }
  const ext = extentOf(h, header, layout, address);
  const start = ext.dataAddress ?? address + BigInt(ext.headerSize);
  const data = dataBytes(mem, start, ext.dataLength, 'str', address);
  if (h.kind === 1) {
    if (h.ascii) {
      for (let i = 0; i < data.length; i++) {
        if (data[i]! > 0x7f) {
          throw new SymbolError(`str at ${hex(address)}: ascii str has byte 0x${data[i]!.toString(16)} at index ${i}`, address);
        }
      }
    }
    return latin1(data);
  }
  if (h.kind === 2) return ucs2(data);
  return ucs4(data, address);
}

/** The contents of the bytes object at `address` (a view into the regions, not a copy). */
export function readPyBytes(mem: RegionMemory, layout: Layout, address: bigint): Uint8Array {
  if (address === 0n) throw new SymbolError('bytes at 0x0: NULL pointer', address);
  const need = layout.bytes.obSize + ptrSize(layout);
  const header = mem.bytes(address, need);
  if (header === null) {
    throw new SymbolError(`bytes at ${hex(address)}: header (${need} bytes) is not in the captured regions`, address);
  }
  const ext = pyBytesExtent(header, layout, address);
  return dataBytes(mem, address + BigInt(ext.headerSize), ext.dataLength, 'bytes', address);
}
