// The native (x86-64) unwinder: the reference (src/native/unwind.ts) on hand-built stacks, one
// case per rule and status, each expected from first principles — and its WebAssembly twin
// (assembly/native-unwind.ts through src/kernel/native-unwinder.ts), both builds, giving the
// same answer on each and on hostile input (a property test). Then the CFI reader on a real
// object: the .eh_frame of the libc this process maps.
import fs from 'node:fs';
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import * as abi from '../src/kernel/abi.js';
import { KernelNativeUnwinder, objectPieces } from '../src/kernel/native-unwinder.js';
import { readFrameSection } from '../src/native/eh-frame.js';
import { CFA, RA_UNDEFINED, RBP, ROW_FIELDS, R_CFA, R_CFA_OFFSET, R_RA_OFFSET, R_RBP, R_RBP_OFFSET, rowAt, type UnwindTable } from '../src/native/unwind-table.js';
import { FOUND, UNWIND_STATUS, unwindNative, type MappedObject, type NativeRegisters, type NativeUnwind, type StackCopy } from '../src/native/unwind.js';
import { parseElf } from '../src/record/linux/elf.js';
import { lastAtOrBelow } from '../src/walk/region-index.js';
import { mappedLibrary, nativeInput } from '../fuzz/native-arbitraries.js';
import { skipTest } from './helpers/coverage.js';

const TOP = 1n << 64n;
/** object A: mapped at A, its own addresses from 0 (bias A); object B: no table */
const A = 0x40_0000n;
const B = 0x60_0000n;
/** the stack copy: STACK_BYTES at S */
const S = 0x7ffd_0000_0000n;
const STACK_BYTES = 0x400;
/** where glibc's rt_sigframe keeps the interrupted rbp, rsp, rip: the ucontext at rsp, gregs at +40 */
const UC_RBP = 40n + 10n * 8n;
const UC_RSP = 40n + 15n * 8n;
const UC_RIP = 40n + 16n * 8n;

type Row = [start: number, cfa: number, cfaOffset: number, rbp: number, rbpOffset: number, ra: number];
const tableOf = (rows: Row[]): UnwindTable => ({
  starts: BigUint64Array.from(rows.map((r) => BigInt(r[0]))),
  rules: Int32Array.from(rows.flatMap((r) => r.slice(1))),
});

// object A's functions: f (entry; after push rbp; after mov rbp, rsp), code with no CFI, g,
// _start (the outermost: its return address is undefined), a PLT entry that pushes its argument
// at byte 11, __restore_rt (a signal frame), a broken row whose CFA does not grow
const F = 0x1000n;
const F_PUSHED = 0x1001n;
const F_BODY = 0x1050n;
const NO_CFI = 0x1200n;
const G = 0x2000n;
const START = 0x2100n;
const PLT = 0x2200n;
const RESTORE_RT = 0x2300n;
const BROKEN = 0x2310n;
const TABLE_A = tableOf([
  [0x1000, CFA.RSP, 8, RBP.SAME, 0, -8],
  [0x1001, CFA.RSP, 16, RBP.AT, -16, -8],
  [0x1004, CFA.RBP, 16, RBP.AT, -16, -8],
  [0x1100, CFA.NONE, 0, RBP.SAME, 0, RA_UNDEFINED],
  [0x2000, CFA.RSP, 16, RBP.SAME, 0, -8],
  [0x2100, CFA.RSP, 8, RBP.SAME, 0, RA_UNDEFINED],
  [0x2200, CFA.PLT, 8 | (11 << 24), RBP.SAME, 0, -8],
  [0x2300, CFA.SIGNAL, 8, RBP.SAME, 0, -8],
  [0x2310, CFA.RSP, 0, RBP.SAME, 0, -8],
  [0x2400, CFA.NONE, 0, RBP.SAME, 0, RA_UNDEFINED],
]);
const OBJECTS: MappedObject[] = [
  { start: A, end: A + 0x10000n, bias: A, table: TABLE_A },
  { start: B, end: B + 0x1000n, bias: B, table: null },
];

/** A stack copy with these u64 values at these addresses. */
function stackOf(words: [bigint, bigint][], address = S, size = STACK_BYTES): StackCopy {
  const bytes = new Uint8Array(size);
  const dv = new DataView(bytes.buffer);
  for (const [at, v] of words) dv.setBigUint64(Number(at - address), BigInt.asUintN(64, v), true);
  return { address, bytes };
}

let kernels: KernelNativeUnwinder[] = [];
beforeAll(async () => {
  kernels = [await KernelNativeUnwinder.load({ shared: true }), await KernelNativeUnwinder.load({ shared: false })];
});

/** The reference's unwind, after checking both kernel builds give exactly the same. */
function both(regs: NativeRegisters, stack: StackCopy, objects: readonly MappedObject[] = OBJECTS, maxFrames?: number): NativeUnwind {
  const want = unwindNative(regs, stack, objects, maxFrames);
  for (const k of kernels) {
    k.setObjects(objects);
    expect(k.unwind(regs, stack, maxFrames), `${k.shared ? 'shared' : 'unshared'} kernel vs reference`).toEqual(want);
  }
  return want;
}

const { CFI, FRAME_POINTER: FP, SIGNAL } = FOUND;

describe('the native unwinder, rule by rule (reference and kernel)', () => {
  it('CFA = rsp + offset: a function entered, then its caller, up to the outermost frame', () => {
    // f just entered: its return address at rsp; g keeps 16 bytes (CFA rsp + 16, RA at CFA − 8)
    const stack = stackOf([
      [S + 0x100n, A + G + 5n],
      [S + 0x110n, A + START + 0x50n],
    ]);
    expect(both({ rip: A + F, rsp: S + 0x100n, rbp: 0n }, stack)).toEqual({
      pcs: [A + F, A + G + 5n, A + START + 0x50n],
      found: [CFI, CFI],
      sps: [S + 0x100n, S + 0x108n, S + 0x118n],
      status: 'complete',
    });
  });

  it('CFA = rbp + offset, and rbp restored from where it was saved', () => {
    // f's body: rbp points at the saved rbp, the return address above it
    const stack = stackOf([
      [S + 0x120n, S + 0x200n],
      [S + 0x128n, A + START + 0x50n],
    ]);
    expect(both({ rip: A + F_BODY, rsp: S + 0x100n, rbp: S + 0x120n }, stack)).toEqual({ pcs: [A + F_BODY, A + START + 0x50n], found: [CFI], sps: [S + 0x100n, S + 0x130n], status: 'complete' });
    // after push rbp: CFA rsp + 16, the caller's rbp at CFA − 16 — the frame-pointer walk then
    // follows it (the caller, in code with no CFI)
    const pushed = stackOf([
      [S + 0x100n, S + 0x140n],
      [S + 0x108n, A + NO_CFI],
      [S + 0x140n, 0n],
      [S + 0x148n, 0n],
    ]);
    expect(both({ rip: A + F_PUSHED, rsp: S + 0x100n, rbp: 0x1234n }, pushed)).toEqual({ pcs: [A + F_PUSHED, A + NO_CFI], found: [CFI], sps: [S + 0x100n, S + 0x110n], status: 'complete' });
  });

  it('a return address is looked up one byte back; the first pc is not', () => {
    // f was called from the last instruction of g: its return address is _start's first byte,
    // which must be unwound by g's row (one byte back), not _start's
    const stack = stackOf([
      [S + 0x100n, A + START],
      [S + 0x110n, A + START + 0x50n],
    ]);
    expect(both({ rip: A + F, rsp: S + 0x100n, rbp: 0n }, stack)).toEqual({
      pcs: [A + F, A + START, A + START + 0x50n],
      found: [CFI, CFI],
      sps: [S + 0x100n, S + 0x108n, S + 0x118n],
      status: 'complete',
    });
    // the same address as the thread's pc is _start's own
    expect(both({ rip: A + START, rsp: S + 0x100n, rbp: 0n }, stack).status).toBe('complete');
    expect(both({ rip: A + START, rsp: S + 0x100n, rbp: 0n }, stack).pcs).toEqual([A + START]);
  });

  it('a PLT entry: 8 more bytes of CFA once it has pushed its argument (pc & 15 >= 11)', () => {
    const stack = stackOf([
      [S + 0x100n, A + START + 0x50n],
      [S + 0x108n, A + START + 0x60n],
    ]);
    // at byte 6: nothing pushed yet, the return address at rsp
    expect(both({ rip: A + PLT + 6n, rsp: S + 0x100n, rbp: 0n }, stack)).toEqual({ pcs: [A + PLT + 6n, A + START + 0x50n], found: [CFI], sps: [S + 0x100n, S + 0x108n], status: 'complete' });
    // at byte 11: the argument pushed, the return address at rsp + 8
    expect(both({ rip: A + PLT + 11n, rsp: S + 0x100n, rbp: 0n }, stack)).toEqual({ pcs: [A + PLT + 11n, A + START + 0x60n], found: [CFI], sps: [S + 0x100n, S + 0x110n], status: 'complete' });
  });

  it('a signal frame: the interrupted registers from the ucontext, the interrupted pc looked up as it is', () => {
    // interrupted at f's first byte (one byte back would be before every row of A)
    const rsp = S + 0x100n;
    const stack = stackOf([
      [rsp + UC_RIP, A + F],
      [rsp + UC_RSP, S + 0x300n],
      [rsp + UC_RBP, S + 0x380n],
      [S + 0x300n, A + START + 0x50n],
    ]);
    expect(both({ rip: A + RESTORE_RT, rsp, rbp: 0n }, stack)).toEqual({
      pcs: [A + RESTORE_RT, A + F, A + START + 0x50n],
      found: [SIGNAL, CFI],
      sps: [rsp, S + 0x300n, S + 0x308n],
      status: 'complete',
    });
    // an interrupted rsp that is not above the frame's: not growing; a ucontext past the copy: stack-short
    const back = stackOf([
      [rsp + UC_RIP, A + F],
      [rsp + UC_RSP, rsp],
    ]);
    expect(both({ rip: A + RESTORE_RT, rsp, rbp: 0n }, back).status).toBe('not-growing');
    expect(both({ rip: A + RESTORE_RT, rsp: S + 0x380n, rbp: 0n }, stack)).toEqual({ pcs: [A + RESTORE_RT], found: [], sps: [S + 0x380n], status: 'stack-short' });
  });

  it('no row for a pc: the frame pointer (CFA rbp + 16), in code without CFI and in an object without a table', () => {
    const stack = stackOf([
      [S + 0x140n, S + 0x180n],
      [S + 0x148n, A + F_BODY],
      [S + 0x188n, A + START + 0x50n],
    ]);
    expect(both({ rip: A + NO_CFI, rsp: S + 0x100n, rbp: S + 0x140n }, stack)).toEqual({
      pcs: [A + NO_CFI, A + F_BODY, A + START + 0x50n],
      found: [FP, CFI],
      sps: [S + 0x100n, S + 0x150n, S + 0x190n],
      status: 'complete',
    });
    // below the object's first row too
    expect(both({ rip: A + 0x10n, rsp: S + 0x100n, rbp: S + 0x140n }, stack).found).toEqual([FP, CFI]);
    // a frame-pointer chain ends at a return address of 0
    const end = stackOf([
      [S + 0x140n, 0n],
      [S + 0x148n, 0n],
    ]);
    expect(both({ rip: B + 0x10n, rsp: S + 0x100n, rbp: S + 0x140n }, end)).toEqual({ pcs: [B + 0x10n], found: [], sps: [S + 0x100n], status: 'complete' });
  });

  it('a return address rule "undefined" ends the chain: complete', () => {
    expect(both({ rip: A + START + 0x50n, rsp: S + 0x100n, rbp: 0n }, stackOf([]))).toEqual({ pcs: [A + START + 0x50n], found: [], sps: [S + 0x100n], status: 'complete' });
  });

  it('no-object: a pc in no mapping, first or later', () => {
    expect(both({ rip: 0x30_0000n, rsp: S, rbp: 0n }, stackOf([]))).toEqual({ pcs: [0x30_0000n], found: [], sps: [S], status: 'no-object' });
    const stack = stackOf([[S + 0x100n, 0x30_0000n]]);
    expect(both({ rip: A + F, rsp: S + 0x100n, rbp: 0n }, stack)).toEqual({ pcs: [A + F, 0x30_0000n], found: [CFI], sps: [S + 0x100n, S + 0x108n], status: 'no-object' });
    expect(both({ rip: A + F, rsp: S + 0x100n, rbp: 0n }, stack, []).status).toBe('no-object');
  });

  it('no-rule: no row and no frame pointer into the stack above rsp', () => {
    const stack = stackOf([]);
    expect(both({ rip: A + NO_CFI, rsp: S + 0x100n, rbp: S + 0x80n }, stack)).toEqual({ pcs: [A + NO_CFI], found: [], sps: [S + 0x100n], status: 'no-rule' });
    expect(both({ rip: A + NO_CFI, rsp: S + 0x100n, rbp: S + 0x10000n }, stack).status).toBe('no-rule');
    expect(both({ rip: B, rsp: S + 0x100n, rbp: 0n }, stack).status).toBe('no-rule');
  });

  it('stack-short: a saved value outside the copy, or a CFA outside the address space', () => {
    expect(both({ rip: A + F, rsp: S + BigInt(STACK_BYTES), rbp: 0n }, stackOf([]))).toEqual({ pcs: [A + F], found: [], sps: [S + BigInt(STACK_BYTES)], status: 'stack-short' });
    // 4 of the 8 bytes in the copy
    expect(both({ rip: A + F, rsp: S + BigInt(STACK_BYTES) - 4n, rbp: 0n }, stackOf([])).status).toBe('stack-short');
    // rsp + 16 past 2^64 (a copy at the top of the address space)
    const top = stackOf([[TOP - 8n, A + START + 0x50n]], TOP - 0x100n, 0x100);
    expect(both({ rip: A + G + 5n, rsp: TOP - 8n, rbp: 0n }, top)).toEqual({ pcs: [A + G + 5n], found: [], sps: [TOP - 8n], status: 'stack-short' });
    // … but rsp + 8 at exactly 2^64 is no address either, though the return address is at 2^64 − 8
    expect(both({ rip: A + F, rsp: TOP - 8n, rbp: 0n }, top).status).toBe('stack-short');
    // rbp saved outside the copy
    expect(both({ rip: A + F_BODY, rsp: S + 0x100n, rbp: S + 0x3f8n }, stackOf([])).status).toBe('stack-short');
  });

  it('not-growing: a CFA at or below rsp', () => {
    const stack = stackOf([[S + 0x100n, A + G + 5n]]);
    expect(both({ rip: A + BROKEN, rsp: S + 0x108n, rbp: 0n }, stack)).toEqual({ pcs: [A + BROKEN], found: [], sps: [S + 0x108n], status: 'not-growing' });
  });

  it('too-deep: more frames than the limit (g calling itself)', () => {
    const words: [bigint, bigint][] = [];
    for (let k = 0n; k < 40n; k++) words.push([S + 0x108n + 16n * k, A + G + 5n]);
    const r = both({ rip: A + G + 5n, rsp: S + 0x100n, rbp: 0n }, stackOf(words), OBJECTS, 5);
    expect(r).toEqual({ pcs: Array(5).fill(A + G + 5n), found: [CFI, CFI, CFI, CFI], sps: [0n, 1n, 2n, 3n, 4n].map((k) => S + 0x100n + 16n * k), status: 'too-deep' });
    // limits that are not whole numbers: at least 1, fractions down
    expect(both({ rip: A + G + 5n, rsp: S + 0x100n, rbp: 0n }, stackOf(words), OBJECTS, 0).pcs).toHaveLength(1);
    expect(both({ rip: A + G + 5n, rsp: S + 0x100n, rbp: 0n }, stackOf(words), OBJECTS, Number.NaN).pcs).toHaveLength(1);
    expect(both({ rip: A + G + 5n, rsp: S + 0x100n, rbp: 0n }, stackOf(words), OBJECTS, 3.9).pcs).toHaveLength(3);
  });

  it('machine arithmetic: registers and biases mod 2^64, unknown rules, short rule arrays, overlapping objects', () => {
    const stack = stackOf([
      [S + 0x100n, A + G + 5n],
      [S + 0x110n, A + START + 0x50n],
    ]);
    // registers past 2^64 are taken mod 2^64
    expect(both({ rip: A + F + TOP, rsp: S + 0x100n - TOP, rbp: -1n }, stack).pcs).toEqual([A + F, A + G + 5n, A + START + 0x50n]);
    // a "negative" bias: the object mapped at 0x1000, its addresses from A (as BigInt or as u64)
    for (const bias of [0x1000n - A, TOP + 0x1000n - A]) {
      const low = [{ start: 0x1000n, end: 0x3000n, bias, table: tableOf([[Number(A), CFA.RSP, 8, RBP.SAME, 0, RA_UNDEFINED]]) }];
      expect(both({ rip: 0x1010n, rsp: S, rbp: 0n }, stack, low)).toEqual({ pcs: [0x1010n], found: [], sps: [S], status: 'complete' });
    }
    // a rule no reader writes: no rule (frame pointer), and an rbp rule: rbp lost
    const odd = [{ start: A, end: A + 0x1000n, bias: A, table: tableOf([[0, 9, 8, RBP.SAME, 0, -8]]) }];
    expect(both({ rip: A + 0x10n, rsp: S + 0x100n, rbp: S + 0x80n }, stack, odd).status).toBe('no-rule');
    const lostRbp = [{ start: A, end: A + 0x1000n, bias: A, table: tableOf([[0, CFA.RSP, 8, 7, 0, -8]]) }];
    // (its caller has no table: with rbp lost there is no frame pointer to follow; kept, it is followed to a return address of 0)
    const keptRbp = [{ ...lostRbp[0]!, table: tableOf([[0, CFA.RSP, 8, RBP.SAME, 0, -8]]) }];
    expect(both({ rip: A + 0x10n, rsp: S + 0x100n, rbp: S + 0x300n }, stackOf([[S + 0x100n, B + 0x20n]]), [...lostRbp, OBJECTS[1]!]).status).toBe('no-rule');
    expect(both({ rip: A + 0x10n, rsp: S + 0x100n, rbp: S + 0x300n }, stackOf([[S + 0x100n, B + 0x20n]]), [...keptRbp, OBJECTS[1]!]).status).toBe('complete');
    // a table whose rules hold fewer rows than its starts: the rows both hold
    // (g's pc then falls under f's body row, CFA rbp + 16: past the copy; by g's row it would complete)
    const short = [{ start: A, end: A + 0x10000n, bias: A, table: { starts: TABLE_A.starts, rules: TABLE_A.rules.subarray(0, 3 * ROW_FIELDS + 2) } }];
    expect(both({ rip: A + G + 5n, rsp: S + 0x100n, rbp: S + 0x3f8n }, stack, short).status).toBe('stack-short');
    expect(both({ rip: A + G + 5n, rsp: S + 0x100n, rbp: S + 0x3f8n }, stack).status).toBe('complete');
    // overlapping mappings: the first that holds a pc
    const cover = { start: A + 0x800n, end: A + 0x1800n, bias: A, table: null };
    const framed = stackOf([
      [S + 0x100n, A + G + 5n],
      [S + 0x110n, A + START + 0x50n],
      [S + 0x148n, A + START + 0x50n],
    ]);
    expect(both({ rip: A + F, rsp: S + 0x100n, rbp: S + 0x140n }, framed, [cover, ...OBJECTS]).found).toEqual([FP]);
    expect(both({ rip: A + F, rsp: S + 0x100n, rbp: S + 0x140n }, framed, [...OBJECTS, cover]).found).toEqual([CFI, CFI]);
  });

  it('objects as the kernel takes them: sorted disjoint pieces, the first object winning', () => {
    const o = (start: bigint, end: bigint): MappedObject => ({ start, end, bias: 0n, table: null });
    expect(objectPieces([o(10n, 20n), o(0n, 30n), o(15n, 15n), o(25n, 5n), o(-5n, 2n), o(TOP - 2n, TOP + 9n)])).toEqual([
      { start: 0n, last: 9n, object: 1 },
      { start: 10n, last: 19n, object: 0 },
      { start: 20n, last: 29n, object: 1 },
      { start: TOP - 2n, last: TOP - 1n, object: 5 },
    ]);
  });
});

describe('the native unwinder ABI', () => {
  it('the kernel’s numbers are the reference’s', () => {
    expect([abi.NATIVE_CFA_NONE, abi.NATIVE_CFA_RSP, abi.NATIVE_CFA_RBP, abi.NATIVE_CFA_PLT, abi.NATIVE_CFA_SIGNAL]).toEqual([CFA.NONE, CFA.RSP, CFA.RBP, CFA.PLT, CFA.SIGNAL]);
    expect([abi.NATIVE_RBP_SAME, abi.NATIVE_RBP_AT, abi.NATIVE_RBP_UNDEFINED]).toEqual([RBP.SAME, RBP.AT, RBP.UNDEFINED]);
    expect(abi.NATIVE_RA_UNDEFINED).toBe(RA_UNDEFINED);
    expect(abi.NATIVE_ROW_FIELDS).toBe(ROW_FIELDS);
    expect([abi.NATIVE_R_CFA, abi.NATIVE_R_CFA_OFFSET, abi.NATIVE_R_RBP, abi.NATIVE_R_RBP_OFFSET, abi.NATIVE_R_RA_OFFSET]).toEqual([R_CFA, R_CFA_OFFSET, R_RBP, R_RBP_OFFSET, R_RA_OFFSET]);
    const statuses = [abi.NATIVE_COMPLETE, abi.NATIVE_NO_OBJECT, abi.NATIVE_NO_RULE, abi.NATIVE_STACK_SHORT, abi.NATIVE_NOT_GROWING, abi.NATIVE_TOO_DEEP];
    expect(statuses.map((s) => UNWIND_STATUS[s])).toEqual(['complete', 'no-object', 'no-rule', 'stack-short', 'not-growing', 'too-deep']);
    expect([abi.NATIVE_FOUND_CFI, abi.NATIVE_FOUND_FRAME_POINTER, abi.NATIVE_FOUND_SIGNAL]).toEqual([FOUND.CFI, FOUND.FRAME_POINTER, FOUND.SIGNAL]);
  });
});

describe('kernel and reference agree on hostile tables, stacks and registers', () => {
  it('never throw or trap, and agree (5k cases, both builds)', () => {
    const statuses = new Map<string, number>();
    const found = new Set<number>();
    fc.assert(
      fc.property(nativeInput, ({ regs, stack, objects, maxFrames }) => {
        const r = both(regs, stack, objects, maxFrames);
        statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
        for (const f of r.found) found.add(f);
      }),
      { numRuns: 5000 },
    );
    console.log('native unwind property test: statuses', Object.fromEntries(statuses), 'found', [...found]);
    // the generator must reach every status and every way of finding a caller, or it tests too little
    for (const s of UNWIND_STATUS) expect(statuses.get(s) ?? 0, `status ${s} never produced`).toBeGreaterThan(0);
    expect([...found].sort()).toEqual([CFI, FP, SIGNAL]);
  });
});

describe('readFrameSection on a real object', () => {
  const file = mappedLibrary();
  it('the libc this process maps: a row at each exported function’s start, CFA = rsp + 8, return address at CFA − 8', (ctx) => {
    if (file === null) skipTest(ctx, 'native-unwind', 'libc', 'this process maps no shared library (/proc/self/maps): no real .eh_frame to read');
    const bytes = new Uint8Array(fs.readFileSync(file!));
    const elf = parseElf(bytes, file!);
    const section = elf.section('.eh_frame');
    expect(section, `${file} has .eh_frame`).not.toBeNull();
    const s = section!;
    const table = readFrameSection(bytes.subarray(Number(s.offset), Number(s.offset + s.size)), s.addr, '.eh_frame');
    expect(table.fdes).toBeGreaterThan(100);
    expect(table.rules.length).toBe(table.starts.length * ROW_FIELDS);
    for (let i = 1; i < table.starts.length; i++) if (table.starts[i]! <= table.starts[i - 1]!) throw new Error(`rows out of order at ${i}`);
    const names = ['malloc', 'free', 'getpid', 'write', 'qsort', 'fopen'].filter((n) => elf.symbol(n) !== null);
    expect(names.length).toBeGreaterThan(2);
    for (const name of names) {
      const value = elf.symbol(name)!.value;
      const i = lastAtOrBelow(table.starts, value);
      const row = rowAt(table, i);
      // every function starts with its return address just pushed
      expect({ name, start: row.start, cfa: row.cfa, cfaOffset: row.cfaOffset, raOffset: row.raOffset }).toEqual({ name, start: value, cfa: CFA.RSP, cfaOffset: 8, raOffset: -8 });
    }
    // and unwinds as such through the kernel's layout of the whole table: a function entered
    // from a pc in no object
    const bias = 0x7f00_0000_0000n;
    const objects = [{ start: bias, end: bias + 0x1000_0000n, bias, table }];
    const rip = bias + elf.symbol(names[0]!)!.value;
    const stack = stackOf([[S + 0x100n, 0x1234n]]);
    expect(both({ rip, rsp: S + 0x100n, rbp: 0n }, stack, objects)).toEqual({ pcs: [rip, 0x1234n], found: [CFI], sps: [S + 0x100n, S + 0x108n], status: 'no-object' });
  });
});
