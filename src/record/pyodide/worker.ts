// The worker_thread side of recordPyodide (src/record/pyodide/recorder.ts): loads Pyodide
// offline and runs the program under the signal sampler (src/record/pyodide/sampler.ts, the
// part every runtime shares). The main thread writes SIGUSR1 into the interrupt buffer on the
// sampling schedule; the sampler's handler copies the interpreter's memory at the next safe
// point and adds the records to a capture; finished blocks go to the main thread as bytes
// (transferred), which writes them to the real sink.
//
// The program runs with builtins.exec called from JS (src/record/pyodide/program.ts), not
// runPython: runPython would put Pyodide's own Python frames (eval_code, CodeRunner.run) under
// <module> in every sample.

import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parentPort, workerData } from 'node:worker_threads';
import { PYODIDE_PACKAGES, type WorkerInit, type WorkerReply, type WorkerRequest } from './recorder.js';
import { execProgram, prepareProgram } from './program.js';
import { CONTROL, SIGINT } from './protocol.js';
import { PyodideSampler, type PyodideApi } from './sampler.js';

type Pyodide = PyodideApi;

const init = workerData as WorkerInit;
const port = parentPort!;
const post = (m: WorkerReply, transfer?: ArrayBuffer[]): void => port.postMessage(m, transfer);

const interrupt = new Int32Array(init.interrupt);
const control = new Int32Array(init.control);
/** [0]: the recording's start, performance.timeOrigin + performance.now() of this thread, ms */
const startAt = new Float64Array(init.startAt);

main().catch((e: unknown) => {
  post({ type: 'fatal', message: e instanceof Error ? e.message : String(e) });
});

async function main(): Promise<void> {
  const py = await loadOffline(init.version);
  const sampler = new PyodideSampler(py, interrupt, control);
  // compiled before the recording starts: a SyntaxError is reported without samples of its formatting
  const program = prepareProgram(py, { python: init.python, filename: init.filename, args: init.args });
  post({ type: 'ready', pythonVersion: sampler.pythonVersion, description: sampler.description });
  await new Promise<void>((resolve) => port.once('message', (m: WorkerRequest) => m.type === 'run' && resolve()));

  py.setStdout({ batched: (text: string) => post({ type: 'stdout', text: text + '\n' }) });
  py.setStderr({ batched: (text: string) => post({ type: 'stderr', text: text + '\n' }) });
  // Blocks cross to the main thread as they are finished; the sink there writes them.
  sampler.start({
    rateHz: init.rateHz,
    flushEveryMs: init.flushEveryMs,
    recorder: init.recorder,
    command: [init.filename, ...init.args],
    // the program's module code object: a stack without it is not the program's (Pyodide runs
    // Python of its own when an exception leaves the program, before sys.excepthook)
    moduleCode: 'error' in program ? null : program.moduleCode,
    post: (bytes) => post({ type: 'bytes', bytes }, [bytes.buffer as ArrayBuffer]),
  });

  // Start: the schedule on the main thread begins at this instant (epoch-based, so both clocks agree).
  startAt[0] = performance.timeOrigin + sampler.origin;
  Atomics.store(control, CONTROL.STARTED, 1);
  Atomics.notify(control, CONTROL.STARTED);

  const outcome = 'error' in program ? program.error : execProgram(py, program, () => Atomics.load(control, CONTROL.STOP) !== 0);

  sampler.stop();
  // Wait until the main thread has stopped scheduling, so the count of scheduled ticks is final.
  Atomics.wait(control, CONTROL.SCHEDULER_DONE, 0, 10_000);
  sampler.close();
  post({ type: 'done', outcome, totals: sampler.totals });
}

/**
 * Load Pyodide from its npm package directory, offline: while it loads, fetch refuses http(s)
 * (in Node the package reads its files with fs; a load that still tried the network fails).
 */
async function loadOffline(version: WorkerInit['version']): Promise<Pyodide> {
  const pkg = PYODIDE_PACKAGES[version];
  let dir: string;
  try {
    dir = path.dirname(createRequire(import.meta.url).resolve(`${pkg}/package.json`));
  } catch {
    throw new Error(`Pyodide ${version} needs the npm package ${pkg}, which is not installed`);
  }
  const realFetch = globalThis.fetch;
  const attempts: string[] = [];
  globalThis.fetch = ((input: Parameters<typeof fetch>[0], options?: Parameters<typeof fetch>[1]) => {
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    if (/^https?:/i.test(url)) {
      attempts.push(url);
      return Promise.reject(new Error(`network access while loading Pyodide offline: fetch(${url})`));
    }
    return realFetch(input, options);
  }) as typeof fetch;
  let py: Pyodide;
  try {
    const mod = (await import(pathToFileURL(path.join(dir, 'pyodide.mjs')).href)) as {
      loadPyodide: (options: { indexURL: string; stdout?: (s: string) => void; stderr?: (s: string) => void }) => Promise<unknown>;
    };
    // Pyodide's own messages while it loads are not the program's output
    py = (await mod.loadPyodide({ indexURL: dir + path.sep, stdout: () => {}, stderr: () => {} })) as Pyodide;
  } finally {
    globalThis.fetch = realFetch;
  }
  if (attempts.length) throw new Error(`loading ${pkg} offline tried the network: ${attempts.join(', ')}`);
  const sys = py.pyimport('sys');
  const runs = `${sys.version_info.major}.${sys.version_info.minor}`;
  sys.destroy?.();
  if (runs !== version) throw new Error(`${pkg} ${py.version} runs CPython ${runs}, not ${version}`);
  // the main thread asks for an interrupt with SIGINT: make sure it raises KeyboardInterrupt
  const signal = py.pyimport('signal');
  signal.signal(SIGINT, signal.default_int_handler);
  signal.destroy?.();
  return py;
}
