// (code address, instruction pointer) → names and a line, memoized.
//
// One Symbolizer serves one RegionMemory: code-object addresses are reused after a code
// object dies, so the memo is only valid for the memory it was filled from.

import type { Layout } from '../layout/layout.js';
import type { RegionMemory } from '../walk/region-memory.js';
import { decodeCodeObject, type CodeInfo } from './code-object.js';
import { SymbolError, hex, lineForOffset } from './location-table.js';

interface Entry {
  info: CodeInfo | SymbolError;
  /** code-unit index → line */
  lines: Map<number, number | null>;
}

export class Symbolizer {
  private readonly entries = new Map<bigint, Entry>();

  constructor(
    private readonly mem: RegionMemory,
    private readonly layout: Layout,
  ) {}

  private entry(address: bigint): Entry {
    let e = this.entries.get(address);
    if (e === undefined) {
      let info: CodeInfo | SymbolError;
      try {
        info = decodeCodeObject(this.mem, this.layout, address);
      } catch (err) {
        if (!(err instanceof SymbolError)) throw err;
        info = err;
      }
      e = { info, lines: new Map() };
      this.entries.set(address, e);
    }
    return e;
  }

  /** The decoded code object, or why it could not be decoded (both memoized). */
  code(address: bigint): CodeInfo | SymbolError {
    return this.entry(address).info;
  }

  /**
   * The line of a frame whose code object is `code` and whose instruction pointer (3.13+
   * `instr_ptr`, or 3.11/3.12 `prev_instr`) is `instrPtr`. The index is
   * (instrPtr − bytecodeStart) / 2; −1 (a 3.11/3.12 frame that has not started) gives the
   * first line. null means CPython has no line for that instruction.
   *
   * Throws the code object's SymbolError if it could not be decoded, and a SymbolError if
   * the pointer is misaligned or outside the bytecode: the walk rejects such frames, so
   * getting here with one is a caller bug, not a missing line.
   */
  line(code: bigint, instrPtr: bigint): number | null {
    const e = this.entry(code);
    return lineOf(e.info, e.lines, instrPtr);
  }

  /** Number of code objects looked up so far (decoded or failed). */
  get size(): number {
    return this.entries.size;
  }
}

/**
 * The line of instruction pointer `instrPtr` in a decoded code object, memoized in `lines`
 * (code-unit index → line). See Symbolizer.line.
 */
export function lineOf(info: CodeInfo | SymbolError, lines: Map<number, number | null>, instrPtr: bigint): number | null {
  if (info instanceof SymbolError) throw info;
  const diff = instrPtr - info.bytecodeStart;
  if (diff % 2n !== 0n || diff < -2n || diff >= info.bytecodeEnd - info.bytecodeStart) {
    throw new SymbolError(
      `instruction pointer ${hex(instrPtr)} is not a code unit of code object ${hex(info.address)} ` +
        `(bytecode ${hex(info.bytecodeStart)}..${hex(info.bytecodeEnd)}, index -1 allowed)`,
      info.address,
    );
  }
  const index = Number(diff / 2n);
  let line = lines.get(index);
  if (line === undefined) {
    line = lineForOffset(info.locations, index, info.firstLine);
    lines.set(index, line);
  }
  return line;
}
