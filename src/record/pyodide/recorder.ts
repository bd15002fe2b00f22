// Recording Python that runs in Pyodide (CPython compiled to wasm32), by signals.
//
// Pyodide's linear memory is not shared, so no other thread can read it while Python runs
// (reference notes on Pyodide, §6). What does work is cooperative: Pyodide runs in a
// worker_thread with an interrupt buffer (an Int32Array over a SharedArrayBuffer); this thread
// writes SIGUSR1 into it on an absolute schedule at the sampling rate; CPython checks the
// buffer at eval-breaker safe points (every 50th check) and runs the SIGUSR1 handler there —
// a JS function, which copies the interpreter's memory and adds the records to a capture
// writer (src/record/pyodide/worker.ts). Finished blocks come back here as bytes and go to the
// output sink.
//
// Consequences, and what the capture says about them:
// - samples happen only at safe points, in the thread that runs Python, so each copy is
//   consistent by construction: the header's mode is "signal";
// - the buffer holds one signal, and a tick is written only once the handler has begun for the
//   one before (CONTROL.ANSWERED): Pyodide runs Python code (collections.abc checks) to hand the
//   handler its frame, and a signal taken there would sample those frames in a nested call
//   (a signal CPython's check erased — it reads the buffer, then writes 0 — is written again
//   after LOST_AFTER_MS, src/record/pyodide/ticks.ts).
//   Missed ticks = scheduled − taken, recorded in the capture as the recording goes;
// - while Python is blocked in C or JS code nothing is sampled (those ticks are missed too).
//
// Ending: the program finishes (or calls sys.exit); it raises (the promise rejects with a
// PyodideProgramError carrying the traceback, after the capture is closed); or durationMs is
// reached: sampling stops, SIGINT goes into the buffer, the program gets KeyboardInterrupt at
// its next safe point, and the capture is closed. A program that will not stop (it swallows
// KeyboardInterrupt, or is stuck in C code) is terminated after a grace period; every block
// written until then is in the capture, which then has no end block.

import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { fileSink, type CaptureSink } from '../../capture/index.js';
import { RECORDER } from '../../version.js';
import { CONTROL, SIGINT, SIGUSR1, type ProgramOutcome, type WorkerTotals } from './protocol.js';
import { newTickResult, signalTick } from './ticks.js';
import { Sleeper } from '../sampling/sleeper.js';

// ---- protocol with the worker (src/record/pyodide/worker.ts) --------------------------------

export { CONTROL, SIGINT, SIGUSR1, type ProgramOutcome, type WorkerTotals } from './protocol.js';

/** Npm packages of the Pyodide versions (pyodide-314 is an alias of pyodide@314). */
export const PYODIDE_PACKAGES = { '3.14': 'pyodide-314', '3.15': 'pyodide' } as const;
export type PyodideVersion = keyof typeof PYODIDE_PACKAGES;

export interface WorkerInit {
  version: PyodideVersion;
  python: string;
  filename: string;
  args: string[];
  rateHz: number;
  flushEveryMs: number;
  recorder: string;
  interrupt: SharedArrayBuffer;
  control: SharedArrayBuffer;
  /** one float64: the recording's start, performance.timeOrigin + performance.now(), ms */
  startAt: SharedArrayBuffer;
}

/** Start the program (Pyodide is loaded, the program compiled). */
export type WorkerRequest = { type: 'run' };

export type WorkerReply =
  | { type: 'ready'; pythonVersion: string; description: string }
  | { type: 'bytes'; bytes: Uint8Array }
  | { type: 'stdout' | 'stderr'; text: string }
  | { type: 'done'; outcome: ProgramOutcome; totals: WorkerTotals }
  | { type: 'fatal'; message: string };

// ---- the recorder ---------------------------------------------------------------------------

export interface PyodideRecordOptions {
  /** the program's source */
  python: string;
  /** its file name (co_filename, sys.argv[0]); default "<pyodide>" */
  filename?: string;
  /** sys.argv[1:] */
  args?: string[];
  rateHz: number;
  /** stop after this long: sampling stops and the program is interrupted (KeyboardInterrupt) */
  durationMs?: number;
  /** a capture file path, or a sink for the capture's bytes */
  output: CaptureSink | string;
  /** CPython version of the Pyodide to run (default 3.15) */
  version?: PyodideVersion;
  /** the program's standard output/error, as it comes (default: collected into the stats only) */
  onStdout?: (text: string) => void;
  onStderr?: (text: string) => void;
  /** Pyodide is loaded; sampling starts now */
  onStart?: (info: { pythonVersion: string; description: string; loadMs: number }) => void;
  /** called every `progressEveryMs` (default 250) while recording */
  onProgress?: (stats: PyodideProgress) => void;
  progressEveryMs?: number;
  /** end a capture block at least this often (default 1000 ms) */
  flushEveryMs?: number;
  /** how long a program interrupted at durationMs may take to stop before it is terminated (default 3000 ms) */
  stopGraceMs?: number;
}

export interface PyodideProgress {
  scheduled: number;
  /** ticks sampled */
  taken: number;
  elapsedMs: number;
}

export type PyodideRecordingEnd =
  /** the program ran to its end (or sys.exit(0)) */
  | 'finished'
  /** sys.exit with a non-zero code (exitCode) */
  | 'exited'
  /** durationMs was reached and the program was interrupted */
  | 'duration'
  /** durationMs was reached and the program did not stop: its worker was terminated */
  | 'terminated'
  /** the program raised (error holds the traceback) */
  | 'error';

export interface PyodideRecordingStats extends Omit<WorkerTotals, 'ticks' | 'missed' | 'samples'> {
  /** e.g. "3.15.0rc1" */
  pythonVersion: string;
  /** e.g. "pyodide 315.0.0a2 (CPython 3.15.0rc1)" */
  target: string;
  rateHz: number;
  /** ticks the schedule asked for */
  scheduled: number;
  /** ticks sampled */
  ticks: number;
  /** scheduled − taken: ticks that found the buffer still full, or Python away from a safe point */
  missed: number;
  /** of the missed: slots the schedule itself skipped because this thread was late (never written) */
  lateTicks: number;
  /** of the missed: slots not written because the handler had not yet begun for the signal before (CONTROL.ANSWERED) */
  unanswered: number;
  /** signals erased from the interrupt buffer before a handler saw them (CPython's check reads, then writes 0), written again */
  lost: number;
  /** thread samples written (one per tick: Pyodide has one thread) */
  samples: number;
  /** from the first scheduled tick to the program's end (or its interruption) */
  elapsedMs: number;
  /** time loading Pyodide took */
  loadMs: number;
  ended: PyodideRecordingEnd;
  exitCode: number;
  /** the program's output (the last 1 MiB of each) */
  stdout: string;
  stderr: string;
  /** bytes of the capture */
  bytesWritten: number;
  /** the capture ends with its end block (false only when the worker had to be terminated) */
  closedCleanly: boolean;
}

/** The program raised: `traceback` is Python's own, and the capture is closed and readable. */
export class PyodideProgramError extends Error {
  override name = 'PyodideProgramError';
  constructor(
    readonly traceback: string,
    readonly stats: PyodideRecordingStats,
  ) {
    super(traceback);
  }
}

const OUTPUT_KEEP = 1 << 20;
/** How long the worker may take to flush after a stop before the program is interrupted anyway (it is away from safe points: in C or JS code). */
const STOP_FLUSH_WAIT_MS = 250;

/** Where the worker module is, and how to start it: compiled JS, or TypeScript through tsx when run from the sources (tests). */
function workerSpec(): { url: URL } {
  const here = import.meta.url;
  if (!here.endsWith('.ts')) return { url: new URL('./worker.js', here) };
  // Running from src/ (vitest, tsx): the worker is TypeScript too. A worker does not inherit the
  // parent's loader hooks, so a small ESM bootstrap registers tsx's, then imports the worker.
  const require = createRequire(here);
  let api: string;
  try {
    // tsx/esm/api's "import" condition; createRequire would pick the CommonJS one
    api = pathToFileURL(require.resolve('tsx/package.json').replace(/package\.json$/, 'dist/esm/api/index.mjs')).href;
  } catch {
    throw new Error(`recordPyodide: running from TypeScript sources (${fileURLToPath(here)}) needs tsx to load the worker; build with "npm run build" or install tsx`);
  }
  const target = new URL('./worker.ts', here).href;
  const code = `const { register } = await import(${JSON.stringify(api)}); register(); await import(${JSON.stringify(target)});`;
  return { url: new URL(`data:text/javascript,${encodeURIComponent(code)}`) };
}

/** Atomics.waitAsync (ES2024, in Node 20) as a promise; polls where it is missing. */
function waitAsync(array: Int32Array, index: number, value: number, timeoutMs: number): Promise<unknown> {
  const wa = (Atomics as unknown as { waitAsync?: (a: Int32Array, i: number, v: number, t: number) => { async: boolean; value: unknown } }).waitAsync;
  if (!wa) return new Promise((r) => setTimeout(r, 1));
  const { value: result } = wa(array, index, value, timeoutMs);
  return Promise.resolve(result);
}
/** Let the event loop run: the worker's messages (capture blocks, output) arrive here. */
const yieldNow = (): Promise<void> => new Promise((r) => setImmediate(r));

/**
 * Run a Python program in Pyodide (in a worker_thread) and sample it at `rateHz` into a
 * capture. Resolves with the recording's statistics when the program has ended and the capture
 * is closed; rejects with PyodideProgramError if the program raised (the capture is still
 * closed and readable), or with an Error if Pyodide could not be loaded.
 */
export async function recordPyodide(options: PyodideRecordOptions): Promise<PyodideRecordingStats> {
  const rateHz = options.rateHz;
  if (!(rateHz > 0) || !Number.isFinite(rateHz)) throw new RangeError(`recordPyodide: rate ${rateHz} Hz`);
  if (options.durationMs !== undefined && !(options.durationMs > 0)) throw new RangeError(`recordPyodide: duration ${options.durationMs} ms`);
  const version = options.version ?? '3.15';
  if (!(version in PYODIDE_PACKAGES)) throw new RangeError(`recordPyodide: no Pyodide for CPython ${String(version)} (3.14 or 3.15)`);
  const interval = 1000 / rateHz;
  const progressEvery = options.progressEveryMs ?? 250;
  const graceMs = options.stopGraceMs ?? 3000;

  const interrupt = new Int32Array(new SharedArrayBuffer(4));
  const control = new Int32Array(new SharedArrayBuffer(4 * CONTROL.length));
  const init: WorkerInit = {
    version,
    python: options.python,
    filename: options.filename ?? '<pyodide>',
    args: options.args ?? [],
    rateHz,
    flushEveryMs: options.flushEveryMs ?? 1000,
    recorder: RECORDER,
    interrupt: interrupt.buffer as SharedArrayBuffer,
    control: control.buffer as SharedArrayBuffer,
    startAt: new SharedArrayBuffer(8),
  };

  const sink: CaptureSink = typeof options.output === 'string' ? fileSink(options.output) : options.output;
  let bytesWritten = 0;
  let stdout = '';
  let stderr = '';
  const keep = (all: string, more: string): string => {
    const s = all + more;
    return s.length > OUTPUT_KEEP ? s.slice(s.length - OUTPUT_KEEP) : s;
  };

  const loadStarted = performance.now();
  const worker = new Worker(workerSpec().url, { workerData: init, stdout: false, stderr: false });
  let ready: Extract<WorkerReply, { type: 'ready' }> | null = null;
  let done: Extract<WorkerReply, { type: 'done' }> | null = null;
  let failure: Error | null = null;
  let exited = false;
  let wake: (() => void) | null = null;
  const notify = (): void => {
    const w = wake;
    wake = null;
    w?.();
  };
  const wait = (): Promise<void> => new Promise((r) => (wake = r));

  worker.on('message', (m: WorkerReply) => {
    switch (m.type) {
      case 'bytes':
        // a sink that throws (a full disk) ends the recording with that error
        try {
          sink.write(m.bytes);
          bytesWritten += m.bytes.length;
        } catch (e) {
          failure ??= e instanceof Error ? e : new Error(String(e));
          Atomics.store(control, CONTROL.STOP, 1);
        }
        break;
      case 'stdout':
        stdout = keep(stdout, m.text);
        options.onStdout?.(m.text);
        break;
      case 'stderr':
        stderr = keep(stderr, m.text);
        options.onStderr?.(m.text);
        break;
      case 'ready':
        ready = m;
        break;
      case 'done':
        done = m;
        break;
      case 'fatal':
        failure ??= new Error(`pyodide worker: ${m.message}`);
        break;
    }
    notify();
  });
  worker.on('error', (e) => {
    failure ??= e;
    notify();
  });
  worker.on('exit', () => {
    exited = true;
    notify();
  });

  try {
    while (!ready && !failure && !exited) await wait();
    if (!ready) throw failure ?? new Error('pyodide worker: exited before Pyodide was loaded');
    const { pythonVersion, description } = ready as Extract<WorkerReply, { type: 'ready' }>;
    const loadMs = performance.now() - loadStarted;
    options.onStart?.({ pythonVersion, description, loadMs });

    const request: WorkerRequest = { type: 'run' };
    worker.postMessage(request);
    // The worker says when the program starts (its set-up takes a few ms that are not the program's).
    while (Atomics.load(control, CONTROL.STARTED) === 0 && !failure && !exited) {
      const started = waitAsync(control, CONTROL.STARTED, 0, 50);
      await Promise.race([wait(), started]);
    }
    if (Atomics.load(control, CONTROL.STARTED) === 0) throw failure ?? new Error('pyodide worker: exited before the program started');
    // on this thread's clock
    const start = new Float64Array(init.startAt)[0]! - performance.timeOrigin;

    // The schedule: tick k is due at start + k·interval. A tick that comes too late for its
    // slot is not made up for; the slots skipped are scheduled and missed.
    const counts = newTickResult();
    let next = start;
    let lastProgress = start;
    let stoppedForDuration = false;
    // (no spin: the program runs on a thread of this process, and needs the CPU more)
    const sleeper = new Sleeper(false);
    for (;;) {
      if (Atomics.load(control, CONTROL.FINISHED) !== 0 || done || failure || exited) break;
      if (options.durationMs !== undefined && next - start >= options.durationMs) {
        // the program runs (unsampled) to the end of the duration, then is interrupted
        await sleeper.until(start + options.durationMs);
        if (Atomics.load(control, CONTROL.FINISHED) === 0) stoppedForDuration = true;
        break;
      }
      await sleeper.until(next);
      if (Atomics.load(control, CONTROL.FINISHED) !== 0) break;
      const now = performance.now();
      next = signalTick(counts, now, next, interval, interrupt, control);
      if (options.onProgress && now - lastProgress >= progressEvery) {
        options.onProgress({ scheduled: counts.scheduled, taken: Atomics.load(control, CONTROL.TAKEN), elapsedMs: now - start });
        lastProgress = now;
      }
      await yieldNow();
    }
    const elapsedMs = performance.now() - start;
    if (stoppedForDuration || failure) Atomics.store(control, CONTROL.STOP, 1);
    Atomics.store(control, CONTROL.SCHEDULER_DONE, 1);
    Atomics.notify(control, CONTROL.SCHEDULER_DONE);

    // Stopping before the program's end: one more SIGUSR1 makes the worker flush what it has
    // (so a program that then refuses to stop loses nothing); then SIGINT, which raises
    // KeyboardInterrupt, written again now and then in case the program caught one — while
    // the program runs (FINISHED not set) only.
    let terminated = false;
    if (stoppedForDuration || failure) {
      Atomics.store(interrupt, 0, SIGUSR1);
      const flushDeadline = performance.now() + Math.min(graceMs, STOP_FLUSH_WAIT_MS);
      while (Atomics.load(control, CONTROL.FLUSHED) === 0 && !done && !exited && performance.now() < flushDeadline) {
        await new Promise((r) => setTimeout(r, 1));
      }
      const deadline = performance.now() + graceMs;
      while (!done && !exited) {
        if (performance.now() >= deadline) {
          terminated = true;
          await worker.terminate();
          break;
        }
        // not once the program is over (FINISHED: its frames gone, Pyodide formatting its
        // KeyboardInterrupt, the worker winding up): a SIGINT then would be raised in that
        // Python, not the program's — a failure of the worker instead of a stopped program
        if (Atomics.load(control, CONTROL.FINISHED) === 0) Atomics.store(interrupt, 0, SIGINT);
        await Promise.race([wait(), new Promise((r) => setTimeout(r, 50))]);
      }
    } else {
      while (!done && !failure && !exited) await wait();
    }
    if (failure) throw failure;
    const finished = done as Extract<WorkerReply, { type: 'done' }> | null;
    if (!finished && !terminated) throw new Error('pyodide worker: exited before the program ended');

    const totals = finished?.totals;
    const taken = totals?.ticks ?? Atomics.load(control, CONTROL.TAKEN);
    const outcome: ProgramOutcome = finished?.outcome ?? { kind: 'stopped' };
    const stats: PyodideRecordingStats = {
      pythonVersion,
      target: description,
      rateHz,
      scheduled: counts.scheduled,
      ticks: taken,
      missed: Math.max(0, counts.scheduled - taken),
      lateTicks: counts.lateTicks,
      unanswered: counts.unanswered,
      lost: counts.lost,
      samples: totals?.samples ?? taken,
      failedTicks: totals?.failedTicks ?? 0,
      firstFailure: totals?.firstFailure ?? null,
      codeObjects: totals?.codeObjects ?? 0,
      copyMicros: totals?.copyMicros ?? { total: 0, max: 0 },
      handlerMicros: totals?.handlerMicros ?? { total: 0, max: 0 },
      elapsedMs,
      loadMs,
      ended: terminated
        ? 'terminated'
        : outcome.kind === 'stopped'
          ? 'duration'
          : outcome.kind === 'finished'
            ? stoppedForDuration
              ? 'duration'
              : 'finished'
            : outcome.kind === 'exit'
              ? 'exited'
              : 'error',
      exitCode: outcome.kind === 'exit' ? outcome.exitCode : outcome.kind === 'error' ? 1 : 0,
      stdout,
      stderr,
      bytesWritten,
      closedCleanly: !terminated,
    };
    if (outcome.kind === 'error') throw new PyodideProgramError(outcome.traceback, stats);
    return stats;
  } finally {
    if (!exited) await worker.terminate();
    sink.close?.();
  }
}
