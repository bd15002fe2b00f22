// Sampling Python that runs in Pyodide, by signals: the part that runs in the thread that runs
// Python, in any runtime (a Node worker_thread: src/record/pyodide/worker.ts; a browser's Web
// Worker: src/record/pyodide/browser.ts). No Node API here.
//
// Another thread writes SIGUSR1 into Pyodide's interrupt buffer on the sampling schedule (and
// counts it in the control array, src/record/pyodide/protocol.ts); CPython notices it at its
// next eval-breaker safe point and calls the handler installed here, which copies the
// interpreter's memory (MemoryCopier over pyodideSource) and adds the records to a
// CaptureWriter. Finished blocks go to `post` as bytes.
//
// Why everything happens in this thread: Pyodide's wasm memory is not shared (see the
// reference notes on Pyodide), so only the thread that runs Python can read it, and only when
// Python lets JS run — at the safe point where the handler is called.
//
// Why a JS handler and not a Python one: a Python handler's own frame would be pushed on top of
// the interrupted frame, so every sample would carry it. A JS function (a JsProxy, callable from
// Python) is called from C at the safe point without pushing any interpreter frame: the
// thread's current frame is the interrupted one, and the sampled stack is the program's own.

import { CaptureWriter } from '../../capture/writer.js';
import { formatVersion } from '../../layout/index.js';
import { captureHeader } from '../sampling/capture-header.js';
import { MemoryCopier } from '../copy/copier.js';
import { CONTROL, SIGUSR1, type WorkerTotals } from './protocol.js';
import { pyodideSource, type PyodideLike, type PyodideSource } from './source.js';
import { emitCodes, sampleRecord } from '../sampling/sink.js';

/** The members of the Pyodide API used here (the package's own types are not a dependency). */
export interface PyProxyLike {
  destroy?: () => void;
  [key: string]: unknown;
}
export interface PyodideApi extends PyodideLike {
  readonly version: string;
  setInterruptBuffer(buffer: Int32Array | undefined): void;
  setStdout(options?: { batched: (s: string) => void }): void;
  setStderr(options?: { batched: (s: string) => void }): void;
  pyimport(name: string): any;
  toPy(value: unknown): any;
  runPython(code: string, options?: { globals?: unknown; filename?: string }): unknown;
  FS: { mkdirTree(path: string): void; writeFile(path: string, data: string): void };
}

/** samples taken (and thrown away) before the recording, to warm the JIT up */
export const WARM_UP_SAMPLES = 3000;

export interface SamplerStart {
  rateHz: number;
  /** end a capture block at least this often, ms */
  flushEveryMs: number;
  /** the header's recorder field */
  recorder: string;
  /** the header's command (the program and its arguments), when there is one */
  command?: string[];
  /** the header's start time, ms since the epoch (default Date.now()) */
  startTime?: number;
  /** only stacks with this code object on them are sampled (the program's module code), or null: all */
  moduleCode?: bigint | null;
  /** a finished block's bytes (the sampler keeps no reference to them) */
  post(bytes: Uint8Array): void;
  /** after each sample (cheap: the caller decides how often it does anything) */
  onSample?(totals: Readonly<WorkerTotals>): void;
}

/**
 * The sampling side: made once Pyodide is loaded (it warms the copier up then), started
 * around the Python it is to sample, stopped when that Python has returned, and closed once
 * the ticking side says how many ticks it scheduled.
 */
export class PyodideSampler {
  readonly source: PyodideSource;
  readonly pythonVersion: string;
  readonly description: string;
  /** address of the thread state (Pyodide has one), or null when none was found */
  readonly tstate: bigint | null;
  readonly totals: WorkerTotals = {
    ticks: 0,
    samples: 0,
    failedTicks: 0,
    firstFailure: null,
    codeObjects: 0,
    copyMicros: { total: 0, max: 0 },
    handlerMicros: { total: 0, max: 0 },
    missed: 0,
  };
  /** the recording's start, performance.now() of this thread, ms (0 before start) */
  origin = 0;
  private writer: CaptureWriter | null = null;
  private sampling = false;
  private stopFlushed = false;
  private restore: (() => void) | null = null;

  constructor(
    readonly py: PyodideApi,
    /** the buffer Pyodide checks for signals (the ticking side writes it) */
    readonly interrupt: Int32Array,
    /** the control array (CONTROL slots) shared with the ticking side */
    readonly control: Int32Array,
    options: { warmUpSamples?: number } = {},
  ) {
    this.source = pyodideSource(py);
    this.pythonVersion = formatVersion(this.source.layout.version);
    this.description = this.source.description;
    this.tstate = warmUp(py, this.source, options.warmUpSamples ?? WARM_UP_SAMPLES);
  }

  /** Install the handler and the interrupt buffer: samples are taken from now on, at the ticks. */
  start(options: SamplerStart): void {
    if (this.writer) throw new Error('PyodideSampler: already started');
    const { py, source, tstate, totals, control, interrupt } = this;
    const moduleCode = options.moduleCode ?? null;
    const copier = new MemoryCopier(source);
    const post = options.post;
    const writer = (this.writer = new CaptureWriter(
      {
        write(bytes: Uint8Array): void {
          post(bytes.slice());
        },
      },
      captureHeader(source, {
        ...(options.command ? { command: options.command } : {}),
        rateHz: options.rateHz,
        startTime: options.startTime ?? Date.now(),
        recorder: options.recorder,
        copy: 'signal',
      }),
    ));
    const flushEvery = options.flushEveryMs;
    const onSample = options.onSample;
    let lastFlush = 0;

    // The SIGUSR1 handler. Called by CPython as handler(signum, frame) at a safe point of the
    // interrupted code, with no Python frame of its own: current_frame is the interrupted frame.
    // It must never throw: an exception would surface in the program as a JsException.
    const onSignal = (_signum: unknown, frame: unknown): void => {
      // first of all: this signal is answered, the ticking side may write the next (CONTROL.ANSWERED)
      Atomics.add(control, CONTROL.ANSWERED, 1);
      // Pyodide hands the frame object over as a PyProxy; free it at once (it is not used)
      (frame as PyProxyLike | null)?.destroy?.();
      if (!this.sampling) return;
      if (moduleCode !== null && !inProgram(source, tstate, moduleCode)) return;
      if (Atomics.load(control, CONTROL.STOP) !== 0) {
        this.stopFlush();
        return;
      }
      const started = performance.now();
      try {
        const codes = takeSample(copier, writer, Math.round((started - this.origin) * 1000), totals.copyMicros);
        totals.codeObjects += codes;
        totals.ticks++;
        totals.samples++;
        // a tick written after this one was consumed may still be in the buffer (pending): not missed yet
        this.reportMissed(Atomics.load(control, CONTROL.SCHEDULED), Atomics.load(interrupt, 0) !== 0 ? 1 : 0);
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
      if (onSample) {
        try {
          onSample(totals);
        } catch {
          // the caller's fault must not become the program's exception
        }
      }
    };

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
        this.sampling = false;
        Atomics.store(control, CONTROL.FINISHED, 1);
      }
      try {
        return excepthook(...args);
      } finally {
        for (const a of args) (a as PyProxyLike | null)?.destroy?.();
      }
    };
    const previous = signal.getsignal(SIGUSR1) as unknown;
    signal.signal(SIGUSR1, onSignal);
    py.setInterruptBuffer(interrupt);
    this.restore = () => {
      // (a handler of SIG_DFL or SIG_IGN may come back as a plain number: the enum's value)
      signal.signal(SIGUSR1, previous === 1 ? signal.SIG_IGN : previous === 0 || previous === null || previous === undefined ? signal.SIG_DFL : previous);
      if (typeof previous === 'object') (previous as PyProxyLike | null)?.destroy?.();
      sys.excepthook = excepthook;
      excepthook.destroy?.();
      signal.destroy?.();
      sys.destroy?.();
    };

    this.sampling = true;
    this.origin = lastFlush = performance.now();
  }

  /**
   * The Python sampled has returned: no more samples; the ticking side is told (FINISHED).
   * `releaseBuffer`: also take the interrupt buffer away from Pyodide (default true).
   */
  stop(releaseBuffer = true): void {
    this.sampling = false;
    Atomics.store(this.control, CONTROL.FINISHED, 1);
    Atomics.notify(this.control, CONTROL.STOP);
    if (releaseBuffer) this.py.setInterruptBuffer(undefined);
    const restore = this.restore;
    this.restore = null;
    restore?.();
  }

  /**
   * End the capture: the missed ticks still unsaid (the ticking side has stopped: SCHEDULED is
   * final), then the end block.
   */
  close(): void {
    const writer = this.writer;
    if (!writer) return;
    this.reportMissed(Atomics.load(this.control, CONTROL.SCHEDULED), 0);
    writer.close();
  }

  /** Add to the capture the missed ticks it does not say yet: missed = scheduled − taken. */
  private reportMissed(scheduled: number, pending: number): void {
    const due = scheduled - pending - this.totals.ticks - this.totals.missed;
    if (due > 0 && this.writer) {
      this.writer.addMissed(due);
      this.totals.missed += due;
    }
  }

  // The recording was stopped from the ticking side: one more SIGUSR1 comes before the program
  // is interrupted, so that everything taken is handed on even if the program then refuses to
  // stop and its thread has to be terminated.
  private stopFlush(): void {
    if (this.stopFlushed) return;
    this.stopFlushed = true;
    try {
      this.reportMissed(Atomics.load(this.control, CONTROL.SCHEDULED), 0);
      this.writer?.flush();
    } catch (e) {
      this.totals.firstFailure ??= e instanceof Error ? e.message : String(e);
    }
    Atomics.store(this.control, CONTROL.FLUSHED, 1);
  }
}

/** Is no Python frame running: current_frame is NULL, or (3.15) the thread's base frame? */
export function pythonIdle(source: PyodideSource, tstate: bigint | null): boolean {
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
export function inProgram(source: PyodideSource, tstate: bigint | null, moduleCode: bigint): boolean {
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

/**
 * One sample: copy every thread, then add the code objects seen for the first time (before
 * the samples that use them) and the samples. Returns the number of code records added.
 */
function takeSample(copier: MemoryCopier, writer: CaptureWriter, time: number, copyMicros: { total: number; max: number }): number {
  // (the copy runs at a safe point, in the thread that runs Python: the program waits for it)
  const threads = copier.copyAll({ paused: true });
  let codes = 0;
  for (const t of threads) {
    emitCodes(writer, t);
    codes += t.codes.length;
    // Pyodide has no threads (no pthreads build): its one thread state is the main thread,
    // though interp->threads.main, where the copier looks, is never set there.
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
function warmUp(py: PyodideApi, source: PyodideSource, samples: number): bigint | null {
  const copier = new MemoryCopier(source);
  const writer = new CaptureWriter({ write: () => {} }, captureHeader(source, { rateHz: 1, startTime: 0, recorder: 'warm-up' }));
  const copyMicros = { total: 0, max: 0 };
  let tstate: bigint | null = null;
  let n = 0;
  // called as the handler is, with a signal number and a frame: Pyodide converts a frame with
  // isinstance checks against collections.abc, Python code that is slowest the first time (the
  // ABCs' caches are empty); done here, the handler's first calls do not run it under sampling
  const step = (_signum: unknown, frame: unknown): void => {
    (frame as PyProxyLike | null)?.destroy?.();
    takeSample(copier, writer, n, copyMicros);
    tstate ??= copier.copyAll()[0]?.threadStateAddress ?? null;
    // blocks about as big as a second of recording at 1 kHz, so deflate warms up too
    if (++n % 500 === 0) writer.flush();
  };
  const globals = py.toPy({ step }) as PyProxyLike;
  try {
    py.runPython(`import sys\ndef f(k):\n    for i in range(k):\n        step(10, sys._getframe())\n\nf(${Math.max(1, Math.floor(samples))})\n`, { globals });
  } finally {
    globals.destroy?.();
  }
  writer.close();
  return tstate;
}
