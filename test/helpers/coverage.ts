// Live tests record what they covered or skipped (and why); test/setup/coverage-report.ts
// prints the summary at the end of the run.
import fs from 'node:fs';
import path from 'node:path';

// set per run by test/setup/coverage-report.ts
const DIR = process.env.PYUNWIND_COVERAGE_DIR ?? path.resolve('.cache/test-coverage/unsorted');

export function recordCoverage(suite: string, target: string, ok: boolean, reason?: string): void {
  fs.mkdirSync(DIR, { recursive: true });
  fs.appendFileSync(path.join(DIR, `${process.pid}.jsonl`), JSON.stringify({ suite, target, ok, reason }) + '\n');
  if (!ok) process.stderr.write(`[skip] ${suite} ${target}: ${reason}\n`);
}
