// Opcodes: which instruction a frame was at, named as `dis` names it in adaptive bytecode — the
// specialized form (BINARY_OP_ADD_INT) where the interpreter had specialized it.
//
// Each CPython minor version numbers its opcodes differently, and specialized forms take the
// numbers left free; the tables (src/symbols/opcodes-3.*.ts) are generated from the real
// interpreters by scripts/gen-opcodes.ts and checked against them by test/opcodes.test.ts.
//
// Bytecode (co_code_adaptive) is a sequence of 2-byte code units: an instruction is its unit
// (opcode, oparg) and then its inline CACHE units, as many as its base instruction has — whose
// bytes are counters and cached data, not instructions. EXTENDED_ARG is an instruction of its
// own (dis shows it so), with no cache. A frame's instruction pointer is
// - on 3.13+ (`instr_ptr`) the unit of the instruction running, or to run when the frame
//   resumes: its opcode is the byte there;
// - on 3.11/3.12 (`prev_instr`) the last unit the frame executed: the instruction's own unit
//   while it runs, but one of its cache units while a frame it called runs (a CALL's last
//   cache), and the unit before the first instruction (index −1) in a frame that has not
//   started. The instruction is the one whose units contain the index, found by reading the
//   instructions from the start; index −1 has none.

import type { Layout } from '../layout/layout.js';
import type { CodeInfo } from './code-object.js';
import { OPCODES as OPCODES_3_11 } from './opcodes-3.11.js';
import { OPCODES as OPCODES_3_12 } from './opcodes-3.12.js';
import { OPCODES as OPCODES_3_13 } from './opcodes-3.13.js';
import { OPCODES as OPCODES_3_14 } from './opcodes-3.14.js';
import { OPCODES as OPCODES_3_15 } from './opcodes-3.15.js';

/** One minor version's opcodes (scripts/opcode-table.py says how each list is made). */
export interface OpcodeTableData {
  /** the interpreter the table was generated from, e.g. "3.14.10" */
  python: string;
  /** "3.14" */
  minor: string;
  /** per opcode byte: its name (specialized forms included), null if no instruction has it */
  names: readonly (string | null)[];
  /** per opcode byte: the instruction it specializes (itself if none; INSTRUMENTED_X: X), −1 if none */
  base: readonly number[];
  /** per opcode byte: inline cache units after it, −1 where unknown (INSTRUMENTED_LINE, INSTRUMENTED_INSTRUCTION) */
  caches: readonly number[];
}

export class OpcodeTable {
  constructor(readonly data: OpcodeTableData) {}

  /** The name of opcode byte `op`: `<op>` for a byte that is no instruction of this version. */
  name(op: number): string {
    return this.data.names[op] ?? `<${op}>`;
  }

  /** The name of the instruction `op` specializes (its own name if it is not specialized). */
  baseName(op: number): string {
    const b = this.data.base[op] ?? -1;
    return b < 0 ? this.name(op) : this.name(b);
  }

  /**
   * The opcode at code unit `index` of `bytecode` (2 bytes a unit, opcode first). `containing`
   * (3.11/3.12's prev_instr): the instruction whose units — its own and its caches — contain
   * the index; else (3.13+'s instr_ptr) the instruction that starts there. null: none (index
   * −1 or past the bytecode, or an instruction before it whose cache count is unknown).
   */
  instructionAt(bytecode: Uint8Array, index: number, containing: boolean): number | null {
    const units = bytecode.length >>> 1;
    if (!(index >= 0 && index < units)) return null;
    if (!containing) return bytecode[2 * index]!;
    for (let i = 0; i < units; ) {
      const op = bytecode[2 * i]!;
      const caches = this.data.caches[op] ?? -1;
      if (caches < 0) return null;
      const next = i + 1 + caches;
      if (index < next) return op;
      i = next;
    }
    return null;
  }

  /**
   * The opcode of every instruction of `bytecode` in order, as one string of bytes (its cache
   * units left out: they change as the code runs): two copies of a code object's bytecode have
   * the same key when the interpreter has not re-specialized any instruction between them. An
   * instruction whose cache count is unknown ends the key (code under sys.monitoring).
   */
  instructionKey(bytecode: Uint8Array): string {
    const units = bytecode.length >>> 1;
    const ops: number[] = [];
    for (let i = 0; i < units; ) {
      const op = bytecode[2 * i]!;
      ops.push(op);
      const caches = this.data.caches[op] ?? -1;
      if (caches < 0) break;
      i += 1 + caches;
    }
    let s = '';
    for (let i = 0; i < ops.length; i += 4096) s += String.fromCharCode(...ops.slice(i, i + 4096));
    return s;
  }
}

const TABLES: Record<string, OpcodeTableData> = {
  '3.11': OPCODES_3_11,
  '3.12': OPCODES_3_12,
  '3.13': OPCODES_3_13,
  '3.14': OPCODES_3_14,
  '3.15': OPCODES_3_15,
};
const made = new Map<string, OpcodeTable>();

/** The opcode table of a Layout's `code.opcodes` ("3.14"), or null for a version without one. */
export function opcodeTable(id: string): OpcodeTable | null {
  const data = Object.hasOwn(TABLES, id) ? TABLES[id]! : null;
  if (!data) return null;
  let t = made.get(id);
  if (!t) made.set(id, (t = new OpcodeTable(data)));
  return t;
}

/** The minor versions with a table. */
export const OPCODE_TABLES: readonly string[] = Object.keys(TABLES);

/**
 * The name of the instruction a frame of `info` was at, its instruction pointer being
 * `instrPtr` (instr_ptr, or prev_instr where the layout says so), memoized in `memo` (code-unit
 * index → name). null: not known — the record has no bytecode, the version no table, or there
 * is no instruction there (a 3.11/3.12 frame that has not started).
 */
export function opcodeOf(info: CodeInfo, memo: Map<number, string | null>, layout: Layout, instrPtr: bigint): string | null {
  const index = Number((instrPtr - info.bytecodeStart) >> 1n);
  let name = memo.get(index);
  if (name === undefined) {
    const table = opcodeTable(layout.code.opcodes);
    const op = table && info.bytecode ? table.instructionAt(info.bytecode, index, layout.frame.instrPtrIsPrevious) : null;
    name = op === null ? null : table!.name(op);
    memo.set(index, name);
  }
  return name;
}
