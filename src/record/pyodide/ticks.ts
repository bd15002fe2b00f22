// The ticking side of signal sampling, for a thread of its own that may block (a Web Worker or
// a worker_thread: Atomics.wait is not allowed on a browser's main thread): SIGUSR1 written
// into Pyodide's interrupt buffer on an absolute schedule, counted in the control array
// (src/record/pyodide/protocol.ts). Why a thread of its own: the thread that runs Python is
// busy running it, and a browser page's timers are clamped (4 ms once nested) and late
// whenever the page is busy; Atomics.wait wakes within a fraction of a millisecond. No Node API.

import { CONTROL, SIGUSR1 } from './protocol.js';

/**
 * How long a signal written and gone from the buffer may stay unanswered before it counts as
 * lost, ms. CPython's check of the buffer reads it and then writes 0, not atomically (Python/
 * emscripten_signal.c): a signal written between the two is erased, and no handler ever answers
 * it. Between the read that took a signal and its handler's start there are microseconds
 * (Pyodide's argument conversion; 15-90 µs measured here at 1 kHz), so this leaves that window
 * alone unless the thread is held off the CPU for longer.
 */
export const LOST_AFTER_MS = 2;

/**
 * One tick at `now` for the slot due at `next`: slots already past are counted as scheduled and
 * late (missed, never made up for), then the signal is written and counted — the signal first,
 * so the sampling side never counts as missed a tick it could still take. A signal is written
 * only when the handler has begun once for every signal written before (CONTROL.ANSWERED), so
 * that the Python code Pyodide runs on the way into the handler (the frame argument's
 * conversion) is never interrupted by a nested call that would sample it; otherwise the slot
 * is scheduled and missed (unanswered), unless the last signal was erased from the buffer
 * (LOST_AFTER_MS): then it is written again. Returns the next slot.
 */
export function signalTick(counts: TickResult, now: number, next: number, interval: number, interrupt: Int32Array, control: Int32Array): number {
  const late = Math.floor((now - next) / interval);
  if (late > 0) {
    counts.scheduled += late;
    counts.lateTicks += late;
    next += late * interval;
  }
  const answered = Atomics.load(control, CONTROL.ANSWERED);
  let write = answered >= counts.written;
  if (!write && Atomics.load(interrupt, 0) === 0 && now - counts.lastWriteAt >= LOST_AFTER_MS) {
    counts.lost += counts.written - answered;
    counts.written = answered;
    write = true;
  }
  if (write) {
    Atomics.store(interrupt, 0, SIGUSR1);
    counts.written++;
    counts.lastWriteAt = now;
  } else {
    counts.unanswered++;
  }
  Atomics.store(control, CONTROL.SCHEDULED, ++counts.scheduled);
  return next + interval;
}

export interface TickResult {
  scheduled: number;
  /** slots skipped because this thread woke too late for them (counted in scheduled, never written) */
  lateTicks: number;
  /** signals written into the interrupt buffer and not found lost */
  written: number;
  /** slots not written because the handler had not yet begun for the signal before (counted in scheduled) */
  unanswered: number;
  /** signals erased from the buffer by CPython's check before any handler saw them (LOST_AFTER_MS) */
  lost: number;
  /** when the last signal was written, on the ticking thread's clock (ms) */
  lastWriteAt: number;
}

/** Counts of a schedule that has not ticked yet. */
export function newTickResult(): TickResult {
  return { scheduled: 0, lateTicks: 0, written: 0, unanswered: 0, lost: 0, lastWriteAt: 0 };
}

/**
 * Wait for the sampling side to start (CONTROL.STARTED), then tick at `rateHz` until it says
 * the program ended (FINISHED) or a stop is asked for (STOP); then say the count is final
 * (SCHEDULER_DONE, notified). Blocks the calling thread throughout. A tick that comes too late
 * for its slot is not made up for: the slots skipped are scheduled and missed.
 */
export function tickLoop(interrupt: Int32Array, control: Int32Array, rateHz: number, startTimeoutMs = 60_000): TickResult {
  if (!(rateHz > 0) || !Number.isFinite(rateHz)) throw new RangeError(`tickLoop: rate ${rateHz} Hz`);
  const interval = 1000 / rateHz;
  const over = (): boolean => Atomics.load(control, CONTROL.FINISHED) !== 0 || Atomics.load(control, CONTROL.STOP) !== 0;
  const waitStart = performance.now();
  while (Atomics.load(control, CONTROL.STARTED) === 0 && !over() && performance.now() - waitStart < startTimeoutMs) {
    Atomics.wait(control, CONTROL.STARTED, 0, 50);
  }
  const counts = newTickResult();
  if (Atomics.load(control, CONTROL.STARTED) !== 0) {
    const start = performance.now();
    let next = start + interval;
    for (;;) {
      if (over()) break;
      // sleep until the slot; a stop (notified on STOP) wakes the wait early
      for (let left = next - performance.now(); left > 0 && !over(); left = next - performance.now()) {
        Atomics.wait(control, CONTROL.STOP, 0, left);
      }
      if (over()) break;
      next = signalTick(counts, performance.now(), next, interval, interrupt, control);
    }
  }
  Atomics.store(control, CONTROL.SCHEDULER_DONE, 1);
  Atomics.notify(control, CONTROL.SCHEDULER_DONE);
  return counts;
}
