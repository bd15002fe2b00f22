// A Python frame by name, at the two stages that name it. Here, below the profile, so that the
// symbols layer can build on SourceFrame without importing the profile (which re-exports it).

/** A Python frame as the source names it: function, file, line. The profile's frame (and its JSON form). */
export interface SourceFrame {
  qualname: string;
  filename: string;
  /** null where CPython has no line for the instruction */
  line: number | null;
  /**
   * The instruction the frame was at, as `dis` names it in adaptive bytecode
   * (BINARY_OP_ADD_INT): only in profiles made with opcodes (report --opcodes), and there only
   * where it is known. A frame is (qualname, filename, line, opcode).
   */
  opcode?: string;
  /**
   * A native (C) frame, from a capture with native stacks (report --native): `qualname` is its
   * function (or its address in the object, `0x…`, where no symbol holds it), `filename` the
   * object's path, `line` null. A frame is (qualname, filename, line, opcode, native).
   */
  native?: true;
}

/** A walked frame, symbolized: its SourceFrame, with the code object and instruction pointer it came from. */
export interface SymbolizedFrame extends SourceFrame {
  /** address of the code object */
  code: bigint;
  /** the frame's instruction pointer as stored (instr_ptr, or prev_instr on 3.11/3.12) */
  instrPtr: bigint;
}

/** The SourceFrame of a symbolized frame (a plain object, as the profile keeps it). */
export function sourceFrame(f: SourceFrame): SourceFrame {
  if (f.native) return { qualname: f.qualname, filename: f.filename, line: f.line, native: true };
  return f.opcode === undefined ? { qualname: f.qualname, filename: f.filename, line: f.line } : { qualname: f.qualname, filename: f.filename, line: f.line, opcode: f.opcode };
}
