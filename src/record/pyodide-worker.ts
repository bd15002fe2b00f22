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
import { formatVersion } from '../layout/index.js';
import { captureHeader } from './capture-header.js';
import { MemoryCopier } from './copier.js';
import { emitCodes, sampleRecord } from './sink.js';
import { pyodideSource, type PyodideLike, type PyodideSource } from './pyodide.js';
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
  runPython(code: string, options?: { globals?: unknown; filename?: string }): unknown;
  FS: { mkdirTree(path: string): void; writeFile(path: string, data: string): void };
}

const init = workerData as WorkerInit;
/** samples taken (and thrown away) before the recording, to warm the JIT up */
const WARM_UP_SAMPLES = 3000;
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
  const source = pyodideSource(py);
  const layout = source.layout;
  const pythonVersion = formatVersion(layout.version);
  const tstate = warmUp(py, source);
  // compiled before the recording starts: a SyntaxError is reported without samples of its formatting
  const program = prepareProgram(py);
  // the program's module code object: a stack without it is not the program's (Pyodide runs
  // Python of its own when an exception leaves the program, before sys.excepthook)
  let moduleCode: bigint | null = null;
  if (!('error' in program)) {
    const builtins = py.pyimport('builtins');
    moduleCode = BigInt(builtins.id(program.code) as number);
    builtins.destroy?.();
  }
  post({ type: 'ready', pythonVersion, description: source.description });
  await new Promise<void>((resolve) => port.once('message', (m: WorkerRequest) => m.type === 'run' && resolve()));

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
  const copier = new MemoryCopier(source);
  // Blocks cross to the main thread as they are finished; the sink there writes them.
  const sink: CaptureSink = {
    write(bytes: Uint8Array): void {
      const own = bytes.slice();
      post({ type: 'bytes', bytes: own }, [own.buffer as ArrayBuffer]);
    },
  };
  const startTime = Date.now();
  const writer = new CaptureWriter(sink, captureHeader(source, {
    command: [init.filename, ...init.args],
    rateHz: init.rateHz,
    startTime,
    recorder: init.recorder,
    mode: 'signal',
  }));
  let lastFlush = 0;
  let sampling = true;
  const flushEvery = init.flushEveryMs;
  // the recording's start, on this thread's clock: sample times are µs since then
  let origin = 0;

  /** Add to the capture the missed ticks it does not say yet: missed = scheduled − taken. */
  const reportMissed = (scheduled: number, pending: number): void => {
    const due = scheduled - pending - totals.ticks - totals.missed;
    if (due > 0) {
      writer.addMissed(due);
      totals.missed += due;
    }
  };

  // The recording was stopped (duration reached): the main thread sends one more SIGUSR1 before
  // it interrupts the program, so that everything taken is in the capture even if the program
  // then refuses to stop and its worker has to be terminated.
  let stopFlushed = false;
  const stopFlush = (): void => {
    if (stopFlushed) return;
    stopFlushed = true;
    try {
      reportMissed(Atomics.load(control, CONTROL.SCHEDULED), 0);
      writer.flush();
    } catch (e) {
      totals.firstFailure ??= e instanceof Error ? e.message : String(e);
    }
    Atomics.store(control, CONTROL.FLUSHED, 1);
  };

  // The SIGUSR1 handler. Called by CPython as handler(signum, frame) at a safe point of the
  // interrupted code, with no Python frame of its own: current_frame is the interrupted frame.
  // It must never throw: an exception would surface in the program as a JsException.
  const onSignal = (_signum: unknown, frame: unknown): void => {
    // Pyodide hands the frame object over as a PyProxy; free it at once (it is not used)
    (frame as PyProxyLike | null)?.destroy?.();
    if (!sampling) return;
    if (moduleCode !== null && !inProgram(source, tstate, moduleCode)) return;
    if (Atomics.load(control, CONTROL.STOP) !== 0) {
      stopFlush();
      return;
    }
    const started = performance.now();
    try {
      const codes = takeSample(copier, writer, Math.round((started - origin) * 1000), totals.copyMicros);
      totals.codeObjects += codes;
      totals.ticks++;
      totals.samples++;
      // a tick written after this one was consumed may still be in the buffer (pending): not missed yet
      reportMissed(Atomics.load(control, CONTROL.SCHEDULED), Atomics.load(interrupt, 0) !== 0 ? 1 : 0);
      Atomics.store(control, CONTROL.TAKEN, totals.ticks);
      if (started - lastFlush >= flushEvery) {
        writer.flush();
        lastFlush = performance.now();
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
  const sys = py.pyimport('sys');
  const signal = py.pyimport('signal');
  // Pyodide formats an exception that leaves a call from JS by calling sys.excepthook (through
  // PyErr_Print), which runs Python code (the traceback module) after the program's frames are
  // gone. Stop sampling (and the schedule) before that: those stacks are not the program's.
  const excepthook = sys.excepthook as PyProxyLike & ((...a: unknown[]) => unknown);
  sys.excepthook = (...args: unknown[]): unknown => {
    // Called from C, so it adds no frame: if no Python frame is left, the program is over.
    // (A program may call sys.excepthook itself; its frames are then on the stack, and the
    // formatting it asked for is part of its profile.)
    if (pythonIdle(source, tstate)) {
      sampling = false;
      Atomics.store(control, CONTROL.FINISHED, 1);
    }
    try {
      return excepthook(...args);
    } finally {
      for (const a of args) (a as PyProxyLike | null)?.destroy?.();
    }
  };
  signal.signal(SIGUSR1, onSignal);
  py.setInterruptBuffer(interrupt);

  // Start: the schedule on the main thread begins at this instant (epoch-based, so both clocks agree).
  origin = lastFlush = performance.now();
  startAt[0] = performance.timeOrigin + origin;
  Atomics.store(control, CONTROL.STARTED, 1);
  Atomics.notify(control, CONTROL.STARTED);

  const outcome = 'error' in program ? program.error : execProgram(py, program);

  sampling = false;
  Atomics.store(control, CONTROL.FINISHED, 1);
  py.setInterruptBuffer(undefined);
  signal.signal(SIGUSR1, signal.SIG_IGN);
  sys.excepthook = excepthook;
  excepthook.destroy?.();
  signal.destroy?.();
  sys.destroy?.();
  // Wait until the main thread has stopped scheduling, so the count of scheduled ticks is final.
  Atomics.wait(control, CONTROL.SCHEDULER_DONE, 0, 10_000);
  reportMissed(Atomics.load(control, CONTROL.SCHEDULED), 0);
  writer.close();
  post({ type: 'done', outcome, totals });
}

/** Is no Python frame running: current_frame is NULL, or (3.15) the thread's base frame? */
function pythonIdle(source: PyodideSource, tstate: bigint | null): boolean {
  if (tstate === null) return true;
  const L = source.layout.tstate;
  const current = source.tryRead(tstate + BigInt(L.currentFrame), 4);
  if (!current) return true;
  const frame = new DataView(current.buffer, current.byteOffset, 4).getUint32(0, true);
  if (frame === 0) return true;
  if (L.baseFrame === null) return false;
  const base = source.tryRead(tstate + BigInt(L.baseFrame), 4);
  return !!base && new DataView(base.buffer, base.byteOffset, 4).getUint32(0, true) === frame;
}

/** Is the program's module frame on the thread's stack? (A pointer walk, bounded.) */
function inProgram(source: PyodideSource, tstate: bigint | null, moduleCode: bigint): boolean {
  if (tstate === null) return false;
  const L = source.layout;
  const word = (a: bigint): bigint | null => {
    const b = source.tryRead(a, 4);
    return b ? BigInt(new DataView(b.buffer, b.byteOffset, 4).getUint32(0, true)) : null;
  };
  const tag = BigInt(L.executableTagMask);
  let frame = word(tstate + BigInt(L.tstate.currentFrame));
  for (let i = 0; frame && i < 100_000; i++) {
    const code = word(frame + BigInt(L.frame.executable));
    if (code !== null && (code & ~tag) === moduleCode) return true;
    frame = word(frame + BigInt(L.frame.previous));
  }
  return false;
}

interface Program {
  code: PyProxyLike;
  globals: PyProxyLike;
}

/** Compile the program and make its __main__ namespace; a SyntaxError is the program's error. */
function prepareProgram(py: Pyodide): Program | { error: ProgramOutcome } {
  const sys = py.pyimport('sys');
  const builtins = py.pyimport('builtins');
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
    const code = builtins.compile(init.python, init.filename, 'exec') as PyProxyLike;
    const globals = py.toPy({ __name__: '__main__', __file__: init.filename }) as PyProxyLike;
    return { code, globals };
  } catch (e) {
    return { error: outcomeOf(e, sys) };
  } finally {
    builtins.destroy?.();
    sys.destroy?.();
  }
}

/**
 * Run the program as __main__ with builtins.exec called from JS: no Python frame of
 * Pyodide's sits under <module> (runPython would add eval_code and CodeRunner.run).
 */
function execProgram(py: Pyodide, program: Program): ProgramOutcome {
  const builtins = py.pyimport('builtins');
  try {
    builtins.exec(program.code, program.globals);
    return { kind: 'finished' };
  } catch (e) {
    const sys = py.pyimport('sys');
    try {
      return outcomeOf(e, sys);
    } finally {
      sys.destroy?.();
    }
  } finally {
    program.code.destroy?.();
    program.globals.destroy?.();
    builtins.destroy?.();
  }
}

/** What an exception out of the program means. */
function outcomeOf(e: unknown, sys: any): ProgramOutcome {
  const type = (e as { type?: unknown }).type;
  // not a PythonError: a fault of the recorder or of Pyodide, not of the program
  if (typeof type !== 'string') throw e;
  const message = (e instanceof Error ? e.message : String(e)).trimEnd();
  if (type === 'KeyboardInterrupt' && Atomics.load(control, CONTROL.STOP) !== 0) return { kind: 'stopped' };
  if (type === 'SystemExit') {
    const exitCode = systemExitCode(sys, message);
    return exitCode === 0 ? { kind: 'finished' } : { kind: 'exit', exitCode, traceback: message };
  }
  return { kind: 'error', type, traceback: message };
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

/**
 * One sample: copy every thread, then add the code objects seen for the first time (before
 * the samples that use them) and the samples. Returns the number of code records added.
 */
function takeSample(copier: MemoryCopier, writer: CaptureWriter, time: number, copyMicros: { total: number; max: number }): number {
  const threads = copier.copyAll();
  let codes = 0;
  for (const t of threads) {
    emitCodes(writer, t);
    codes += t.codes.length;
    // Pyodide has no threads (no pthreads build): its one thread state is the main thread,
    // though interp->threads.main, where the copier looks, is never set there. The copy runs
    // at a safe point, in the thread that runs Python: nothing can move under it; should the
    // copier ever say otherwise, the record keeps its word (torn).
    writer.addSample(sampleRecord(t, time, threads.length === 1));
    copyMicros.total += t.copyMicros;
    if (t.copyMicros > copyMicros.max) copyMicros.max = t.copyMicros;
  }
  return codes;
}

/**
 * Run the sampling path a few thousand times before the recording starts, over a real stack
 * (Python calling a JS function in a loop), into a throwaway capture, so that the JIT has the
 * copier and the sample encoder compiled when the program starts rather than compiling them
 * inside the program's first handler calls. Measured on 3.15 at 1 kHz for 3 s: handler time
 * ~70 µs per sample without, ~45 µs with (block flushes included). Takes ~200–300 ms. (The
 * first real block flush still costs ~20 ms: deflate warms up on data like the program's, not
 * on these nearly identical samples.) Returns the address of the thread state.
 */
function warmUp(py: Pyodide, source: PyodideSource): bigint | null {
  const copier = new MemoryCopier(source);
  const writer = new CaptureWriter({ write: () => {} }, captureHeader(source, { rateHz: 1, startTime: 0, recorder: 'warm-up' }));
  const copyMicros = { total: 0, max: 0 };
  let tstate: bigint | null = null;
  let n = 0;
  const step = (): void => {
    takeSample(copier, writer, n, copyMicros);
    tstate ??= copier.copyAll()[0]?.threadStateAddress ?? null;
    // blocks about as big as a second of recording at 1 kHz, so deflate warms up too
    if (++n % 500 === 0) writer.flush();
  };
  const globals = py.toPy({ step }) as PyProxyLike;
  try {
    py.runPython(`def f(k):\n    for i in range(k):\n        step()\n\nf(${WARM_UP_SAMPLES})\n`, { globals });
  } finally {
    globals.destroy?.();
  }
  writer.close();
  return tstate;
}
