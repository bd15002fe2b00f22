// Pyodide in the live tests: load CPython 3.14 or 3.15 (npm `pyodide-314` / `pyodide`) offline
// from node_modules, once per process, and run Python programs that stop at a point of their
// choosing so the test can copy the interpreter's memory there.
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { PyodideAPI } from 'pyodide';
import type { PyodideLike } from '../../src/record/pyodide/source.js';

export type PyodideVersion = '3.14' | '3.15';

/** The Pyodide API plus the internals pyunwind reads (not in Pyodide's public types). */
export type Pyodide = PyodideAPI & PyodideLike;

export interface LoadedPyodide {
  py: Pyodide;
  /** e.g. "pyodide-315.0.0a2" */
  label: string;
  /** the package directory it was loaded from */
  dir: string;
  /** time loadPyodide took, ms */
  loadMs: number;
}

const PACKAGES: Record<PyodideVersion, string> = { '3.14': 'pyodide-314', '3.15': 'pyodide' };

const cache = new Map<PyodideVersion, Promise<LoadedPyodide | { missing: string }>>();

/** Load one Pyodide version (cached per process), or say why it is not available. */
export function loadPyodideVersion(which: PyodideVersion): Promise<LoadedPyodide | { missing: string }> {
  let p = cache.get(which);
  if (!p) {
    p = load(which);
    cache.set(which, p);
  }
  return p;
}

function packageDir(pkg: string): string | null {
  try {
    return path.dirname(createRequire(import.meta.url).resolve(`${pkg}/package.json`));
  } catch {
    return null;
  }
}

async function load(which: PyodideVersion): Promise<LoadedPyodide | { missing: string }> {
  const pkg = PACKAGES[which];
  const dir = packageDir(pkg);
  if (dir === null) return { missing: `npm package ${pkg} is not installed (it is a devDependency: npm install)` };
  for (const f of ['pyodide.mjs', 'pyodide.asm.wasm', 'python_stdlib.zip']) {
    if (!fs.existsSync(path.join(dir, f))) return { missing: `${pkg} in ${dir} has no ${f}` };
  }
  // Everything must come from the package directory: while Pyodide is imported and loaded,
  // fetch refuses http(s), and a load that tried the network fails even if Pyodide recovered.
  const started = performance.now();
  const { result: py, attempts } = await withoutNetwork(async () => {
    const { loadPyodide } = (await import(pathToFileURL(path.join(dir, 'pyodide.mjs')).href)) as {
      loadPyodide: (options: { indexURL: string }) => Promise<PyodideAPI>;
    };
    return (await loadPyodide({ indexURL: dir + '/' })) as Pyodide;
  });
  const loadMs = performance.now() - started;
  if (attempts.length > 0) throw new Error(`loading ${pkg} offline tried the network: ${attempts.join(', ')}`);
  const runs = py.runPython('import sys; "%d.%d" % sys.version_info[:2]') as string;
  if (runs !== which) return { missing: `${pkg} ${py.version} runs CPython ${runs}, not ${which}` };
  return { py, label: `pyodide-${py.version}`, dir, loadMs };
}

// fetch is process-global and both versions may load at once: stub it while any load runs.
let offline = 0;
let realFetch: typeof globalThis.fetch | undefined;
let attempted: string[] = [];

/** Run `run` with fetch refusing http(s) URLs; returns the URLs it refused. */
export async function withoutNetwork<T>(run: () => Promise<T>): Promise<{ result: T; attempts: string[] }> {
  if (offline++ === 0) {
    realFetch = globalThis.fetch;
    attempted = [];
    const stub = (input: Parameters<typeof fetch>[0], init?: Parameters<typeof fetch>[1]): Promise<Response> => {
      const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
      if (/^https?:/i.test(url)) {
        attempted.push(url);
        throw new Error(`network access while loading Pyodide offline: fetch(${url})`);
      }
      if (!realFetch) throw new Error(`no fetch to delegate ${url} to`);
      return realFetch(input, init);
    };
    globalThis.fetch = stub as typeof fetch;
  }
  const mine = attempted;
  try {
    const result = await run();
    return { result, attempts: [...mine] };
  } finally {
    if (--offline === 0) {
      if (realFetch) globalThis.fetch = realFetch;
      realFetch = undefined;
    }
  }
}

export interface Capture<T> {
  /** what onCapture returned */
  value: T;
  /** the arguments Python passed to capture(), converted to JS */
  args: unknown[];
}

export interface CaptureRun<T> {
  /** value of the program's last expression (converted to JS), as runPython returns it */
  result: unknown;
  stdout: string;
  stderr: string;
  captures: Capture<T>[];
}

export const PROBE_MODULE = 'pyunwind_probe';

/**
 * Run `source` as `__main__` with the JS module `pyunwind_probe` importable: its `capture(...)`
 * calls `onCapture` synchronously while Python is stopped inside the call, so `onCapture` sees
 * the interpreter's memory exactly as it is at that point of the program.
 */
export function runWithCapture<T>(
  py: Pyodide,
  source: string,
  onCapture: (...args: unknown[]) => T,
  options: { filename?: string } = {},
): CaptureRun<T> {
  const captures: Capture<T>[] = [];
  let failure: { error: unknown } | null = null;
  const capture = (...raw: unknown[]): void => {
    const args = raw.map(toJs);
    try {
      captures.push({ value: onCapture(...args), args });
    } catch (error) {
      // Python would see a JsException and maybe swallow it: remember the first one.
      failure ??= { error };
      throw error;
    }
  };
  const out: string[] = [];
  const err: string[] = [];
  // A module imported in an earlier run stays in sys.modules with the old capture.
  const evict = `import sys; sys.modules.pop(${JSON.stringify(PROBE_MODULE)}, None)`;
  py.runPython(evict);
  py.registerJsModule(PROBE_MODULE, { capture });
  py.setStdout({ batched: (s: string) => out.push(s) });
  py.setStderr({ batched: (s: string) => err.push(s) });
  const globals = py.toPy({ __name__: '__main__' }) as ReturnType<PyodideAPI['toPy']> & { destroy(): void };
  let result: unknown;
  try {
    result = toJs(py.runPython(source, { globals, filename: options.filename ?? '<exec>' }));
  } catch (e) {
    if (failure) throw (failure as { error: unknown }).error;
    throw e;
  } finally {
    py.setStdout();
    py.setStderr();
    py.unregisterJsModule(PROBE_MODULE);
    py.runPython(evict);
    globals.destroy();
  }
  if (failure) throw (failure as { error: unknown }).error;
  return { result, stdout: out.map((s) => s + '\n').join(''), stderr: err.map((s) => s + '\n').join(''), captures };
}

/** Python values arrive as proxies: convert them and free the proxy. */
function toJs(v: unknown): unknown {
  if (typeof v === 'object' && v !== null && typeof (v as { toJs?: unknown }).toJs === 'function') {
    const proxy = v as { toJs(): unknown; destroy?: () => void };
    const js = proxy.toJs();
    proxy.destroy?.();
    return js;
  }
  return v;
}
