// Symbolization: captured code objects → qualname, filename and line numbers.
export { SymbolError, decodeLocationTable, lineForOffset, entryForOffset, type LocationEntry } from './location-table.js';
export {
  readPyString,
  readPyBytes,
  pyStringExtent,
  pyBytesExtent,
  pyStringHeaderSize,
  pyBytesHeaderSize,
  decodeStringHeader,
  type ObjectExtent,
  type StringHeader,
} from './strings.js';
export { decodeCodeObject, codeRange, type CodeInfo } from './code-object.js';
export { Symbolizer } from './symbolizer.js';
export { OpcodeTable, opcodeTable, OPCODE_TABLES, type OpcodeTableData } from './opcodes.js';
export type { SourceFrame, SymbolizedFrame } from './types.js';
