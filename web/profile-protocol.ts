// The messages between the in-browser profiler's page (web/profile.ts) and the worker that
// runs Pyodide (web/profile-worker.ts).

import type { ProgramOutcome, WorkerTotals } from '../src/record/pyodide/protocol.js';

export type ToProfileWorker = {
  type: 'run';
  python: string;
  /** co_filename and sys.argv[0] */
  filename: string;
  args: string[];
  rateHz: number;
};

export type FromProfileWorker =
  | { type: 'status'; text: string }
  | { type: 'loaded'; pythonVersion: string; description: string; loadMs: number }
  /** sampling has started: the buffers the page may write to stop the program */
  | { type: 'started'; interrupt: SharedArrayBuffer; control: SharedArrayBuffer }
  /** a finished block of the capture (the first holds its header) */
  | { type: 'block'; bytes: ArrayBuffer }
  | { type: 'progress'; scheduled: number; samples: number; bytes: number; elapsedMs: number }
  | { type: 'output'; stream: 'stdout' | 'stderr'; text: string }
  /** the program has ended and the capture is closed (every block was sent before this) */
  | { type: 'done'; outcome: ProgramOutcome; totals: WorkerTotals; scheduled: number; captureBytes: number }
  | { type: 'fatal'; message: string };
