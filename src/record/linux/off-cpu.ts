// Proof from the kernel that a thread did not run while it was copied — without stopping it.
//
// Before CPython 3.15 nothing in a thread's memory proves the copy of a thread that may be
// running Python (the GIL's last holder: it may take the GIL again at any moment). But a thread
// blocked in the kernel cannot change its frames until it is put on a CPU again, and the kernel
// tells both halves of that:
// - /proc/PID/task/TID/syscall names the system call the thread is blocked in (or "-1 sp pc":
//   blocked, not in one), and says "running" otherwise. To answer, the kernel waits until the
//   thread is off every CPU (wait_task_inactive): an answer other than "running" means the
//   thread was off its CPU, asleep, at that instant.
// - /proc/PID/task/TID/schedstat's third number counts the times the thread was put on a CPU.
// Read the count, then the system call; copy; read the count again. Unchanged, it says the
// thread — off its CPU when the system call was read — was not put on a CPU before the copy was
// done: nothing of it ran, so the copy is of one moment, as if the thread had been stopped.
// (The count is read first: read after the system call, a wake-up between the two would be in
// it, and the run that followed unseen.)
//
// A program whose threads mostly wait (a server between requests, a sleeping script, a thread
// pool's idle workers that last held the GIL) is then copied without a single stop.

import fs from 'node:fs';

/** Open files kept at most (two per thread): past it, a thread gets no proof and is stopped. */
const MAX_OPEN = 1024;

export class OffCpuWatch {
  private readonly files = new Map<number, { sched: number; syscall: number }>();
  private readonly buf = Buffer.alloc(256);

  private constructor(private readonly pid: number) {}

  /**
   * A watch of `pid`'s threads, or null where the kernel cannot tell what the proof needs: no
   * schedstat (a kernel without CONFIG_SCHED_INFO), a count that does not count, or no syscall file.
   */
  static open(pid: number): OffCpuWatch | null {
    if (!fs.existsSync(`/proc/${pid}/task/${pid}/syscall`)) return null;
    const self = `/proc/thread-self/schedstat`;
    const count = (): bigint | null => {
      try {
        return parseCount(fs.readFileSync(self, 'latin1'));
      } catch {
        return null;
      }
    };
    const before = count();
    // off this CPU and back: the count must move
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 2);
    const after = count();
    if (before === null || after === null || after <= before) return null;
    return new OffCpuWatch(pid);
  }

  /** Thread `tid` now: its run count if it is off its CPU (blocked), else null (running, or unknown). */
  mark(tid: number): bigint | null {
    const seen = this.look(tid);
    // "running\n", or a system call number (-1: blocked, not in one) and its arguments
    return seen && this.buf.toString('latin1', 0, Math.min(seen.n, 7)) !== 'running' ? seen.count : null;
  }

  /**
   * Thread `tid` now, as `mark` sees it, with the stack and instruction pointers the kernel
   * gives for a blocked thread (the last two fields of its syscall file: the registers it
   * entered the kernel with) — the start of an unwind of its native stack without a stop
   * (native-recorder.ts). Null: running, or unknown.
   */
  blockedAt(tid: number): { mark: bigint; sp: bigint; pc: bigint } | null {
    const seen = this.look(tid);
    const at = seen && parseSpPc(this.buf.toString('latin1', 0, seen.n));
    return at && { mark: seen!.count, ...at };
  }

  /** The thread's run count, then its syscall file read into `buf` (n bytes); null where either cannot be read. */
  private look(tid: number): { count: bigint; n: number } | null {
    const f = this.open(tid);
    if (!f) return null;
    const count = this.count(tid, f.sched);
    if (count === null) return null;
    const n = this.readAt(tid, f.syscall);
    return n > 0 ? { count, n } : null;
  }

  /** Thread `tid`'s run count (the times it was put on a CPU, from schedstat), or null where it cannot be read. */
  arrivals(tid: number): bigint | null {
    const f = this.open(tid);
    return f ? this.count(tid, f.sched) : null;
  }

  /** The thread has not been put on a CPU since `mark`. */
  stillOff(tid: number, mark: bigint): boolean {
    const f = this.files.get(tid);
    return f !== undefined && this.count(tid, f.sched) === mark;
  }

  close(): void {
    for (const tid of [...this.files.keys()]) this.forget(tid);
  }

  private open(tid: number): { sched: number; syscall: number } | null {
    let f = this.files.get(tid);
    if (f) return f;
    if (this.files.size >= MAX_OPEN || !(tid > 0)) return null;
    let sched = -1;
    try {
      sched = fs.openSync(`/proc/${this.pid}/task/${tid}/schedstat`, 'r');
      f = { sched, syscall: fs.openSync(`/proc/${this.pid}/task/${tid}/syscall`, 'r') };
    } catch {
      if (sched >= 0) fs.closeSync(sched);
      return null;
    }
    this.files.set(tid, f);
    return f;
  }

  private count(tid: number, fd: number): bigint | null {
    const n = this.readAt(tid, fd);
    return n <= 0 ? null : parseCount(this.buf.toString('latin1', 0, n));
  }

  /** Bytes read from the start of the file (procfs makes the text anew at each read from 0); 0 when the thread is gone. */
  private readAt(tid: number, fd: number): number {
    try {
      return fs.readSync(fd, this.buf, 0, this.buf.length, 0);
    } catch {
      this.forget(tid);
      return 0;
    }
  }

  private forget(tid: number): void {
    const f = this.files.get(tid);
    if (!f) return;
    this.files.delete(tid);
    for (const fd of [f.sched, f.syscall]) {
      try {
        fs.closeSync(fd);
      } catch {
        // already closed
      }
    }
  }
}

/** The third number of a schedstat line ("run_ns wait_ns timeslices"), or null. */
function parseCount(text: string): bigint | null {
  const m = /^\s*\d+\s+\d+\s+(\d+)/.exec(text);
  return m ? BigInt(m[1]!) : null;
}

/**
 * The stack and instruction pointers of a syscall file's line ("NR a1 … a6 SP PC", or "-1 SP
 * PC": blocked, not in a system call), or null ("running", or not that shape).
 */
export function parseSpPc(text: string): { sp: bigint; pc: bigint } | null {
  const f = text.trim().split(' ');
  if (!(f.length === 3 ? f[0] === '-1' : f.length === 9 && /^\d+$/.test(f[0]!))) return null;
  const sp = f[f.length - 2]!;
  const pc = f[f.length - 1]!;
  if (!/^0x[0-9a-f]{1,16}$/.test(sp) || !/^0x[0-9a-f]{1,16}$/.test(pc)) return null;
  return { sp: BigInt(sp), pc: BigInt(pc) };
}
