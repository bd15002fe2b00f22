// Naming native pcs: the object a pc lies in, and the function symbol that holds it — as gdb's
// `bt` names a frame (the symbol whose start is the last at or below the address, if the
// address is inside its size). A function no symbol names (a stripped file's static one) is
// still one function: the object's unwind table says where it starts.

import type { NativeObject } from './objects.js';
import { lastAtOrBelow } from '../walk/region-index.js';

/** A native frame, named. */
export interface NativeFrameName {
  /** the function (a symbol), or null where no symbol holds the address */
  name: string | null;
  /** the object's path, or null where the pc lies in no object (JIT code, a corrupt pc) */
  object: string | null;
  /** the pc as an address in the object (link-time; the pc itself where there is no object) */
  address: bigint;
  /**
   * where no symbol names it: the start of the function that holds the pc, by the object's
   * unwind table (an object address; its frames are one function, `sub_<start>`), or null
   */
  start: bigint | null;
}

/** How a frame is shown: its function's name; else `sub_<start>` (the function's start in its object, as disassemblers name one); else the pc's address. */
export function nativeLabel(n: NativeFrameName): string {
  return n.name ?? (n.start !== null ? `sub_${n.start.toString(16)}` : `0x${n.address.toString(16)}`);
}

/** The object that holds `pc` (objects sorted by start, not overlapping), or null. */
export function objectAt(objects: readonly NativeObject[], pc: bigint): NativeObject | null {
  let lo = 0;
  let hi = objects.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const o = objects[mid]!;
    if (pc < o.start) hi = mid - 1;
    else if (pc >= o.end) lo = mid + 1;
    else return o;
  }
  return null;
}

/**
 * Name the pc of a frame. `returnAddress`: the pc is where a call returns to, so the caller's
 * call instruction is the byte before it (a call that is the last instruction of a function —
 * a noreturn callee — returns past the function's end).
 */
export function nameNativePc(objects: readonly NativeObject[], pc: bigint, returnAddress: boolean): NativeFrameName {
  const o = objectAt(objects, pc);
  if (!o) return { name: null, object: null, address: pc, start: null };
  const address = pc - o.bias;
  const at = address - (returnAddress ? 1n : 0n);
  const s = o.symbols;
  const i = lastAtOrBelow(s.starts, at);
  if (i < 0) return { name: null, object: o.path, address, start: null };
  const size = s.sizes[i]!;
  if (size !== 0 && at >= s.starts[i]! + BigInt(size)) return { name: null, object: o.path, address, start: null };
  // (a nameless symbol: a function only the unwind table knows, native-objects.ts)
  const name = s.names[i]!;
  return name === '' ? { name: null, object: o.path, address, start: s.starts[i]! } : { name, object: o.path, address, start: null };
}
