// What the thread that runs Pyodide and the thread that ticks it share, in every runtime (Node's
// worker_threads, a browser's Web Workers): the signal numbers written into Pyodide's interrupt
// buffer, the slots of the control Int32Array (over a SharedArrayBuffer) both threads read and
// write, and the totals the sampling side keeps. No Node API here.

export const SIGINT = 2;
export const SIGUSR1 = 10;

/** Slots of the control Int32Array shared by the ticking thread and the sampling thread. */
export const CONTROL = {
  /** ticks scheduled so far (the ticking thread writes, after writing the signal) */
  SCHEDULED: 0,
  /** ticks sampled so far (the sampling thread writes) */
  TAKEN: 1,
  /** 1: stop sampling (the ticking side writes: duration reached, or a stop asked for) */
  STOP: 2,
  /** 1: the program has ended (the sampling thread writes) */
  FINISHED: 3,
  /** 1: the schedule has stopped and SCHEDULED is final (the ticking thread writes, and notifies) */
  SCHEDULER_DONE: 4,
  /** 1: after STOP, everything sampled is in blocks handed on (the sampling thread writes) */
  FLUSHED: 5,
  /** 1: the program is about to start and the start time is set (the sampling thread writes, and notifies) */
  STARTED: 6,
  /**
   * handler calls begun so far (the sampling thread adds one on entering its SIGUSR1 handler,
   * before anything else). The ticking side writes the next signal only once every signal it
   * wrote has been answered: Pyodide runs Python code to hand the handler its frame argument
   * (isinstance checks against collections.abc), and a signal taken there would call the
   * handler again, nested, sampling those frames as if they were the program's.
   */
  ANSWERED: 7,
  length: 8,
} as const;

export type ProgramOutcome =
  | { kind: 'finished' }
  | { kind: 'stopped' }
  | { kind: 'exit'; exitCode: number; traceback: string }
  | { kind: 'error'; type: string; traceback: string };

export interface WorkerTotals {
  /** ticks sampled (every thread copied once) */
  ticks: number;
  /** thread samples written */
  samples: number;
  /** handler calls whose copy failed (nothing was written for them) */
  failedTicks: number;
  firstFailure: string | null;
  codeObjects: number;
  /** copy time per thread sample, µs */
  copyMicros: { total: number; max: number };
  /** time per handler call (copy + encoding + block flushes), µs: what sampling cost the program */
  handlerMicros: { total: number; max: number };
  /** missed ticks written to the capture */
  missed: number;
}
