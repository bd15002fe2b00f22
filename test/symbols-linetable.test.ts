// The location-table decoder against CPython itself: test/fixtures/dump_linetables.py prints,
// for thousands of real code objects (stdlib modules, generated extremes, random tables fed
// through CPython's own decoder), the line of every code unit (co_lines) and its positions
// (co_positions). The TypeScript decoder must agree on every index, on every interpreter.
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { recordCoverage, skipTest } from './helpers/coverage.js';
import { nativeInterpreters } from '../harness/interpreters.js';
import {
  SymbolError,
  decodeLocationTable,
  entryForOffset,
  lineForOffset,
  type LocationEntry,
} from '../src/symbols/index.js';

const SCRIPT = path.resolve('test/fixtures/dump_linetables.py');
const SUITE = 'symbols-linetable';

type Pos = [number, number | null, number | null, number | null, number | null];
interface CodeRecord {
  kind: 'code';
  src: string;
  qual: string;
  first: number;
  table: string;
  units: number;
  real: boolean;
  lines: [number, number, number | null][];
  pos: Pos[];
}
interface Summary {
  kind: 'summary';
  version: string;
  quick: boolean;
  debug_ranges: boolean;
  modules: string[];
  skipped: Record<string, string>;
  codes: number;
  big_table: number | null;
  max_line: number;
  max_table: number;
}

function fromHex(s: string): Uint8Array {
  return Uint8Array.from(Buffer.from(s, 'hex'));
}

function dump(command: string, pyArgs: string[], scriptArgs: string[]): { codes: CodeRecord[]; summary: Summary } {
  const out = execFileSync(command, [...pyArgs, SCRIPT, ...scriptArgs], {
    encoding: 'utf8',
    maxBuffer: 1 << 30,
    timeout: 120_000,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const codes: CodeRecord[] = [];
  let summary: Summary | null = null;
  for (const line of out.split('\n')) {
    if (!line) continue;
    const rec = JSON.parse(line) as CodeRecord | Summary;
    if (rec.kind === 'code') codes.push(rec);
    else summary = rec;
  }
  if (!summary) throw new Error(`${command} ${SCRIPT}: no summary line (output truncated?)`);
  return { codes, summary };
}

interface Checked {
  codes: number;
  indices: number;
  entries: number;
  kinds: number[];
  mismatches: string[];
  /** real code objects whose table does not cover exactly co_code */
  uncovered: string[];
}

/** Entry codes (bits 3–6 of each entry's first byte) present in a decoded table. */
function countKinds(table: Uint8Array, kinds: number[]): void {
  for (const b of table) if (b & 0x80) kinds[(b >> 3) & 15]!++;
}

function same(a: LocationEntry | null, p: Pos): boolean {
  return (
    (a?.line ?? null) === p[1] &&
    (a?.endLine ?? null) === p[2] &&
    (a?.column ?? null) === p[3] &&
    (a?.endColumn ?? null) === p[4]
  );
}

function check(codes: CodeRecord[]): Checked {
  const r: Checked = { codes: 0, indices: 0, entries: 0, kinds: new Array(16).fill(0), mismatches: [], uncovered: [] };
  const miss = (msg: string) => {
    if (r.mismatches.length < 20) r.mismatches.push(msg);
    else if (r.mismatches.length === 20) r.mismatches.push('…');
  };
  for (const c of codes) {
    const where = `${c.src} ${c.qual} (first line ${c.first})`;
    const table = fromHex(c.table);
    let entries: LocationEntry[];
    try {
      entries = decodeLocationTable(table, c.first);
    } catch (e) {
      miss(`${where}: ${(e as Error).message}`);
      continue;
    }
    r.codes++;
    r.entries += entries.length;
    countKinds(table, r.kinds);
    const covered = entries.length ? entries[entries.length - 1]!.end : 0;
    if (c.real && covered !== c.units) r.uncovered.push(`${where}: table covers ${covered} of ${c.units} units`);
    if (lineForOffset(entries, -1, c.first) !== c.first) miss(`${where}: index -1 is not the first line`);
    for (const [start, end, line] of c.lines) {
      for (let i = start; i < end; i++) {
        const got = lineForOffset(entries, i, c.first);
        if (got !== line) miss(`${where} index ${i}: co_lines says ${line}, decoder ${got}`);
      }
    }
    let i = 0;
    for (const p of c.pos) {
      for (let k = 0; k < p[0]; k++, i++) {
        const e = entryForOffset(entries, i);
        if (!same(e, p)) {
          miss(
            `${where} index ${i}: co_positions says ${JSON.stringify(p.slice(1))}, ` +
              `decoder ${JSON.stringify(e && [e.line, e.endLine, e.column, e.endColumn])}`,
          );
        }
      }
    }
    if (i !== c.units) miss(`${where}: co_positions gave ${i} positions for ${c.units} units`);
    r.indices += i;
  }
  return r;
}

describe('location tables against real CPython', () => {
  for (const py of nativeInterpreters()) {
    it(`${py.label}: every line and position of every code unit`, (ctx) => {
      if (py.missing) return skipTest(ctx, SUITE, py.label, py.missing);
      const full = dump(py.command, [], []);
      const r = check(full.codes);
      const s = full.summary;
      console.log(
        `[${SUITE}] ${py.label} (${s.version}): ${r.codes} code objects, ${r.indices} code-unit indices, ` +
          `${r.entries} entries checked; modules ${s.modules.length}` +
          (Object.keys(s.skipped).length ? ` (absent: ${Object.keys(s.skipped).join(', ')})` : '') +
          `; largest table ${s.max_table} B, generated big function ${s.big_table} B, max line ${s.max_line}; ` +
          `entry kinds ${r.kinds.map((n, k) => `${k}:${n}`).join(' ')}`,
      );
      expect(r.mismatches).toEqual([]);
      expect(r.uncovered).toEqual([]);
      expect(r.codes).toBe(s.codes);
      expect(s.modules.length).toBeGreaterThanOrEqual(12);
      expect(s.big_table).toBeGreaterThan(65536);
      expect(s.max_line).toBeGreaterThan(100000);
      // random tables reach every kind through CPython's decoder
      for (let k = 0; k < 16; k++) expect(r.kinds[k], `entry kind ${k}`).toBeGreaterThan(0);

      // -X no_debug_ranges: the compiler writes column-less (kind 13) entries for real code
      const quick = dump(py.command, ['-X', 'no_debug_ranges'], ['--quick']);
      const q = check(quick.codes);
      expect(quick.summary.debug_ranges).toBe(false);
      console.log(
        `[${SUITE}] ${py.label} -X no_debug_ranges: ${q.codes} code objects, ${q.indices} indices; kind 13 entries ${q.kinds[13]}`,
      );
      expect(q.mismatches).toEqual([]);
      expect(q.uncovered).toEqual([]);
      expect(q.kinds[13]).toBeGreaterThan(0);
      recordCoverage(SUITE, py.label, true);
    });
  }
});

describe('location tables: malformed and extreme input', () => {
  it('an empty table has no entries and no lines', () => {
    expect(decodeLocationTable(new Uint8Array(), 5)).toEqual([]);
    expect(lineForOffset([], 0, 5)).toBeNull();
    expect(lineForOffset([], -1, 5)).toBe(5);
  });

  it('a truncated entry throws, naming the byte offset', () => {
    // one-line form (code 10) needs two column bytes; only one is there
    const t = Uint8Array.from([0x80 | (10 << 3), 1, 2, 0x80 | (10 << 3), 1]);
    expect(() => decodeLocationTable(t, 1)).toThrow(SymbolError);
    expect(() => decodeLocationTable(t, 1)).toThrow(/byte 5 of 5: entry that starts at byte 3 is cut short/);
  });

  it('a byte without bit 7 where an entry must start throws', () => {
    const t = Uint8Array.from([0x80 | (15 << 3), 0x00]);
    expect(() => decodeLocationTable(t, 1)).toThrow(/byte 1 of 2: 0x0 is not an entry start/);
  });

  it('an entry start inside an entry throws', () => {
    const t = Uint8Array.from([0x80 | (14 << 3), 2, 0x80 | (15 << 3)]);
    expect(() => decodeLocationTable(t, 1)).toThrow(/byte 2 of 3: 0x.* starts a new entry inside the entry at byte 0/);
  });

  it('a varint longer than CPython can write throws', () => {
    const t = Uint8Array.from([0x80 | (13 << 3), 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x01]);
    expect(() => decodeLocationTable(t, 1)).toThrow(/byte 1 of 8: varint longer than 6 bytes/);
    // six bytes (values up to 2^36) are fine
    const ok = Uint8Array.from([0x80 | (13 << 3), 0x40, 0x40, 0x40, 0x40, 0x40, 0x02]);
    expect(decodeLocationTable(ok, 0)[0]!.line).toBe(2 ** 30);
  });

  it('garbage never hangs or reads outside the table', () => {
    let seed = 12345;
    const rand = () => ((seed = (seed * 1103515245 + 12345) >>> 0) >>> 16) & 0xff;
    for (let n = 0; n < 2000; n++) {
      const t = Uint8Array.from({ length: n % 64 }, rand);
      try {
        const entries = decodeLocationTable(t, 1);
        expect(entries.length).toBeLessThanOrEqual(t.length);
      } catch (e) {
        expect(e).toBeInstanceOf(SymbolError);
      }
    }
  });

  it('a 1 MB table decodes whole, and lookups are binary searches over it', () => {
    // alternate a long-form entry (+7 lines, 1 unit) and a short entry (8 units)
    const parts: number[] = [];
    let units = 0;
    while (parts.length < 1 << 20) {
      parts.push(0x80 | (14 << 3) | 0, 14, 0, 1, 2); // svarint +7, end line +0, col 0, end col 1
      parts.push(0x80 | (0 << 3) | 7, 0x12);
      units += 9;
    }
    const table = Uint8Array.from(parts);
    const t0 = performance.now();
    const entries = decodeLocationTable(table, 100);
    const ms = performance.now() - t0;
    expect(entries.length).toBe((parts.length / 7) * 2);
    expect(entries[entries.length - 1]!.end).toBe(units);
    const pairs = parts.length / 7;
    expect(lineForOffset(entries, units - 1, 100)).toBe(100 + 7 * pairs);
    expect(lineForOffset(entries, units, 100)).toBeNull();
    expect(lineForOffset(entries, 9 * 1000, 100)).toBe(100 + 7 * 1001);
    console.log(`[${SUITE}] 1 MB table: ${entries.length} entries in ${ms.toFixed(0)} ms`);
  });
});
