import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    // live-process tests spawn interpreters; two cores: keep files in parallel but not too many
    maxWorkers: 2,
    globalSetup: ['test/setup/coverage-report.ts'],
    reporters: ['default'],
  },
});
