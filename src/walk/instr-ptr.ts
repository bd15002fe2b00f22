// The walk's rule for a frame's instruction pointer (assembly/walk.ts applies the same one):
// it must lie in its code object's bytecode, at an instruction boundary's parity. 3.11/3.12
// store prev_instr, which is one code unit before the bytecode while a frame starts.
//
// The recorder applies it too, to the innermost frame of a copy checked by reading it twice:
// that frame's instruction pointer changes as it runs, so the two readings are not compared
// there, and a frame caught while CPython sets it up (its code object written, its
// instruction pointer not yet — a call at the address of the frame that just returned) shows
// the code of one function with the instruction pointer of another. Such a copy moved.

/** Does `ip` fit a code object whose bytecode is [start, end)? */
export function instrPtrFits(ip: bigint, start: bigint, end: bigint, isPrevious: boolean): boolean {
  const low = isPrevious && start >= 2n ? start - 2n : start;
  return ip >= low && ip < end && ((ip ^ start) & 1n) === 0n;
}

/** The same, on addresses held as numbers (exact below 2^53: the steady copy's user-space addresses). */
export function instrPtrFitsNumber(ip: number, start: number, end: number, isPrevious: boolean): boolean {
  const low = isPrevious && start >= 2 ? start - 2 : start;
  return ip >= low && ip < end && (ip - start) % 2 === 0;
}
