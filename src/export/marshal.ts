// A writer of Python's marshal format (what `marshal.dump` writes and `marshal.load` reads),
// for the few types the pstats export needs: int, float, str, tuple, dict. No library does
// this, so it is written from CPython's Python/marshal.c (r_object / w_object):
//
//   int    'i' + int32 LE                  when it fits 32 bits,
//          'l' + int32 n + |n| uint16 LE   otherwise: base-2^15 digits, least significant first,
//                                          n negative for a negative number (never 0 digits);
//   float  'g' + float64 LE                (TYPE_BINARY_FLOAT);
//   str    'z' + uint8 n + n bytes         (TYPE_SHORT_ASCII) when ASCII and at most 255 bytes,
//          'u' + int32 n + n bytes UTF-8   (TYPE_UNICODE) otherwise. Python decodes 'u' with
//                                          "surrogatepass", so a lone surrogate in a JS string
//                                          is written as its 3-byte form and reads back the same;
//   tuple  ')' + uint8 n + items           (TYPE_SMALL_TUPLE) up to 255 items,
//          '(' + int32 n + items           (TYPE_TUPLE) otherwise;
//   dict   '{' + key, value, … + '0'       (TYPE_DICT, closed by TYPE_NULL).
//
// No references (FLAG_REF) are written: every object is written in full, which any version of
// marshal.load reads. Sizes are bounded as marshal's reader bounds them (a length is an int32)
// and so is nesting (marshal.c refuses more than 2000 levels).

/** A Python float (a JS number alone is written as an int: it must then be an integer). */
export class PyFloat {
  constructor(readonly value: number) {}
}

/** A Python dict: its entries, written in this order (keys must be distinct and hashable: no dicts). */
export class PyDict {
  constructor(readonly entries: readonly (readonly [MarshalValue, MarshalValue])[]) {}
}

/** number/bigint: int; PyFloat: float; string: str; array: tuple; PyDict: dict. */
export type MarshalValue = number | bigint | string | PyFloat | PyDict | readonly MarshalValue[];

/** the largest length marshal can hold (an int32) */
const MAX_LENGTH = 0x7fff_ffff;
/** marshal.c's MAX_MARSHAL_STACK_DEPTH: the reader refuses deeper nesting */
const MAX_DEPTH = 2000;

class Writer {
  private buf = new Uint8Array(1 << 16);
  private view = new DataView(this.buf.buffer);
  length = 0;

  private reserve(n: number): void {
    if (this.length + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.length + n) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.buf.subarray(0, this.length));
    this.buf = next;
    this.view = new DataView(next.buffer);
  }

  byte(b: number): void {
    this.reserve(1);
    this.buf[this.length++] = b;
  }

  int32(n: number): void {
    this.reserve(4);
    this.view.setInt32(this.length, n, true);
    this.length += 4;
  }

  uint16(n: number): void {
    this.reserve(2);
    this.view.setUint16(this.length, n, true);
    this.length += 2;
  }

  float64(x: number): void {
    this.reserve(8);
    this.view.setFloat64(this.length, x, true);
    this.length += 8;
  }

  bytes(b: Uint8Array): void {
    this.reserve(b.length);
    this.buf.set(b, this.length);
    this.length += b.length;
  }

  result(): Uint8Array {
    return this.buf.slice(0, this.length);
  }
}

const TYPE_INT = 0x69; // 'i'
const TYPE_LONG = 0x6c; // 'l'
const TYPE_BINARY_FLOAT = 0x67; // 'g'
const TYPE_UNICODE = 0x75; // 'u'
const TYPE_SHORT_ASCII = 0x7a; // 'z'
const TYPE_TUPLE = 0x28; // '('
const TYPE_SMALL_TUPLE = 0x29; // ')'
const TYPE_DICT = 0x7b; // '{'
const TYPE_NULL = 0x30; // '0'

/**
 * UTF-8 of a JS string, lone surrogates included (as Python's "surrogatepass" writes them:
 * TextEncoder would replace them with U+FFFD). Null when the string is ASCII (its bytes are its
 * code units).
 */
function utf8(s: string): Uint8Array | null {
  let ascii = true;
  for (let i = 0; i < s.length; i++) {
    if (s.charCodeAt(i) >= 0x80) {
      ascii = false;
      break;
    }
  }
  if (ascii) return null;
  const out: number[] = [];
  for (let i = 0; i < s.length; i++) {
    let c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
        i++;
      }
    }
    if (c < 0x80) out.push(c);
    else if (c < 0x800) out.push(0xc0 | (c >> 6), 0x80 | (c & 0x3f));
    else if (c < 0x10000) out.push(0xe0 | (c >> 12), 0x80 | ((c >> 6) & 0x3f), 0x80 | (c & 0x3f));
    else out.push(0xf0 | (c >> 18), 0x80 | ((c >> 12) & 0x3f), 0x80 | ((c >> 6) & 0x3f), 0x80 | (c & 0x3f));
    if (out.length > MAX_LENGTH) throw new RangeError('marshal: a string longer than 2^31 − 1 bytes');
  }
  return Uint8Array.from(out);
}

function writeInt(w: Writer, n: bigint): void {
  if (n >= -(1n << 31n) && n < 1n << 31n) {
    w.byte(TYPE_INT);
    w.int32(Number(n));
    return;
  }
  const digits: number[] = [];
  for (let a = n < 0n ? -n : n; a > 0n; a >>= 15n) digits.push(Number(a & 0x7fffn));
  if (digits.length > MAX_LENGTH) throw new RangeError('marshal: an int too large');
  w.byte(TYPE_LONG);
  w.int32(n < 0n ? -digits.length : digits.length);
  for (const d of digits) w.uint16(d);
}

function write(w: Writer, v: MarshalValue, depth: number): void {
  if (depth > MAX_DEPTH) throw new RangeError(`marshal: nested deeper than ${MAX_DEPTH} levels`);
  if (typeof v === 'number') {
    if (!Number.isSafeInteger(v)) throw new RangeError(`marshal: ${v} is not a safe integer (wrap floats in PyFloat)`);
    writeInt(w, BigInt(v));
  } else if (typeof v === 'bigint') {
    writeInt(w, v);
  } else if (typeof v === 'string') {
    const bytes = utf8(v);
    if (bytes === null && v.length <= 255) {
      w.byte(TYPE_SHORT_ASCII);
      w.byte(v.length);
      for (let i = 0; i < v.length; i++) w.byte(v.charCodeAt(i));
    } else {
      const n = bytes?.length ?? v.length;
      if (n > MAX_LENGTH) throw new RangeError('marshal: a string longer than 2^31 − 1 bytes');
      w.byte(TYPE_UNICODE);
      w.int32(n);
      if (bytes) w.bytes(bytes);
      else for (let i = 0; i < v.length; i++) w.byte(v.charCodeAt(i));
    }
  } else if (v instanceof PyFloat) {
    w.byte(TYPE_BINARY_FLOAT);
    w.float64(v.value);
  } else if (v instanceof PyDict) {
    w.byte(TYPE_DICT);
    for (const [key, value] of v.entries) {
      write(w, key, depth + 1);
      write(w, value, depth + 1);
    }
    w.byte(TYPE_NULL);
  } else if (Array.isArray(v)) {
    const items = v as readonly MarshalValue[];
    if (items.length <= 255) {
      w.byte(TYPE_SMALL_TUPLE);
      w.byte(items.length);
    } else {
      if (items.length > MAX_LENGTH) throw new RangeError('marshal: a tuple longer than 2^31 − 1 items');
      w.byte(TYPE_TUPLE);
      w.int32(items.length);
    }
    for (const item of items) write(w, item, depth + 1);
  } else {
    throw new TypeError(`marshal: cannot write ${typeof v}`);
  }
}

/** The bytes `marshal.dumps(value)` would give (up to the version-specific choices above). */
export function marshalDumps(value: MarshalValue): Uint8Array {
  const w = new Writer();
  write(w, value, 0);
  return w.result();
}
