// The worker_thread side of recordPyodide (src/record/pyodide-recorder.ts): loads Pyodide
// offline, installs a JS function as Python's SIGUSR1 handler, and runs the program. The main
// thread writes SIGUSR1 into the interrupt buffer on the sampling schedule; CPython notices it
// at its next eval-breaker safe point and calls the handler, which copies the interpreter's
// memory and adds the records to a CaptureWriter. Finished blocks go to the main thread as
// bytes (transferred), which writes them to the real sink.
//
// Why everything happens here: Pyodide's wasm memory is not shared (see the reference notes
// on Pyodide), so only the thread that runs Python can read it, and only when Python lets JS
// run — at the safe point where the handler is called.
//
// Why a JS handler and not a Python one: a Python handler's own frame would be pushed on top of
// the interrupted frame, so every sample would carry it. A JS function (a JsProxy, callable from
// Python) is called from C at the safe point without pushing any interpreter frame: the
// thread's current frame is the interrupted one, and the sampled stack is the program's own.
//
// The program runs with builtins.exec called from JS (not runPython): runPython would put
// Pyodide's own Python frames (eval_code, CodeRunner.run) under <module> in every sample.

import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parentPort, workerData } from 'node:worker_threads';
import { CaptureWriter, type CaptureSink } from '../capture/index.js';
import { SAMPLE_FLAG } from '../capture/types.js';
import { formatVersion } from '../layout/index.js';
import { MemoryCopier } from './copier.js';
import { pyodideSource, type PyodideLike } from './pyodide.js';
import {
  CONTROL,
  PYODIDE_PACKAGES,
  SIGINT,
  SIGUSR1,
  type ProgramOutcome,
  type WorkerInit,
  type WorkerReply,
  type WorkerRequest,
  type WorkerTotals,
} from './pyodide-recorder.js';

/** The members of the Pyodide API used here (the package's own types are a devDependency). */
interface PyProxyLike {
  destroy?: () => void;
  [key: string]: unknown;
}
interface Pyodide extends PyodideLike {
  readonly version: string;
  setInterruptBuffer(buffer: Int32Array | undefined): void;
  setStdout(options?: { batched: (s: string) => void }): void;
  setStderr(options?: { batched: (s: string) => void }): void;
  pyimport(name: string): any;
  toPy(value: unknown): any;
  FS: { mkdirTree(path: string): void; writeFile(path: string, data: string): void };
}

const init = workerData as WorkerInit;
const port = parentPort!;
const post = (m: WorkerReply, transfer?: ArrayBuffer[]): void => port.postMessage(m, transfer);

const interrupt = new Int32Array(init.interrupt);
const control = new Int32Array(init.control);

main().catch((e: unknown) => {
  post({ type: 'fatal', message: e instanceof Error ? e.message : String(e) });
});

async function main(): Promise<void> {
  const py = await loadOffline(init.version);
  const source = pyodideSource(py);
  const layout = source.layout;
  const pythonVersion = formatVersion(layout.version);
  post({ type: 'ready', pythonVersion, description: source.description });

  const run = await new Promise<Extract<WorkerRequest, { type: 'run' }>>((resolve) => {
    port.once('message', (m: WorkerRequest) => resolve(m as Extract<WorkerRequest, { type: 'run' }>));
  });

  // Blocks cross to the main thread as they are finished; the sink there writes them.
  const sink: CaptureSink = {
    write(bytes: Uint8Array): void {
      const own = bytes.slice();
      post({ type: 'bytes', bytes: own }, [own.buffer as ArrayBuffer]);
    },
  };
  const argv = [init.filename, ...init.args];
  const writer = new CaptureWriter(sink, {
    layoutSource: layout.source,
    pointerSize: layout.pointerSize,
    pythonVersion,
    target: source.description,
    command: argv,
    runtimeAddress: source.runtimeAddress,
    rateHz: init.rateHz,
    startTime: run.startTime,
    recorder: init.recorder,
    mode: 'signal',
  });
  const copier = new MemoryCopier(source);

  // µs since the recording's start: this thread's clock, shifted to the main thread's origin
  const origin = run.startAt - performance.timeOrigin;
  const totals: WorkerTotals = {
    ticks: 0,
    samples: 0,
    failedTicks: 0,
    firstFailure: null,
    codeObjects: 0,
    copyMicros: { total: 0, max: 0 },
    handlerMicros: { total: 0, max: 0 },
    missed: 0,
  };
  let lastFlush = performance.now();
  let sampling = true;
  const flushEvery = init.flushEveryMs;

  /** The missed ticks so far that the capture does not say yet (see the note at `missed`). */
  const reportMissed = (scheduled: number, pending: number): void => {
    const due = scheduled - pending - totals.ticks - totals.missed;
    if (due > 0) {
      writer.addMissed(due);
      totals.missed += due;
    }
  };

  // The SIGUSR1 handler. Called by CPython as handler(signum, frame) at a safe point of the
  // interrupted code, with no Python frame of its own: current_frame is the interrupted frame.
  // It must never throw: an exception would surface in the program as a JsException.
  const onSignal = (_signum: unknown, frame: unknown): void => {
    // Pyodide hands the frame object over as a PyProxy; free it at once (it is not used)
    (frame as PyProxyLike | null)?.destroy?.();
    if (!sampling || Atomics.load(control, CONTROL.STOP) !== 0) return;
    const started = performance.now();
    try {
      const threads = copier.copyAll();
      const tc = performance.now(); (globalThis as any).T ??= {copy:0, add:0, flush:0, n:0, hist:[]}; (globalThis as any).T.copy += tc - started;
      const { codes, replaced } = copier.takeNewCodes();
      // a block holds one copy per code address: a reused address starts a new block
      if (replaced) writer.flush();
      // code records before the samples that use them (CodeObjectSnapshot is a CodeRecord)
      for (const c of codes) writer.addCode(c);
      totals.codeObjects += codes.length;
      totals.ticks++;
      // missed = scheduled − taken; a tick written after this one's consumption may still be
      // in the buffer (pending), and is not missed yet
      reportMissed(Atomics.load(control, CONTROL.SCHEDULED), Atomics.load(interrupt, 0) !== 0 ? 1 : 0);
      const time = Math.round((started - origin) * 1000);
      for (const t of threads) {
        writer.addSample({
          time,
          interpreterId: t.interpreterId,
          threadStateAddress: t.threadStateAddress,
          threadId: t.threadId,
          nativeThreadId: t.nativeThreadId,
          flags: (t.holdsGil ? SAMPLE_FLAG.GIL : 0) | (t.mainThread ? SAMPLE_FLAG.MAIN : 0),
          // the copy runs at a safe point, in the thread that runs Python: nothing can move
          // under it, but if the copier ever says so, keep its word
          recorderStatus: t.moved ? 'torn' : 'ok',
          copyMicros: t.copyMicros,
          regions: t.regions,
          errors: t.errors,
        });
        totals.samples++;
        totals.copyMicros.total += t.copyMicros;
        if (t.copyMicros > totals.copyMicros.max) totals.copyMicros.max = t.copyMicros;
      }
      const ta = performance.now(); (globalThis as any).T.add += ta - tc; (globalThis as any).T.n++; (globalThis as any).T.hist.push(Math.round((ta-started)*1000));
      Atomics.store(control, CONTROL.TAKEN, totals.ticks);
      if (started - lastFlush >= flushEvery) {
        writer.flush();
        lastFlush = performance.now(); (globalThis as any).T.flush += lastFlush - ta; console.log('flush', lastFlush-ta);
      }
    } catch (e) {
      totals.failedTicks++;
      totals.firstFailure ??= e instanceof Error ? e.message : String(e);
    }
    const us = Math.round((performance.now() - started) * 1000);
    totals.handlerMicros.total += us;
    if (us > totals.handlerMicros.max) totals.handlerMicros.max = us;
  };

  py.setStdout({ batched: (text: string) => post({ type: 'stdout', text: text + '\n' }) });
  py.setStderr({ batched: (text: string) => post({ type: 'stderr', text: text + '\n' }) });
  const signal = py.pyimport('signal');
  signal.signal(SIGUSR1, onSignal);
  py.setInterruptBuffer(interrupt);

  const outcome = runProgram(py);

  sampling = false;
  py.setInterruptBuffer(undefined);
  signal.signal(SIGUSR1, signal.SIG_IGN);
  signal.destroy?.();
  // Wait until the main thread has stopped scheduling, so the count of scheduled ticks is final.
  Atomics.store(control, CONTROL.FINISHED, 1);
  Atomics.notify(control, CONTROL.FINISHED);
  Atomics.wait(control, CONTROL.SCHEDULER_DONE, 0, 10_000);
  reportMissed(Atomics.load(control, CONTROL.SCHEDULED), 0);
  writer.close();
  const T=(globalThis as any).T; T.hist.sort((a:number,b:number)=>a-b); console.log(JSON.stringify({copy:T.copy/T.n*1000, add:T.add/T.n*1000, flush:T.flush, p50:T.hist[T.n>>1], p90:T.hist[Math.floor(T.n*0.9)], p99:T.hist[Math.floor(T.n*0.99)], first:T.hist.slice(-10)}));
  post({ type: 'done', outcome, totals });
}

/**
 * Run the program as __main__: compile, then exec in a fresh module namespace. Both are
 * builtins called from JS, so no Python frame of Pyodide's sits under <module>.
 */
function runProgram(py: Pyodide): ProgramOutcome {
  const sys = py.pyimport('sys');
  const builtins = py.pyimport('builtins');
  let globals: PyProxyLike | null = null;
  let code: PyProxyLike | null = null;
  try {
    sys.argv = py.toPy([init.filename, ...init.args]);
    // tracebacks show source lines when the file is where its name says
    if (init.filename.startsWith('/')) {
      try {
        py.FS.mkdirTree(path.posix.dirname(init.filename));
        py.FS.writeFile(init.filename, init.python);
      } catch {
        // only tracebacks would miss the source lines
      }
    }
    globals = py.toPy({ __name__: '__main__', __file__: init.filename }) as PyProxyLike;
    code = builtins.compile(init.python, init.filename, 'exec') as PyProxyLike;
    builtins.exec(code, globals);
    return { kind: 'finished' };
  } catch (e) {
    const type = (e as { type?: unknown }).type;
    const message = e instanceof Error ? e.message : String(e);
    if (type === 'KeyboardInterrupt' && Atomics.load(control, CONTROL.STOP) !== 0) return { kind: 'stopped' };
    if (type === 'SystemExit') {
      const exitCode = systemExitCode(sys, message);
      return exitCode === 0 ? { kind: 'finished' } : { kind: 'exit', exitCode, traceback: message };
    }
    if (typeof type === 'string') return { kind: 'error', type, traceback: message.trimEnd() };
    throw e;
  } finally {
    (code as PyProxyLike | null)?.destroy?.();
    globals?.destroy?.();
    builtins.destroy?.();
    sys.destroy?.();
  }
}

/** sys.exit(x): None → 0, an int → itself, anything else → 1 (CPython prints it). */
function systemExitCode(sys: any, message: string): number {
  let code: unknown;
  try {
    const exc = sys.last_exc ?? sys.last_value;
    code = exc?.code;
    exc?.destroy?.();
  } catch {
    code = undefined;
  }
  if (code === undefined) {
    // the traceback's last line: "SystemExit: 3", or "SystemExit" for None
    const last = message.trimEnd().split('\n').pop() ?? '';
    const m = /^SystemExit(?::\s*(.*))?$/.exec(last);
    code = m ? (m[1] === undefined || m[1] === '' || m[1] === 'None' ? null : /^-?\d+$/.test(m[1]) ? Number(m[1]) : m[1]) : 1;
  }
  if (code === null) return 0;
  if (typeof code === 'number' && Number.isInteger(code)) return code;
  if (typeof code === 'bigint') return Number(code);
  (code as PyProxyLike | null)?.destroy?.();
  return 1;
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
