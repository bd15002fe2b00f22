import { defineConfig } from 'vitest/config';

/**
 * Tests that load the machine without measuring it: browsers, other runtimes, packing the
 * package. They run after the live tests (sequence.groupOrder), never beside them: a recording
 * test's sample counts follow the CPU its recorder gets, and a Chromium or a Deno beside it on
 * two cores takes most of it.
 */
const HEAVY = ['test/export-html.test.ts', 'test/export-speedscope-app.test.ts', 'test/viewer.test.ts', 'test/pyodide-browser.test.ts', 'test/runtimes.test.ts', 'test/package.test.ts'];

/**
 * Tests that compare two sampling modes' profiles of one program: they run alone (after the
 * live tests, before the heavy ones). The reference they compare with, --blocking, samples
 * where its stop lands, and a stop lands later on a loaded machine: with another recording test
 * beside it on two cores, --blocking gave to_postfix (test/real-programs.test.ts, recursion on
 * 3.13) 13.1 % of the samples, against 9.1 % in a run with nothing beside it.
 */
const MEASURING = ['test/real-programs.test.ts'];

const common = {
  testTimeout: 120_000,
  hookTimeout: 120_000,
};

export default defineConfig({
  test: {
    // live-process tests spawn interpreters; two cores: keep files in parallel but not too many
    maxWorkers: 2,
    globalSetup: ['test/setup/coverage-report.ts'],
    reporters: ['default'],
    projects: [
      { test: { ...common, name: 'live', include: ['test/**/*.test.ts'], exclude: [...HEAVY, ...MEASURING], sequence: { groupOrder: 0 } } },
      { test: { ...common, name: 'measuring', include: MEASURING, fileParallelism: false, sequence: { groupOrder: 1 } } },
      // (one at a time: two browsers at once starve each other's pages)
      { test: { ...common, name: 'heavy', include: HEAVY, fileParallelism: false, sequence: { groupOrder: 2 } } },
    ],
  },
});
