// The real-program suite: programs built on the standard library (workloads/: json + tomllib,
// a thread pool, asyncio tasks, ast + pure-Python pickle, deep recursion, long C calls),
// recorded with `pyunwind record -- PYTHON PROGRAM` in the default mode and with --blocking
// (exact: every thread that may run Python stopped for its copy) on CPython 3.13, 3.14 and
// 3.15. No sample may be rejected as corrupt or dangling, and every function's self share in
// the default mode must be within 3 points of --blocking. (The same comparison beside CPython's
// own profiler is bench/real-programs.bench.ts, figures in docs/validation.md.)
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { recordCoverage } from './helpers/coverage.js';
import { nativeInterpreters } from './helpers/interpreters.js';
import { REAL_PROGRAMS, largestGap, recordWithPyunwind, topShares } from './helpers/real-programs.js';

const SECONDS = 3;
const RATE_HZ = 2000;
const GAP_POINTS = 3;
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pyunwind-programs-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const targets = nativeInterpreters().filter((p) => /^debian-3\.1[345]$/.test(p.label));

describe.each(targets)('real programs on $label', (py) => {
  if (py.missing) {
    it(`is skipped: ${py.missing}`, () => recordCoverage('real-programs', py.label, false, py.missing!));
    return;
  }
  describe.each(REAL_PROGRAMS)('$name', (program) => {
    // Two recordings of two runs, on a 2-core machine shared with other test files: a run whose
    // program was starved of CPU can land off by itself; such a comparison is made again.
    it(`default mode: nothing corrupt or dangling, every function within ${GAP_POINTS} points of --blocking`, { retry: 2 }, async () => {
      // (a program with deep stacks gets fewer samples per second: recorded for longer)
      const seconds = program.deep ? 2 * SECONDS : SECONDS;
      const adaptive = await recordWithPyunwind(py.command, program, { mode: 'adaptive', seconds, rateHz: RATE_HZ, dir });
      const blocking = await recordWithPyunwind(py.command, program, { mode: 'blocking', seconds, rateHz: RATE_HZ, dir });
      const gap = largestGap(adaptive.shares, blocking.shares);
      const bad = (r: typeof adaptive): number => (r.statuses.corrupt ?? 0) + (r.statuses.dangling ?? 0);
      console.log(
        `${py.label} ${program.name}: default ${adaptive.attempted} samples (rejected ${adaptive.rejected}, stopped ${adaptive.stopped}), ` +
          `blocking ${blocking.attempted}; largest gap ${gap.gap.toFixed(1)} (${gap.fn}: ${gap.a.toFixed(1)} vs ${gap.b.toFixed(1)}); ` +
          `default: ${topShares(adaptive.shares, 5)}`,
      );
      expect(bad(adaptive)).toBe(0);
      expect(bad(blocking)).toBe(0);
      // shares of a few hundred samples would differ by sampling noise alone
      expect(adaptive.attempted).toBeGreaterThan(1500);
      expect(blocking.attempted).toBeGreaterThan(1500);
      expect(gap.gap, `${gap.fn}: default ${gap.a.toFixed(1)}%, blocking ${gap.b.toFixed(1)}%`).toBeLessThanOrEqual(GAP_POINTS);
      recordCoverage('real-programs', `${py.label} ${program.name}`, true);
    });
  });
});
