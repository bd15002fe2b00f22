// The recorder's bytecode refresh (src/record/copy/code-cache.ts), on a code object laid out by hand
// in a memory the test changes: copied with its bytecode; read again 10 ms after, then after
// 20, 40 … ms (each time on a multiple of the interval); recorded again only when the opcodes
// of its instructions changed — never for its inline caches, which count as the code runs —
// and such a record is no new object at the address (no copy made again with the target
// stopped for it). Both ways a code object is confirmed: re-read (3.11–3.13) and by the count of
// code-object deaths (3.14+), where a steady copy's confirmation lapses while a refresh is due.
import { describe, expect, it } from 'vitest';
import { builtinLayout } from '../src/layout/builtin.js';
import type { Layout } from '../src/layout/layout.js';
import { CodeCache } from '../src/record/copy/code-cache.js';
import type { MemorySource } from '../src/record/copy/source.js';
import { CodeTable } from '../src/symbols/code-table.js';
import { opcodeTable } from '../src/symbols/opcodes.js';

const L: Layout = builtinLayout(0x030c01f0, 'x86_64'); // 3.12.1: prev_instr, its opcode numbering
const ops = opcodeTable(L.code.opcodes)!;
const op = (name: string): number => ops.data.names.indexOf(name);

const TYPE = 0x1000n;
const TYPE_NAME = 0x1100n;
const CODE = 0x20000n;
const QUALNAME = 0x30000n;
const NAME = 0x30100n;
const FILENAME = 0x30200n;
const LINETABLE = 0x30300n;
const INTERP = 0x9000n;

/** A memory of regions the test can change, read as /proc/PID/mem would be. */
class FakeMemory implements MemorySource {
  readonly description = 'fake';
  readonly runtimeAddress = 0n;
  readonly layout = L;
  readonly regions = new Map<bigint, Uint8Array>();
  reads = 0;
  tryRead(address: bigint, length: number): Uint8Array | null {
    this.reads++;
    for (const [at, bytes] of this.regions) {
      const off = Number(address - at);
      if (address >= at && off + length <= bytes.length) return bytes.slice(off, off + length);
    }
    return null;
  }
  read(address: bigint, length: number): Uint8Array {
    const b = this.tryRead(address, length);
    if (!b) throw new Error(`unreadable ${address}`);
    return b;
  }
  close(): void {}
}

const ptr = (b: Uint8Array, off: number, v: bigint): void => new DataView(b.buffer).setBigUint64(off, v, true);

function asciiStr(text: string): Uint8Array {
  const u = L.unicode;
  // (with room after it, as a heap has: the copier reads a little past a short header)
  const b = new Uint8Array(u.asciiSize + text.length + 1 + 128);
  ptr(b, u.length, BigInt(text.length));
  new DataView(b.buffer).setUint32(u.state, (1 << u.kindShift) | (1 << u.compactBit) | (1 << u.asciiBit), true);
  b.set(Buffer.from(text, 'latin1'), u.asciiSize);
  return b;
}

/** hot(): RESUME, LOAD_FAST, LOAD_FAST, BINARY_OP (+1 cache), RETURN_VALUE — as 3.12 lays it out */
const INSTRUCTIONS = ['RESUME', 'LOAD_FAST', 'LOAD_FAST', 'BINARY_OP', 'RETURN_VALUE'];

function memory(): { mem: FakeMemory; bytecode: Uint8Array } {
  const mem = new FakeMemory();
  const type = new Uint8Array(L.type.tpName + 8);
  ptr(type, L.type.tpName, TYPE_NAME);
  mem.regions.set(TYPE, type);
  mem.regions.set(TYPE_NAME, Uint8Array.from(Buffer.from('code\0')));
  const units: number[] = [];
  for (const n of INSTRUCTIONS) {
    units.push(op(n), 0);
    for (let c = 0; c < ops.data.caches[op(n)]!; c++) units.push(0, 0);
  }
  const code = new Uint8Array(L.code.codeAdaptive + units.length);
  ptr(code, L.object.obType, TYPE);
  ptr(code, L.object.obSize, BigInt(units.length / 2));
  new DataView(code.buffer).setInt32(L.code.firstlineno, 10, true);
  ptr(code, L.code.qualname, QUALNAME);
  ptr(code, L.code.name, NAME);
  ptr(code, L.code.filename, FILENAME);
  ptr(code, L.code.linetable, LINETABLE);
  code.set(units, L.code.codeAdaptive);
  mem.regions.set(CODE, code);
  mem.regions.set(QUALNAME, asciiStr('hot'));
  mem.regions.set(NAME, asciiStr('hot'));
  mem.regions.set(FILENAME, asciiStr('app.py'));
  // one location entry (no columns, line 10) for all units
  const table = Uint8Array.from([0x80 | (13 << 3) | 7, 0]);
  const bytes = new Uint8Array(L.bytes.obSval + table.length + 1 + 128);
  ptr(bytes, L.bytes.obSize, BigInt(table.length));
  bytes.set(table, L.bytes.obSval);
  mem.regions.set(LINETABLE, bytes);
  return { mem, bytecode: code.subarray(L.code.codeAdaptive) };
}

/** One copy's check at time `now` (ms), committed: the records it makes. */
function pass(cache: CodeCache, now: number, generation: bigint | null): { records: number; replaced: boolean; changes: boolean } {
  cache.beginPass(now);
  const pending = cache.check([CODE], INTERP, generation);
  const changes = cache.changes(pending);
  const { fresh, replaced } = cache.commit(pending);
  return { records: fresh.length, replaced, changes };
}

/** The name of the instruction at the BINARY_OP's unit, in the record the cache holds now. */
function recorded(cache: CodeCache): string {
  const table = new CodeTable(L, [cache.snapshot(CODE)!]);
  const info = table.code(CODE)!;
  if (!('bytecode' in info) || !info.bytecode) throw new Error('no bytecode recorded');
  return ops.name(ops.instructionAt(info.bytecode, 3, true)!);
}

describe.each([
  ['re-read each copy (3.11–3.13)', null],
  ['confirmed by the count of deaths (3.14+)', 7n],
] as const)('bytecode refresh: %s', (_, generation) => {
  it('copies the bytecode, and records it again when an instruction was specialized', () => {
    const { mem, bytecode } = memory();
    const cache = new CodeCache(mem, L);
    expect(pass(cache, 3, generation)).toMatchObject({ records: 1, replaced: false });
    expect(cache.snapshot(CODE)!.regions[0]!.bytes.length).toBe(L.code.codeAdaptive + bytecode.length);
    expect(recorded(cache)).toBe('BINARY_OP');

    // the interpreter specializes BINARY_OP, and counts in its cache
    bytecode[6] = op('BINARY_OP_ADD_INT');
    bytecode[8] = 0x33;
    // not due before 10 ms: nothing read again
    expect(pass(cache, 9, generation).records).toBe(0);
    expect(recorded(cache)).toBe('BINARY_OP');
    // due at 10 ms: recorded again, replacing the record (a new block), yet no new object
    expect(pass(cache, 10, generation)).toEqual({ records: 1, replaced: true, changes: false });
    expect(recorded(cache)).toBe('BINARY_OP_ADD_INT');

    // the next refresh at 20 ms (twice the interval, on a multiple of it), then 40, 80
    bytecode[8] = 0x44; // its cache only: no record
    expect(pass(cache, 19, generation).records).toBe(0);
    expect(pass(cache, 20, generation).records).toBe(0);
    bytecode[6] = op('BINARY_OP'); // despecialized
    expect(pass(cache, 39, generation).records).toBe(0);
    expect(pass(cache, 40, generation).records).toBe(1);
    expect(recorded(cache)).toBe('BINARY_OP');
    // the interval grows to 10.24 s and stays there
    let now = 40;
    for (let gap = 80; gap <= 10240; gap *= 2) {
      const next = (Math.floor(now / gap) + 1) * gap;
      bytecode[6] = bytecode[6] === op('BINARY_OP') ? op('BINARY_OP_ADD_INT') : op('BINARY_OP');
      expect(pass(cache, next - 1, generation).records, `before ${next}`).toBe(0);
      expect(pass(cache, next, generation).records, `at ${next}`).toBe(1);
      now = next;
    }
    bytecode[6] = bytecode[6] === op('BINARY_OP') ? op('BINARY_OP_ADD_INT') : op('BINARY_OP');
    const last = (Math.floor(now / 10240) + 1) * 10240;
    expect(pass(cache, last - 1, generation).records).toBe(0);
    expect(pass(cache, last, generation).records).toBe(1);
  });

  it('without bytecode (the recorder before opcodes): the fixed part alone, never refreshed', () => {
    const { mem, bytecode } = memory();
    const cache = new CodeCache(mem, L, false);
    expect(pass(cache, 3, generation).records).toBe(1);
    expect(cache.snapshot(CODE)!.regions[0]!.bytes.length).toBe(L.code.size);
    bytecode[6] = op('BINARY_OP_ADD_INT');
    for (const t of [10, 20, 40, 80, 160]) expect(pass(cache, t, generation).records).toBe(0);
  });
});

describe('bytecode refresh and the steady copy', () => {
  it('a confirmation lapses while a refresh is due, and a new round says so', () => {
    const { mem } = memory();
    const cache = new CodeCache(mem, L);
    pass(cache, 3, 7n);
    expect(cache.confirmed(CODE, INTERP, 7n)).toBe(true);
    const round = cache.refreshRound;
    cache.beginPass(9);
    expect(cache.refreshRound).toBe(round);
    cache.beginPass(10);
    expect(cache.refreshRound).toBe(round + 1);
    expect(cache.confirmed(CODE, INTERP, 7n)).toBe(false);
    // refreshed (unchanged): confirmed again until 20 ms
    expect(pass(cache, 10, 7n).records).toBe(0);
    expect(cache.confirmed(CODE, INTERP, 7n)).toBe(true);
    cache.beginPass(15);
    expect(cache.refreshRound).toBe(round + 1);
    cache.beginPass(20);
    expect(cache.refreshRound).toBe(round + 2);
  });
});

// A withdrawal (no code object at the address any more) is a record of the capture like any
// other: a code object recorded there after it replaces it, and so must begin a new block —
// else the writer, which puts a block's code records before its samples, puts the new record
// before the samples the withdrawal was for, and they are named by a function that did not
// exist yet (seen on 3.15 in test/code-reuse.test.ts: a sample named f_246 while f_244 ran).
describe.each([
  ['re-read each copy (3.11–3.13)', null, null, null],
  ['confirmed by the count of deaths (3.14+)', 7n, 8n, 9n],
] as const)('a code object after a withdrawal: %s', (_, first, second, third) => {
  it('replaces the withdrawal', () => {
    const { mem } = memory();
    const cache = new CodeCache(mem, L);
    expect(pass(cache, 3, first)).toMatchObject({ records: 1, replaced: false });
    const code = mem.regions.get(CODE)!;
    mem.regions.delete(CODE);
    expect(pass(cache, 4, second)).toMatchObject({ records: 1, replaced: true });
    expect(cache.snapshot(CODE)).toBeNull();
    // another function at the address
    mem.regions.set(CODE, code);
    mem.regions.set(QUALNAME, asciiStr('cold'));
    mem.regions.set(NAME, asciiStr('cold'));
    expect(pass(cache, 5, third)).toMatchObject({ records: 1, replaced: true });
    expect(cache.snapshot(CODE)).not.toBeNull();
  });
});
