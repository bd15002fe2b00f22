// Layouts from real _Py_DebugOffsets tables, from the built-in 3.11/3.12 tables, and the
// errors malformed tables give.
//
// Fixtures (test/fixtures/debug-offsets/*.bin): the first 1024 bytes of `_PyRuntime` of real
// interpreters, dumped once. native-*: the process's /proc/PID/mem at the address of the
// `.PyRuntime` ELF section (plus the load bias of libpython for pyenv's PIE build): pyenv 3.13.0,
// and the Debian 3.13.18/3.14.10/3.15.2 of scripts/provision-cpython.sh. pyodide-*:
// `HEAPU8.slice(_module.__PyRuntime, +1024)` of pyodide 314.0.7 (3.14.2), 315.0.0-alpha.2
// (3.15.0rc1) and 0.29.3 (3.13.2, not a project dependency).
// test/fixtures/offsets.c prints offsetof/sizeof against an interpreter's installed headers.

import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { TABLE_SHAPES } from '../src/layout/debug-offsets.js';
import {
  DEBUG_OFFSETS_READ_SIZE,
  LayoutError,
  builtinLayout,
  formatVersion,
  hasDebugOffsetsCookie,
  layoutFromDebugOffsets,
  layoutFromSource,
  parseVersionHex,
  type Layout,
} from '../src/layout/index.js';
import { recordCoverage, skipTest } from './helpers/coverage.js';
import { liveLayout, nativeInterpreters } from '../harness/interpreters.js';

const FIXTURES = path.resolve('test/fixtures/debug-offsets');
const fixture = (name: string): Uint8Array => new Uint8Array(fs.readFileSync(path.join(FIXTURES, name)));

/** A copy of `bytes` with the uint64 at byte `at` set to `value`. */
function patched(bytes: Uint8Array, at: number, value: bigint): Uint8Array {
  const out = new Uint8Array(bytes);
  new DataView(out.buffer).setBigUint64(at, value, true);
  return out;
}

function u64(bytes: Uint8Array, at: number): bigint {
  return new DataView(bytes.buffer, bytes.byteOffset).getBigUint64(at, true);
}

function layoutError(fn: () => unknown): LayoutError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(LayoutError);
    return e as LayoutError;
  }
  throw new Error('expected a LayoutError, nothing was thrown');
}

// Positions inside the tables (byte offsets of the uint64 slots), from the headers.
const AT_313 = { version: 8, freeThreaded: 16, tstateSize: 152, currentFrame: 184, codeSize: 272 };
const AT_315 = { tstateSize: 176, currentFrame: 208, llistPrev: 832 };

interface FixtureCase {
  file: string;
  version: string;
  tableSize: number;
  expected: Record<string, unknown>;
}

// Values from the reference notes (live readouts) and offsetof against each version's headers.
const CASES: FixtureCase[] = [
  {
    file: 'native-3.13.0.bin', version: '3.13.0', tableSize: 584,
    expected: {
      pointerSize: 8, bottom: 'entry-frame', executableTagMask: 0,
      runtime: { interpretersHead: 632 },
      interp: { id: 7272, next: 7264, threadsHead: 7344, threadsMain: null, codeObjectGeneration: null },
      tstate: { size: 304, currentFrame: 72, threadId: 152, nativeThreadId: 160, datastackChunk: 232, baseFrame: null },
      frame: { size: 80, previous: 8, executable: 0, instrPtr: 56, owner: 70 },
      code: { size: 208, filename: 112, name: 120, qualname: 128, linetable: 136, firstlineno: 68, codeAdaptive: 200 },
      object: { size: 16, obType: 8 }, type: { tpName: 24, tpFlags: 168 },
      unicode: { length: 16, state: 32, asciiSize: 40 }, bytes: { obSize: 16, obSval: 32 },
      owners: { interpreter: null, cstack: 3 },
    },
  },
  {
    file: 'native-3.13.18.bin', version: '3.13.18', tableSize: 584,
    // 3.13.x grew PyThreadState at its end (datastack_cached_chunk); offsets stayed
    expected: { pointerSize: 8, tstate: { size: 312, currentFrame: 72 }, frame: { owner: 70 }, code: { qualname: 128 } },
  },
  {
    file: 'native-3.14.10.bin', version: '3.14.10', tableSize: 760,
    expected: {
      pointerSize: 8, bottom: 'entry-frame', executableTagMask: 3,
      interp: { threadsMain: 7360, codeObjectGeneration: 7992 },
      tstate: { size: 832, currentFrame: 72, datastackChunk: 232, baseFrame: null, holdsGil: null },
      frame: { size: 88, owner: 74, instrPtr: 56 },
      code: { size: 216, qualname: 128, codeAdaptive: 208 },
      gen: { iframe: 72, frameState: 67 },
      owners: { interpreter: 3, cstack: 4 },
    },
  },
  {
    file: 'native-3.15.2.bin', version: '3.15.2', tableSize: 888,
    expected: {
      pointerSize: 8, bottom: 'base-frame', executableTagMask: 3,
      runtime: { interpretersHead: 936 },
      tstate: {
        size: 888, currentFrame: 72, baseFrame: 80, lastProfiledFrame: 88, lastProfiledFrameSeq: 96,
        threadId: 176, nativeThreadId: 184, datastackChunk: 256, holdsGil: 36,
      },
      frame: { size: 88, owner: 74 },
      unicode: { asciiSize: 40, compactSize: 56 },
      gen: { iframe: 72, frameState: 67 },
      owners: { interpreter: 3, cstack: null },
    },
  },
  {
    file: 'pyodide-3.13.2.bin', version: '3.13.2', tableSize: 584,
    expected: {
      pointerSize: 4, runtime: { interpretersHead: 620 },
      interp: { next: 3644, threadsHead: 3704 },
      tstate: { size: 184, next: 4, interp: 8, currentFrame: 52, threadId: 92, nativeThreadId: 96, datastackChunk: 144 },
      frame: { size: 44, previous: 4, instrPtr: 28, owner: 38 },
      code: { size: 128, filename: 80, qualname: 88, firstlineno: 44, codeAdaptive: 124 },
      object: { size: 8, obType: 4 }, unicode: { length: 8, state: 16, asciiSize: 20, compactSize: 28 },
      bytes: { obSize: 8, obSval: 16 }, gen: { iframe: 36, frameState: 35 },
    },
  },
  {
    file: 'pyodide-3.14.2.bin', version: '3.14.2', tableSize: 760,
    expected: {
      pointerSize: 4, runtime: { interpretersHead: 796 },
      interp: { threadsHead: 3704, threadsMain: 3712 },
      tstate: { size: 704, currentFrame: 52, datastackChunk: 144, datastackTop: 148, datastackLimit: 152 },
      frame: { size: 44, previous: 4, owner: 38 }, gen: { iframe: 36, frameState: 35 },
    },
  },
  {
    file: 'pyodide-3.15.0rc1.bin', version: '3.15.0rc1', tableSize: 888,
    expected: {
      pointerSize: 4, bottom: 'base-frame', runtime: { interpretersHead: 924 },
      tstate: {
        size: 736, currentFrame: 56, baseFrame: 60, lastProfiledFrame: 64, lastProfiledFrameSeq: 68,
        threadId: 108, datastackChunk: 160, holdsGil: 20,
      },
      frame: { size: 44, previous: 4, executable: 0, instrPtr: 28, owner: 38 },
      code: { size: 132, filename: 80, name: 84, qualname: 88, linetable: 92, firstlineno: 44, codeAdaptive: 128 },
      unicode: { state: 16, length: 8, asciiSize: 20, compactSize: 28 },
      gen: { iframe: 36, frameState: 35 },
    },
  },
];

/** Every offset the Layout exposes fits its struct, and the derived ones follow their rules. */
function expectConsistent(l: Layout): void {
  const p = l.pointerSize;
  const t = l.tstate;
  for (const off of [t.prev, t.next, t.interp, t.currentFrame, t.threadId, t.nativeThreadId, t.datastackLimit,
    t.baseFrame ?? 0, t.lastProfiledFrame ?? 0, t.lastProfiledFrameSeq ?? 0]) {
    expect(off + p).toBeLessThanOrEqual(t.size);
  }
  expect(t.datastackTop).toBe(t.datastackChunk + p);
  expect(t.datastackLimit).toBe(t.datastackChunk + 2 * p);
  for (const off of [l.frame.previous, l.frame.executable, l.frame.instrPtr]) expect(off + p).toBeLessThanOrEqual(l.frame.size);
  expect(l.frame.owner).toBeLessThan(l.frame.size);
  for (const off of [l.code.filename, l.code.name, l.code.qualname, l.code.linetable]) expect(off + p).toBeLessThanOrEqual(l.code.size);
  expect(l.code.codeAdaptive).toBeLessThan(l.code.size);
  expect(l.chunk).toEqual({ previous: 0, size: p, top: 2 * p, data: 3 * p });
  expect(l.object).toEqual({ size: 2 * p, obType: p, obSize: 2 * p });
  expect(l.unicode.legacyData).toBe(l.unicode.compactSize);
  expect(l.unicode.compactSize).toBeGreaterThan(l.unicode.asciiSize);
  expect(l.owners).toMatchObject({ thread: 0, generator: 1, frameObject: 2 });
  expect(l.freeThreaded).toBe(false);
}

describe('layoutFromDebugOffsets on real tables', () => {
  it('knows the table sizes of 3.13, 3.14 and the 3.15 candidates', () => {
    expect(TABLE_SHAPES.get(13)!.map((s) => s.size)).toEqual([584]);
    expect(TABLE_SHAPES.get(14)!.map((s) => s.size)).toEqual([760]);
    expect(TABLE_SHAPES.get(15)!.map((s) => s.size)).toEqual([888, 840, 824]);
    expect(DEBUG_OFFSETS_READ_SIZE).toBeGreaterThanOrEqual(888);
  });

  for (const c of CASES) {
    it(`parses ${c.file}`, () => {
      const bytes = fixture(c.file);
      expect(bytes.length).toBe(DEBUG_OFFSETS_READ_SIZE);
      expect(hasDebugOffsetsCookie(bytes)).toBe(true);
      const l = layoutFromDebugOffsets(bytes);
      expect(formatVersion(l.version)).toBe(c.version);
      expect(l.id).toBe(`debug-offsets/3.${l.version.minor}/${c.tableSize}`);
      expect(l.source.kind).toBe('debug-offsets');
      expect((l.source as { bytes: Uint8Array }).bytes).toEqual(bytes.subarray(0, c.tableSize));
      expect(l).toMatchObject(c.expected);
      expect(l.frame.isEntry).toBeNull();
      expect(l.frame.instrPtrIsPrevious).toBe(false);
      expect(l.tstate.cframeCurrentFrame).toBeNull();
      expect(l.unicode).toMatchObject({ kindShift: 2, compactBit: 5, asciiBit: 6 });
      expectConsistent(l);
    });
  }

  it('accepts a buffer longer than the table', () => {
    const big = new Uint8Array(4096);
    big.set(fixture('native-3.15.2.bin'));
    expect(layoutFromDebugOffsets(big).id).toBe('debug-offsets/3.15/888');
  });

  it('copies the table into the source, so later changes to the buffer do not leak in', () => {
    const bytes = fixture('native-3.14.10.bin');
    const l = layoutFromDebugOffsets(bytes);
    bytes.fill(0);
    expect(layoutFromSource(l.source)).toEqual(l);
  });

  // The smaller 3.15 tables of the development cycle, rebuilt from the 888-byte one by
  // dropping the fields they did not have yet: the anchors must pick each of them.
  it.each([
    [840, ['thread_state.last_profiled_frame_seq', 'type_object.tp_basicsize', 'type_object.tp_dictoffset',
      'heap_type_object.size', 'heap_type_object.ht_cached_keys', 'unicode_object.compactunicodeobject_size']],
    [824, ['thread_state.last_profiled_frame_seq', 'type_object.tp_basicsize', 'type_object.tp_dictoffset',
      'heap_type_object.size', 'heap_type_object.ht_cached_keys', 'unicode_object.compactunicodeobject_size',
      'gc.generation_stats_size', 'gc.generation_stats']],
  ])('picks the %i-byte 3.15 table by its anchors', (size, dropped) => {
    const full = TABLE_SHAPES.get(15)![0]!;
    const src = fixture('native-3.15.2.bin');
    const drop = new Set(dropped.map((k) => full.at.get(k)!));
    const words: Uint8Array[] = [src.subarray(0, 24)];
    for (let at = 24; at < full.size; at += 8) if (!drop.has(at)) words.push(src.subarray(at, at + 8));
    const out = new Uint8Array(DEBUG_OFFSETS_READ_SIZE);
    let pos = 0;
    for (const w of words) {
      out.set(w, pos);
      pos += w.length;
    }
    expect(pos).toBe(size);
    const l = layoutFromDebugOffsets(out);
    expect(l.id).toBe(`debug-offsets/3.15/${size}`);
    expect(l.tstate).toMatchObject({ currentFrame: 72, baseFrame: 80, lastProfiledFrame: 88, lastProfiledFrameSeq: null, threadId: 176 });
    expect(l.unicode.compactSize).toBe(l.unicode.asciiSize + 16);
    expect(l.gen).toEqual({ iframe: 72, frameState: 67 });
    expect(layoutFromSource(l.source)).toEqual(l);
  });
});

describe('layoutFromDebugOffsets on malformed tables', () => {
  const t313 = () => fixture('native-3.13.0.bin');
  const t315 = () => fixture('native-3.15.2.bin');

  it('rejects a wrong cookie', () => {
    const bytes = t313();
    bytes[0] = 'X'.charCodeAt(0);
    expect(hasDebugOffsetsCookie(bytes)).toBe(false);
    expect(layoutError(() => layoutFromDebugOffsets(bytes)).message).toMatch(/no "xdebugpy" cookie.*found "Xdebugpy"/);
    expect(layoutError(() => layoutFromDebugOffsets(new Uint8Array(1024))).message).toMatch(/cookie/);
  });

  it('rejects a buffer shorter than the table', () => {
    expect(layoutError(() => layoutFromDebugOffsets(t313().subarray(0, 500))).message).toBe(
      'debug offsets: buffer holds 500 bytes but the 3.13 table is 584 bytes',
    );
    expect(layoutError(() => layoutFromDebugOffsets(t313().subarray(0, 583))).message).toMatch(/583 bytes/);
    expect(layoutError(() => layoutFromDebugOffsets(t313().subarray(0, 16))).message).toMatch(/header alone needs 24/);
    // between the smallest 3.15 candidate and the real one: the real one is too long, the others do not fit
    const msg = layoutError(() => layoutFromDebugOffsets(t315().subarray(0, 880))).message;
    expect(msg).toMatch(/no known 3\.15 table layout fits/);
    expect(msg).toMatch(/888-byte table: the buffer holds only 880 bytes/);
    expect(layoutError(() => layoutFromDebugOffsets(t315().subarray(0, 800))).message).toMatch(/at least 824 bytes/);
  });

  it('rejects an unknown minor version', () => {
    for (const [hex, want] of [[0x031000a0n, '3.16'], [0x030c01f0n, '3.12'], [0x040000f0n, '4.0']] as const) {
      const msg = layoutError(() => layoutFromDebugOffsets(patched(t313(), AT_313.version, hex))).message;
      expect(msg).toBe(`debug offsets: unsupported Python ${want} (debug offsets version 0x${hex.toString(16)})`);
    }
    const bad = patched(t313(), AT_313.version, 0x1_030d00f0n);
    expect(layoutError(() => layoutFromDebugOffsets(bad)).message).toMatch(/version 0x1030d00f0 is not a PY_VERSION_HEX/);
  });

  it('rejects a malformed release level', () => {
    expect(layoutError(() => layoutFromDebugOffsets(patched(t313(), AT_313.version, 0x030d0000n))).message).toMatch(
      /release level 0x0/,
    );
  });

  it('rejects a free-threaded build', () => {
    const msg = layoutError(() => layoutFromDebugOffsets(patched(t313(), AT_313.freeThreaded, 1n))).message;
    expect(msg).toMatch(/free-threaded build .* is not supported/);
  });

  it('rejects an offset beyond its section size', () => {
    const msg = layoutError(() => layoutFromDebugOffsets(patched(t313(), AT_313.currentFrame, 4096n))).message;
    expect(msg).toBe(
      'debug offsets: invalid 3.13 table (584 bytes, version 0x30d00f0): ' +
        'thread_state.current_frame = 4096 is outside thread_state.size = 304',
    );
    // inside the struct, but the 8-byte pointer would run past its end
    expect(layoutError(() => layoutFromDebugOffsets(patched(t313(), AT_313.currentFrame, 300n))).message).toBe(
      'debug offsets (3.13, 584-byte table): thread_state.current_frame = 300 with width 8 runs past thread_state.size = 304',
    );
    expect(layoutError(() => layoutFromDebugOffsets(patched(t313(), AT_313.currentFrame, 73n))).message).toMatch(
      /thread_state\.current_frame = 73 is not aligned to 8 bytes/,
    );
    // datastack_top/limit are derived: a datastack_chunk at the very end leaves no room for them
    const chunkAt = TABLE_SHAPES.get(13)![0]!.at.get('thread_state.datastack_chunk')!;
    expect(layoutError(() => layoutFromDebugOffsets(patched(t313(), chunkAt, 288n))).message).toMatch(
      /datastack_limit .* = 304 is outside thread_state\.size = 304/,
    );
  });

  it('rejects a section size of 0 or an absurd one', () => {
    expect(layoutError(() => layoutFromDebugOffsets(patched(t313(), AT_313.codeSize, 0n))).message).toMatch(
      /code_object\.size = 0 \(expected 1\.\.16777216\)/,
    );
    expect(layoutError(() => layoutFromDebugOffsets(patched(t313(), AT_313.tstateSize, 1n << 40n))).message).toMatch(
      /thread_state\.size = 1099511627776 \(expected 1\.\.16777216\)/,
    );
    expect(layoutError(() => layoutFromDebugOffsets(patched(t315(), AT_315.tstateSize, 0n))).message).toMatch(
      /888-byte table: thread_state\.size = 0/,
    );
  });

  it('rejects a 3.15 table whose anchors fit no candidate', () => {
    const msg = layoutError(() => layoutFromDebugOffsets(patched(t315(), AT_315.llistPrev, 7n))).message;
    expect(msg).toMatch(/^debug offsets: no known 3\.15 table layout fits \(version 0x30f02f0\): /);
    expect(msg).toMatch(/888-byte table: llist_node\.prev = 7 \(expected the pointer size 8\)/);
    expect(msg).toMatch(/840-byte table: pyobject\.size = 0 \(expected 16 or 8\)/);
    expect(msg).toMatch(/824-byte table: /);
  });

  it('rejects a pointer size that is neither 8 nor 4', () => {
    const at = TABLE_SHAPES.get(13)![0]!.at.get('thread_state.next')!;
    expect(layoutError(() => layoutFromDebugOffsets(patched(t313(), at, 16n))).message).toMatch(
      /thread_state\.next = 16 \(expected the pointer size, 8 or 4\)/,
    );
  });

  it('never reads outside the buffer or throws anything but LayoutError on random tables', () => {
    // random words in the table of each version: parsing either succeeds or says what is wrong
    let seed = 12345;
    const rnd = () => (seed = (seed * 1103515245 + 12345) >>> 0);
    for (const file of ['native-3.13.0.bin', 'native-3.14.10.bin', 'native-3.15.2.bin', 'pyodide-3.15.0rc1.bin']) {
      for (let i = 0; i < 200; i++) {
        let bytes = fixture(file);
        const at = 24 + 8 * (rnd() % 108);
        const choices = [0n, 1n, 3n, 4n, 8n, 1n << 24n, 1n << 63n, BigInt(rnd() % 4096)];
        bytes = patched(bytes, at, choices[rnd() % choices.length]!);
        try {
          expectConsistent(layoutFromDebugOffsets(bytes));
        } catch (e) {
          expect(e).toBeInstanceOf(LayoutError);
        }
      }
    }
  });
});

describe('versions', () => {
  it('parses and formats PY_VERSION_HEX', () => {
    expect(parseVersionHex(0x030f00c1)).toEqual({ major: 3, minor: 15, micro: 0, level: 0xc, serial: 1, hex: 0x030f00c1 });
    expect(formatVersion(parseVersionHex(0x030f00c1))).toBe('3.15.0rc1');
    expect(formatVersion(parseVersionHex(0x030d00f0))).toBe('3.13.0');
    expect(formatVersion(parseVersionHex(0x030e00a2))).toBe('3.14.0a2');
    expect(formatVersion(parseVersionHex(0x030f00b4))).toBe('3.15.0b4');
    expect(formatVersion(parseVersionHex(0x030b07f0))).toBe('3.11.7');
  });

  it('rejects values that are not a PY_VERSION_HEX', () => {
    for (const bad of [-1, 1.5, 2 ** 32, 0x030d0050, Number.NaN]) expect(() => parseVersionHex(bad)).toThrow(LayoutError);
  });
});

describe('builtinLayout', () => {
  it.each([
    [0x030b07f0, 'x86_64', 'builtin/3.11/x86_64', 8],
    [0x030b03f0, 'wasm32', 'builtin/3.11/wasm32', 4],
    [0x030c01f0, 'x86_64', 'builtin/3.12/x86_64', 8],
    [0x030c07f0, 'wasm32', 'builtin/3.12/wasm32', 4],
  ] as const)('0x%s on %s', (hex, arch, id, ptr) => {
    const l = builtinLayout(hex, arch);
    expect(l.id).toBe(id);
    expect(l.pointerSize).toBe(ptr);
    expect(l.source).toEqual({ kind: 'builtin', id, versionHex: hex });
    expect(l.version.hex).toBe(hex);
    expect(l.frame.instrPtrIsPrevious).toBe(true);
    expect(l.tstate.cframeCurrentFrame).not.toBeNull();
    expect(l.tstate).toMatchObject({ baseFrame: null, lastProfiledFrame: null, lastProfiledFrameSeq: null, holdsGil: null });
    expect(l.executableTagMask).toBe(0);
    if (l.version.minor === 11) {
      expect(l.bottom).toBe('is-entry-flag');
      expect(l.frame.isEntry).not.toBeNull();
      expect(l.owners).toEqual({ thread: 0, generator: 1, frameObject: 2, interpreter: null, cstack: null });
    } else {
      expect(l.bottom).toBe('entry-frame');
      expect(l.frame.isEntry).toBeNull();
      expect(l.owners).toEqual({ thread: 0, generator: 1, frameObject: 2, interpreter: null, cstack: 3 });
    }
    expectConsistent(l);
    expect(layoutFromSource(l.source)).toEqual(l);
  });

  it('checks the wasm32 numbers measured in Pyodide 0.25.1 (3.11.3) and 0.27.7 (3.12.7)', () => {
    expect(builtinLayout(0x030b03f0, 'wasm32')).toMatchObject({
      runtime: { interpretersHead: 36 },
      interp: { id: 40, next: 0, threadsHead: 16 },
      tstate: { size: 208, currentFrame: 40, cframeCurrentFrame: 4, threadId: 88, datastackChunk: 172 },
      frame: { size: 44, previous: 24, executable: 16, instrPtr: 28, isEntry: 36, owner: 37 },
      code: { qualname: 88, firstlineno: 48, codeAdaptive: 116 },
      unicode: { asciiSize: 24, compactSize: 36 },
      gen: { iframe: 40, frameState: 39 },
    });
    expect(builtinLayout(0x030c07f0, 'wasm32')).toMatchObject({
      runtime: { interpretersHead: 28 },
      interp: { id: 8, next: 0, threadsHead: 64 },
      tstate: { size: 168, currentFrame: 40, cframeCurrentFrame: 0, threadId: 80, datastackChunk: 136 },
      frame: { size: 44, previous: 4, executable: 0, instrPtr: 28, owner: 38 },
      code: { qualname: 88, firstlineno: 44, codeAdaptive: 124 },
      unicode: { asciiSize: 20, compactSize: 28 },
      gen: { iframe: 36, frameState: 35 },
    });
  });

  it('returns a fresh object each time', () => {
    const a = builtinLayout(0x030c01f0, 'x86_64');
    a.tstate.size = 1;
    expect(builtinLayout(0x030c01f0, 'x86_64').tstate.size).toBe(288);
  });

  it('rejects versions and architectures it has no table for', () => {
    expect(layoutError(() => builtinLayout(0x030d00f0, 'x86_64')).message).toMatch(
      /none for Python 3\.13 on x86_64 .* use layoutFromDebugOffsets/,
    );
    expect(layoutError(() => builtinLayout(0x030a0df0, 'x86_64')).message).toMatch(/none for Python 3\.10/);
    expect(layoutError(() => builtinLayout(0x030b07f0, 'arm64' as 'x86_64')).message).toMatch(/unknown architecture "arm64"/);
    expect(() => builtinLayout(-5, 'x86_64')).toThrow(LayoutError);
  });
});

describe('layoutFromSource', () => {
  it('round-trips every fixture and both builtin arches', () => {
    for (const c of CASES) {
      const l = layoutFromDebugOffsets(fixture(c.file));
      expect(layoutFromSource(l.source)).toEqual(l);
    }
    const b = builtinLayout(0x030b07f0, 'wasm32');
    expect(layoutFromSource({ kind: 'builtin', id: b.id, versionHex: 0x030b07f0 })).toEqual(b);
  });

  it('rejects a builtin id that does not match its version, or is malformed', () => {
    expect(layoutError(() => layoutFromSource({ kind: 'builtin', id: 'builtin/3.11/x86_64', versionHex: 0x030c01f0 })).message)
      .toMatch(/"builtin\/3\.11\/x86_64" does not match version 0x30c01f0 \(3\.12\)/);
    expect(layoutError(() => layoutFromSource({ kind: 'builtin', id: 'builtin/3.11', versionHex: 0x030b07f0 })).message)
      .toMatch(/malformed id/);
    expect(() => layoutFromSource({ kind: 'nope' } as never)).toThrow(LayoutError);
  });
});

// ---------------------------------------------------------------------------------------------
// offsetof/sizeof against each native interpreter's own installed headers (pyenv builds ship
// them; Debian's only with its -dev package: without headers the target is skipped, saying so).

function hasGcc(): boolean {
  try {
    execFileSync('gcc', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** Runs offsets.c compiled against `include`; a string says why it could not. */
function measuredOffsets(include: string): Map<string, number> | string {
  if (!hasGcc()) return 'gcc is not installed';
  if (!fs.existsSync(path.join(include, 'internal', 'pycore_frame.h'))) return `no internal headers in ${include}`;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pyunwind-offsets-'));
  try {
    const exe = path.join(dir, 'offsets');
    // the parent directory too: Debian's pyconfig.h includes <x86_64-linux-gnu/python3.X/pyconfig.h>
    const dirs = [include, path.join(include, 'internal'), path.dirname(include)];
    execFileSync('gcc', [...dirs.flatMap((d) => ['-I', d]), path.resolve('test/fixtures/offsets.c'), '-o', exe], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    const out = execFileSync(exe, { encoding: 'utf8' });
    return new Map(out.trim().split('\n').map((line) => {
      const [k, v] = line.split(' ');
      return [k!, Number(v)] as const;
    }));
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** The Layout's numeric leaves as "section.field" → value (what offsets.c prints). */
function numericLeaves(l: Layout): Map<string, number> {
  const out = new Map<string, number>();
  const walk = (prefix: string, v: unknown) => {
    if (typeof v === 'number') out.set(prefix, v);
    else if (v && typeof v === 'object') for (const [k, x] of Object.entries(v)) walk(prefix ? `${prefix}.${k}` : k, x);
  };
  // not struct offsets: the tag mask is a property of _PyStackRef, not measurable by offsetof;
  // nor is the stack slot where a suspended `await` keeps the awaited object (a property of
  // the SEND instruction, as CPython's own reader takes it)
  const { id: _id, source: _source, version: _version, executableTagMask: _mask, ...rest } = l;
  walk('', rest);
  out.delete('objects.awaitedSlot');
  out.set('version.hex', l.version.hex);
  return out;
}

describe('offsets.c against the interpreters\' headers', () => {
  for (const interp of nativeInterpreters()) {
    it(`${interp.label}: the layout equals offsetof/sizeof`, async (ctx) => {
      const skip = (reason: string) => skipTest(ctx, 'layout offsetof', interp.label, reason);
      if (interp.missing) return skip(interp.missing);
      const [hexLine, include] = execFileSync(
        interp.command,
        ['-c', 'import sys, sysconfig; print(sys.hexversion); print(sysconfig.get_paths()["include"])'],
        { encoding: 'utf8', timeout: 20_000 },
      ).trim().split('\n');
      const measured = measuredOffsets(include!);
      if (typeof measured === 'string') return skip(measured);
      expect(measured.get('version.hex')).toBe(Number(hexLine));
      // the layout pyunwind builds for this very interpreter, read live (3.13+: its debug
      // offsets, so what the table lacks and pyunwind derives is checked too)
      const layout = await liveLayout(interp.command);
      const ours = Object.fromEntries(numericLeaves(layout));
      const theirs = Object.fromEntries(measured);
      expect(ours).toEqual(theirs);
      recordCoverage('layout offsetof', interp.label, true);
    });
  }
});
