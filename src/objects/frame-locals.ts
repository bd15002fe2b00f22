// A frame's local variables and arguments, by name, with their values (dump --locals): the code
// object names them (co_localsplusnames, with a kind byte each in co_localspluskinds) and says
// how many are arguments (co_argcount + co_kwonlyargcount, and *args and **kwargs where co_flags
// says so); the frame holds their values after its header (localsplus). A cell variable's value
// is the cell's content, as Python shows it.

import type { Layout } from '../layout/layout.js';
import type { MemorySource } from '../record/copy/source.js';
import type { WalkFrame } from '../walk/types.js';
import { aligned } from './dict-items.js';
import type { ObjectReader, ObjectValue } from './object-reader.js';

/** locals read per frame at most */
export const MAX_LOCALS = 256;
/** co_localspluskinds: CO_FAST_HIDDEN (3.12+: a comprehension's inlined variable), CELL, FREE */
const CO_FAST_HIDDEN = 0x10;
const CO_FAST_CELL = 0x40;
const CO_FAST_FREE = 0x80;
/** co_flags: CO_VARARGS, CO_VARKEYWORDS */
const CO_VARARGS = 0x4;
const CO_VARKEYWORDS = 0x8;

export interface LocalVariable {
  name: string;
  /** an argument of the function (positional, keyword-only, *args or **kwargs) */
  argument: boolean;
  /** null: the slot holds what cannot be read as an object */
  value: ObjectValue | null;
}

/**
 * The bound locals of `frame` (a variable not yet assigned is left out), or why they cannot be
 * read. `reader` decodes the values; both read `source`.
 */
export function frameLocals(source: MemorySource, L: Layout, reader: ObjectReader, frame: WalkFrame): LocalVariable[] | string {
  const C = L.code.locals;
  if (!C || !L.values || L.pointerSize !== 8) return 'locals are not read for this target';
  const end = Math.max(C.flags, C.argcount, C.kwonlyargcount) + 4;
  const code = source.tryRead(frame.code, Math.max(end, C.localsplusnames + 8, C.localspluskinds + 8));
  if (!code) return `code object at 0x${frame.code.toString(16)} is unreadable`;
  const dv = new DataView(code.buffer, code.byteOffset, code.byteLength);
  const flags = dv.getInt32(C.flags, true);
  const argcount = dv.getInt32(C.argcount, true);
  const kwonly = dv.getInt32(C.kwonlyargcount, true);
  if (argcount < 0 || kwonly < 0 || argcount + kwonly > MAX_LOCALS) return 'the code object\'s argument counts are out of range';
  const nargs = argcount + kwonly + (flags & CO_VARARGS ? 1 : 0) + (flags & CO_VARKEYWORDS ? 1 : 0);

  // the names: a tuple of str; the kinds: a bytes object of as many
  const namesAt = dv.getBigUint64(C.localsplusnames, true);
  const kindsAt = dv.getBigUint64(C.localspluskinds, true);
  if (!aligned(namesAt) || !aligned(kindsAt)) return 'the code object\'s local names are not objects';
  const sizeOf = (at: bigint, offset: number): number | null => {
    const h = source.tryRead(at, offset + 8);
    if (!h) return null;
    const n = new DataView(h.buffer, h.byteOffset, h.byteLength).getBigInt64(offset, true);
    return n < 0n || n > BigInt(MAX_LOCALS) ? null : Number(n);
  };
  const n = sizeOf(namesAt, L.object.obSize);
  if (n === null) return `co_localsplusnames at 0x${namesAt.toString(16)}: not a tuple of at most ${MAX_LOCALS} names`;
  if (n === 0) return [];
  if (sizeOf(kindsAt, L.bytes.obSize) !== n) return 'co_localspluskinds does not have a kind for each name';
  const nameItems = source.tryRead(namesAt + BigInt(L.values.tupleItems), n * 8);
  const kinds = source.tryRead(kindsAt + BigInt(L.bytes.obSval), n);
  const slots = source.tryRead(frame.frame + BigInt(L.frame.localsplus), n * 8);
  if (!nameItems || !kinds || !slots) return 'the local names, kinds or values are unreadable';
  const names = new DataView(nameItems.buffer, nameItems.byteOffset, nameItems.byteLength);
  const values = new DataView(slots.buffer, slots.byteOffset, slots.byteLength);
  // 3.14+ keep _PyStackRef values: tag bits in the low two (1: a NULL; 3: a small int)
  const tagged = L.version.major > 3 || L.version.minor >= 14;
  const out: LocalVariable[] = [];
  for (let i = 0; i < n; i++) {
    const kind = kinds[i]!;
    if (kind & CO_FAST_HIDDEN) continue;
    const raw = values.getBigUint64(i * 8, true);
    if (raw === 0n || (tagged && raw === 1n)) continue;
    const name = reader.text(names.getBigUint64(i * 8, true)) ?? `<local ${i}>`;
    let value: ObjectValue | null;
    if (tagged && (raw & 3n) === 3n) value = reader.taggedInt(raw);
    else {
      value = reader.value(tagged ? raw & ~3n : raw);
      // a cell or free variable: its value is what the cell holds
      if (value?.type === 'cell' && kind & (CO_FAST_CELL | CO_FAST_FREE)) {
        const ref = source.tryRead(value.address + BigInt(L.object.size), 8);
        const inner = ref ? new DataView(ref.buffer, ref.byteOffset, 8).getBigUint64(0, true) : 0n;
        if (inner === 0n) continue;
        value = reader.value(inner);
      }
    }
    out.push({ name, argument: i < nargs, value });
  }
  return out;
}
