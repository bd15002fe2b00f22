// Stopping the target for a copy that must not move: SIGSTOP stops every thread of the
// process, SIGCONT resumes them. The target must be resumed on every path — normal end,
// errors, Ctrl-C, and a recorder that is killed outright — so a small watchdog process holds
// a pipe from the recorder and sends SIGCONT when that pipe closes, which the kernel does when
// the recorder dies for any reason.
//
// (A stopped process is visible to its parent: a shell may report it as stopped while it is.
// Stops last microseconds.)

import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import type { Stopper } from './copier.js';

/** How long to wait for every thread to be stopped before copying anyway. */
const STOP_TIMEOUT_MS = 50;

export interface StopStats {
  stops: number;
  /** total time the target was stopped, µs */
  stoppedMicros: number;
  /** stops where not every thread was seen stopped within the timeout */
  incomplete: number;
}

export class ProcessStopper implements Stopper {
  readonly stats: StopStats = { stops: 0, stoppedMicros: 0, incomplete: 0 };
  private watchdog: ChildProcess | null;
  private stoppedAt = 0;
  private stopped = false;

  get stoppedMicros(): number {
    return this.stats.stoppedMicros;
  }

  constructor(readonly pid: number) {
    // sh reads its stdin until EOF — the recorder's end, however it comes — then resumes the target
    this.watchdog = spawn('sh', ['-c', `read _ ; kill -CONT ${pid} 2>/dev/null`], {
      stdio: ['pipe', 'ignore', 'ignore'],
      detached: true,
    });
    this.watchdog.unref();
    this.watchdog.on('error', () => {
      this.watchdog = null;
    });
  }

  stop(): boolean {
    process.kill(this.pid, 'SIGSTOP');
    this.stopped = true;
    this.stoppedAt = performance.now();
    this.stats.stops++;
    const all = this.waitUntilStopped();
    if (!all) this.stats.incomplete++;
    return all;
  }

  resume(): void {
    if (!this.stopped) return;
    this.stopped = false;
    try {
      process.kill(this.pid, 'SIGCONT');
    } catch {
      // the target is gone
    }
    this.stats.stoppedMicros += Math.round((performance.now() - this.stoppedAt) * 1000);
  }

  /** Resume the target (if stopped) and let the watchdog go. */
  close(): void {
    this.resume();
    if (this.watchdog?.stdin) this.watchdog.stdin.end();
    this.watchdog = null;
  }

  /** Poll every thread's state until all are stopped ('T'/'t') or the timeout passes. */
  private waitUntilStopped(): boolean {
    const until = performance.now() + STOP_TIMEOUT_MS;
    for (;;) {
      let all = true;
      let tasks: string[];
      try {
        tasks = fs.readdirSync(`/proc/${this.pid}/task`);
      } catch {
        return false;
      }
      for (const tid of tasks) {
        let stat: string;
        try {
          stat = fs.readFileSync(`/proc/${this.pid}/task/${tid}/stat`, 'latin1');
        } catch {
          continue; // the thread exited
        }
        const state = stat[stat.lastIndexOf(')') + 2];
        if (state !== 'T' && state !== 't' && state !== 'Z' && state !== 'X') {
          all = false;
          break;
        }
      }
      if (all) return true;
      if (performance.now() > until) return false;
      // yield the CPU: a thread that is waiting to run cannot stop until it runs
      Atomics.wait(pause, 0, 0, 0.02);
    }
  }
}

const pause = new Int32Array(new SharedArrayBuffer(4));
