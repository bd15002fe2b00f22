// The pstats export of a real capture (threadpool.py on native CPython 3.15), read by Python's
// own pstats (the provisioned python3.15): pstats.Stats(FILE) loads it, and every function's
// (cc, nc, tt, ct) and callers are what the json report gives (samples on the stack, self
// samples, × the interval; threads merged); `python -m pstats FILE` shows the json's top
// function first by cumulative time. The CLI writes the same bytes with -o. Skips loudly when
// 3.15 is not provisioned.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { nativeInterpreters } from '../harness/interpreters.js';
import { metaFromHeader } from '../src/export/meta.js';
import { exportPstats } from '../src/export/pstats.js';
import { Profile } from '../src/profile/index.js';
import { reportCapture } from '../src/pipeline/report-file.js';
import { recordCoverage, cannotRun } from './helpers/coverage.js';
import { formatCapture } from './helpers/format-capture.js';

const BIN = path.resolve('bin/pyunwind.js');
const run = promisify(execFile);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pyunwind-pstats-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

interface JsonDoc {
  metadata: { rateHz: number };
  threads: {
    frames: { qualname: string; filename: string; line: number | null }[];
    stacks: [number, number, number][];
    functions: { qualname: string; filename: string; self: number; total: number }[];
  }[];
}

/** Python's view of the file: per function key (json of [file, line, name]) its numbers and callers. */
const READ = `
import json, pstats, sys
s = pstats.Stats(sys.argv[1])
k = lambda f: json.dumps(list(f))
print(json.dumps({
  'type': type(s).__name__,
  'total_tt': s.total_tt,
  'total_calls': s.total_calls,
  'stats': {k(f): [cc, nc, tt, ct, {k(c): list(v) for c, v in callers.items()}] for f, (cc, nc, tt, ct, callers) in s.stats.items()},
}))
`;

interface PyView {
  type: string;
  total_tt: number;
  total_calls: number;
  stats: Record<string, [cc: number, nc: number, tt: number, ct: number, callers: Record<string, [number, number, number, number]>]>;
}

const py = nativeInterpreters().find((p) => p.label === 'debian-3.15');
const cap = await formatCapture();
const why = typeof cap === 'string' ? cap : !py || py.missing ? `native CPython 3.15: ${py?.missing ?? 'not known'}` : null;

if (why !== null || typeof cap === 'string') {
  describe('pstats export of a real capture', () => {
    cannotRun('formats', 'pstats', why!);
  });
} else {
  describe(`pstats export of threadpool.py recorded from ${cap.label}`, () => {
    it("loads in Python's pstats with the json report's numbers, threads merged", async () => {
      const jsonFile = path.join(dir, 'report.json');
      await run(process.execPath, [BIN, 'report', cap.file, '--format', 'json', '-o', jsonFile]);
      const doc = JSON.parse(fs.readFileSync(jsonFile, 'utf8')) as JsonDoc;
      const out = path.join(dir, 'profile.pstats');
      await run(process.execPath, [BIN, 'report', cap.file, '--format', 'pstats', '-o', out]);

      // the CLI's bytes are the export's, and canonical (the same from the json read back)
      const report = await reportCapture(cap.file);
      const meta = metaFromHeader(report.header);
      const bytes = exportPstats(report.profile, meta);
      expect(new Uint8Array(fs.readFileSync(out))).toEqual(bytes);
      expect(exportPstats(Profile.fromJSON(doc), meta)).toEqual(bytes);

      // expected, from the json: a function is (qualname, filename) keyed with its smallest line
      const interval = 1 / doc.metadata.rateHz;
      const id = (qualname: string, filename: string): string => JSON.stringify([qualname, filename]);
      const line = new Map<string, number>();
      for (const t of doc.threads) {
        for (const f of t.frames) {
          const k = id(f.qualname, f.filename);
          if (f.line !== null && (line.get(k) ?? Infinity) > f.line) line.set(k, f.line);
        }
      }
      const key = (qualname: string, filename: string): string => JSON.stringify([filename, line.get(id(qualname, filename)) ?? 0, qualname]);
      // per function: samples on the stack and self samples, summed over the threads' function tables
      const fn = new Map<string, { total: number; self: number; qualname: string; filename: string }>();
      for (const t of doc.threads) {
        for (const f of t.functions) {
          const k = key(f.qualname, f.filename);
          const e = fn.get(k) ?? { total: 0, self: 0, qualname: f.qualname, filename: f.filename };
          e.total += f.total;
          e.self += f.self;
          fn.set(k, e);
        }
      }
      // per caller → callee edge: samples with the edge (once each), and samples whose leaf it calls
      const edges = new Map<string, Map<string, { total: number; self: number }>>();
      const edge = (callee: string, caller: string): { total: number; self: number } => {
        let m = edges.get(callee);
        if (!m) edges.set(callee, (m = new Map()));
        let e = m.get(caller);
        if (!e) m.set(caller, (e = { total: 0, self: 0 }));
        return e;
      };
      for (const t of doc.threads) {
        t.stacks.forEach(([, , w], i) => {
          if (w === 0) return;
          const path: string[] = []; // leaf first
          for (let x = i; x >= 0; x = t.stacks[x]![0]) {
            const f = t.frames[t.stacks[x]![1]]!;
            path.push(key(f.qualname, f.filename));
          }
          const seen = new Set<string>();
          for (let d = 0; d + 1 < path.length; d++) {
            const pair = JSON.stringify([path[d], path[d + 1]]);
            if (!seen.has(pair)) edge(path[d]!, path[d + 1]!).total += w;
            seen.add(pair);
          }
          if (path.length > 1) edge(path[0]!, path[1]!).self += w;
        });
      }

      const { stdout } = await run(py!.command, ['-c', READ, out], { maxBuffer: 64 << 20 });
      const raw = JSON.parse(stdout) as PyView;
      // keys as JSON.stringify writes them (Python's json.dumps spaces and escapes differently)
      const norm = (k: string): string => JSON.stringify(JSON.parse(k));
      const normKeys = <V>(o: Record<string, V>): Record<string, V> => Object.fromEntries(Object.entries(o).map(([k, v]) => [norm(k), v]));
      const view: PyView = {
        ...raw,
        stats: Object.fromEntries(Object.entries(raw.stats).map(([k, [cc, nc, tt, ct, callers]]) => [norm(k), [cc, nc, tt, ct, normKeys(callers)]])),
      };
      expect(view.type).toBe('Stats'); // the classic shape: no ('__sampled__',) marker
      expect(Object.keys(view.stats).sort()).toEqual([...fn.keys()].sort());
      expect(fn.size).toBeGreaterThan(20); // a real profile
      let selfSum = 0;
      let totalCalls = 0;
      let edgeCount = 0;
      for (const [k, [cc, nc, tt, ct, callers]] of Object.entries(view.stats)) {
        const want = fn.get(k)!;
        expect([k, cc, nc]).toEqual([k, want.total, want.total]);
        expect(Math.abs(tt - want.self * interval)).toBeLessThan(1e-9);
        expect(Math.abs(ct - want.total * interval)).toBeLessThan(1e-9);
        const wantCallers = edges.get(k) ?? new Map<string, { total: number; self: number }>();
        expect(Object.keys(callers).sort()).toEqual([...wantCallers.keys()].sort());
        for (const [c, [ecc, enc, ett, ect]] of Object.entries(callers)) {
          const e = wantCallers.get(c)!;
          expect([k, c, ecc, enc]).toEqual([k, c, e.total, e.total]);
          expect(Math.abs(ett - e.self * interval)).toBeLessThan(1e-9);
          expect(Math.abs(ect - e.total * interval)).toBeLessThan(1e-9);
          edgeCount++;
        }
        selfSum += want.self;
        totalCalls += want.total;
      }
      expect(Math.abs(view.total_tt - selfSum * interval)).toBeLessThan(1e-9 * fn.size);
      expect(view.total_calls).toBe(totalCalls);

      // python -m pstats: the json's top function (total, then self) comes first by cumulative time
      const top = [...fn.entries()].sort(([ka, a], [kb, b]) => b.total - a.total || b.self - a.self || (ka < kb ? -1 : 1));
      const [topKey, topFn] = top[0]!;
      const ties = top.filter(([, f]) => f.total === topFn.total).length;
      expect(ties, 'more functions tie at the top than `stats 5` shows').toBeLessThanOrEqual(5);
      const [file, topLine, name] = JSON.parse(topKey) as [string, number, string];
      const browse = await new Promise<string>((resolve, reject) => {
        const child = execFile(py!.command, ['-m', 'pstats', out], { maxBuffer: 16 << 20 }, (err, so) => (err ? reject(err) : resolve(so)));
        child.stdin!.end('sort cumulative\nstats 5\nquit\n');
      });
      expect(browse).toContain('Ordered by: cumulative time');
      expect(browse).toContain(`${file}:${topLine}(${name})`);
      const rows = browse.split('\n').filter((l) => /^\s+\d+\s+\d+\.\d{3}\s/.test(l));
      expect(rows).toHaveLength(5);
      expect(rows[0]!.trim().split(/\s+/)[0]).toBe(String(topFn.total));

      recordCoverage('formats', 'pstats', true);
      process.stderr.write(
        `pstats: ${fn.size} functions, ${edgeCount} caller edges, ${totalCalls} "calls" (samples on stack), total_tt ${view.total_tt.toFixed(3)} s; top by cumulative: ${name} (${topFn.total} samples, ${ties} tied)\n`,
      );
    });
  });
}
