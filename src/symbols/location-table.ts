// CPython's location table (`co_linetable`, 3.11+; format in CPython's
// InternalDocs/locations.md, decoder `advance_with_locations` in Objects/codeobject.c).
//
// The table is untrusted input: every byte read is checked against the table's length, the
// loop consumes at least one byte per step (so it ends after table.length steps), and a
// malformed table throws a SymbolError that names the byte offset. There is no limit on the
// table's size: a generated function's table can be megabytes long and must still decode.

/** Why a code object, string or table could not be read; the message names the address or offset. */
export class SymbolError extends Error {
  override name = 'SymbolError';
  /** the object (or table) the error is about; undefined when it is not known */
  readonly address: bigint | undefined;
  constructor(message: string, address?: bigint) {
    super(message);
    this.address = address;
  }
}

export function hex(address: bigint | number): string {
  return '0x' + address.toString(16);
}

/**
 * One entry of a location table. `start`/`end` are code-unit indices (2-byte units), the
 * entry covers `start <= i < end`. null means "no location" (CPython's -1 / None).
 */
export interface LocationEntry {
  start: number;
  end: number;
  line: number | null;
  endLine: number | null;
  column: number | null;
  endColumn: number | null;
}

const NO_LOCATION = 15;
const LONG = 14;
const NO_COLUMNS = 13;
const ONE_LINE0 = 10;

/**
 * CPython reads varints into a 32-bit unsigned int, 6 bits per byte: a 7th byte would shift
 * past 32 bits, which no CPython encoder writes. Rejecting it keeps garbage from producing
 * numbers beyond 2^36 — it limits the encoding, not the size of any real value.
 */
const MAX_VARINT_BYTES = 6;

/**
 * Decode a whole table. Throws SymbolError (naming the byte offset) if the table is
 * truncated or malformed: an entry must start with a byte that has bit 7 set, and the bytes
 * that follow it must not (CPython's encoder never sets it there, so a set bit means the
 * previous entry was cut short or the bytes are not a location table). Entries decoded before
 * the error are not returned: a table that is wrong in one place is not trusted anywhere.
 */
export function decodeLocationTable(table: Uint8Array, firstLine: number): LocationEntry[] {
  const entries: LocationEntry[] = [];
  const n = table.length;
  let pos = 0;
  let line = firstLine;
  let unit = 0;

  const fail = (at: number, what: string): never => {
    throw new SymbolError(`location table byte ${at} of ${n}: ${what}`);
  };
  const byte = (entryAt: number): number => {
    if (pos >= n) fail(pos, `entry that starts at byte ${entryAt} is cut short by the end of the table`);
    const b = table[pos]!;
    if (b & 0x80) fail(pos, `0x${b.toString(16)} starts a new entry inside the entry at byte ${entryAt}`);
    pos++;
    return b;
  };
  const varint = (entryAt: number): number => {
    const at = pos;
    let b = byte(entryAt);
    let value = b & 63;
    let shift = 0;
    let count = 1;
    while (b & 64) {
      if (count === MAX_VARINT_BYTES) fail(at, `varint longer than ${MAX_VARINT_BYTES} bytes`);
      b = byte(entryAt);
      shift += 6;
      value += (b & 63) * 2 ** shift;
      count++;
    }
    return value;
  };
  const svarint = (entryAt: number): number => {
    const v = varint(entryAt);
    const magnitude = Math.floor(v / 2);
    return v % 2 === 1 ? -magnitude : magnitude;
  };

  while (pos < n) {
    const entryAt = pos;
    const first = table[pos]!;
    if (!(first & 0x80)) fail(pos, `0x${first.toString(16)} is not an entry start (bit 7 clear)`);
    pos++;
    const code = (first >> 3) & 15;
    const start = unit;
    unit += (first & 7) + 1;
    let entry: LocationEntry;
    if (code === NO_LOCATION) {
      entry = { start, end: unit, line: null, endLine: null, column: null, endColumn: null };
    } else if (code === LONG) {
      line += svarint(entryAt);
      const endLine = line + varint(entryAt);
      const column = varint(entryAt) - 1;
      const endColumn = varint(entryAt) - 1;
      entry = {
        start,
        end: unit,
        line,
        endLine,
        column: column < 0 ? null : column,
        endColumn: endColumn < 0 ? null : endColumn,
      };
    } else if (code === NO_COLUMNS) {
      line += svarint(entryAt);
      entry = { start, end: unit, line, endLine: line, column: null, endColumn: null };
    } else if (code >= ONE_LINE0) {
      line += code - ONE_LINE0;
      const column = byte(entryAt);
      const endColumn = byte(entryAt);
      entry = { start, end: unit, line, endLine: line, column, endColumn };
    } else {
      const b = byte(entryAt);
      const column = code * 8 + ((b >> 4) & 7);
      entry = { start, end: unit, line, endLine: line, column, endColumn: column + (b & 15) };
    }
    entries.push(entry);
  }
  return entries;
}

/**
 * The line of the instruction at `codeUnitIndex`, as CPython's PyCode_Addr2Line computes it:
 * a negative index (a 3.11/3.12 frame that has not started: prev_instr is one unit before the
 * first instruction) gives `firstLine`; an index inside a no-location entry, or past the last
 * entry, gives null. `entries` must be what decodeLocationTable returned (contiguous, sorted).
 */
export function lineForOffset(entries: LocationEntry[], codeUnitIndex: number, firstLine: number): number | null {
  if (codeUnitIndex < 0) return firstLine;
  const entry = entryForOffset(entries, codeUnitIndex);
  return entry ? entry.line : null;
}

/** The entry covering `codeUnitIndex`, or null when no entry does. */
export function entryForOffset(entries: LocationEntry[], codeUnitIndex: number): LocationEntry | null {
  let lo = 0;
  let hi = entries.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1;
    const e = entries[mid]!;
    if (codeUnitIndex < e.start) hi = mid - 1;
    else if (codeUnitIndex >= e.end) lo = mid + 1;
    else return e;
  }
  return null;
}
