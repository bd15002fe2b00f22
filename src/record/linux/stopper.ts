// Stopping the target for a copy that must not move.
//
// Two ways, the cheapest that works here first (`openStopper`):
// - ptrace (ThreadStopper): PTRACE_SEIZE + PTRACE_INTERRUPT stops just the thread whose stack
//   is copied — in a GIL build only the thread that runs Python can change its frames — and
//   PTRACE_DETACH lets it go. A recorder that dies while a thread is stopped leaves nothing
//   behind: the kernel detaches its tracees and they run on. Measured here: ~80–120 µs per stop.
// - SIGSTOP/SIGCONT (ProcessStopper): the whole process, then a poll of /proc until every thread
//   is seen stopped (~140–180 µs here). The target must be resumed on every path, so a small
//   watchdog process holds a pipe from the recorder and sends SIGCONT when that pipe closes,
//   which the kernel does when the recorder dies for any reason. (A process stopped this way
//   is visible to its parent: a shell may report it as stopped while it is.)
//
// Both count the time the target was stopped: the sampler's schedule runs on the target's own
// clock, which stands still meanwhile.

import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import { loadNative, USER_REGS, type NativeCalls } from './native.js';
import type { NativeRegisters } from '../../native/unwind.js';
import { OffCpuWatch } from './off-cpu.js';

/** Stops and resumes the whole target (every thread), for copies that must not move. */
export interface Stopper {
  /**
   * Stop what must not run while thread `tid` (its kernel thread id; 0: unknown) is copied —
   * that thread, or the whole target; true when it was seen stopped.
   */
  stopThread(tid: number): boolean;
  /** stop every thread of the target; true when every thread was seen stopped */
  stopAll(): boolean;
  /** let everything stopped since the last resume run on */
  resume(): void;
  /** time the target has spent stopped by this stopper so far, µs */
  readonly stoppedMicros: number;
  /**
   * Where the kernel can tell it, whether a thread stayed off its CPU while it was copied — a
   * proof as good as a stop, without stopping it (off-cpu.ts); null where it cannot.
   */
  readonly offCpu: OffCpuWatch | null;
}

/** How long to wait for a thread (or every thread) to be stopped before copying anyway. */
const STOP_TIMEOUT_MS = 50;

export interface StopStats {
  stops: number;
  /** total time the target was stopped, µs */
  stoppedMicros: number;
  /** stops where the thread (or not every thread) was seen stopped within the timeout */
  incomplete: number;
}

/** Stops the whole process with SIGSTOP. */
export class ProcessStopper implements Stopper {
  readonly kind = 'SIGSTOP';
  readonly stats: StopStats = { stops: 0, stoppedMicros: 0, incomplete: 0 };
  private watchdog: ChildProcess | null;
  private stoppedAt = 0;
  private stopped = false;

  get stoppedMicros(): number {
    return this.stats.stoppedMicros;
  }

  readonly offCpu: OffCpuWatch | null;

  constructor(readonly pid: number) {
    this.offCpu = OffCpuWatch.open(pid);
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

  /** Stop every thread (a single thread cannot be stopped on its own with signals). */
  stopThread(): boolean {
    return this.stopAll();
  }

  stopAll(): boolean {
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
    this.offCpu?.close();
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

/** Stops threads one by one with ptrace. */
export class ThreadStopper implements Stopper {
  readonly kind = 'ptrace';
  readonly stats: StopStats = { stops: 0, stoppedMicros: 0, incomplete: 0 };
  private readonly held: number[] = [];
  private stoppedAt = 0;

  readonly offCpu: OffCpuWatch | null;

  constructor(
    readonly pid: number,
    private readonly native: NativeCalls,
  ) {
    this.offCpu = OffCpuWatch.open(pid);
  }

  get stoppedMicros(): number {
    return this.stats.stoppedMicros;
  }

  /** Stop one thread (by its kernel thread id; 0 or unknown: every thread). */
  stopThread(tid: number): boolean {
    if (!(tid > 0)) return this.stopAll();
    return this.stop([tid]);
  }

  /** Stop these threads (none: nothing to do); true when each was seen stopped or is gone. */
  stopThreads(tids: readonly number[]): boolean {
    return tids.length === 0 || this.stop(tids);
  }

  /** Stop every thread of the process. */
  stopAll(): boolean {
    let tids: number[];
    try {
      tids = fs.readdirSync(`/proc/${this.pid}/task`).map(Number);
    } catch {
      this.stats.stops++;
      this.stats.incomplete++;
      return false;
    }
    return this.stop(tids);
  }

  /**
   * The registers an unwind starts from, of a thread this stopper holds stopped (native
   * frames); null if it is not held or they cannot be read.
   */
  registers(tid: number): NativeRegisters | null {
    if (!this.held.includes(tid)) return null;
    const r = this.native.registers(tid);
    return r ? { rip: r[USER_REGS.rip]!, rsp: r[USER_REGS.rsp]!, rbp: r[USER_REGS.rbp]! } : null;
  }

  /** The threads held stopped now. */
  get heldThreads(): readonly number[] {
    return this.held;
  }

  resume(): void {
    if (this.held.length === 0) return;
    for (const tid of this.held) this.native.resumeThread(this.pid, tid);
    this.held.length = 0;
    this.stats.stoppedMicros += Math.round((performance.now() - this.stoppedAt) * 1000);
  }

  close(): void {
    this.resume();
    this.offCpu?.close();
    // a thread that stopped too late for its copy is let go as soon as it stops
    this.native.releaseLingering(1000);
  }

  private stop(tids: readonly number[]): boolean {
    if (this.held.length === 0) this.stoppedAt = performance.now();
    this.stats.stops++;
    const todo = tids.filter((t) => !this.held.includes(t));
    const results = this.native.stopThreads(this.pid, todo, STOP_TIMEOUT_MS);
    let all = true;
    results.forEach((r, i) => {
      if (r === 'stopped') this.held.push(todo[i]!);
      // a thread that is gone cannot move either
      else if (r !== 'gone') all = false;
    });
    if (!all) this.stats.incomplete++;
    return all;
  }
}

export type AnyStopper = ProcessStopper | ThreadStopper;

/**
 * The cheapest stopper that works on process `pid`: ptrace where it is allowed (tried once on
 * the process's main thread: allowed unless denied), else SIGSTOP.
 */
export function openStopper(pid: number): AnyStopper {
  const native = loadNative();
  if (typeof native !== 'string') {
    const [r] = native.stopThreads(pid, [pid], STOP_TIMEOUT_MS);
    if (r === 'stopped') native.resumeThread(pid, pid);
    if (r === 'stopped' || r === 'timeout') return new ThreadStopper(pid, native);
  }
  return new ProcessStopper(pid);
}

/**
 * A stopper for process `pid` of the kind `other` is (record --subprocesses: a subprocess is
 * stopped as its parent is), without openStopper's trial stop — which, on a process just
 * started on a busy machine, can take as long as the process waits for a CPU.
 */
export function stopperLike(other: AnyStopper, pid: number): AnyStopper {
  const native = loadNative();
  return other.kind === 'ptrace' && typeof native !== 'string' ? new ThreadStopper(pid, native) : new ProcessStopper(pid);
}
