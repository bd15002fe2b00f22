// The unwind table: what the native unwinder needs of an object's DWARF call-frame
// information, flattened on the host into one row per address range.
//
// DWARF CFI is a small program per function (CIE + FDE instructions) that must be run from the
// function's start to the address being unwound. Running it per sample, in the kernel, would
// put a DWARF interpreter in the hot path and in front of hostile input; instead the host runs
// each program once, when the object's tables are read, and keeps for every address range the
// three rules an x86-64 unwind needs (as the OpenTelemetry eBPF profiler's "stack deltas" do):
// where the canonical frame address (CFA) is, where the caller's rbp was saved, and where the
// return address is. The unwinder (src/native/unwind.ts, and its twin in the kernel) then only
// finds the row of a pc and applies it.

/** How a row finds the CFA (the caller's rsp). */
export const CFA = {
  /** no rule: the unwind cannot go on from this pc (no FDE, or CFI we do not follow) */
  NONE: 0,
  /** CFA = rsp + offset */
  RSP: 1,
  /** CFA = rbp + offset */
  RBP: 2,
  /**
   * a PLT entry's expression: CFA = rsp + offset, + 8 more once the entry has pushed its
   * argument (pc & 15 >= `extra`); gcc and ld write exactly this expression for .plt
   */
  PLT: 3,
  /**
   * a signal frame (the 'S' augmentation: glibc's __restore_rt): the interrupted registers are
   * in the ucontext at rsp; the pc found is not a return address
   */
  SIGNAL: 4,
} as const;

/** How a row finds the caller's rbp. */
export const RBP = {
  /** unchanged by this function (so far) */
  SAME: 0,
  /** saved at CFA + offset */
  AT: 1,
  /** not recoverable */
  UNDEFINED: 2,
} as const;

/** Return address rule: at CFA + offset, or RA_UNDEFINED (the outermost frame: _start, clone). */
export const RA_UNDEFINED = 0x7fffffff;

/** Row fields, in order, in UnwindTable.rules (Int32Array, ROW_FIELDS per row). */
export const ROW_FIELDS = 5;
export const R_CFA = 0;
export const R_CFA_OFFSET = 1;
export const R_RBP = 2;
export const R_RBP_OFFSET = 3;
export const R_RA_OFFSET = 4;

/**
 * An object's rows, sorted by address. Row i holds from starts[i] up to starts[i + 1]
 * (a row with CFA.NONE closes a function whose next neighbour does not start right after it).
 * Addresses are the object's own (link-time virtual addresses: add the load bias).
 */
export interface UnwindTable {
  starts: BigUint64Array;
  rules: Int32Array;
}

/** The row as an object (tests, messages). */
export interface UnwindRow {
  start: bigint;
  cfa: number;
  cfaOffset: number;
  rbp: number;
  rbpOffset: number;
  raOffset: number;
}

export function rowAt(t: UnwindTable, i: number): UnwindRow {
  const o = i * ROW_FIELDS;
  return {
    start: t.starts[i]!,
    cfa: t.rules[o + R_CFA]!,
    cfaOffset: t.rules[o + R_CFA_OFFSET]!,
    rbp: t.rules[o + R_RBP]!,
    rbpOffset: t.rules[o + R_RBP_OFFSET]!,
    raOffset: t.rules[o + R_RA_OFFSET]!,
  };
}
