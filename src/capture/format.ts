// The byte-level vocabulary of a .pyuw capture: constants, limits, checksums, varints, the
// file header and block headers. The writer and the reader both build on this file so that
// the two can never disagree about a number; docs/capture-format.md is its prose twin.
//
// Everything a reader parses here comes from outside: every length is checked against what
// is left and against a fixed limit before it is used, and every error names the byte.

// (crc-32's own file, the one its `main` names: a bundler for a neutral platform reads no `main`)
import { BLOCK_SECTIONS, FORM_PATCH, FORM_WHOLE, FRAME_CHANGED, FRAME_IMAGE, FRAME_LITERAL, KIND_FRAMES, KIND_LITERAL, KIND_PATCH, MAX_BLOCK_RAW, RECORD_CODE, RECORD_NATIVE_OBJECT, RECORD_SAMPLE, RECORD_THREAD_NAME } from './codes.js';

import CRC32 from 'crc-32/crc32.js';
import { Inflate, deflateSync, inflateSync } from 'fflate';
import type { LayoutSource } from '../layout/layout.js';
import { CaptureError, SAMPLE_FACTS, SAMPLING_MODES, type CaptureHeader, type CodeRecord, type Region, type ThreadNameRecord, type SampleFact, type SamplingMode } from './types.js';

// ---------------------------------------------------------------------------------------
// Constants

/**
 * First 8 bytes of every capture. Like PNG's signature: the high first byte catches
 * 7-bit transfers and the CR LF / SUB bytes catch text-mode line-ending translation.
 */
export const FILE_MAGIC = Uint8Array.of(0x89, 0x50, 0x59, 0x55, 0x57, 0x0d, 0x0a, 0x1a); // \x89 P Y U W \r \n \x1a
/** First 4 bytes of every block header; the reader scans for them to resynchronize. */
export const BLOCK_MAGIC = Uint8Array.of(0x50, 0x59, 0x55, 0x42); // "PYUB"

/** Readers refuse a different major version; any minor version of their major is readable. */
export const FORMAT_MAJOR = 1;
export const FORMAT_MINOR = 5;
/**
 * The minor version written for a capture without native stacks (no `native` in its header):
 * such a capture holds nothing 1.5 added, and is written byte for byte as 1.4 wrote it.
 */
export const FORMAT_MINOR_WITHOUT_NATIVE = 4;

/** magic(8) major(2) minor(2) body length(4) */
export const HEADER_PREFIX_SIZE = 16;
/** magic(4) type(1) compression(1) reserved(2) seq(4) stored(4) raw(4) payload crc(4) header crc(4) */
export const BLOCK_HEADER_SIZE = 28;

export const BLOCK_TYPE = { RECORDS: 1, END: 2, SECTIONS: BLOCK_SECTIONS } as const;
export const COMPRESSION = { NONE: 0, DEFLATE: 1 } as const;
/**
 * Block header flags (byte 6, 0 in files of earlier writers: nothing said). NO_CODES: the writer
 * put no code record (and, 1.5, no native object record) in this block — a reader that spreads blocks over workers need not inflate
 * it to find the code records the others must have. A claim, not a proof: a worker that finds
 * code records in such a block says so, and the capture is processed in one thread.
 */
export const BLOCK_FLAG = { NO_CODES: 1 } as const;
export const RECORD_TYPE = { CODE: RECORD_CODE, SAMPLE: RECORD_SAMPLE, THREAD_NAME: RECORD_THREAD_NAME, NATIVE_OBJECT: RECORD_NATIVE_OBJECT } as const;
export const SAMPLE_FORM = { WHOLE: FORM_WHOLE, PATCH: FORM_PATCH } as const;
export const REGION_KIND = { LITERAL: KIND_LITERAL, PATCH: KIND_PATCH, FRAMES: KIND_FRAMES } as const;
export const FRAME_OP = { LITERAL: FRAME_LITERAL, IMAGE: FRAME_IMAGE, CHANGED: FRAME_CHANGED } as const;
export const RECORDER_STATUS_CODE = { ok: 0, torn: 1 } as const;

/** Header body bigger than this is not a header a writer made (a layout blob is ~1 KB). */
export const MAX_HEADER_BODY = 16 << 20;
/**
 * A block's raw (and so its stored) length. It bounds the memory one block can ask for and,
 * with the bounded inflate below, the time a crafted deflate stream can cost.
 */
export { MAX_BLOCK_RAW };
/**
 * A block ends when its raw records reach this size (or, in the recorder, after a second).
 * The recorder deflates each block on its sampling thread: at 128 KB that is ~3 ms, short of
 * the sampler's catch-up window (sampler.ts CATCH_UP_MS), where a 1 MB block took 10-30 ms
 * and cost ticks. Each block starts each thread's samples whole again, which at this size
 * adds a few percent to a capture.
 */
export const DEFAULT_BLOCK_BYTES = 128 << 10;
export const DEFAULT_COMPRESSION_LEVEL = 6;

const U64_MAX = (1n << 64n) - 1n;

// ---------------------------------------------------------------------------------------
// Checksums and small helpers

/** CRC-32 (IEEE 802.3, as zlib/PNG), unsigned. */
export function crc32(bytes: Uint8Array): number {
  return CRC32.buf(bytes) >>> 0;
}

export function hex32(n: number): string {
  return '0x' + (n >>> 0).toString(16).padStart(8, '0');
}

/** "89 50 59 … ("?PYU…")": how a file's first bytes look, for "not a capture" errors. */
export function describeBytes(bytes: Uint8Array, max = 16): string {
  const shown = bytes.subarray(0, max);
  const hexes = Array.from(shown, (b) => b.toString(16).padStart(2, '0')).join(' ');
  const text = Array.from(shown, (b) => (b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : '.')).join('');
  return `${hexes}${bytes.length > max ? ' …' : ''} "${text}"`;
}

function startsWith(bytes: Uint8Array, at: number, magic: Uint8Array): boolean {
  if (at < 0 || at + magic.length > bytes.length) return false;
  for (let i = 0; i < magic.length; i++) if (bytes[at + i] !== magic[i]) return false;
  return true;
}

const textEncoder = new TextEncoder();
const textDecoder = new TextDecoder(); // not fatal: a bad byte becomes U+FFFD, never an exception

// ---------------------------------------------------------------------------------------
// Writing bytes

/** An append-only byte buffer with LEB128 varints. */
export class ByteWriter {
  private buf: Uint8Array;
  length = 0;

  constructor(initial = 256) {
    this.buf = new Uint8Array(initial);
  }

  private ensure(n: number): void {
    const need = this.length + n;
    if (need <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < need) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.buf.subarray(0, this.length));
    this.buf = next;
  }

  /** The bytes written so far (a view: valid until the next write or reset). */
  view(): Uint8Array {
    return this.buf.subarray(0, this.length);
  }

  reset(): void {
    this.length = 0;
  }

  u8(v: number): void {
    this.ensure(1);
    this.buf[this.length++] = v;
  }

  u32(v: number): void {
    this.ensure(4);
    const b = this.buf;
    const p = this.length;
    b[p] = v & 0xff;
    b[p + 1] = (v >>> 8) & 0xff;
    b[p + 2] = (v >>> 16) & 0xff;
    b[p + 3] = (v >>> 24) & 0xff;
    this.length = p + 4;
  }

  bytes(src: Uint8Array): void {
    this.ensure(src.length);
    this.buf.set(src, this.length);
    this.length += src.length;
  }

  /** Bytes [start, end) of `src` (short stretches copied here: a view per stretch costs more). */
  range(src: Uint8Array, start: number, end: number): void {
    const n = end - start;
    if (n > 64) {
      this.bytes(src.subarray(start, end));
      return;
    }
    this.ensure(n);
    const b = this.buf;
    let p = this.length;
    for (let i = start; i < end; i++) b[p++] = src[i]!;
    this.length = p;
  }

  /** Unsigned LEB128 of a non-negative safe integer. */
  uint(v: number): void {
    this.ensure(8);
    const b = this.buf;
    let p = this.length;
    // above 2^31 bit operators would wrap: divide instead
    while (v >= 0x80000000) {
      b[p++] = (v % 128) | 0x80;
      v = Math.floor(v / 128);
    }
    while (v >= 0x80) {
      b[p++] = (v & 0x7f) | 0x80;
      v >>>= 7;
    }
    b[p++] = v;
    this.length = p;
  }

  /** Unsigned LEB128 of a 64-bit value (at most 10 bytes). */
  big(v: bigint): void {
    if (v <= 0x1f_ffff_ffff_ffffn) {
      this.uint(Number(v));
      return;
    }
    this.ensure(10);
    while (v >= 0x80n) {
      this.buf[this.length++] = Number(v & 0x7fn) | 0x80;
      v >>= 7n;
    }
    this.buf[this.length++] = Number(v);
  }

  /** Zigzag (0, -1, 1, -2, … → 0, 1, 2, 3, …) then LEB128, for a signed safe integer. */
  sint(v: number): void {
    if (v >= 0 && v <= 0xf_ffff_ffff_ffff) this.uint(v * 2);
    else if (v < 0 && v >= -0xf_ffff_ffff_ffff) this.uint(-v * 2 - 1);
    else this.big(v >= 0 ? BigInt(v) * 2n : -BigInt(v) * 2n - 1n); // |v| ≥ 2^52: zigzag leaves 2^53
  }

  /** varint length + UTF-8 */
  string(s: string): void {
    const utf8 = textEncoder.encode(s);
    this.uint(utf8.length);
    this.bytes(utf8);
  }
}

/** Bytes a varint of `v` takes, for the writer's size estimates. */
export function uintSize(v: number): number {
  let n = 1;
  while (v >= 128) {
    v = Math.floor(v / 128);
    n++;
  }
  return n;
}

export function bigSize(v: bigint): number {
  // (a 64-bit value that fits a double exactly, as every user-space address does, is sized
  // as a number: shifting a bigint allocates)
  if (v >= 0n && v <= 0x1f_ffff_ffff_ffffn) return uintSize(Number(v));
  let n = 1;
  while (v >= 128n) {
    v >>= 7n;
    n++;
  }
  return n;
}

// ---------------------------------------------------------------------------------------
// Reading bytes

/** A malformed payload: `at` is the byte offset inside the buffer being decoded. */
export class DecodeError extends Error {
  override name = 'DecodeError';
  constructor(
    message: string,
    readonly at: number,
  ) {
    super(message);
  }
}

/** A bounds-checked cursor over one buffer; every read past `end` is a DecodeError. */
export class ByteReader {
  pos: number;

  constructor(
    readonly buf: Uint8Array,
    pos = 0,
    readonly end = buf.length,
  ) {
    this.pos = pos;
  }

  get remaining(): number {
    return this.end - this.pos;
  }

  fail(message: string, at = this.pos): never {
    throw new DecodeError(message, at);
  }

  u8(what: string): number {
    if (this.pos >= this.end) this.fail(`${what}: the data ends here`);
    return this.buf[this.pos++]!;
  }

  u32(what: string): number {
    if (this.end - this.pos < 4) this.fail(`${what}: the data ends here`);
    const b = this.buf;
    const p = this.pos;
    this.pos = p + 4;
    return (b[p]! | (b[p + 1]! << 8) | (b[p + 2]! << 16) | (b[p + 3]! << 24)) >>> 0;
  }

  /** `n` bytes as a view into the buffer (no copy). */
  bytes(n: number, what: string): Uint8Array {
    if (n > this.end - this.pos) this.fail(`${what}: ${n} bytes wanted, ${this.end - this.pos} left`);
    const v = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    return v;
  }

  /** Unsigned LEB128 no larger than 2^53 − 1. */
  uint(what: string): number {
    const start = this.pos;
    const b = this.buf;
    let result = 0;
    let scale = 1;
    // 8 bytes carry 56 bits: enough for 2^53; more is not a number this format writes
    for (let i = 0; i < 8; i++) {
      if (this.pos >= this.end) this.fail(`${what}: the data ends inside a varint`, start);
      const byte = b[this.pos++]!;
      result += (byte & 0x7f) * scale;
      if (byte < 0x80) {
        if (result > Number.MAX_SAFE_INTEGER) this.fail(`${what}: varint exceeds 2^53`, start);
        return result;
      }
      scale *= 128;
    }
    return this.fail(`${what}: varint longer than 8 bytes`, start);
  }

  /** Unsigned LEB128 of a 64-bit value. */
  big(what: string): bigint {
    const start = this.pos;
    const b = this.buf;
    // fast path: up to 7 bytes (49 bits) fits a double exactly — every user-space address
    let result = 0;
    let scale = 1;
    for (let i = 0; i < 7; i++) {
      if (this.pos >= this.end) this.fail(`${what}: the data ends inside a varint`, start);
      const byte = b[this.pos++]!;
      result += (byte & 0x7f) * scale;
      if (byte < 0x80) return BigInt(result);
      scale *= 128;
    }
    let big = BigInt(result);
    let shift = 49n;
    for (let i = 7; i < 10; i++) {
      if (this.pos >= this.end) this.fail(`${what}: the data ends inside a varint`, start);
      const byte = b[this.pos++]!;
      big |= BigInt(byte & 0x7f) << shift;
      if (byte < 0x80) {
        if (big > U64_MAX) this.fail(`${what}: varint exceeds 64 bits`, start);
        return big;
      }
      shift += 7n;
    }
    return this.fail(`${what}: varint longer than 10 bytes`, start);
  }

  /** Zigzag LEB128 of a signed safe integer. */
  sint(what: string): number {
    const start = this.pos;
    const b = this.buf;
    // fast path: up to 7 bytes (49 bits) in a double
    let result = 0;
    let scale = 1;
    for (let i = 0; i < 7 && this.pos < this.end; i++) {
      const byte = b[this.pos++]!;
      result += (byte & 0x7f) * scale;
      if (byte < 0x80) return result % 2 === 1 ? -(result + 1) / 2 : result / 2;
      scale *= 128;
    }
    this.pos = start;
    const z = this.big(what);
    const v = z & 1n ? -(z >> 1n) - 1n : z >> 1n;
    if (v > BigInt(Number.MAX_SAFE_INTEGER) || v < BigInt(Number.MIN_SAFE_INTEGER)) this.fail(`${what}: value exceeds 2^53`, start);
    return Number(v);
  }

  /** A count of items that each take at least `minBytes`: a larger count cannot be honest. */
  count(what: string, minBytes: number): number {
    const start = this.pos;
    const n = this.uint(what);
    if (n * minBytes > this.end - this.pos) this.fail(`${what}: ${n} items cannot fit in the ${this.end - this.pos} bytes left`, start);
    return n;
  }

  string(what: string): string {
    const n = this.uint(`${what} length`);
    const bytes = this.bytes(n, what);
    // a capture may be read where it lies in a SharedArrayBuffer (a page's processing workers
    // share it); browsers' TextDecoder refuses views of shared memory: a name is copied out first
    return textDecoder.decode(bytes.buffer instanceof ArrayBuffer ? bytes : bytes.slice());
  }
}

// ---------------------------------------------------------------------------------------
// Values the writer is handed: checked before they reach the file, so that what is written
// always reads back as the same value.

export function checkU64(v: unknown, what: string): bigint {
  if (typeof v !== 'bigint' || v < 0n || v > U64_MAX) throw new RangeError(`${what} must be a bigint in [0, 2^64) (got ${String(v)})`);
  return v;
}

export function checkUint(v: unknown, what: string): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) throw new RangeError(`${what} must be a non-negative safe integer (got ${String(v)})`);
  return v;
}

export function checkRegions(regions: unknown, what: string): Region[] {
  if (!Array.isArray(regions)) throw new TypeError(`${what} must be an array of regions`);
  // (a loop whose messages are made only on failure: this runs for every region of every sample)
  for (let i = 0; i < regions.length; i++) {
    const r = regions[i] as Region;
    const address: unknown = r?.address;
    if (typeof address !== 'bigint' || address < 0n || address > U64_MAX) checkU64(address, `${what}[${i}].address`);
    if (!(r.bytes instanceof Uint8Array)) throw new TypeError(`${what}[${i}].bytes must be a Uint8Array`);
    if (r.bytes.length > MAX_BLOCK_RAW) throw new RangeError(`${what}[${i}] is ${r.bytes.length} bytes: more than a block may hold (${MAX_BLOCK_RAW})`);
  }
  return regions as Region[];
}

// ---------------------------------------------------------------------------------------
// Literal regions and code records (code records are never patched: each is copied once)

export function writeLiteralRegion(w: ByteWriter, r: Region): void {
  w.big(r.address);
  w.uint(r.bytes.length);
  w.bytes(r.bytes);
}

/** A region whose bytes are a view into the payload (no copy). */
export function readLiteralRegion(r: ByteReader, what: string): Region {
  const address = r.big(`${what} address`);
  const n = r.uint(`${what} length`);
  return { address, bytes: r.bytes(n, `${what} bytes`) };
}

export function writeCodeRecord(w: ByteWriter, rec: CodeRecord): void {
  w.big(rec.address);
  w.uint(rec.regions.length);
  for (const r of rec.regions) writeLiteralRegion(w, r);
}

export function readCodeRecord(r: ByteReader): CodeRecord {
  const address = r.big('code address');
  const n = r.count('code region count', 2);
  const regions: Region[] = new Array(n);
  for (let i = 0; i < n; i++) regions[i] = readLiteralRegion(r, `code region ${i}`);
  return { address, regions };
}

export function checkCodeRecord(rec: CodeRecord): void {
  checkU64(rec?.address, 'code record address');
  checkRegions(rec.regions, 'code record regions');
}

// ---------------------------------------------------------------------------------------
// Thread-name records (format 1.1)

export function writeThreadNameRecord(w: ByteWriter, rec: ThreadNameRecord): void {
  w.uint(rec.time);
  w.big(rec.interpreterId);
  w.big(rec.threadId);
  w.big(rec.nativeThreadId);
  w.string(rec.name);
}

export function readThreadNameRecord(r: ByteReader): ThreadNameRecord {
  const time = r.uint('thread name time');
  const interpreterId = r.big('thread name interpreterId');
  const threadId = r.big('thread name threadId');
  const nativeThreadId = r.big('thread name nativeThreadId');
  const name = r.string('thread name');
  return { time, interpreterId, threadId, nativeThreadId, name };
}

export function checkThreadNameRecord(rec: ThreadNameRecord): void {
  checkUint(rec?.time, 'thread name time');
  checkU64(rec.interpreterId, 'thread name interpreterId');
  checkU64(rec.threadId, 'thread name threadId');
  checkU64(rec.nativeThreadId, 'thread name nativeThreadId');
  if (typeof rec.name !== 'string') throw new TypeError(`thread name: expected a string, got ${typeof rec.name}`);
}

// ---------------------------------------------------------------------------------------
// File header

/** What the header says besides the CaptureHeader itself. */
export interface HeaderInfo {
  header: CaptureHeader;
  major: number;
  minor: number;
  /** byte offset of the first block */
  end: number;
}

export function encodeHeader(h: CaptureHeader): Uint8Array {
  const src = h.layoutSource;
  let layout: Record<string, unknown>;
  let blob: Uint8Array = new Uint8Array(0);
  if (src?.kind === 'debug-offsets') {
    if (!(src.bytes instanceof Uint8Array)) throw new TypeError('header.layoutSource.bytes must be a Uint8Array');
    layout = { kind: src.kind };
    blob = src.bytes;
  } else if (src?.kind === 'builtin') {
    if (typeof src.id !== 'string') throw new TypeError('header.layoutSource.id must be a string');
    checkUint(src.versionHex, 'header.layoutSource.versionHex');
    layout = { kind: src.kind, id: src.id, versionHex: src.versionHex };
  } else {
    throw new TypeError(`header.layoutSource.kind must be "debug-offsets" or "builtin"`);
  }
  if (h.pointerSize !== 4 && h.pointerSize !== 8) throw new RangeError(`header.pointerSize must be 4 or 8 (got ${String(h.pointerSize)})`);
  for (const k of ['pythonVersion', 'target', 'recorder'] as const) {
    if (typeof h[k] !== 'string') throw new TypeError(`header.${k} must be a string`);
  }
  for (const k of ['rateHz', 'startTime'] as const) {
    if (typeof h[k] !== 'number' || !Number.isFinite(h[k])) throw new RangeError(`header.${k} must be a finite number (got ${String(h[k])})`);
  }
  checkU64(h.runtimeAddress, 'header.runtimeAddress');
  if (h.command !== undefined && (!Array.isArray(h.command) || h.command.some((a) => typeof a !== 'string'))) {
    throw new TypeError('header.command must be an array of strings');
  }
  if (h.pid !== undefined) checkUint(h.pid, 'header.pid');
  if (h.parentPid !== undefined) checkUint(h.parentPid, 'header.parentPid');
  if (h.rootPid !== undefined) checkUint(h.rootPid, 'header.rootPid');
  if (h.copy !== undefined && typeof h.copy !== 'string') throw new TypeError('header.copy must be a string');
  if (h.sampling !== undefined && !SAMPLING_MODES.includes(h.sampling)) throw new TypeError(`header.sampling must be one of ${SAMPLING_MODES.join(', ')}`);
  if (h.facts !== undefined && (!Array.isArray(h.facts) || h.facts.some((f) => !SAMPLE_FACTS.includes(f)))) throw new TypeError(`header.facts must be an array of ${SAMPLE_FACTS.join(', ')}`);
  if (h.bytecode !== undefined && typeof h.bytecode !== 'boolean') throw new TypeError('header.bytecode must be a boolean');
  if (h.native !== undefined) {
    if (typeof h.native !== 'object' || h.native === null) throw new TypeError('header.native must be {stackBytes}');
    checkUint(h.native.stackBytes, 'header.native.stackBytes');
  }

  // JSON for the descriptive part: readable with `strings`, and new optional fields cost
  // nothing to add. Bigints go as hex strings (JSON numbers are doubles).
  const json: Record<string, unknown> = {
    layoutSource: layout,
    pointerSize: h.pointerSize,
    pythonVersion: h.pythonVersion,
    target: h.target,
    runtimeAddress: '0x' + h.runtimeAddress.toString(16),
    rateHz: h.rateHz,
    startTime: h.startTime,
    recorder: h.recorder,
  };
  if (h.command !== undefined) json.command = h.command;
  if (h.pid !== undefined) json.pid = h.pid;
  if (h.parentPid !== undefined) json.parentPid = h.parentPid;
  if (h.rootPid !== undefined) json.rootPid = h.rootPid;
  if (h.copy !== undefined) json.copy = h.copy;
  if (h.sampling !== undefined) json.sampling = h.sampling;
  if (h.facts !== undefined) json.facts = h.facts;
  if (h.asyncio !== undefined) json.asyncio = { mode: h.asyncio.mode, debugOffsets: h.asyncio.debugOffsets };
  if (h.bytecode !== undefined) json.bytecode = h.bytecode;
  if (h.native !== undefined) json.native = { stackBytes: h.native.stackBytes };

  const body = new ByteWriter(512 + blob.length);
  body.string(JSON.stringify(json));
  body.uint(blob.length);
  body.bytes(blob);
  if (body.length > MAX_HEADER_BODY) throw new RangeError(`header is ${body.length} bytes, more than ${MAX_HEADER_BODY}`);

  const out = new ByteWriter(HEADER_PREFIX_SIZE + body.length + 4);
  out.bytes(FILE_MAGIC);
  out.u8(FORMAT_MAJOR & 0xff);
  out.u8(FORMAT_MAJOR >>> 8);
  const minor = h.native !== undefined ? FORMAT_MINOR : FORMAT_MINOR_WITHOUT_NATIVE;
  out.u8(minor & 0xff);
  out.u8(minor >>> 8);
  out.u32(body.length);
  out.bytes(body.view());
  out.u32(crc32(out.view().subarray(FILE_MAGIC.length)));
  return out.view().slice();
}

/**
 * Parses the header from the first bytes of a file. `read(offset, length)` returns up to
 * `length` bytes (fewer only at the end of the file); `size` is the file's length.
 * Throws CaptureError naming `name` and the byte for anything that is not a usable header.
 */
export function decodeHeader(name: string, size: number, read: (offset: number, length: number) => Uint8Array): HeaderInfo {
  if (size === 0) throw new CaptureError(`${name} is empty: not a pyunwind capture`);
  // one byte more than the prefix, so that "not a capture" can show that more follows
  const prefix = read(0, Math.min(size, HEADER_PREFIX_SIZE + 1));
  const magicPart = prefix.subarray(0, Math.min(prefix.length, FILE_MAGIC.length));
  if (!magicPart.every((b, i) => b === FILE_MAGIC[i])) {
    throw new CaptureError(`${name} is not a pyunwind capture (starts with ${describeBytes(prefix)})`);
  }
  if (size < HEADER_PREFIX_SIZE) {
    throw new CaptureError(`${name} ends at byte ${size} inside its header (which needs at least ${HEADER_PREFIX_SIZE + 4} bytes): the recording was cut short`);
  }
  const major = prefix[8]! | (prefix[9]! << 8);
  const minor = prefix[10]! | (prefix[11]! << 8);
  if (major !== FORMAT_MAJOR) {
    throw new CaptureError(
      `${name} is a pyunwind capture of format version ${major}.${minor}; this pyunwind reads format ${FORMAT_MAJOR}.x` +
        (major > FORMAT_MAJOR ? ' (it was written by a newer pyunwind)' : ''),
    );
  }
  const bodyLength = new ByteReader(prefix, 12).u32('header length');
  if (bodyLength > MAX_HEADER_BODY) {
    throw new CaptureError(`${name}: header length ${bodyLength} at byte 12 is larger than any header (${MAX_HEADER_BODY}): the file is damaged`);
  }
  const end = HEADER_PREFIX_SIZE + bodyLength + 4;
  if (size < end) {
    throw new CaptureError(`${name} ends at byte ${size} inside its header (which ends at byte ${end}): the recording was cut short`);
  }
  const all = read(0, end);
  const stored = new ByteReader(all, end - 4).u32('header checksum');
  const computed = crc32(all.subarray(FILE_MAGIC.length, end - 4));
  if (stored !== computed) {
    throw new CaptureError(`${name}: header checksum mismatch at byte ${end - 4} (stored ${hex32(stored)}, computed ${hex32(computed)}): the header is damaged`);
  }

  const r = new ByteReader(all, HEADER_PREFIX_SIZE, end - 4);
  let json: unknown;
  let blob: Uint8Array;
  try {
    const text = r.string('header JSON');
    blob = r.bytes(r.uint('layout bytes length'), 'layout bytes');
    // anything after the blob belongs to a later minor version: ignored
    json = JSON.parse(text);
  } catch (e) {
    const at = e instanceof DecodeError ? ` at byte ${e.at}` : '';
    throw new CaptureError(`${name}: the header${at} cannot be read: ${(e as Error).message}`);
  }
  return { header: headerFromJson(name, json, blob.slice()), major, minor, end };
}

function headerFromJson(name: string, json: unknown, blob: Uint8Array): CaptureHeader {
  const bad = (field: string, want: string): never => {
    throw new CaptureError(`${name}: header field "${field}" ${want}`);
  };
  if (typeof json !== 'object' || json === null || Array.isArray(json)) return bad('(root)', 'must be a JSON object');
  const o = json as Record<string, unknown>;
  const str = (k: string): string => (typeof o[k] === 'string' ? (o[k] as string) : bad(k, 'must be a string'));
  const num = (k: string): number => (typeof o[k] === 'number' && Number.isFinite(o[k]) ? (o[k] as number) : bad(k, 'must be a number'));

  const ls = o.layoutSource as Record<string, unknown> | undefined;
  let layoutSource: LayoutSource;
  if (typeof ls !== 'object' || ls === null) return bad('layoutSource', 'must be an object');
  if (ls.kind === 'debug-offsets') {
    layoutSource = { kind: 'debug-offsets', bytes: blob };
  } else if (ls.kind === 'builtin') {
    if (typeof ls.id !== 'string') return bad('layoutSource.id', 'must be a string');
    if (typeof ls.versionHex !== 'number' || !Number.isSafeInteger(ls.versionHex)) return bad('layoutSource.versionHex', 'must be an integer');
    layoutSource = { kind: 'builtin', id: ls.id, versionHex: ls.versionHex };
  } else {
    return bad('layoutSource.kind', `is ${JSON.stringify(ls.kind)}, which this pyunwind does not know`);
  }

  const pointerSize = o.pointerSize;
  if (pointerSize !== 4 && pointerSize !== 8) return bad('pointerSize', 'must be 4 or 8');
  const ra = str('runtimeAddress');
  if (!/^0x[0-9a-f]{1,16}$/i.test(ra)) bad('runtimeAddress', 'must be a hex string "0x…" of at most 64 bits');

  const header: CaptureHeader = {
    layoutSource,
    pointerSize,
    pythonVersion: str('pythonVersion'),
    target: str('target'),
    runtimeAddress: BigInt(ra),
    rateHz: num('rateHz'),
    startTime: num('startTime'),
    recorder: str('recorder'),
  };
  if (o.command !== undefined) {
    if (!Array.isArray(o.command) || o.command.some((a) => typeof a !== 'string')) bad('command', 'must be an array of strings');
    header.command = o.command as string[];
  }
  if (o.pid !== undefined) {
    if (typeof o.pid !== 'number' || !Number.isSafeInteger(o.pid)) bad('pid', 'must be an integer');
    header.pid = o.pid as number;
  }
  for (const k of ['parentPid', 'rootPid'] as const) {
    if (o[k] === undefined) continue;
    if (typeof o[k] !== 'number' || !Number.isSafeInteger(o[k])) bad(k, 'must be an integer');
    header[k] = o[k] as number;
  }
  // the copy mode; written as `mode` before 0.2
  if (o.copy !== undefined) header.copy = str('copy');
  else if (o.mode !== undefined) header.copy = str('mode');
  if (o.sampling !== undefined) {
    if (!(SAMPLING_MODES as readonly unknown[]).includes(o.sampling)) bad('sampling', `must be one of ${SAMPLING_MODES.join(', ')}`);
    header.sampling = o.sampling as SamplingMode;
  }
  if (o.facts !== undefined) {
    if (!Array.isArray(o.facts) || o.facts.some((f) => typeof f !== 'string')) bad('facts', 'must be an array of strings');
    // a fact a later version tells of means nothing here
    header.facts = (o.facts as string[]).filter((f): f is SampleFact => (SAMPLE_FACTS as readonly string[]).includes(f));
  }
  if (o.asyncio !== undefined) {
    const a = o.asyncio as Record<string, unknown> | null;
    if (typeof a !== 'object' || a === null || (a.mode !== 'running' && a.mode !== 'all') || typeof a.debugOffsets !== 'string' || !/^(?:[0-9a-f]{2})*$/.test(a.debugOffsets)) {
      bad('asyncio', 'must be {"mode": "running" or "all", "debugOffsets": hex bytes}');
    }
    header.asyncio = { mode: a!.mode as 'running' | 'all', debugOffsets: a!.debugOffsets as string };
  }
  if (o.bytecode !== undefined) {
    if (typeof o.bytecode !== 'boolean') bad('bytecode', 'must be true or false');
    header.bytecode = o.bytecode as boolean;
  }
  if (o.native !== undefined) {
    const n = o.native as Record<string, unknown> | null;
    if (typeof n !== 'object' || n === null || Array.isArray(n) || typeof n.stackBytes !== 'number' || !Number.isSafeInteger(n.stackBytes) || n.stackBytes < 0) {
      bad('native', 'must be {"stackBytes": a non-negative integer}');
    }
    header.native = { stackBytes: n!.stackBytes as number };
  }
  // other fields: written by a later version, ignored
  return header;
}

// ---------------------------------------------------------------------------------------
// Block headers

/** What precedes every block's stored payload (docs/capture-format.md, Blocks). */
export interface BlockHeader {
  type: number;
  compression: number;
  /** the writer's 0-based block number */
  seq: number;
  /** BLOCK_FLAG bits (0 from earlier writers) */
  flags: number;
  storedLength: number;
  rawLength: number;
  payloadCrc: number;
}

/** Block header + payload, ready for one write. Deflated unless that would not be smaller. */
export function encodeBlock(type: number, seq: number, raw: Uint8Array, level = DEFAULT_COMPRESSION_LEVEL, flags = 0): Uint8Array {
  if (raw.length > MAX_BLOCK_RAW) throw new RangeError(`block of ${raw.length} bytes exceeds the format's limit of ${MAX_BLOCK_RAW}`);
  let stored = raw;
  let compression: number = COMPRESSION.NONE;
  if (level > 0 && raw.length > 0) {
    const deflated = deflateRaw(raw, level);
    if (deflated.length < raw.length) {
      stored = deflated;
      compression = COMPRESSION.DEFLATE;
    }
  }
  return blockWithHeader({ type, compression, seq, flags, storedLength: stored.length, rawLength: raw.length, payloadCrc: crc32(stored) }, stored);
}

/** Raw DEFLATE of `raw` at `level` (1–9): Node's zlib where the runtime has it, else fflate. */
export function deflateRaw(raw: Uint8Array, level: number): Uint8Array {
  const lv = Math.min(9, Math.max(1, Math.round(level)));
  return zlibDeflateRaw ? zlibDeflateRaw(raw, { level: lv }) : deflateSync(raw, { level: lv as 1 });
}

/** Writes a block header before already-stored bytes (the tests use it to wrap crafted payloads). */
export function blockWithHeader(f: BlockHeader, stored: Uint8Array): Uint8Array {
  const w = new ByteWriter(BLOCK_HEADER_SIZE + stored.length);
  w.bytes(BLOCK_MAGIC);
  w.u8(f.type);
  w.u8(f.compression);
  w.u8(f.flags);
  w.u8(0);
  w.u32(f.seq);
  w.u32(f.storedLength);
  w.u32(f.rawLength);
  w.u32(f.payloadCrc);
  w.u32(crc32(w.view()));
  w.bytes(stored);
  return w.view();
}

/** The block header at `at` in `bytes`, or why there is none (magic or header checksum). */
export function parseBlockHeader(bytes: Uint8Array, at = 0): BlockHeader | string {
  if (bytes.length - at < BLOCK_HEADER_SIZE) return 'too short';
  if (!startsWith(bytes, at, BLOCK_MAGIC)) return `no block magic (found ${describeBytes(bytes.subarray(at, at + 4), 4)})`;
  const r = new ByteReader(bytes, at + 4, at + BLOCK_HEADER_SIZE);
  const type = r.u8('type');
  const compression = r.u8('compression');
  const flags = r.u8('flags');
  r.pos += 1; // reserved
  const seq = r.u32('seq');
  const storedLength = r.u32('stored length');
  const rawLength = r.u32('raw length');
  const payloadCrc = r.u32('payload crc');
  const stored = r.u32('header crc');
  const computed = crc32(bytes.subarray(at, at + BLOCK_HEADER_SIZE - 4));
  if (stored !== computed) return `block header checksum mismatch (stored ${hex32(stored)}, computed ${hex32(computed)})`;
  return { type, compression, seq, flags, storedLength, rawLength, payloadCrc };
}

/** Offset of the first BLOCK_MAGIC in `bytes` at or after `from`, or -1. */
export function findMagic(bytes: Uint8Array, from: number): number {
  const m0 = BLOCK_MAGIC[0]!;
  for (let i = bytes.indexOf(m0, from); i !== -1; i = bytes.indexOf(m0, i + 1)) {
    if (startsWith(bytes, i, BLOCK_MAGIC)) return i;
    if (i + BLOCK_MAGIC.length > bytes.length) break;
  }
  return -1;
}

/**
 * Stored payloads up to this size are inflated in one call. fflate's one-shot inflate keeps
 * running past a full output buffer (writes there are dropped), so a crafted stream costs up
 * to ~1032× its stored size in time: bounded here to ~66 MB of work, a few ms.
 */
const ONE_SHOT_MAX = 64 << 10;
/** Larger payloads are fed in steps of this size, each of which can make ~1032× as much. */
const INFLATE_STEP = 64 << 10;

type InflateRawSync = (data: Uint8Array, options: { maxOutputLength: number; finishFlush?: number; chunkSize?: number }) => Uint8Array;
type DeflateRawSync = (buf: Uint8Array, options: { level: number }) => Uint8Array;

/** Node's zlib where the runtime has it (process.getBuiltinModule); null elsewhere. */
const nodeZlib = ((): { inflateRawSync?: InflateRawSync; deflateRawSync?: DeflateRawSync } | null => {
  try {
    const p = (globalThis as { process?: { getBuiltinModule?: (id: string) => { inflateRawSync?: InflateRawSync; deflateRawSync?: DeflateRawSync } | undefined } }).process;
    return p?.getBuiltinModule?.('node:zlib') ?? null;
  } catch {
    return null;
  }
})();

/**
 * Node's zlib for deflating blocks where the runtime has it: the recorder deflates each block
 * on its sampling thread, and zlib took 10 ms for a 350 KB block at level 6 where fflate took
 * 21 ms (2.5 against 7.9 ms for 128 KB); elsewhere fflate. Both write raw DEFLATE.
 */
const zlibDeflateRaw: DeflateRawSync | null = nodeZlib?.deflateRawSync ?? null;

/** Node's zlib (native, ~2.5× fflate here) where the runtime has it; elsewhere fflate alone. */
const zlibInflateRaw: InflateRawSync | null = nodeZlib?.inflateRawSync ?? null;

/**
 * The payload through Node's zlib, when it inflates to exactly `rawLength` bytes; null when
 * there is no zlib or the stream is anything but that (then fflate below decides, and its
 * message explains). zlib stops at maxOutputLength, so a crafted stream costs no more here.
 */
function nativeInflate(stored: Uint8Array, rawLength: number): Uint8Array | null {
  if (!zlibInflateRaw) return null;
  try {
    // one output chunk of the block's size: zlib's default (16 KB chunks joined at the end)
    // allocated and copied each block twice
    const out = zlibInflateRaw(stored, { maxOutputLength: rawLength + 1, chunkSize: Math.max(64, rawLength + 1) });
    return out.length === rawLength ? new Uint8Array(out.buffer, out.byteOffset, out.length) : null;
  } catch {
    return null;
  }
}

/**
 * What the first `n` stored bytes of a raw-DEFLATE payload inflate to (at most `maxOut + 1`
 * bytes), the stream cut there: for reading the start of a block without inflating all of it.
 * null when that much of the stream is already bad.
 */
export function inflatePrefix(stored: Uint8Array, n: number, maxOut: number): Uint8Array | null {
  const part = stored.subarray(0, n);
  const whole = n >= stored.length;
  if (zlibInflateRaw) {
    try {
      const out = zlibInflateRaw(part, { maxOutputLength: maxOut + 1, ...(whole ? {} : { finishFlush: Z_SYNC_FLUSH }) });
      return new Uint8Array(out.buffer, out.byteOffset, out.length);
    } catch {
      return null;
    }
  }
  const parts: Uint8Array[] = [];
  let length = 0;
  const inflater = new Inflate((chunk) => {
    if (length <= maxOut) parts.push(chunk);
    length += chunk.length;
  });
  try {
    for (let p = 0; p < part.length && length <= maxOut; p += INFLATE_STEP) {
      const end = Math.min(part.length, p + INFLATE_STEP);
      inflater.push(part.subarray(p, end), whole && end === part.length);
    }
  } catch {
    return null;
  }
  const out = new Uint8Array(Math.min(length, maxOut + 1));
  let at = 0;
  for (const c of parts) {
    const take = Math.min(c.length, out.length - at);
    out.set(c.subarray(0, take), at);
    at += take;
  }
  return out;
}

/** zlib's Z_SYNC_FLUSH: inflate what there is, without asking for the stream's end. */
const Z_SYNC_FLUSH = 2;

function tooLong(rawLength: number): Error {
  return new Error(`inflates to more than the ${rawLength} bytes the block header announces`);
}

/**
 * Inflates a raw-DEFLATE payload that must yield exactly `rawLength` bytes, stopping soon
 * after the output passes `rawLength` whatever the stream says (see ONE_SHOT_MAX).
 */
export function inflateExact(stored: Uint8Array, rawLength: number): Uint8Array {
  if (stored.length === 0) throw new Error('empty deflate stream');
  const fast = nativeInflate(stored, rawLength);
  if (fast) return fast;
  if (stored.length <= ONE_SHOT_MAX) {
    // one spare byte tells "exactly rawLength" from "more"
    const out = new Uint8Array(rawLength + 1);
    let got: Uint8Array;
    try {
      got = inflateSync(stored, { out });
    } catch (e) {
      // a stored (type 0) deflate block past the buffer's end makes TypedArray.set throw
      if (e instanceof RangeError) throw tooLong(rawLength);
      throw e;
    }
    if (got.length > rawLength) throw tooLong(rawLength);
    if (got.length !== rawLength) throw new Error(`inflates to ${got.length} bytes, the block header announces ${rawLength}`);
    return out.subarray(0, rawLength);
  }
  const out = new Uint8Array(rawLength);
  let length = 0;
  let overflow = false;
  const inflater = new Inflate((chunk) => {
    if (overflow) return;
    if (length + chunk.length > rawLength) {
      overflow = true;
      return;
    }
    out.set(chunk, length);
    length += chunk.length;
  });
  for (let p = 0; p < stored.length && !overflow; p += INFLATE_STEP) {
    const end = Math.min(stored.length, p + INFLATE_STEP);
    inflater.push(stored.subarray(p, end), end === stored.length);
  }
  if (overflow) throw tooLong(rawLength);
  if (length !== rawLength) throw new Error(`inflates to ${length} bytes, the block header announces ${rawLength}`);
  return out;
}

// ---------------------------------------------------------------------------------------
// End block

/** The totals the writer records in its end block. */
export interface CaptureTrailer {
  /** record blocks written before the end block */
  blocks: number;
  samples: number;
  codes: number;
  missed: number;
}

export function encodeTrailer(t: CaptureTrailer): Uint8Array {
  const w = new ByteWriter(32);
  w.uint(t.blocks);
  w.uint(t.samples);
  w.uint(t.codes);
  w.uint(t.missed);
  return w.view().slice();
}

export function decodeTrailer(raw: Uint8Array): CaptureTrailer {
  const r = new ByteReader(raw);
  // fields a later minor version appends are ignored
  return { blocks: r.uint('trailer blocks'), samples: r.uint('trailer samples'), codes: r.uint('trailer codes'), missed: r.uint('trailer missed') };
}
