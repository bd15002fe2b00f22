// A captured code object → its names, first line, bytecode range and location table.
//
// Only the fields are read (each bounds-checked on its own): a recorder may copy just the fixed
// part of the object plus the strings and the line table; the bytecode's extent comes from
// ob_size. The bytecode itself (co_code_adaptive, inline after the fixed part) is `bytecode`
// when the copy holds all of it — pyunwind's recorder copies it since 0.2 — for the opcodes.

import type { Layout } from '../layout/layout.js';
import type { RegionMemory } from '../walk/region-memory.js';
import type { CodeRange } from '../walk/types.js';
import { SymbolError, decodeLocationTable, hex, type LocationEntry } from './location-table.js';
import { readPyBytes, readPyString } from './strings.js';

export interface CodeInfo {
  address: bigint;
  qualname: string;
  name: string;
  filename: string;
  firstLine: number;
  /** first byte of co_code_adaptive */
  bytecodeStart: bigint;
  /** one past the last byte of the bytecode (ob_size code units of 2 bytes) */
  bytecodeEnd: bigint;
  /** bytes a frame of this code takes on the data stack (co_framesize words) */
  frameSize: number;
  locations: LocationEntry[];
  /** the bytecode as copied (co_code_adaptive, bytecodeStart..bytecodeEnd), null if the copy does not hold all of it */
  bytecode: Uint8Array | null;
}

/** far more local and stack slots than any real function has (CPython's own limits are lower) */
const MAX_FRAME_WORDS = 1 << 20;

/** CPython's _PyCode_Validate refuses co_code longer than INT_MAX bytes. */
const MAX_CODE_UNITS = 0x7fffffff >>> 1;

function fail(address: bigint, what: string): never {
  throw new SymbolError(`code object at ${hex(address)}: ${what}`, address);
}

function field<T>(address: bigint, name: string, fieldAddress: bigint, value: T | null): T {
  if (value === null) fail(address, `${name} at ${hex(fieldAddress)} is not in the captured regions`);
  return value;
}

/** Run `read`, turning its SymbolError into one that names the code object and the field. */
function within<T>(address: bigint, name: string, read: () => T): T {
  try {
    return read();
  } catch (e) {
    if (e instanceof SymbolError) fail(address, `${name}: ${e.message}`);
    throw e;
  }
}

/**
 * Decode the code object at `address`. Throws SymbolError naming the object and the field
 * when a field is not captured, a pointer is NULL or misaligned, ob_size or co_firstlineno is
 * out of range, or a string/line table is malformed.
 */
export function decodeCodeObject(mem: RegionMemory, layout: Layout, address: bigint): CodeInfo {
  const ps = BigInt(layout.pointerSize);
  if (address === 0n) fail(address, 'NULL pointer');
  if (address % ps !== 0n) fail(address, `address is not aligned to ${ps} bytes`);
  const c = layout.code;

  const sizeAt = address + BigInt(layout.object.obSize);
  const obSize = field(address, 'ob_size', sizeAt, mem.ssize(sizeAt));
  if (obSize < 0n || obSize > BigInt(MAX_CODE_UNITS)) {
    fail(address, `ob_size ${obSize} is not a bytecode length (0..${MAX_CODE_UNITS} code units)`);
  }
  const bytecodeStart = address + BigInt(c.codeAdaptive);
  const bytecodeEnd = bytecodeStart + obSize * 2n;
  if (bytecodeEnd > 1n << (8n * ps)) fail(address, `bytecode of ${obSize} code units runs past the address space`);

  const lineAt = address + BigInt(c.firstlineno);
  const firstLine = field(address, 'co_firstlineno', lineAt, mem.i32(lineAt));
  // 0 occurs for synthetic code (e.g. code.replace(co_firstlineno=0), some C-created code).
  if (firstLine < 0) fail(address, `co_firstlineno ${firstLine} is negative`);

  // the words a frame of this code takes on the data stack (co_framesize): header + locals + stack
  const intField = (name: string, offset: number): number => {
    const at = address + BigInt(offset);
    const v = field(address, name, at, mem.i32(at));
    if (v < 0 || v > MAX_FRAME_WORDS) fail(address, `${name} ${v} is out of range (0..${MAX_FRAME_WORDS})`);
    return v;
  };
  const frameSize =
    layout.frame.localsplus + (intField('co_nlocalsplus', c.nlocalsplus) + intField('co_stacksize', c.stacksize)) * layout.pointerSize;

  const pointer = (name: string, offset: number): bigint => {
    const at = address + BigInt(offset);
    const p = field(address, name, at, mem.ptr(at));
    if (p === 0n) fail(address, `${name} is NULL`);
    if (p % ps !== 0n) fail(address, `${name} ${hex(p)} is not aligned to ${ps} bytes`);
    return p;
  };
  const filenameAddr = pointer('co_filename', c.filename);
  const nameAddr = pointer('co_name', c.name);
  const qualnameAddr = pointer('co_qualname', c.qualname);
  const linetableAddr = pointer('co_linetable', c.linetable);

  const filename = within(address, 'co_filename', () => readPyString(mem, layout, filenameAddr));
  const name = within(address, 'co_name', () => readPyString(mem, layout, nameAddr));
  const qualname = within(address, 'co_qualname', () => readPyString(mem, layout, qualnameAddr));
  const table = within(address, 'co_linetable', () => readPyBytes(mem, layout, linetableAddr));
  const locations = within(address, `co_linetable (bytes at ${hex(linetableAddr)})`, () =>
    decodeLocationTable(table, firstLine),
  );

  const bytecode = mem.bytes(bytecodeStart, Number(obSize) * 2);

  return { address, qualname, name, filename, firstLine, bytecodeStart, bytecodeEnd, frameSize, locations, bytecode };
}

export function codeRange(info: CodeInfo): CodeRange {
  return { address: info.address, bytecodeStart: info.bytecodeStart, bytecodeEnd: info.bytecodeEnd, frameSize: info.frameSize };
}
