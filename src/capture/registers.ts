// A sample's native registers (format 1.5; docs/capture-format.md, "Registers"): rip, rsp and rbp
// as the recorder read them. In a record block they are appended to the sample record's body,
// after a marker (an older reader ignores a body's trailing bytes); in a section block they are
// section 25, each changed from its thread's previous sample's: a thread that sits in a system
// call has the same three each time, and one that runs keeps its rsp within a few hundred bytes.

import { DecodeError, type ByteReader, type ByteWriter, checkU64 } from './format.js';
import type { NativeRegisters } from '../native/unwind.js';

/** The marker before them in a record block's sample body, and the tag before them in section 25. */
export const REGISTERS_NONE = 0;
export const REGISTERS_PRESENT = 1;

const ZERO: NativeRegisters = { rip: 0n, rsp: 0n, rbp: 0n };

export function checkRegisters(regs: unknown): void {
  if (typeof regs !== 'object' || regs === null) throw new TypeError('sample.registers must be {rip, rsp, rbp} (bigints)');
  const r = regs as NativeRegisters;
  checkU64(r.rip, 'sample.registers.rip');
  checkU64(r.rsp, 'sample.registers.rsp');
  checkU64(r.rbp, 'sample.registers.rbp');
}

// ---- record blocks: after the regions, `u8 1` and the three as varints (nothing: none) ----

export function writeRecordRegisters(w: ByteWriter, regs: NativeRegisters | undefined): void {
  if (!regs) return;
  w.u8(REGISTERS_PRESENT);
  w.big(regs.rip);
  w.big(regs.rsp);
  w.big(regs.rbp);
}

/**
 * The registers at the end of a sample body (r at the end of its regions): none when the body
 * ends there, or when its marker is 0 — or another value, which a later minor version would mean
 * (what follows is then its fields: ignored, as a body's unknown trailing bytes are).
 */
export function readRecordRegisters(r: ByteReader): NativeRegisters | undefined {
  if (r.pos >= r.end) return undefined;
  if (r.u8('registers marker') !== REGISTERS_PRESENT) return undefined;
  return { rip: r.big('rip'), rsp: r.big('rsp'), rbp: r.big('rbp') };
}

// ---- section blocks: per sample `u8` tag, then each as a change from the thread's previous ----

/** zigzag of (cur − prev) taken as a signed 64-bit value: 0 … 2^64 − 1 */
function deltaZig(cur: bigint, prev: bigint): bigint {
  const d = BigInt.asIntN(64, cur - prev);
  return d >= 0n ? d << 1n : (-d << 1n) - 1n;
}

function undeltaZig(z: bigint, prev: bigint): bigint {
  const d = z & 1n ? -((z + 1n) >> 1n) : z >> 1n;
  return BigInt.asUintN(64, prev + d);
}

/** A sample's entry in section 25, against its thread's previous sample's registers (undefined: it had none, or a new thread). */
export function writeSectionRegisters(w: ByteWriter, regs: NativeRegisters | undefined, prev: NativeRegisters | undefined): void {
  if (!regs) {
    w.u8(REGISTERS_NONE);
    return;
  }
  const p = prev ?? ZERO;
  w.u8(REGISTERS_PRESENT);
  w.big(deltaZig(regs.rip, p.rip));
  w.big(deltaZig(regs.rsp, p.rsp));
  w.big(deltaZig(regs.rbp, p.rbp));
}

export function readSectionRegisters(r: ByteReader, prev: NativeRegisters | undefined): NativeRegisters | undefined {
  const at = r.pos;
  const tag = r.u8('registers tag');
  if (tag === REGISTERS_NONE) return undefined;
  if (tag !== REGISTERS_PRESENT) throw new DecodeError(`unknown registers tag ${tag}`, at);
  const p = prev ?? ZERO;
  return { rip: undeltaZig(r.big('rip change'), p.rip), rsp: undeltaZig(r.big('rsp change'), p.rsp), rbp: undeltaZig(r.big('rbp change'), p.rbp) };
}
