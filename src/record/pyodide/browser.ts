// `pyunwind/pyodide-browser`: profile the Python of a page that already embeds Pyodide, the way
// pyunwind's own in-browser profiler does (web/profile.html).
//
//   // in the Web Worker that loaded Pyodide
//   import { profilePyodide } from 'pyunwind/pyodide-browser';
//   const profiler = profilePyodide(pyodide, { rateHz: 1000, onBlock: (bytes) => postMessage(bytes) });
//   await profiler.start();
//   pyodide.runPython(code);            // sampled while it runs
//   const capture = await profiler.stop(); // a .pyuw: `pyunwind report`, `pyunwind view`, reportCaptureBytes
//
// Requirements:
// - Cross-origin isolation (the page and its workers served with
//   Cross-Origin-Opener-Policy: same-origin and Cross-Origin-Embedder-Policy: require-corp):
//   the interrupt buffer and the control array are SharedArrayBuffers.
// - Pyodide runs in a (module or classic) Web Worker, not on the page's main thread: the
//   sampler reads Pyodide's memory from inside the thread that runs Python (that memory is not
//   shared), at the safe points where CPython checks its interrupt buffer.
// - Pyodide's interrupt buffer is pyunwind's while it profiles: profilePyodide sets it
//   (pyodide.setInterruptBuffer) to the one given as `interrupt` — pass the page's own if it
//   already has one (its Stop button then keeps working: write 2, SIGINT, into it) — or to a
//   new one, taken away again by stop(). SIGUSR1 (10) is pyunwind's while it profiles.
// - The ticks come from a small Web Worker of pyunwind's (ticker-worker.js, beside this
//   module; `tickerUrl` says where else it is, e.g. after bundling): a page's own timers are
//   clamped to 4 ms and late when the page is busy. Nested workers need Chrome, Firefox, or
//   Safari 15.5+. A Content-Security-Policy must allow that worker (worker-src 'self'), and
//   Pyodide itself needs script-src 'unsafe-eval' 'wasm-unsafe-eval' in its worker.
// - Samples are taken only while Python runs bytecode (at safe points): Python blocked in a
//   JS call, or waiting (await), is not sampled; those ticks are counted as missed.
//
// No Node API here.

import { CONTROL, SIGUSR1, type WorkerTotals } from './protocol.js';
import { PyodideSampler, type PyodideApi } from './sampler.js';
import type { TickerReply, TickerRequest } from './ticker-worker.js';
import { RECORDER } from '../../version.js';
import { concatBytes } from '../../capture/concat.js';

export { CONTROL, SIGINT, SIGUSR1, type WorkerTotals as PyodideSamplerTotals } from './protocol.js';
export type { PyodideApi } from './sampler.js';

export interface PyodideProfileProgress {
  /** ticks the ticker wrote */
  scheduled: number;
  /** samples taken */
  samples: number;
  /** capture bytes handed to onBlock so far */
  bytes: number;
  /** since start(), ms */
  elapsedMs: number;
}

export interface ProfilePyodideOptions {
  /** samples per second (default 1000) */
  rateHz?: number;
  /** each finished block of the capture, in order (the first holds the capture's header); their concatenation is a capture. The profiler keeps the bytes: transfer a copy, not them */
  onBlock?: (bytes: Uint8Array) => void;
  /** while Python runs, at most every `progressEveryMs` (called from the sampler, between two bytecodes of the program) */
  onProgress?: (progress: PyodideProfileProgress) => void;
  /** default 250 ms */
  progressEveryMs?: number;
  /** end a capture block at least this often (default 250 ms: a page can show the profile as it fills in) */
  flushEveryMs?: number;
  /** the interrupt buffer the page already gave Pyodide (an Int32Array over a SharedArrayBuffer); default: a new one */
  interrupt?: Int32Array;
  /** where ticker-worker.js is (default: beside this module; the viewer's build names it pyodide-ticker-worker.js) */
  tickerUrl?: string | URL;
  /** the capture header's command (e.g. the program's name) */
  command?: string[];
  /** sample only stacks that have this code object (id() of a module's code) on them; default: every stack */
  moduleCode?: bigint | null;
  /** the capture header's recorder (default "pyunwind VERSION") */
  recorder?: string;
}

export interface PyodideProfiler {
  /** e.g. "3.15.0rc1" */
  readonly pythonVersion: string;
  /** e.g. "pyodide 315.0.0a2 (CPython 3.15.0rc1)" */
  readonly description: string;
  /** the interrupt buffer Pyodide checks (write 2, SIGINT, to interrupt the program) */
  readonly interrupt: Int32Array;
  /** the control array shared with the ticker (CONTROL slots) */
  readonly control: Int32Array;
  /** what the sampler counted so far */
  readonly totals: Readonly<WorkerTotals>;
  /** start the ticker and install the handler: Python run after this is sampled */
  start(): Promise<void>;
  /** after the Python sampled has returned: stop, and the whole capture */
  stop(): Promise<Uint8Array>;
}

/**
 * Profile the Python of a Pyodide loaded in this Web Worker. Warms the sampler up (a few
 * hundred ms of Python calling it) before it returns.
 */
export function profilePyodide(pyodide: unknown, options: ProfilePyodideOptions = {}): PyodideProfiler {
  const py = pyodide as PyodideApi;
  const rateHz = options.rateHz ?? 1000;
  if (!(rateHz > 0) || !Number.isFinite(rateHz)) throw new RangeError(`profilePyodide: rate ${rateHz} Hz`);
  if (typeof SharedArrayBuffer === 'undefined') {
    throw new Error('profilePyodide: SharedArrayBuffer is not available: serve the page cross-origin isolated (COOP: same-origin, COEP: require-corp)');
  }
  const interrupt = options.interrupt ?? new Int32Array(new SharedArrayBuffer(4));
  if (!(interrupt.buffer instanceof SharedArrayBuffer)) throw new TypeError('profilePyodide: interrupt must be an Int32Array over a SharedArrayBuffer');
  const control = new Int32Array(new SharedArrayBuffer(4 * CONTROL.length));
  const sampler = new PyodideSampler(py, interrupt, control);
  const parts: Uint8Array[] = [];
  let bytes = 0;
  let ticker: Worker | null = null;
  let tickerDone: Promise<void> | null = null;
  let state: 'new' | 'started' | 'stopped' = 'new';
  let startedAt = 0;

  return {
    pythonVersion: sampler.pythonVersion,
    description: sampler.description,
    interrupt,
    control,
    get totals() {
      return sampler.totals;
    },

    async start(): Promise<void> {
      if (state !== 'new') throw new Error('profilePyodide: start() once');
      state = 'started';
      const url = options.tickerUrl ?? new URL('./ticker-worker.js', import.meta.url);
      const w = (ticker = new Worker(url, { type: 'module', name: 'pyunwind ticker' }));
      let ready!: () => void;
      let failed!: (e: Error) => void;
      const isReady = new Promise<void>((ok, fail) => ((ready = ok), (failed = fail)));
      let done!: () => void;
      tickerDone = new Promise<void>((ok) => (done = ok));
      w.onmessage = (ev: MessageEvent<TickerReply>) => {
        if (ev.data.type === 'ready') ready();
        else if (ev.data.type === 'done') done();
        else {
          failed(new Error(`pyunwind ticker: ${ev.data.message}`));
          done();
        }
      };
      w.onerror = (ev: ErrorEvent) => {
        ev.preventDefault?.();
        failed(new Error(`pyunwind ticker: cannot start ${String(url)}${ev.message ? `: ${ev.message}` : ''}`));
        done();
      };
      const request: TickerRequest = { interrupt: interrupt.buffer as SharedArrayBuffer, control: control.buffer as SharedArrayBuffer, rateHz };
      w.postMessage(request);
      await isReady;

      const progressEvery = options.progressEveryMs ?? 250;
      let lastProgress = 0;
      const onProgress = options.onProgress;
      sampler.start({
        rateHz,
        flushEveryMs: options.flushEveryMs ?? 250,
        recorder: options.recorder ?? RECORDER,
        ...(options.command ? { command: options.command } : {}),
        moduleCode: options.moduleCode ?? null,
        post(block) {
          parts.push(block);
          bytes += block.length;
          options.onBlock?.(block);
        },
        onSample: onProgress
          ? (totals) => {
              const now = performance.now();
              if (now - lastProgress < progressEvery) return;
              lastProgress = now;
              onProgress({ scheduled: Atomics.load(control, CONTROL.SCHEDULED), samples: totals.samples, bytes, elapsedMs: now - startedAt });
            }
          : undefined,
      });
      startedAt = performance.now();
      Atomics.store(control, CONTROL.STARTED, 1);
      Atomics.notify(control, CONTROL.STARTED);
    },

    async stop(): Promise<Uint8Array> {
      if (state !== 'started') throw new Error(state === 'new' ? 'profilePyodide: stop() before start()' : 'profilePyodide: stop() once');
      state = 'stopped';
      // the page's own buffer stays Pyodide's; a tick still in it is dropped
      sampler.stop(!options.interrupt);
      Atomics.compareExchange(interrupt, 0, SIGUSR1, 0);
      // the ticker's count is final once it says so (it wakes at once: FINISHED is notified)
      await Promise.race([tickerDone, new Promise((r) => setTimeout(r, 2000))]);
      ticker?.terminate();
      ticker = null;
      sampler.close();
      return concatBytes(parts, bytes);
    },
  };
}
