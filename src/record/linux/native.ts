// System calls Node has no binding for, through the koffi FFI package: gathered reads and
// writes of another process's memory (process_vm_readv/writev: several ranges in one call,
// measured 2.7–3.6 µs against 3.3–4.5 µs for each pread of /proc/PID/mem), and stopping one
// thread of it with ptrace (PTRACE_SEIZE + PTRACE_INTERRUPT, measured ~80 µs for a running
// thread against ~180 µs for SIGSTOP of the process and a wait until /proc says it stopped).
//
// Everything here is optional: when koffi or the calls are not available (another platform,
// a sandbox that forbids ptrace), `loadNative()` says why and the callers fall back to
// /proc/PID/mem and SIGSTOP.

import fs from 'node:fs';
import { createRequire } from 'node:module';

export interface Range {
  address: bigint;
  length: number;
}

export type StopResult = 'stopped' | 'gone' | 'denied' | 'timeout';

export interface NativeCalls {
  /**
   * Read every range of process `pid`, in one system call where they are all readable. Each
   * result is a fresh array (all carved from one buffer); null for a range that could not be
   * read whole.
   */
  readv(pid: number, ranges: readonly Range[]): (Uint8Array | null)[];
  /** Write `bytes` at `address` of process `pid`; false if not all of it could be written. */
  write(pid: number, address: bigint, bytes: Uint8Array): boolean;
  /**
   * Stop threads (ptrace-stop): attach to each, interrupt them all, then wait until each is
   * stopped — so that they stop in parallel. Per thread: `gone`: it does not exist (any more);
   * `denied`: ptrace is not allowed here (another tracer, permissions, a sandbox); `timeout`:
   * it did not stop in time, nor LINGER_MS after (it is let go when it does). A thread that
   * stops after `timeoutMs` but within LINGER_MS is `stopped`: once interrupted, a thread must
   * be seen stopped before it can be let go.
   */
  stopThreads(pid: number, tids: readonly number[], timeoutMs: number): StopResult[];
  /**
   * The general registers of a thread stopped by stopThreads (PTRACE_GETREGS): the x86-64
   * user_regs_struct as 27 words, in the kernel's order (USER_REGS); null if they cannot be read.
   */
  registers(tid: number): BigUint64Array | null;
  /** Let a thread stopped by stopThreads run on (detach; a signal that arrived meanwhile is delivered). */
  resumeThread(pid: number, tid: number): void;
  /**
   * Wait up to `waitMs` for the threads still attached that could not be let go yet to stop
   * (stopThreads gave up on them LINGER_MS after their timeout: a tracee can only be detached
   * once stopped) or to end (killed while stopped: their parent sees them end only once we have
   * waited for them), and let them go. The sampling loop calls it every few ms.
   */
  releaseLingering(waitMs: number): void;
  /**
   * A gathered read made ready once and repeated: its ranges land, one after the other, in
   * `bytes` (the same array every time), with no allocation per call.
   */
  prepare(pid: number, ranges: readonly Range[]): PreparedRead;
  /** CPU time this thread has used, µs (null: cannot be told) — unlike process.cpuUsage(), without the process's other threads (the collector's, the pool's). */
  threadCpuMicros(): number | null;
  /** Set this thread's timer slack (how late the kernel may wake it), ns; false if refused. */
  setTimerSlack(ns: number): boolean;
  /**
   * Run this thread (not the process's others) under the round-robin real-time policy at
   * `priority` (1: the lowest), or back under the normal one (null); its children never inherit
   * it. False if refused (it needs CAP_SYS_NICE).
   */
  setRealtime(priority: number | null): boolean;
}

/** See NativeCalls.prepare. */
export interface PreparedRead {
  /** where the ranges land, in order, each at the end of the one before */
  readonly bytes: Uint8Array;
  /** bytes of all the ranges */
  readonly length: number;
  /** read every range again; the number of bytes read (less than `length`: not all were readable) */
  read(): number;
}

const PTRACE_SEIZE = 0x4206;
const PTRACE_INTERRUPT = 0x4207;
const PTRACE_DETACH = 17;
const PTRACE_GETREGS = 12;

/** Word indexes of x86-64's user_regs_struct (the kernel's asm/ptrace.h order), as registers() gives it. */
export const USER_REGS = { r15: 0, r14: 1, r13: 2, r12: 3, rbp: 4, rbx: 5, r11: 6, r10: 7, r9: 8, r8: 9, rax: 10, rcx: 11, rdx: 12, rsi: 13, rdi: 14, orig_rax: 15, rip: 16, cs: 17, eflags: 18, rsp: 19, ss: 20, fs_base: 21, gs_base: 22, count: 27 } as const;
const PTRACE_EVENT_STOP = 128;
const WNOHANG = 1;
const WSTOPPED = 2;
const WEXITED = 4;
const WNOWAIT = 0x01000000;
const WALL = 0x40000000;
const P_PID = 1;
const CLD_EXITED = 1;
const CLD_KILLED = 2;
const CLD_DUMPED = 3;
const ESRCH = 3;
const SCHED_OTHER = 0;
const SCHED_RR = 2;
const SCHED_RESET_ON_FORK = 0x40000000;
const PR_SET_TIMERSLACK = 29;
const CLOCK_THREAD_CPUTIME_ID = 3;
const IOVEC = 16;
/** bytes per slab that reads are carved from */
const SLAB = 256 << 10;
/**
 * How long past its timeout stopThreads waits for an interrupted thread to stop: it can only be
 * let go once stopped, and a runnable thread on a busy machine may wait for a CPU well past
 * the timeout (seen with record --subprocesses on 2 cores at a load of 15: a child left in a
 * stop, with its parent waiting for it, hung the recording).
 */
const LINGER_MS = 2000;

interface Koffi {
  load(name: string): { func(signature: string): (...args: unknown[]) => number | bigint };
  address(value: unknown): bigint;
  errno(): number;
}

/** Is process `pid` a child of this process (its parent in /proc/PID/stat, also for a zombie)? */
function ownChild(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'latin1');
    return Number(stat.slice(stat.lastIndexOf(')') + 4).split(' ', 1)[0]) === process.pid;
  } catch {
    return false;
  }
}

let cached: NativeCalls | string | null = null;

/** The native calls, or why they are not available. */
export function loadNative(): NativeCalls | string {
  if (cached !== null) return cached;
  cached = load();
  return cached;
}

function load(): NativeCalls | string {
  if (process.platform !== 'linux') return `native calls are Linux-only (this is ${process.platform})`;
  let koffi: Koffi;
  try {
    koffi = createRequire(import.meta.url)('koffi') as Koffi;
  } catch (e) {
    return `the koffi package is not available (${(e as Error).message.split('\n')[0]})`;
  }
  let libc;
  try {
    libc = koffi.load('libc.so.6');
  } catch (e) {
    return `cannot load libc.so.6 (${(e as Error).message})`;
  }
  const readv = libc.func('long process_vm_readv(int pid, void *local, unsigned long liovcnt, void *remote, unsigned long riovcnt, unsigned long flags)');
  const writev = libc.func('long process_vm_writev(int pid, void *local, unsigned long liovcnt, void *remote, unsigned long riovcnt, unsigned long flags)');
  const ptrace = libc.func('long ptrace(long request, int pid, void *addr, void *data)');
  // the same call with `data` as a number: the signal to deliver on detach
  const ptraceSignal = libc.func('long ptrace(long request, int pid, void *addr, long data)');
  const userRegs = new DataView(new ArrayBuffer(USER_REGS.count * 8));
  const userRegsAddress = koffi.address(userRegs);
  const waitpid = libc.func('int waitpid(int pid, _Out_ int *status, int options)');
  const schedYield = libc.func('int sched_yield()');
  const prctl = libc.func('int prctl(int option, unsigned long arg2, unsigned long arg3, unsigned long arg4, unsigned long arg5)');
  // (pid 0: the calling thread alone, on Linux)
  const schedSetscheduler = libc.func('int sched_setscheduler(int pid, int policy, const int *param)');
  const clockGettime = libc.func('int clock_gettime(int clock, void *ts)');
  const timespec = new DataView(new ArrayBuffer(16));
  const timespecAddress = koffi.address(timespec);
  const waitid = libc.func('int waitid(int idtype, int id, void *info, int options)');
  const siginfo = new DataView(new ArrayBuffer(128));
  const siginfoAddress = koffi.address(siginfo);

  // iovec arrays, reused (off the V8 heap: their addresses must not move)
  let local = new DataView(new ArrayBuffer(IOVEC * 64));
  let remote = new DataView(new ArrayBuffer(IOVEC * 64));
  let localAddress = koffi.address(local);
  let remoteAddress = koffi.address(remote);
  const status = [0];
  /** signal that interrupted a stop, per thread, to deliver on resume */
  const pendingSignal = new Map<number, number>();

  // Reads land in a slab that results are carved from: one allocation (and one address
  // lookup) per SLAB bytes rather than per read. A slab lives as long as any result in it.
  let slab = new Uint8Array(new ArrayBuffer(SLAB));
  let slabAddress = koffi.address(slab);
  let slabUsed = 0;
  /** room for `n` bytes: in the current slab, a new one, or (big reads) a buffer of their own */
  const room = (n: number): { bytes: Uint8Array; address: bigint; offset: number } => {
    if (n > SLAB / 4) {
      const own = new Uint8Array(new ArrayBuffer(n));
      return { bytes: own, address: koffi.address(own), offset: 0 };
    }
    if (slabUsed + n > SLAB) {
      slab = new Uint8Array(new ArrayBuffer(SLAB));
      slabAddress = koffi.address(slab);
      slabUsed = 0;
    }
    const offset = slabUsed;
    slabUsed += (n + 7) & ~7;
    return { bytes: slab, address: slabAddress, offset };
  };

  const iovecs = (n: number): void => {
    if (local.byteLength >= n * IOVEC) return;
    local = new DataView(new ArrayBuffer(n * IOVEC * 2));
    remote = new DataView(new ArrayBuffer(n * IOVEC * 2));
    localAddress = koffi.address(local);
    remoteAddress = koffi.address(remote);
  };
  const set = (dv: DataView, i: number, base: bigint, len: number): void => {
    dv.setBigUint64(i * IOVEC, base, true);
    dv.setUint32(i * IOVEC + 8, len, true);
    dv.setUint32(i * IOVEC + 12, 0, true);
  };
  /** one process_vm_readv/writev of `ranges` to or from `address + offsets[i]` */
  const transfer = (fn: typeof readv, pid: number, address: bigint, offsets: readonly number[], ranges: readonly Range[]): number => {
    iovecs(ranges.length);
    for (let i = 0; i < ranges.length; i++) {
      set(local, i, address + BigInt(offsets[i]!), ranges[i]!.length);
      set(remote, i, ranges[i]!.address, ranges[i]!.length);
    }
    return Number(fn(pid, localAddress, ranges.length, remoteAddress, ranges.length, 0));
  };

  /**
   * threads attached that could not be let go yet (tid → pid): interrupted, but not stopped
   * even after LINGER_MS — let go when they stop — or killed while stopped — reaped when they end
   */
  const lingering = new Map<number, number>();
  /**
   * Thread `tid` of process `pid` ended while attached: it is a zombie that waits for us, its
   * tracer. A thread other than the process's first holds back the whole process's exit until
   * we reap it. The first thread's exit goes to the process's parent only once we have waited
   * for it — the parent's wait hangs until then (a program whose child the recorder had
   * stopped when it exited waits for it for ever) — unless that parent is this process (Node,
   * for a child it started), which reaps it itself: reaping it here would steal its exit.
   */
  const reapTraced = (pid: number, tid: number): void => {
    if (tid !== pid || !ownChild(pid)) waitpid(tid, status, WALL | WNOHANG);
  };
  /**
   * Has thread `tid` (attached and interrupted) stopped? 'stopped' (its stop taken), 'gone'
   * (it exited, or was killed), or 'running' (not yet).
   */
  const pollStopped = (pid: number, tid: number): 'stopped' | 'gone' | 'running' => {
    // look first, without reaping: an exit must stay for whoever waits for the process
    // (Node waits for the children it started; reaping one here would hang it)
    siginfo.setInt32(8, 0, true);
    siginfo.setInt32(16, 0, true);
    const peek = Number(waitid(P_PID, tid, siginfoAddress, WEXITED | WSTOPPED | WNOHANG | WNOWAIT | WALL));
    const code = siginfo.getInt32(8, true);
    if (peek < 0) return 'gone';
    if (code === CLD_EXITED || code === CLD_KILLED || code === CLD_DUMPED) {
      reapTraced(pid, tid);
      return 'gone';
    }
    const r = siginfo.getInt32(16, true) === 0 ? 0 : Number(waitpid(tid, status, WALL | WNOHANG));
    if (r === tid) {
      const s = status[0]!;
      if ((s & 0xff) !== 0x7f) return 'gone'; // exited or killed (and reaped just now: not the first thread)
      // an interrupt (or group) stop, or a signal arriving first: stopped either way; a
      // signal must be handed back on resume
      if (s >> 16 !== PTRACE_EVENT_STOP) pendingSignal.set(tid, (s >> 8) & 0xff);
      return 'stopped';
    }
    return r < 0 ? 'gone' : 'running';
  };
  /** Wait until thread `tid` stopped, or `until` (performance.now() ms). */
  const waitStopped = (pid: number, tid: number, until: number): 'stopped' | 'gone' | 'running' => {
    for (;;) {
      const r = pollStopped(pid, tid);
      if (r !== 'running') return r;
      // let the thread run: on a busy machine it may wait for this very CPU, and cannot
      // stop before it runs (spinning here cost ~3.5 ms per stop in one of ten stops)
      schedYield();
      if (performance.now() > until) return 'running';
    }
  };
  /** Let a stopped thread run on (a signal that arrived meanwhile is delivered). */
  const detach = (pid: number, tid: number): void => {
    const sig = pendingSignal.get(tid) ?? 0;
    pendingSignal.delete(tid);
    // a thread killed while stopped (SIGKILL of the process) cannot be detached: it is reaped
    // once it has ended (releaseLingering; it may still be on its way out now)
    if (Number(ptraceSignal(PTRACE_DETACH, tid, null, sig)) !== 0) {
      if (pollStopped(pid, tid) === 'running') lingering.set(tid, pid);
    }
  };
  /** Let go the lingering threads that have stopped since, waiting up to `waitMs` for them. */
  const releaseLingering = (waitMs: number): void => {
    if (lingering.size === 0) return;
    const until = performance.now() + waitMs;
    for (const [tid, pid] of [...lingering]) {
      const r = waitMs > 0 ? waitStopped(pid, tid, until) : pollStopped(pid, tid);
      if (r === 'running') continue;
      lingering.delete(tid);
      if (r === 'stopped') detach(pid, tid);
    }
  };

  const calls: NativeCalls = {
    threadCpuMicros() {
      if (Number(clockGettime(CLOCK_THREAD_CPUTIME_ID, timespecAddress)) !== 0) return null;
      return Number(timespec.getBigInt64(0, true)) * 1e6 + Number(timespec.getBigInt64(8, true)) / 1000;
    },
    setTimerSlack(ns) {
      return Number(prctl(PR_SET_TIMERSLACK, ns, 0, 0, 0)) === 0;
    },
    setRealtime(priority) {
      const policy = priority === null ? SCHED_OTHER : SCHED_RR | SCHED_RESET_ON_FORK;
      return Number(schedSetscheduler(0, policy, [priority ?? 0])) === 0;
    },
    prepare(pid, ranges) {
      let length = 0;
      for (const r of ranges) length += r.length;
      // its own buffers, off the V8 heap, for as long as the read is kept
      const bytes = new Uint8Array(new ArrayBuffer(Math.max(8, length)));
      const n = ranges.length;
      const localIov = new DataView(new ArrayBuffer(Math.max(1, n) * IOVEC));
      const remoteIov = new DataView(new ArrayBuffer(Math.max(1, n) * IOVEC));
      const base = koffi.address(bytes);
      let o = 0;
      for (let i = 0; i < n; i++) {
        set(localIov, i, base + BigInt(o), ranges[i]!.length);
        set(remoteIov, i, ranges[i]!.address, ranges[i]!.length);
        o += ranges[i]!.length;
      }
      const localIovAddress = koffi.address(localIov);
      const remoteIovAddress = koffi.address(remoteIov);
      const prepared: PreparedRead & { iovecs: DataView[] } = {
        bytes,
        length,
        // only the iovec arrays' addresses go to the call: the read holds the arrays, so that
        // the collector does not free them while the read is kept
        iovecs: [localIov, remoteIov],
        read: () => (n === 0 ? 0 : Number(readv(pid, localIovAddress, n, remoteIovAddress, n, 0))),
      };
      return prepared;
    },
    readv(pid, ranges) {
      let total = 0;
      for (const r of ranges) total += r.length;
      const at = room(total);
      const offsets: number[] = [];
      let o = at.offset;
      for (const r of ranges) {
        offsets.push(o);
        o += r.length;
      }
      const got = total === 0 ? 0 : transfer(readv, pid, at.address, offsets, ranges);
      const out: (Uint8Array | null)[] = [];
      for (let i = 0; i < ranges.length; i++) {
        const r = ranges[i]!;
        const start = offsets[i]!;
        if (got >= start - at.offset + r.length) out.push(at.bytes.subarray(start, start + r.length));
        else if (got < 0) out.push(null);
        else {
          // the call stopped at an unreadable page: this range on its own
          const one = room(r.length);
          out.push(transfer(readv, pid, one.address, [one.offset], [r]) === r.length ? one.bytes.subarray(one.offset, one.offset + r.length) : null);
        }
      }
      return out;
    },
    write(pid, address, bytes) {
      const at = room(bytes.length);
      at.bytes.set(bytes, at.offset);
      return transfer(writev, pid, at.address, [at.offset], [{ address, length: bytes.length }]) === bytes.length;
    },
    stopThreads(pid, tids, timeoutMs) {
      releaseLingering(0);
      const results: StopResult[] = tids.map((tid) => {
        if (Number(ptrace(PTRACE_SEIZE, tid, null, null)) !== 0) return koffi.errno() === ESRCH ? 'gone' : 'denied';
        if (Number(ptrace(PTRACE_INTERRUPT, tid, null, null)) !== 0) {
          // (it ended since: a zombie, that cannot be detached, is reaped)
          if (Number(ptrace(PTRACE_DETACH, tid, null, null)) !== 0) reapTraced(pid, tid);
          return 'gone';
        }
        return 'timeout'; // until seen stopped
      });
      const until = performance.now() + timeoutMs;
      tids.forEach((tid, i) => {
        if (results[i] !== 'timeout') return;
        let r = waitStopped(pid, tid, until);
        if (r === 'running') {
          // Too late — but a tracee can only be detached once stopped: the interrupt stands,
          // and the thread stops as soon as it runs (on a busy machine it waits for a CPU).
          // Left alone it would stay stopped, and an exit status Node reads for a child in that
          // state passes for its exit. So wait on, and take the stop when it comes.
          r = waitStopped(pid, tid, performance.now() + LINGER_MS);
          if (r === 'running') lingering.set(tid, pid);
        }
        results[i] = r === 'running' ? 'timeout' : r;
      });
      return results;
    },
    registers(tid) {
      if (Number(ptrace(PTRACE_GETREGS, tid, null, userRegsAddress)) !== 0) return null;
      return new BigUint64Array(userRegs.buffer.slice(0));
    },
    resumeThread(pid, tid) {
      detach(pid, tid);
      releaseLingering(0);
    },
    releaseLingering(waitMs) {
      releaseLingering(waitMs);
    },
  };
  return calls;
}
