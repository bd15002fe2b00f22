// A Python frame by name, at the two stages that name it. Here, below the profile, so that the
// symbols layer can build on SourceFrame without importing the profile (which re-exports it).

/** A Python frame as the source names it: function, file, line. The profile's frame (and its JSON form). */
export interface SourceFrame {
  qualname: string;
  filename: string;
  /** null where CPython has no line for the instruction */
  line: number | null;
}

/** A walked frame, symbolized: its SourceFrame, with the code object and instruction pointer it came from. */
export interface SymbolizedFrame extends SourceFrame {
  /** address of the code object */
  code: bigint;
  /** the frame's instruction pointer as stored (instr_ptr, or prev_instr on 3.11/3.12) */
  instrPtr: bigint;
}
