// The native (x86-64) unwinder: from a thread's registers and a copy of its stack, the chain of
// return addresses, by the unwind rows of the objects mapped where the pcs lie, or by the frame
// pointer where an object has no row for a pc. src/native/unwind.ts has exactly the same
// semantics in TypeScript (BigInt) — change both together; the host (src/kernel/native-unwinder.ts)
// lays out the request, the object table and the rows (src/kernel/abi.ts NU_*, NO_*).
//
// The reference's numbers are unbounded; these are u64. They agree because the reference is
// written in the machine's terms: registers mod 2^64, an object address pc − bias mod 2^64, an
// address computed from a register and an offset is no address when it leaves [0, 2^64) (here:
// the addition carried — `addOffset` says so), and a CFA that is no address is 'stack-short'.
//
// Every load is bounds-checked against the memory size, the loop gives one pc per turn up to
// the frame limit, and nothing is allocated: no request, however hostile, can make it trap.

import {
  NATIVE_CFA_NONE,
  NATIVE_CFA_PLT,
  NATIVE_CFA_RBP,
  NATIVE_CFA_RSP,
  NATIVE_CFA_SIGNAL,
  NATIVE_COMPLETE,
  NATIVE_FOUND_CFI,
  NATIVE_FOUND_FRAME_POINTER,
  NATIVE_FOUND_SIGNAL,
  NATIVE_NO_OBJECT,
  NATIVE_NO_RULE,
  NATIVE_NOT_GROWING,
  NATIVE_RA_UNDEFINED,
  NATIVE_RBP_AT,
  NATIVE_RBP_SAME,
  NATIVE_RBP_UNDEFINED,
  NATIVE_ROW_FIELDS,
  NATIVE_R_CFA,
  NATIVE_R_CFA_OFFSET,
  NATIVE_R_RA_OFFSET,
  NATIVE_R_RBP,
  NATIVE_R_RBP_OFFSET,
  NATIVE_STACK_SHORT,
  NATIVE_TOO_DEEP,
  NATIVE_FRAMES_LIMIT,
  NO_BIAS,
  NO_LAST,
  NO_ROWS,
  NO_RULES,
  NO_SIZE,
  NO_START,
  NO_STARTS,
  NU_CAPACITY,
  NU_COUNT,
  NU_FOUND,
  NU_MAX_FRAMES,
  NU_OBJECTS,
  NU_OBJECT_COUNT,
  NU_PCS,
  NU_RBP,
  NU_RIP,
  NU_RSP,
  NU_SIZE,
  NU_SPS,
  NU_STACK_ADDRESS,
  NU_STACK_DATA,
  NU_STACK_LENGTH,
  NU_STATUS,
} from '../src/kernel/abi';
import { inMemory } from './walk';

// where glibc's rt_sigframe keeps the interrupted registers: the ucontext at the signal frame's
// rsp, its mcontext's gregs at +40 (REG_RBP 10, REG_RSP 15, REG_RIP 16)
const UC_RBP: i64 = 40 + 10 * 8;
const UC_RSP: i64 = 40 + 15 * 8;
const UC_RIP: i64 = 40 + 16 * 8;

// ---- the current request ----
let stackAddress: u64 = 0;
let stackLength: u64 = 0;
let stackData: u32 = 0;
let objects: u32 = 0;
let objectCount: u32 = 0;

/** set by addOffset: the sum stayed inside [0, 2^64) */
let sumOk: bool = true;
/** set by read64: the value was in the stack copy */
let readOk: bool = false;
/** set when a table the host laid out lies outside memory (a bug in the host, reported as such) */
let malformed: bool = false;

/** base + delta, where the reference's BigInt sum would be; sumOk: it is in [0, 2^64). */
@inline function addOffset(base: u64, delta: i64): u64 {
  const r = base + <u64>delta;
  sumOk = delta >= 0 ? r >= base : r < base;
  return r;
}

/** The 8 bytes at `at` in the stack copy (only when `ok`: `at` is an address); sets readOk. */
function read64(at: u64, ok: bool): u64 {
  // [at, at + 8) inside [stackAddress, stackAddress + stackLength): the host cut the copy at
  // 2^64, so that range is inside the address space as the reference requires
  if (!ok || at < stackAddress || stackLength < 8 || at - stackAddress > stackLength - 8) {
    readOk = false;
    return 0;
  }
  readOk = true;
  return load<u64>(stackData + <u32>(at - stackAddress));
}

/** no object table entry (an entry cannot start at the last byte of memory) */
const NO_ENTRY: u32 = 0xffffffff;

/** The object table entry holding `pc` (its linear offset; NO_ENTRY: none): the last entry starting at or below pc, if it reaches pc. */
function objectOf(pc: u64): u32 {
  let lo: i32 = 0;
  let hi: i32 = <i32>objectCount - 1;
  let found: i32 = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1;
    if (load<u64>(objects + <u32>mid * NO_SIZE, NO_START) <= pc) {
      found = mid;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  if (found < 0) return NO_ENTRY;
  const o = objects + <u32>found * NO_SIZE;
  return pc <= load<u64>(o, NO_LAST) ? o : NO_ENTRY;
}

/** src/walk/region-index.ts lastAtOrBelow over `count` u64 at `starts`, step for step (a hostile, unsorted table gives the same row). */
function lastAtOrBelow(starts: u32, count: u32, address: u64): i32 {
  let lo: i32 = 0;
  let hi: i32 = <i32>count - 1;
  let found: i32 = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1;
    if (load<u64>(starts + (<u32>mid << 3)) <= address) {
      found = mid;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  return found;
}

// the row found for the current pc
let cfaRule: i32 = NATIVE_CFA_NONE;
let cfaOffset: i32 = 0;
let rbpRule: i32 = NATIVE_RBP_SAME;
let rbpOffset: i32 = 0;
let raOffset: i32 = -8;

/** The row of object address `address` in entry `o` (none: CFA none); sets the rules above, or malformed. */
function findRow(o: u32, address: u64): void {
  cfaRule = NATIVE_CFA_NONE;
  cfaOffset = 0;
  rbpRule = NATIVE_RBP_SAME;
  rbpOffset = 0;
  raOffset = -8;
  const rows = load<u32>(o, NO_ROWS);
  if (rows == 0) return;
  const starts = load<u32>(o, NO_STARTS);
  const rules = load<u32>(o, NO_RULES);
  if (rows > 0x7fffffff || !inMemory(<u64>starts, <u64>rows * 8) || !inMemory(<u64>rules, <u64>rows * NATIVE_ROW_FIELDS * 4)) {
    malformed = true;
    return;
  }
  const i = lastAtOrBelow(starts, rows, address);
  if (i < 0) return;
  const r = rules + <u32>i * NATIVE_ROW_FIELDS * 4;
  cfaRule = load<i32>(r + NATIVE_R_CFA * 4);
  cfaOffset = load<i32>(r + NATIVE_R_CFA_OFFSET * 4);
  rbpRule = load<i32>(r + NATIVE_R_RBP * 4);
  rbpOffset = load<i32>(r + NATIVE_R_RBP_OFFSET * 4);
  raOffset = load<i32>(r + NATIVE_R_RA_OFFSET * 4);
  // rules it does not know: none for the CFA, a lost rbp (as the reference)
  if (cfaRule != NATIVE_CFA_RSP && cfaRule != NATIVE_CFA_RBP && cfaRule != NATIVE_CFA_PLT && cfaRule != NATIVE_CFA_SIGNAL) cfaRule = NATIVE_CFA_NONE;
  if (rbpRule != NATIVE_RBP_SAME && rbpRule != NATIVE_RBP_AT) rbpRule = NATIVE_RBP_UNDEFINED;
}

/**
 * Unwind the request at `req` (NU_SIZE bytes): writes the pcs, how each after the first was
 * found, rsp while each runs, the status and the pcs' count; returns the count, or -1 when the request itself is
 * malformed (a table, the stack bytes or the output outside memory, a copy reaching past 2^64,
 * a frame limit of 0 or past the output's room) — a bug in the host, never the data.
 */
export function unwindNative(req: u32): i32 {
  if (!inMemory(<u64>req, NU_SIZE)) return -1;
  stackAddress = load<u64>(req, NU_STACK_ADDRESS);
  stackLength = <u64>load<u32>(req, NU_STACK_LENGTH);
  stackData = load<u32>(req, NU_STACK_DATA);
  objects = load<u32>(req, NU_OBJECTS);
  objectCount = load<u32>(req, NU_OBJECT_COUNT);
  const limit = load<u32>(req, NU_MAX_FRAMES);
  const pcsOut = load<u32>(req, NU_PCS);
  const foundOut = load<u32>(req, NU_FOUND);
  const capacity = load<u32>(req, NU_CAPACITY);
  const spsOut = load<u32>(req, NU_SPS);
  if (!inMemory(<u64>stackData, stackLength)) return -1;
  if (stackLength > 0 && stackAddress + stackLength - 1 < stackAddress) return -1;
  if (objectCount > 0x7fffffff || !inMemory(<u64>objects, <u64>objectCount * NO_SIZE)) return -1;
  if (limit < 1 || limit > <u32>NATIVE_FRAMES_LIMIT || limit > capacity) return -1;
  if (!inMemory(<u64>pcsOut, <u64>capacity * 8) || !inMemory(<u64>spsOut, <u64>capacity * 8) || !inMemory(<u64>foundOut, <u64>capacity)) return -1;
  malformed = false;

  let rip = load<u64>(req, NU_RIP);
  let rsp = load<u64>(req, NU_RSP);
  let rbp = load<u64>(req, NU_RBP);
  store<u64>(pcsOut, rip);
  store<u64>(spsOut, rsp);
  let count: u32 = 1;
  let status: u32 = NATIVE_COMPLETE;
  // the first pc is where the thread is; later ones are return addresses, looked up one byte
  // back (a call at a function's end returns past it) — but not a pc a signal interrupted
  let exact = true;
  // each turn adds a pc or ends the walk: at most `limit` turns
  for (;;) {
    if (count >= limit) {
      status = NATIVE_TOO_DEEP;
      break;
    }
    const o = objectOf(rip);
    if (o == NO_ENTRY) {
      status = NATIVE_NO_OBJECT;
      break;
    }
    // the object address, mod 2^64 (the reference's BigInt.asUintN)
    findRow(o, rip - load<u64>(o, NO_BIAS) - (exact ? 0 : 1));
    if (malformed) return -1;
    if (cfaRule == NATIVE_CFA_SIGNAL) {
      const r = read64(addOffset(rsp, UC_RIP), sumOk);
      const rOk = readOk;
      const s = read64(addOffset(rsp, UC_RSP), sumOk);
      const sOk = readOk;
      const b = read64(addOffset(rsp, UC_RBP), sumOk);
      if (!rOk || !sOk || !readOk) {
        status = NATIVE_STACK_SHORT;
        break;
      }
      if (s <= rsp) {
        status = NATIVE_NOT_GROWING;
        break;
      }
      rip = r;
      rsp = s;
      rbp = b;
      store<u64>(pcsOut + (count << 3), rip);
      store<u8>(foundOut + count - 1, <u8>NATIVE_FOUND_SIGNAL);
      store<u64>(spsOut + (count << 3), rsp);
      count++;
      exact = true;
      if (rip == 0) {
        status = NATIVE_COMPLETE;
        break;
      }
      continue;
    }
    let cfa: u64;
    let cfaOk = true;
    let how: u32 = NATIVE_FOUND_CFI;
    if (cfaRule == NATIVE_CFA_NONE) {
      // no row: the frame pointer, where it points into the stack above rsp
      read64(rbp, true);
      if (rbp < rsp || !readOk) {
        status = NATIVE_NO_RULE;
        break;
      }
      cfa = addOffset(rbp, 16);
      cfaOk = sumOk;
      rbpRule = NATIVE_RBP_AT;
      rbpOffset = -16;
      raOffset = -8;
      how = NATIVE_FOUND_FRAME_POINTER;
    } else if (cfaRule == NATIVE_CFA_RSP) {
      cfa = addOffset(rsp, <i64>cfaOffset);
      cfaOk = sumOk;
    } else if (cfaRule == NATIVE_CFA_RBP) {
      cfa = addOffset(rbp, <i64>cfaOffset);
      cfaOk = sumOk;
    } else {
      // NATIVE_CFA_PLT: rsp + offset (the low 24 bits, signed), and 8 more once the entry pushed its argument (pc & 15 >= the top 8 bits)
      const extra = <u64>(<u32>cfaOffset >>> 24);
      cfa = addOffset(rsp, <i64>((cfaOffset << 8) >> 8) + ((rip & 15) >= extra ? 8 : 0));
      cfaOk = sumOk;
    }
    if (raOffset == NATIVE_RA_UNDEFINED) {
      status = NATIVE_COMPLETE;
      break;
    }
    // a CFA outside the address space is no address: nothing saved there can be read
    if (!cfaOk) {
      status = NATIVE_STACK_SHORT;
      break;
    }
    const ra = read64(addOffset(cfa, <i64>raOffset), sumOk);
    if (!readOk) {
      status = NATIVE_STACK_SHORT;
      break;
    }
    if (rbpRule == NATIVE_RBP_AT) {
      const b = read64(addOffset(cfa, <i64>rbpOffset), sumOk);
      if (!readOk) {
        status = NATIVE_STACK_SHORT;
        break;
      }
      rbp = b;
    } else if (rbpRule == NATIVE_RBP_UNDEFINED) rbp = 0;
    if (cfa <= rsp) {
      status = NATIVE_NOT_GROWING;
      break;
    }
    rsp = cfa;
    rip = ra;
    exact = false;
    // a return address of 0 ends a chain that has no CFI to say so (the frame-pointer walk)
    if (rip == 0) {
      status = NATIVE_COMPLETE;
      break;
    }
    store<u64>(pcsOut + (count << 3), rip);
    store<u8>(foundOut + count - 1, <u8>how);
    store<u64>(spsOut + (count << 3), rsp);
    count++;
  }
  store<u32>(req, status, NU_STATUS);
  store<u32>(req, count, NU_COUNT);
  return <i32>count;
}
