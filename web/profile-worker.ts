// The in-browser profiler's worker: loads Pyodide from ./pyodide/ beside this script (the build
// copies it from the npm package), then for each program the page sends: compiles it, profiles
// it with profilePyodide (src/record/pyodide/browser.ts — the library entry a page that embeds
// Pyodide uses; its ticker is pyodide-ticker-worker.js beside this script) while it runs as
// __main__ (builtins.exec from JS: no frame of Pyodide's under <module>), and posts every
// capture block to the page as it is finished.
//
// Built by scripts/build-web.mjs into dist/web/profile-worker.js (an ES module worker). Pyodide
// evaluates JS of its own while it loads (emscripten's EM_ASM), so this script is served with
// script-src 'unsafe-eval' (src/cli/view.ts); nothing else is.

import { profilePyodide } from '../src/record/pyodide/browser.js';
import { execProgram, prepareProgram } from '../src/record/pyodide/program.js';
import { CONTROL, SIGINT } from '../src/record/pyodide/protocol.js';
import type { PyodideApi } from '../src/record/pyodide/sampler.js';
import type { FromProfileWorker, ToProfileWorker } from './profile-protocol.js';

const scope = globalThis as unknown as { postMessage(m: FromProfileWorker, transfer?: Transferable[]): void; onmessage: ((ev: MessageEvent<ToProfileWorker>) => void) | null };
const post = (m: FromProfileWorker, transfer: Transferable[] = []): void => scope.postMessage(m, transfer);

let pyodide: Promise<PyodideApi> | null = null;

function loadPyodideHere(): Promise<PyodideApi> {
  pyodide ??= (async () => {
    post({ type: 'status', text: 'loading Pyodide' });
    const indexURL = new URL('pyodide/', import.meta.url).href;
    const mod = (await import(/* @vite-ignore */ new URL('pyodide.mjs', indexURL).href)) as {
      loadPyodide(options: { indexURL: string; stdout?: (s: string) => void; stderr?: (s: string) => void }): Promise<unknown>;
    };
    // Pyodide's own messages while it loads are not the program's output
    const py = (await mod.loadPyodide({ indexURL, stdout: () => {}, stderr: () => {} })) as PyodideApi;
    // a stop asked for by the page (SIGINT in the interrupt buffer) raises KeyboardInterrupt
    const signal = py.pyimport('signal');
    signal.signal(SIGINT, signal.default_int_handler);
    signal.destroy?.();
    py.setStdout({ batched: (text: string) => post({ type: 'output', stream: 'stdout', text: text + '\n' }) });
    py.setStderr({ batched: (text: string) => post({ type: 'output', stream: 'stderr', text: text + '\n' }) });
    return py;
  })();
  pyodide.catch(() => (pyodide = null));
  return pyodide;
}

async function run(m: Extract<ToProfileWorker, { type: 'run' }>): Promise<void> {
  const loadStarted = performance.now();
  const py = await loadPyodideHere();
  post({ type: 'status', text: 'warming the sampler up' });
  // compiled before the recording starts: a SyntaxError is reported without samples of its formatting
  const program = prepareProgram(py, { python: m.python, filename: m.filename, args: m.args });
  const profiler = profilePyodide(py, {
    rateHz: m.rateHz,
    flushEveryMs: 250,
    command: [m.filename, ...m.args],
    // only the program's stacks: not the Python Pyodide runs of its own when an exception leaves it
    moduleCode: 'error' in program ? null : program.moduleCode,
    tickerUrl: new URL('pyodide-ticker-worker.js', import.meta.url),
    onBlock(bytes) {
      // a copy to transfer: the profiler keeps the block (stop() returns the whole capture)
      const own = bytes.slice().buffer as ArrayBuffer;
      post({ type: 'block', bytes: own }, [own]);
    },
    onProgress: (p) => post({ type: 'progress', ...p }),
  });
  post({ type: 'loaded', pythonVersion: profiler.pythonVersion, description: profiler.description, loadMs: performance.now() - loadStarted });
  await profiler.start();
  post({ type: 'started', interrupt: profiler.interrupt.buffer as SharedArrayBuffer, control: profiler.control.buffer as SharedArrayBuffer });
  post({ type: 'status', text: 'running' });
  const outcome = 'error' in program ? program.error : execProgram(py, program, () => Atomics.load(profiler.control, CONTROL.STOP) !== 0);
  const scheduled = () => Atomics.load(profiler.control, CONTROL.SCHEDULED);
  const capture = await profiler.stop();
  post({ type: 'done', outcome, totals: { ...profiler.totals }, scheduled: scheduled(), captureBytes: capture.length });
}

let running = false;
scope.onmessage = (ev) => {
  const m = ev.data;
  if (m.type !== 'run') return;
  if (running) {
    post({ type: 'fatal', message: 'a program is already running' });
    return;
  }
  running = true;
  run(m)
    .catch((e: unknown) => post({ type: 'fatal', message: e instanceof Error ? e.message : String(e) }))
    .finally(() => (running = false));
};
