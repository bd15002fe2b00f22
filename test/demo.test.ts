// `pyunwind demo` (what `npm run demo` runs on a fresh clone): the bundled workload recorded in
// Pyodide 3.15 and reported — a sensible profile without any system Python.
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { expect, it } from 'vitest';

it('pyunwind demo prints the profile of the bundled workload', () => {
  const r = spawnSync(process.execPath, [path.resolve('bin/pyunwind.js'), 'demo', '--duration', '2'], { encoding: 'utf8', timeout: 120_000 });
  expect(r.status, r.stderr).toBe(0);
  const out = r.stdout;
  const share = (fn: string): number => {
    // "  self      %  total      %  function" rows: the total share of hot()/cold()
    const m = new RegExp(`^\\s+[\\d,]+\\s+[\\d.]+%\\s+[\\d,]+\\s+([\\d.]+)%\\s+${fn} \\(`, 'm').exec(out);
    return m ? Number(m[1]) : NaN;
  };
  expect(out).toMatch(/complete\s+[\d,]+\s+(9\d|100)\.\d%/);
  expect(share('hot')).toBeGreaterThan(60);
  expect(share('hot')).toBeLessThan(80);
  expect(share('cold')).toBeGreaterThan(20);
  expect(share('cold')).toBeLessThan(40);
  expect(out).toMatch(/measured itself/);
});
