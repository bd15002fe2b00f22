// The code objects of a recording, as processing sees them at one point of it.
//
// Each code record is decoded from its own regions only: CPython reuses the address of a dead
// code object, so bytes copied at one address for different objects (an old line table where a
// new code object's header now is) must never be pooled. A later record for an address
// replaces the earlier one — the recorder writes it, in order, before the first sample that
// needs it — so a sample is always symbolized with the code object that was at that address
// when it was taken. A record with no regions withdraws the address.

import type { Layout } from '../layout/layout.js';
import { RegionMemory } from '../walk/region-memory.js';
import type { CodeRange, Region } from '../walk/types.js';
import { codeRange, decodeCodeObject, type CodeInfo } from './code-object.js';
import { SymbolError } from './location-table.js';
import { opcodeOf } from './opcodes.js';
import { lineOf } from './symbolizer.js';
import type { SymbolizedFrame } from './types.js';

export type { SymbolizedFrame } from './types.js';

interface Entry {
  info: CodeInfo | SymbolError;
  /** code-unit index → line */
  lines: Map<number, number | null>;
  /** code-unit index → the name of the instruction there (null: not known), made when asked for */
  opcodes: Map<number, string | null> | null;
}

export class CodeTable {
  private readonly entries = new Map<bigint, Entry>();
  private sorted: CodeRange[] | null = null;
  /** bumped whenever a code object is added, replaced or withdrawn */
  version = 0;
  /**
   * bumped whenever an address that held a code object is given a record that names its frames
   * otherwise (another code object there, or withdrawn): a (code address, instruction) named
   * before may name something else now. The same code object recorded again (the recorder
   * refreshes its bytecode) names them alike. (An added code object changes no name given
   * before: a frame is named only by a code object the table holds.)
   */
  renamed = 0;
  /** bumped whenever an address that held a code object is given a record with other bytecode (names with opcodes change) */
  recoded = 0;

  constructor(
    readonly layout: Layout,
    records: Iterable<{ address: bigint; regions: Region[] }> = [],
  ) {
    for (const r of records) this.add(r);
  }

  /** Decode a code record from its own regions; it replaces any earlier one at its address. */
  add(record: { address: bigint; regions: Region[] }): void {
    let info: CodeInfo | SymbolError;
    if (record.regions.length === 0) {
      info = new SymbolError(`code object at 0x${record.address.toString(16)}: withdrawn by the recorder (the address no longer held it)`, record.address);
    } else {
      try {
        info = decodeCodeObject(new RegionMemory(record.regions, this.layout.pointerSize), this.layout, record.address);
      } catch (e) {
        if (!(e instanceof SymbolError)) throw e;
        info = e;
      }
    }
    const old = this.entries.get(record.address);
    if (old) {
      if (!sameNames(old.info, info)) this.renamed++;
      if (old.info instanceof SymbolError || info instanceof SymbolError || !sameBytes(old.info.bytecode, info.bytecode)) this.recoded++;
    }
    this.entries.set(record.address, { info, lines: new Map(), opcodes: null });
    this.sorted = null;
    this.version++;
  }

  get size(): number {
    return this.entries.size;
  }

  /** The ranges of every decodable code object, for the walk. */
  get ranges(): CodeRange[] {
    if (!this.sorted) {
      this.sorted = [];
      for (const e of this.entries.values()) if (!(e.info instanceof SymbolError)) this.sorted.push(codeRange(e.info));
      this.sorted.sort((a, b) => (a.address < b.address ? -1 : a.address > b.address ? 1 : 0));
    }
    return this.sorted;
  }

  /** Code objects whose record did not decode, and why. */
  get errors(): Map<bigint, SymbolError> {
    const out = new Map<bigint, SymbolError>();
    for (const [a, e] of this.entries) if (e.info instanceof SymbolError) out.set(a, e.info);
    return out;
  }

  /** The decoded code object at an address, or why it could not be decoded (undefined: no record). */
  code(address: bigint): CodeInfo | SymbolError | undefined {
    return this.entries.get(address)?.info;
  }

  /**
   * A frame of a trusted walk, named; with `opcodes`, with the name of its instruction where
   * the code record holds the bytecode (see src/symbols/opcodes.ts). Throws SymbolError if the
   * code object was not decodable or the instruction pointer is outside it: the walk rejects
   * such frames, so that is a bug.
   */
  frame(code: bigint, instrPtr: bigint, opcodes = false): SymbolizedFrame {
    const e = this.entries.get(code);
    if (!e) throw new SymbolError(`code object at 0x${code.toString(16)}: no record`, code);
    if (e.info instanceof SymbolError) throw e.info;
    const f: SymbolizedFrame = { qualname: e.info.qualname, filename: e.info.filename, line: lineOf(e.info, e.lines, instrPtr), code, instrPtr };
    if (opcodes) {
      const op = opcodeOf(e.info, (e.opcodes ??= new Map()), this.layout, instrPtr);
      if (op !== null) f.opcode = op;
    }
    return f;
  }
}

/** Do two records of one address name every (code, instruction) alike (without opcodes)? */
function sameNames(a: CodeInfo | SymbolError, b: CodeInfo | SymbolError): boolean {
  if (a instanceof SymbolError || b instanceof SymbolError) return false;
  if (a.qualname !== b.qualname || a.name !== b.name || a.filename !== b.filename || a.firstLine !== b.firstLine || a.bytecodeStart !== b.bytecodeStart || a.bytecodeEnd !== b.bytecodeEnd) return false;
  if (a.locations.length !== b.locations.length) return false;
  for (let i = 0; i < a.locations.length; i++) {
    const x = a.locations[i]!;
    const y = b.locations[i]!;
    if (x.start !== y.start || x.end !== y.end || x.line !== y.line || x.endLine !== y.endLine || x.column !== y.column || x.endColumn !== y.endColumn) return false;
  }
  return true;
}

function sameBytes(a: Uint8Array | null, b: Uint8Array | null): boolean {
  if (a === null || b === null) return a === b;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
