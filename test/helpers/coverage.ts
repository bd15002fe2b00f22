// Live tests record what they covered or could not run (and why); test/setup/coverage-report.ts
// prints the list at the end of the run. A test that cannot run is skipped by the runner, with
// the reason — never counted as passed — and under CI, which provides every interpreter,
// browser and runtime the suite needs (.ci/run), it fails instead.
import fs from 'node:fs';
import path from 'node:path';
import { it, type TestContext } from 'vitest';

// set per run by test/setup/coverage-report.ts
const DIR = process.env.PYUNWIND_COVERAGE_DIR ?? path.resolve('.cache/test-coverage/unsorted');

/** The run is CI's (CI=true, as .ci/run and CI services set it): nothing it provides may be missing. */
export const UNDER_CI = /^(true|1)$/i.test(process.env.CI ?? '');

export function recordCoverage(suite: string, target: string, ok: boolean, reason?: string): void {
  fs.mkdirSync(DIR, { recursive: true });
  fs.appendFileSync(path.join(DIR, `${process.pid}.jsonl`), JSON.stringify({ suite, target, ok, reason }) + '\n');
  if (!ok) process.stderr.write(`[skip] ${suite} ${target}: ${reason}\n`);
}

/**
 * This test cannot run here: `reason` says what is missing. Recorded, then skipped by the
 * runner with the reason; under CI it fails with it instead — unless `applies` is false: the
 * target is one the test does not apply to (a version without the feature), which CI cannot
 * provide either.
 */
export function skipTest(ctx: TestContext, suite: string, target: string, reason: string, applies = true): never {
  recordCoverage(suite, target, false, reason);
  if (applies && UNDER_CI) throw new Error(`${suite} ${target}: cannot run: ${reason} (CI provides what the suite needs: see .ci/run)`);
  return ctx.skip(reason);
}

/** A test registered only to say that the tests of `target` cannot run here, and why (skipTest). */
export function cannotRun(suite: string, target: string, reason: string, applies = true): void {
  it(`${target}: cannot run here`, (ctx) => skipTest(ctx, suite, target, reason, applies));
}
