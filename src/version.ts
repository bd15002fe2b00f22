// pyunwind's version: a literal, so that this module reads nothing and loads in every runtime
// (a browser, a worker, Deno, Bun, workerd). `npm version` rewrites it (scripts/sync-version.mjs,
// the "version" script) and test/runtimes.test.ts checks it against package.json.
export const VERSION = '0.1.0';

/** How a capture names the recorder that wrote it. */
export const RECORDER = `pyunwind ${VERSION}`;
