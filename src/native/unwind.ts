// The native unwinder (x86-64), reference version: from a thread's registers and a copy of its
// stack, the chain of return addresses, by the unwind tables of the objects mapped where the
// pcs lie (./unwind-table.ts), or by the frame pointer where an object has no row for a pc.
//
// Offline, like perf's --call-graph=dwarf: everything it reads is in the arguments, and every
// read is checked against the stack copy; a chain that cannot be followed to its outermost
// frame ends with a status saying why, never with a guess.
//
// Its arithmetic is the machine's, so that the kernel's twin (assembly/native-unwind.ts) gives
// exactly the same answer on every input, however hostile: registers are 64-bit (taken mod
// 2^64), an object address is pc − bias mod 2^64 (a bias may be "negative"), a saved value must
// lie at [a, a + 8) inside [0, 2^64) and inside the stack copy, and a CFA that leaves [0, 2^64)
// is no address ('stack-short'). A row rule it does not know is no rule (the CFA's: follow the
// frame pointer; the rbp's: rbp is lost), a table's rows are as many as both its arrays hold,
// and the frame limit is a whole number in [1, NATIVE_FRAMES_LIMIT].

import { CFA, RA_UNDEFINED, RBP, ROW_FIELDS, R_CFA, R_CFA_OFFSET, R_RA_OFFSET, R_RBP, R_RBP_OFFSET, type UnwindTable } from './unwind-table.js';
import { lastAtOrBelow } from '../walk/region-index.js';
import { NATIVE_FRAMES_LIMIT } from '../kernel/abi.js';

/** The registers an x86-64 unwind starts from. */
export interface NativeRegisters {
  rip: bigint;
  rsp: bigint;
  rbp: bigint;
}

/** An executable mapping of an object, and its unwind table (null: none read). */
export interface MappedObject {
  /** the mapping's addresses, [start, end) */
  start: bigint;
  end: bigint;
  /** load bias: an object address + bias = the address in the process */
  bias: bigint;
  table: UnwindTable | null;
}

/** Bytes of the thread's stack, as copied: `bytes` were at `address`. */
export interface StackCopy {
  address: bigint;
  bytes: Uint8Array;
}

export const UNWIND_STATUS = [
  /** reached the outermost frame (the return address rule is "undefined": _start, clone) */
  'complete',
  /** a pc lies in no mapped object we know */
  'no-object',
  /** no row for a pc, and no frame pointer to follow */
  'no-rule',
  /** a saved value lies outside the stack copy */
  'stack-short',
  /** the CFA did not grow (a loop, or a corrupt stack) */
  'not-growing',
  /** more frames than the limit */
  'too-deep',
] as const;
export type UnwindStatus = (typeof UNWIND_STATUS)[number];

/** How a frame's caller was found. */
export const FOUND = { CFI: 0, FRAME_POINTER: 1, SIGNAL: 2 } as const;

export interface NativeUnwind {
  /** the pcs, innermost first: the first is the thread's rip, the others return addresses (or, after a signal frame, the interrupted pc) */
  pcs: bigint[];
  /** for each pc after the first: how it was found (FOUND) */
  found: number[];
  /**
   * the stack pointer in each frame (sps[i] is rsp while pcs[i] runs): frame i's own stack lies
   * in [sps[i], sps[i + 1]) — where its locals are (an eval loop's entry frame, src/native/interleave.ts)
   */
  sps: bigint[];
  status: UnwindStatus;
}

export const MAX_NATIVE_FRAMES = 512;

const U64_MAX = (1n << 64n) - 1n;

/** The frame limit as both unwinders take it: a whole number in [1, NATIVE_FRAMES_LIMIT] (NaN: 1). */
export function frameLimit(maxFrames: number): number {
  const n = Math.floor(maxFrames);
  return n >= 1 ? Math.min(n, NATIVE_FRAMES_LIMIT) : 1;
}

/** The rows a table has: as many as both its arrays hold. */
export function tableRows(t: UnwindTable): number {
  return Math.min(t.starts.length, Math.floor(t.rules.length / ROW_FIELDS));
}

function objectOf(objects: readonly MappedObject[], pc: bigint): MappedObject | null {
  // (objects: a few dozen; sorted lookups are the kernel's business)
  for (const o of objects) if (pc >= o.start && pc < o.end) return o;
  return null;
}

function read64(stack: StackCopy, at: bigint): bigint | null {
  // (an 8-byte value inside the address space: a copy reaching past it is cut there)
  if (at < 0n || at > U64_MAX - 7n) return null;
  const off = at - stack.address;
  if (off < 0n || off + 8n > BigInt(stack.bytes.length)) return null;
  const o = Number(off);
  const b = stack.bytes;
  let v = 0n;
  for (let i = 7; i >= 0; i--) v = (v << 8n) | BigInt(b[o + i]!);
  return v;
}

// where glibc's rt_sigframe keeps the interrupted registers: the ucontext at the signal
// frame's rsp, its mcontext's gregs at +40 (REG_RBP 10, REG_RSP 15, REG_RIP 16)
const UC_RBP = 40n + 10n * 8n;
const UC_RSP = 40n + 15n * 8n;
const UC_RIP = 40n + 16n * 8n;

export function unwindNative(regs: NativeRegisters, stack: StackCopy, objects: readonly MappedObject[], maxFrames = MAX_NATIVE_FRAMES): NativeUnwind {
  const limit = frameLimit(maxFrames);
  let rip = BigInt.asUintN(64, regs.rip);
  let rsp = BigInt.asUintN(64, regs.rsp);
  let rbp = BigInt.asUintN(64, regs.rbp);
  const pcs: bigint[] = [rip];
  const found: number[] = [];
  const sps: bigint[] = [rsp];
  // the first pc is where the thread is; later ones are return addresses, looked up one byte
  // back (a call at a function's end returns past it) — but not a pc a signal interrupted
  let exact = true;
  for (;;) {
    if (pcs.length >= limit) return { pcs, found, sps, status: 'too-deep' };
    const obj = objectOf(objects, rip);
    if (!obj) return { pcs, found, sps, status: 'no-object' };
    let cfaRule: number = CFA.NONE;
    let cfaOffset = 0;
    let rbpRule: number = RBP.SAME;
    let rbpOffset = 0;
    let raOffset = -8;
    const rows = obj.table ? tableRows(obj.table) : 0;
    if (rows > 0) {
      const { starts, rules: rl } = obj.table!;
      const i = lastAtOrBelow(rows < starts.length ? starts.subarray(0, rows) : starts, BigInt.asUintN(64, rip - obj.bias - (exact ? 0n : 1n)));
      if (i >= 0) {
        const o = i * ROW_FIELDS;
        cfaRule = rl[o + R_CFA]!;
        cfaOffset = rl[o + R_CFA_OFFSET]!;
        rbpRule = rl[o + R_RBP]!;
        rbpOffset = rl[o + R_RBP_OFFSET]!;
        raOffset = rl[o + R_RA_OFFSET]!;
        // rules it does not know: none for the CFA, a lost rbp
        if (cfaRule !== CFA.RSP && cfaRule !== CFA.RBP && cfaRule !== CFA.PLT && cfaRule !== CFA.SIGNAL) cfaRule = CFA.NONE;
        if (rbpRule !== RBP.SAME && rbpRule !== RBP.AT) rbpRule = RBP.UNDEFINED;
      }
    }
    let cfa: bigint;
    let how: number = FOUND.CFI;
    if (cfaRule === CFA.SIGNAL) {
      const r = read64(stack, rsp + UC_RIP);
      const s = read64(stack, rsp + UC_RSP);
      const b = read64(stack, rsp + UC_RBP);
      if (r === null || s === null || b === null) return { pcs, found, sps, status: 'stack-short' };
      if (s <= rsp) return { pcs, found, sps, status: 'not-growing' };
      rip = r;
      rsp = s;
      rbp = b;
      pcs.push(rip);
      found.push(FOUND.SIGNAL);
      sps.push(rsp);
      exact = true;
      if (rip === 0n) return { pcs, found, sps, status: 'complete' };
      continue;
    }
    if (cfaRule === CFA.NONE) {
      // no row: the frame pointer, where it points into the stack above rsp
      if (rbp < rsp || read64(stack, rbp) === null) return { pcs, found, sps, status: 'no-rule' };
      cfa = rbp + 16n;
      rbpRule = RBP.AT;
      rbpOffset = -16;
      raOffset = -8;
      how = FOUND.FRAME_POINTER;
    } else if (cfaRule === CFA.RSP) cfa = rsp + BigInt(cfaOffset);
    else if (cfaRule === CFA.RBP) cfa = rbp + BigInt(cfaOffset);
    else {
      // CFA.PLT: rsp + offset, and 8 more once the entry pushed its argument
      const extra = cfaOffset >>> 24;
      cfa = rsp + BigInt((cfaOffset << 8) >> 8) + ((rip & 15n) >= BigInt(extra) ? 8n : 0n);
    }
    if (raOffset === RA_UNDEFINED) return { pcs, found, sps, status: 'complete' };
    // a CFA outside the address space is no address: nothing saved there can be read
    if (cfa < 0n || cfa > U64_MAX) return { pcs, found, sps, status: 'stack-short' };
    const ra = read64(stack, cfa + BigInt(raOffset));
    if (ra === null) return { pcs, found, sps, status: 'stack-short' };
    if (rbpRule === RBP.AT) {
      const b = read64(stack, cfa + BigInt(rbpOffset));
      if (b === null) return { pcs, found, sps, status: 'stack-short' };
      rbp = b;
    } else if (rbpRule === RBP.UNDEFINED) rbp = 0n;
    if (cfa <= rsp) return { pcs, found, sps, status: 'not-growing' };
    rsp = cfa;
    rip = ra;
    exact = false;
    // a return address of 0 ends a chain that has no CFI to say so (the frame-pointer walk)
    if (rip === 0n) return { pcs, found, sps, status: 'complete' };
    pcs.push(rip);
    found.push(how);
    sps.push(rsp);
  }
}
