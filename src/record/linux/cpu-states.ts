// Whether a thread of the target is on a CPU, from the kernel: the state letter of
// /proc/PID/task/TID/stat (R: running or runnable; S, D, T, t, Z, X, I: not). It is not in the
// target's memory, so the recorder asks for it beside each copy. Each thread's stat file is
// kept open and read again from its start (one pread per thread per tick; procfs makes the text
// anew at each read from offset 0); a thread that is gone fails its read and is forgotten.

import fs from 'node:fs';

/** Open stat files kept at most (a target with more threads gets no answer for the rest). */
const MAX_OPEN = 4096;

export class CpuStates {
  private readonly files = new Map<bigint, number>();
  private readonly buf = Buffer.alloc(512);

  constructor(private readonly pid: number) {}

  /** Can this process's threads be told (procfs readable)? */
  static available(pid: number): boolean {
    try {
      fs.accessSync(`/proc/${pid}/task`, fs.constants.R_OK);
      return true;
    } catch {
      return false;
    }
  }

  /** The thread with kernel id `tid` is running or runnable; null when that cannot be read. */
  onCpu(tid: bigint): boolean | null {
    if (tid <= 0n) return null;
    let fd = this.files.get(tid);
    if (fd === undefined) {
      if (this.files.size >= MAX_OPEN) return null;
      try {
        fd = fs.openSync(`/proc/${this.pid}/task/${tid}/stat`, 'r');
      } catch {
        return null;
      }
      this.files.set(tid, fd);
    }
    let n: number;
    try {
      n = fs.readSync(fd, this.buf, 0, this.buf.length, 0);
    } catch {
      // the thread ended: its file answers no more
      this.forget(tid);
      return null;
    }
    // "TID (COMM) S ...": the command may hold spaces and parentheses, the state follows the last ')'
    const close = this.buf.lastIndexOf(0x29, n - 1);
    if (close < 0 || close + 2 >= n) return null;
    return this.buf[close + 2] === 0x52; // 'R'
  }

  private forget(tid: bigint): void {
    const fd = this.files.get(tid);
    this.files.delete(tid);
    if (fd !== undefined) {
      try {
        fs.closeSync(fd);
      } catch {
        // already gone
      }
    }
  }

  close(): void {
    for (const tid of [...this.files.keys()]) this.forget(tid);
  }
}
