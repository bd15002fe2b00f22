// Real objects from real interpreters: test/fixtures/dump_objects.py copies str objects
// (compact of every kind, and non-compact str-subclass instances), code objects with their
// strings and line tables, as a recorder would — exactly the bytes the layout says they
// occupy — and the instruction offsets and line numbers of live frames. The symbolizer, given
// the layout pyunwind builds for that interpreter, must reproduce Python's own answers.
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Layout } from '../src/layout/layout.js';
import { RegionMemory } from '../src/walk/region-memory.js';
import { SymbolError, Symbolizer, readPyString } from '../src/symbols/index.js';
import { recordCoverage, skipTest } from './helpers/coverage.js';
import { liveLayout, nativeInterpreters } from '../harness/interpreters.js';

const SCRIPT = path.resolve('test/fixtures/dump_objects.py');
const SUITE = 'symbols-live';

interface Dump {
  version: string;
  regions: [string, string][];
  strings: { addr: string; text: string; compact: boolean }[];
  codes: { addr: string; qual: string; name: string; filename: string; first: number }[];
  frames: { code: string; lasti: number; lineno: number | null; what: string }[];
}

describe('str and code objects copied from real interpreters', () => {
  for (const py of nativeInterpreters()) {
    it(`${py.label}: names, strings and frame lines`, async (ctx) => {
      const skip = (why: string) => skipTest(ctx, SUITE, py.label, why);
      if (py.missing) return skip(py.missing);
      const l = await liveLayout(py.command);
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
