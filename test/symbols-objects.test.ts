// str, bytes and code objects laid out by hand per layout (x86-64 3.11 and 3.12+, wasm32,
// and free-threaded state bits), decoded from regions; and what goes wrong with bad ones.
import { describe, expect, it } from 'vitest';
import type { Layout } from '../src/layout/layout.js';
import { RegionMemory } from '../src/walk/region-memory.js';
import type { Region } from '../src/walk/types.js';
import {
  SymbolError,
  Symbolizer,
  codeRange,
  decodeCodeObject,
  pyBytesExtent,
  pyBytesHeaderSize,
  pyStringExtent,
  pyStringHeaderSize,
  readPyBytes,
  readPyString,
} from '../src/symbols/index.js';

// ---- layouts: only the fields src/symbols reads ----------------------------------------

interface Flavor {
  name: string;
  layout: Layout;
}

function layout(
  pointerSize: 4 | 8,
  unicode: Layout['unicode'],
  code: Partial<Layout['code']>,
  obHeader: number,
): Layout {
  const l = {
    pointerSize,
    object: { size: obHeader, obType: obHeader - pointerSize, obSize: obHeader },
    bytes: { obSize: obHeader, obSval: obHeader + 2 * pointerSize },
    unicode,
    // co_stacksize and co_nlocalsplus sit around co_firstlineno in every version
    code: { stacksize: code.firstlineno! - 4, nlocalsplus: code.firstlineno! + 4, ...code },
    frame: { localsplus: 9 * pointerSize },
  };
  return l as unknown as Layout;
}

const GIL_BITS = { kindShift: 2, compactBit: 5, asciiBit: 6 };

const FLAVORS: Flavor[] = [
  {
    name: 'x86-64 3.12+',
    layout: layout(
      8,
      { length: 16, state: 32, asciiSize: 40, compactSize: 56, legacyData: 56, ...GIL_BITS },
      { size: 200, filename: 112, name: 120, qualname: 128, linetable: 136, firstlineno: 68, codeAdaptive: 192 },
      16,
    ),
  },
  {
    name: 'x86-64 3.11',
    layout: layout(
      8,
      { length: 16, state: 32, asciiSize: 48, compactSize: 72, legacyData: 72, ...GIL_BITS },
      { size: 192, filename: 112, name: 120, qualname: 128, linetable: 136, firstlineno: 72, codeAdaptive: 184 },
      16,
    ),
  },
  {
    name: 'wasm32 3.14',
    layout: layout(
      4,
      { length: 8, state: 16, asciiSize: 20, compactSize: 28, legacyData: 28, ...GIL_BITS },
      { size: 132, filename: 80, name: 84, qualname: 88, linetable: 92, firstlineno: 44, codeAdaptive: 128 },
      8,
    ),
  },
  {
    // the free-threaded state word (interned is a whole byte); offsets are illustrative
    name: 'free-threaded state bits',
    layout: layout(
      8,
      { length: 32, state: 48, asciiSize: 56, compactSize: 72, legacyData: 72, kindShift: 8, compactBit: 11, asciiBit: 12 },
      { size: 224, filename: 128, name: 136, qualname: 144, linetable: 152, firstlineno: 84, codeAdaptive: 216 },
      32,
    ),
  },
];

// ---- object builders -------------------------------------------------------------------

function writePtr(b: Uint8Array, off: number, v: bigint, size: 4 | 8): void {
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  if (size === 8) dv.setBigUint64(off, v, true);
  else dv.setUint32(off, Number(v), true);
}

interface StrOptions {
  /** force a kind (default: the narrowest that holds the text) */
  kind?: number;
  compact?: boolean;
  ascii?: boolean;
  /** for non-compact strings: where the characters go */
  dataAddress?: bigint;
  /** override the length field */
  length?: bigint;
  /** drop this many bytes off the end of the data */
  truncate?: number;
}

function codePoints(text: string): number[] {
  return [...text].map((c) => c.codePointAt(0)!);
}

function encodeChars(cps: number[], kind: number): Uint8Array {
  const out = new Uint8Array((cps.length + 1) * kind); // + NUL, as CPython stores it
  const dv = new DataView(out.buffer);
  cps.forEach((cp, i) => {
    if (kind === 1) out[i] = cp;
    else if (kind === 2) dv.setUint16(i * 2, cp, true);
    else dv.setUint32(i * 4, cp, true);
  });
  return out;
}

/** Regions of a str object at `address` laid out as `l` says. */
function makeStr(l: Layout, address: bigint, text: string, o: StrOptions = {}): Region[] {
  const u = l.unicode;
  const cps = codePoints(text);
  const max = cps.reduce((a, b) => Math.max(a, b), 0);
  const kind = o.kind ?? (max < 0x100 ? 1 : max < 0x10000 ? 2 : 4);
  const ascii = o.ascii ?? max < 0x80;
  const compact = o.compact ?? true;
  const state = (kind << u.kindShift) | ((compact ? 1 : 0) << u.compactBit) | ((ascii ? 1 : 0) << u.asciiBit) | 1;
  const chars = encodeChars(cps, kind === 1 || kind === 2 || kind === 4 ? kind : 1);
  const data = o.truncate ? chars.subarray(0, chars.length - kind - o.truncate) : chars;
  const headerSize = compact ? (ascii ? u.asciiSize : u.compactSize) : u.legacyData + l.pointerSize;
  const header = new Uint8Array(headerSize + (compact ? data.length : 0));
  header.fill(0xee, 0, l.object.size); // refcount/type: not read
  writePtr(header, u.length, o.length ?? BigInt(cps.length), l.pointerSize);
  writePtr(header, u.length + l.pointerSize, 0xffffffffn, l.pointerSize); // hash
  new DataView(header.buffer).setUint32(u.state, state, true);
  if (compact) {
    header.set(data, headerSize);
    return [{ address, bytes: header }];
  }
  const dataAddress = o.dataAddress ?? address + 0x10000n;
  writePtr(header, u.legacyData, dataAddress, l.pointerSize);
  return [{ address, bytes: header }, ...(dataAddress === 0n ? [] : [{ address: dataAddress, bytes: data }])];
}

function makeBytes(l: Layout, address: bigint, data: Uint8Array, size?: bigint): Region {
  const b = new Uint8Array(l.bytes.obSval + data.length + 1);
  writePtr(b, l.bytes.obSize, size ?? BigInt(data.length), l.pointerSize);
  b.set(data, l.bytes.obSval);
  return { address, bytes: b };
}

function mem(l: Layout, regions: Region[]): RegionMemory {
  return new RegionMemory(regions, l.pointerSize);
}

const STR = 0x10000n;

// ---- str ---------------------------------------------------------------------------------

const SAMPLES: [string, string][] = [
  ['compact ASCII', 'Thread.run'],
  ['empty', ''],
  ['latin-1', 'fünf'],
  ['latin-1 C1 controls (not windows-1252)', '\x80\x85\x9f\xff'],
  ['UCS-2', '函数'],
  ['UCS-4 astral', '𐌰𐌱'],
  ['UCS-4 emoji filename', '/srv/dätei_😀.py'],
  ['lone surrogate (UCS-2)', 'a\ud800b'],
];

describe.each(FLAVORS)('str objects: $name', ({ layout: l }) => {
  it.each(SAMPLES)('%s', (_what, text) => {
    expect(readPyString(mem(l, makeStr(l, STR, text)), l, STR)).toBe(text);
  });

  it.each(SAMPLES.filter(([, t]) => t !== ''))('legacy non-compact %s, data pointer elsewhere', (_what, text) => {
    const regions = makeStr(l, STR, text, { compact: false, dataAddress: 0x900000n });
    expect(readPyString(mem(l, regions), l, STR)).toBe(text);
  });

  it('very long strings (200k chars, every kind)', () => {
    for (const unit of ['a', 'é', '函', '😀']) {
      const text = unit.repeat(200_000) + 'z';
      expect(readPyString(mem(l, makeStr(l, STR, text)), l, STR)).toBe(text);
      const legacy = makeStr(l, STR, text, { compact: false, dataAddress: 0x4000000n });
      expect(readPyString(mem(l, legacy), l, STR)).toBe(text);
    }
  });

  it('the recorder workflow: one header read, then at most one more, is enough', () => {
    const source = (regions: Region[]) => mem(l, regions);
    for (const [, text] of SAMPLES) {
      for (const compact of [true, false]) {
        if (!compact && text === '') continue;
        const target = source(makeStr(l, STR, text, { compact, dataAddress: 0x900000n }));
        // read 1: the header (a live source may read past a short object; pad here)
        const want = pyStringHeaderSize(l);
        const padded = new Uint8Array(want);
        const have = target.bytes(STR, Math.min(want, target.regions[0]!.bytes.length))!;
        padded.set(have);
        const ext = pyStringExtent(padded, l, STR);
        // read 2: what the extent says, and nothing else
        const copied: Region[] = [];
        if (ext.dataAddress === null) {
          copied.push({ address: STR, bytes: target.bytes(STR, ext.headerSize + ext.dataLength)!.slice() });
        } else {
          copied.push({ address: STR, bytes: target.bytes(STR, ext.headerSize)!.slice() });
          copied.push({ address: ext.dataAddress, bytes: target.bytes(ext.dataAddress, ext.dataLength)!.slice() });
        }
        expect(readPyString(mem(l, copied), l, STR)).toBe(text);
      }
    }
  });

  const bad: [string, () => Region[], RegExp][] = [
    ['kind 3', () => makeStr(l, STR, 'abc', { kind: 3, ascii: false }), /^str at 0x10000: kind 3 is not 1, 2 or 4/],
    ['kind 0', () => makeStr(l, STR, 'abc', { kind: 0, ascii: false }), /kind 0 is not 1, 2 or 4/],
    ['ascii flag with kind 2', () => makeStr(l, STR, '函数', { ascii: true }), /ascii flag set but kind is 2/],
    ['negative length', () => makeStr(l, STR, 'abc', { length: -5n }), /^str at 0x10000: length -5 is negative/],
    [
      'length past the region',
      () => makeStr(l, STR, 'abc', { length: 1000n }),
      /^str at 0x10000: 1000 data bytes at 0x[0-9a-f]+\.\.0x[0-9a-f]+ are not in the captured regions/,
    ],
    ['data cut short', () => makeStr(l, STR, '函数函数', { truncate: 1 }), /8 data bytes .* are not in the captured regions/],
    [
      'absurd length',
      () => makeStr(l, STR, 'abc', { length: l.pointerSize === 8 ? 1n << 61n : 0x7fffffffn }),
      l.pointerSize === 8 ? /is not a size/ : /not in the captured regions/,
    ],
    [
      'legacy data pointer outside the regions',
      () => makeStr(l, STR, 'fünf', { compact: false, dataAddress: 0x900000n }).slice(0, 1),
      /^str at 0x10000: 4 data bytes at 0x900000\.\.0x900004 are not in the captured regions/,
    ],
    ['legacy NULL data pointer', () => makeStr(l, STR, 'x', { compact: false, dataAddress: 0n }), /NULL data pointer/],
    [
      'non-ASCII byte in an ASCII str',
      () => makeStr(l, STR, 'fünf', { ascii: true }),
      /ascii str has byte 0xfc at index 1/,
    ],
    [
      'code point past U+10FFFF',
      () => {
        const r = makeStr(l, STR, '😀😀');
        new DataView(r[0]!.bytes.buffer).setUint32(l.unicode.compactSize + 4, 0x110000, true);
        return r;
      },
      /character 1 is 0x110000, beyond U\+10FFFF/,
    ],
    ['no header', () => [], /^str at 0x10000: header \(\d+ bytes\) is not in the captured regions/],
  ];
  it.each(bad)('rejects %s with a SymbolError that says where', (_what, regions, message) => {
    const m = mem(l, regions());
    let err: unknown;
    try {
      readPyString(m, l, STR);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(SymbolError);
    expect((err as Error).message).toMatch(message);
    expect((err as SymbolError).address).toBe(STR);
  });

  it('a NULL pointer is an error, not a read at 0', () => {
    expect(() => readPyString(mem(l, []), l, 0n)).toThrow(/str at 0x0: NULL pointer/);
  });

  it('pyStringExtent: inline and legacy extents, and short headers', () => {
    const u = l.unicode;
    const e1 = pyStringExtent(makeStr(l, STR, 'abc')[0]!.bytes, l);
    expect(e1).toEqual({ headerSize: u.asciiSize, dataAddress: null, dataLength: 3 });
    const e2 = pyStringExtent(makeStr(l, STR, '函数')[0]!.bytes, l);
    expect(e2).toEqual({ headerSize: u.compactSize, dataAddress: null, dataLength: 4 });
    const e4 = pyStringExtent(makeStr(l, STR, '😀')[0]!.bytes, l);
    expect(e4.dataLength).toBe(4);
    const legacy = makeStr(l, STR, 'fünf', { compact: false, dataAddress: 0x900000n })[0]!.bytes;
    expect(pyStringExtent(legacy, l)).toEqual({
      headerSize: u.legacyData + l.pointerSize,
      dataAddress: 0x900000n,
      dataLength: 4,
    });
    expect(() => pyStringExtent(legacy.subarray(0, u.legacyData), l, STR)).toThrow(
      /str at 0x10000: non-compact str header has \d+ bytes, need \d+ for the data pointer/,
    );
    expect(() => pyStringExtent(new Uint8Array(4), l)).toThrow(/header has 4 bytes/);
  });
});

// ---- bytes -------------------------------------------------------------------------------

describe.each(FLAVORS)('bytes objects: $name', ({ layout: l }) => {
  it('reads contents, empty and 1 MB', () => {
    for (const n of [0, 5, 1 << 20]) {
      const data = Uint8Array.from({ length: n }, (_, i) => (i * 7) & 0xff);
      const got = readPyBytes(mem(l, [makeBytes(l, STR, data)]), l, STR);
      // Buffer.equals: a deep toEqual over 1 MB takes seconds
      expect(Buffer.from(got.buffer, got.byteOffset, got.byteLength).equals(data)).toBe(true);
      expect(got.length).toBe(n);
    }
  });

  it('extent for the recorder', () => {
    const r = makeBytes(l, STR, new Uint8Array(10));
    expect(pyBytesExtent(r.bytes.subarray(0, pyBytesHeaderSize(l)), l)).toEqual({
      headerSize: l.bytes.obSval,
      dataAddress: null,
      dataLength: 10,
    });
  });

  it('rejects negative and overlong sizes and missing headers', () => {
    expect(() => readPyBytes(mem(l, [makeBytes(l, STR, new Uint8Array(3), -1n)]), l, STR)).toThrow(
      /^bytes at 0x10000: ob_size -1 is negative/,
    );
    expect(() => readPyBytes(mem(l, [makeBytes(l, STR, new Uint8Array(3), 100n)]), l, STR)).toThrow(
      /^bytes at 0x10000: 100 data bytes at .* are not in the captured regions/,
    );
    expect(() => readPyBytes(mem(l, []), l, STR)).toThrow(/^bytes at 0x10000: header .* not in the captured regions/);
  });
});

// ---- code objects ------------------------------------------------------------------------

const CODE = 0x200000n;
const FILENAME = 0x300000n;
const NAME = 0x310000n;
const QUALNAME = 0x320000n;
const LINETABLE = 0x330000n;

// A hand-made table with every entry family. Lines are relative to firstlineno = 40.
//   units 0      one-line form (code 10): line 40, cols 0..0
//   units 1–4    one-line form (code 11): line 41, cols 4..9
//   units 5–6    short form (code 1):     line 41, col 8+2=10, end 13
//   unit  7      no location (code 15)
//   units 8–9    no columns (code 13):    line 41+2 = 43
//   unit  10     long form (code 14):     line 42..44, cols 5..10
const TABLE = Uint8Array.from([
  0x80 | (10 << 3) | 0, 0, 0,
  0x80 | (11 << 3) | 3, 4, 9,
  0x80 | (1 << 3) | 1, (2 << 4) | 3,
  0x80 | (15 << 3) | 0,
  0x80 | (13 << 3) | 1, 4,
  0x80 | (14 << 3) | 0, 3, 2, 6, 11,
]);
const UNITS = 11;
const LINES = [40, 41, 41, 41, 41, 41, 41, null, 43, 43, 42];

interface CodeOptions {
  obSize?: bigint;
  firstLine?: number;
  qualname?: string;
  omit?: ('filename' | 'name' | 'qualname' | 'linetable' | 'header')[];
  nullField?: 'filename' | 'name' | 'qualname' | 'linetable';
  table?: Uint8Array;
}

function makeCode(l: Layout, o: CodeOptions = {}): Region[] {
  const c = l.code;
  const ps = l.pointerSize;
  const obj = new Uint8Array(c.codeAdaptive + UNITS * 2);
  writePtr(obj, l.object.obSize, o.obSize ?? BigInt(UNITS), ps);
  new DataView(obj.buffer).setInt32(c.firstlineno, o.firstLine ?? 40, true);
  const ptrs = { filename: FILENAME, name: NAME, qualname: QUALNAME, linetable: LINETABLE };
  for (const [k, v] of Object.entries(ptrs)) {
    writePtr(obj, c[k as keyof typeof ptrs], o.nullField === k ? 0n : v, ps);
  }
  const omit = new Set(o.omit ?? []);
  const regions: Region[] = [];
  if (!omit.has('header')) regions.push({ address: CODE, bytes: obj });
  if (!omit.has('filename')) regions.push(...makeStr(l, FILENAME, '/srv/app/dätei_😀.py'));
  if (!omit.has('name')) regions.push(...makeStr(l, NAME, 'método'));
  if (!omit.has('qualname')) regions.push(...makeStr(l, QUALNAME, o.qualname ?? 'Outer.método'));
  if (!omit.has('linetable')) regions.push(makeBytes(l, LINETABLE, o.table ?? TABLE));
  return regions;
}

function codeError(l: Layout, o: CodeOptions): SymbolError {
  try {
    decodeCodeObject(mem(l, makeCode(l, o)), l, CODE);
  } catch (e) {
    expect(e).toBeInstanceOf(SymbolError);
    return e as SymbolError;
  }
  throw new Error('decodeCodeObject did not throw');
}

describe.each(FLAVORS)('code objects: $name', ({ layout: l }) => {
  it('decodes names, first line, bytecode range and locations', () => {
    const info = decodeCodeObject(mem(l, makeCode(l)), l, CODE);
    expect(info).toMatchObject({
      address: CODE,
      qualname: 'Outer.método',
      name: 'método',
      filename: '/srv/app/dätei_😀.py',
      firstLine: 40,
      bytecodeStart: CODE + BigInt(l.code.codeAdaptive),
      bytecodeEnd: CODE + BigInt(l.code.codeAdaptive + UNITS * 2),
    });
    expect(info.locations[info.locations.length - 1]!.end).toBe(UNITS);
    expect(info.locations[5]).toEqual({ start: 10, end: 11, line: 42, endLine: 44, column: 5, endColumn: 10 });
    expect(codeRange(info)).toEqual({ address: CODE, bytecodeStart: info.bytecodeStart, bytecodeEnd: info.bytecodeEnd, frameSize: info.frameSize });
    // the frame size: header, plus co_nlocalsplus + co_stacksize words (both 0 in this object)
    expect(info.frameSize).toBe(l.frame.localsplus);
  });

  it('only the fields are needed, not the bytecode', () => {
    const regions = makeCode(l);
    regions[0] = { address: CODE, bytes: regions[0]!.bytes.subarray(0, l.code.codeAdaptive) };
    expect(decodeCodeObject(mem(l, regions), l, CODE).qualname).toBe('Outer.método');
  });

  it('a 100 KB qualname and firstlineno 0 decode', () => {
    const long = 'Cls.'.repeat(25_000) + 'f';
    const info = decodeCodeObject(mem(l, makeCode(l, { qualname: long, firstLine: 0 })), l, CODE);
    expect(info.qualname).toBe(long);
    expect(info.firstLine).toBe(0);
  });

  it.each(['filename', 'name', 'qualname'] as const)('a missing co_%s region names the field', (field) => {
    const e = codeError(l, { omit: [field] });
    expect(e.message).toMatch(
      new RegExp(`^code object at 0x200000: co_${field}: str at 0x[0-9a-f]+: header \\(\\d+ bytes\\) is not in the captured regions`),
    );
    expect(e.address).toBe(CODE);
  });

  it('a missing line table, a NULL pointer, a missing header', () => {
    expect(codeError(l, { omit: ['linetable'] }).message).toMatch(
      /^code object at 0x200000: co_linetable: bytes at 0x330000: header .* not in the captured regions/,
    );
    expect(codeError(l, { nullField: 'qualname' }).message).toBe('code object at 0x200000: co_qualname is NULL');
    expect(codeError(l, { omit: ['header'] }).message).toMatch(
      /^code object at 0x200000: ob_size at 0x[0-9a-f]+ is not in the captured regions/,
    );
    expect(() => decodeCodeObject(mem(l, makeCode(l)), l, CODE + 1n)).toThrow(/not aligned/);
    expect(() => decodeCodeObject(mem(l, []), l, 0n)).toThrow(/code object at 0x0: NULL pointer/);
  });

  it('rejects a bad ob_size, a negative first line and a truncated line table', () => {
    expect(codeError(l, { obSize: -1n }).message).toMatch(/ob_size -1 is not a bytecode length/);
    expect(codeError(l, { obSize: 1n << 30n }).message).toMatch(/ob_size 1073741824 is not a bytecode length/);
    expect(codeError(l, { firstLine: -3 }).message).toMatch(/co_firstlineno -3 is negative/);
    expect(codeError(l, { table: TABLE.subarray(0, TABLE.length - 1) }).message).toMatch(
      /^code object at 0x200000: co_linetable \(bytes at 0x330000\): location table byte 15 of 15: entry that starts at byte 11 is cut short/,
    );
  });
});

describe.each(FLAVORS)('Symbolizer: $name', ({ layout: l }) => {
  it('lines per instruction pointer, memoized; -1 is the first line', () => {
    const s = new Symbolizer(mem(l, makeCode(l)), l);
    const info = s.code(CODE);
    if (info instanceof SymbolError) throw info;
    expect(s.code(CODE)).toBe(info);
    const start = info.bytecodeStart;
    expect(s.line(CODE, start - 2n)).toBe(40);
    LINES.forEach((line, i) => expect(s.line(CODE, start + BigInt(2 * i)), `index ${i}`).toBe(line));
    LINES.forEach((line, i) => expect(s.line(CODE, start + BigInt(2 * i))).toBe(line));
    expect(s.size).toBe(1);
  });

  it('instruction pointers outside the bytecode or misaligned throw', () => {
    const s = new Symbolizer(mem(l, makeCode(l)), l);
    const info = s.code(CODE) as Exclude<ReturnType<Symbolizer['code']>, SymbolError>;
    expect(() => s.line(CODE, info.bytecodeStart + 1n)).toThrow(/is not a code unit of code object 0x200000/);
    expect(() => s.line(CODE, info.bytecodeEnd)).toThrow(SymbolError);
    expect(() => s.line(CODE, info.bytecodeStart - 4n)).toThrow(SymbolError);
  });

  it('a code object that fails is memoized as its error', () => {
    const s = new Symbolizer(mem(l, makeCode(l, { omit: ['filename'] })), l);
    const e = s.code(CODE);
    expect(e).toBeInstanceOf(SymbolError);
    expect(s.code(CODE)).toBe(e);
    expect(() => s.line(CODE, CODE + BigInt(l.code.codeAdaptive))).toThrow(e as SymbolError);
  });
});
