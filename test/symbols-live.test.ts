// Real objects from real interpreters: test/fixtures/dump_objects.py copies str objects
// (compact of every kind, and non-compact str-subclass instances), code objects with their
// strings and line tables, as a recorder would — exactly the bytes the layout says they
// occupy — and the instruction offsets and line numbers of live frames. The symbolizer, given
// the x86-64 layouts of cpython-internals.md §6.1/§7.1, must reproduce Python's own answers.
// 3.14+ have no hand-written layout here (their layouts come from debug offsets); they are
// recorded as skipped.
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Layout } from '../src/layout/layout.js';
import { RegionMemory } from '../src/walk/region-memory.js';
import { SymbolError, Symbolizer, readPyString } from '../src/symbols/index.js';
import { recordCoverage } from './helpers/coverage.js';
import { nativeInterpreters } from './helpers/interpreters.js';

const SCRIPT = path.resolve('test/fixtures/dump_objects.py');
const SUITE = 'symbols-live';

const BITS = { kindShift: 2, compactBit: 5, asciiBit: 6 };
const CODE_PTRS = { filename: 112, name: 120, qualname: 128, linetable: 136 };

/** x86-64 GIL-build layouts (measured, cpython-internals.md §6.1, §7.1), by minor version. */
const LAYOUTS: Record<string, { unicode: Layout['unicode']; code: Partial<Layout['code']> }> = {
  '3.11': {
    unicode: { length: 16, state: 32, asciiSize: 48, compactSize: 72, legacyData: 72, ...BITS },
    code: { ...CODE_PTRS, firstlineno: 72, codeAdaptive: 184 },
  },
  '3.12': {
    unicode: { length: 16, state: 32, asciiSize: 40, compactSize: 56, legacyData: 56, ...BITS },
    code: { ...CODE_PTRS, firstlineno: 68, codeAdaptive: 192 },
  },
  '3.13': {
    unicode: { length: 16, state: 32, asciiSize: 40, compactSize: 56, legacyData: 56, ...BITS },
    code: { ...CODE_PTRS, firstlineno: 68, codeAdaptive: 200 },
  },
};

function layoutFor(minor: string): Layout {
  const t = LAYOUTS[minor]!;
  return {
    pointerSize: 8,
    object: { size: 16, obType: 8, obSize: 16 },
    bytes: { obSize: 16, obSval: 32 },
    unicode: t.unicode,
    code: t.code,
  } as unknown as Layout;
}

interface Dump {
  version: string;
  regions: [string, string][];
  strings: { addr: string; text: string; compact: boolean }[];
  codes: { addr: string; qual: string; name: string; filename: string; first: number }[];
  frames: { code: string; lasti: number; lineno: number | null; what: string }[];
}

function minorOf(command: string): string | null {
  try {
    return execFileSync(command, ['-c', 'import sys; print("%d.%d" % sys.version_info[:2])'], {
      encoding: 'utf8',
      timeout: 20_000,
    }).trim();
  } catch {
    return null;
  }
}

describe('str and code objects copied from real interpreters', () => {
  for (const py of nativeInterpreters()) {
    it(`${py.label}: names, strings and frame lines`, (ctx) => {
      const skip = (why: string) => {
        console.log(`[${SUITE}] ${py.label} skipped: ${why}`);
        recordCoverage(SUITE, py.label, false, why);
        ctx.skip();
      };
      if (py.missing) return skip(py.missing);
      const minor = minorOf(py.command);
      if (minor === null || !(minor in LAYOUTS)) {
        return skip(`no hand-written x86-64 layout for ${minor} (3.14+ layouts come from debug offsets)`);
      }
      const l = layoutFor(minor);
      const arg = JSON.stringify({ ...l.unicode, codeAdaptive: l.code.codeAdaptive, obSval: l.bytes.obSval, ptr: 8 });
      const out = execFileSync(py.command, [SCRIPT, arg], { encoding: 'utf8', maxBuffer: 1 << 28, timeout: 60_000 });
      const d = JSON.parse(out) as Dump;
      const mem = new RegionMemory(
        d.regions.map(([a, b]) => ({ address: BigInt(a), bytes: Uint8Array.from(Buffer.from(b, 'hex')) })),
        8,
      );

      for (const s of d.strings) {
        expect(readPyString(mem, l, BigInt(s.addr)), `${s.compact ? '' : 'non-compact '}str ${s.text.slice(0, 20)}`).toBe(
          s.text,
        );
      }
      expect(d.strings.some((s) => !s.compact)).toBe(true);

      const sym = new Symbolizer(mem, l);
      for (const c of d.codes) {
        const info = sym.code(BigInt(c.addr));
        if (info instanceof SymbolError) throw info;
        expect({ qual: info.qualname, name: info.name, filename: info.filename, first: info.firstLine }).toEqual({
          qual: c.qual,
          name: c.name,
          filename: c.filename,
          first: c.first,
        });
      }
      const lines: string[] = [];
      for (const f of d.frames) {
        const info = sym.code(BigInt(f.code));
        if (info instanceof SymbolError) throw info;
        // f_lasti is a byte offset, or -1 for a frame that has not started
        const index = f.lasti < 0 ? -1 : f.lasti / 2;
        const line = sym.line(BigInt(f.code), info.bytecodeStart + BigInt(index * 2));
        expect(line, `${f.what} (f_lasti ${f.lasti})`).toBe(f.lineno);
        lines.push(`${f.what}: index ${index} → line ${line}`);
      }
      console.log(
        `[${SUITE}] ${py.label} (${d.version}): ${d.strings.length} str objects ` +
          `(${d.strings.filter((s) => !s.compact).length} non-compact), ${d.codes.length} code objects, ` +
          `${d.frames.length} frames — ${lines.join('; ')}`,
      );
      recordCoverage(SUITE, py.label, true);
    });
  }
});
