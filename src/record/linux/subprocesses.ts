// Finding a process's descendants as they come and go, for record --subprocesses: polled from
// /proc (Linux has no unprivileged notification of another process's forks and execs — the
// process connector needs CAP_NET_ADMIN, ptrace's fork events would make the recorder the
// tracer of every child).
//
// - Children: /proc/PID/task/TID/children lists the processes each thread started (Linux 3.5+
//   with CONFIG_PROC_CHILDREN, as Debian and most distributions build it); without it, every
//   process's parent is read from /proc/N/stat (slower: the whole process table per poll). A
//   descendant is watched in turn — also one that is not Python (a shell, a launcher), since its
//   own children may be — and stays watched when its parent exits (it is reparented). While the
//   last pid the kernel gave (/proc/loadavg) stays the same, no process was made anywhere, and
//   the children are listed only every TASKS_EVERY polls. What a poll cost is measured (CPU
//   time of the recorder's thread) and the record summary says it.
// - Which program a process runs: the 16 random bytes the kernel puts on the stack of every new
//   program (AT_RANDOM in /proc/PID/auxv). execve makes new ones; fork copies them. So a process
//   whose bytes changed has run a new program, even the same binary at the same addresses (with
//   address randomization off).
// - A new process settles before it is looked at: its program must be the same at two polls.
//   A subprocess.Popen child is a copy of its parent (a vfork child even shares its memory)
//   until it execs a moment later: looked at then, it would pass for a Python running the
//   parent's code. A multiprocessing 'fork' child, which never execs, settles at the next poll.
//   A process that lives less than a poll or two is not seen at all. The recorder may ask to
//   look again at the next polls (LOOK_AGAIN): a program just exec'd whose loader has not yet
//   mapped its interpreter library looks like no Python at all.
// - A process that runs a new program after it was looked at (a shell that execs python, a
//   recorded child that execs) is looked at again.

import fs from 'node:fs';
import { loadNative } from './native.js';
import { targetErrorFromErrno } from './process.js';

const AT_RANDOM = 25n;

/** What program a process runs: its AT_RANDOM bytes and where they are. */
export interface ProgramIdentity {
  address: bigint;
  bytes: Uint8Array;
}

const buffer = { bytes: Buffer.alloc(4096) };

/**
 * A small /proc file's bytes (a view into a shared buffer, valid until the next call), or the
 * error code. (readFileSync reads a procfs file, whose size says 0, in 64 KiB chunks until
 * the end: measured 140–190 µs a file here, against 15 µs for this.)
 */
function readProc(file: string): Buffer | string {
  let fd: number;
  try {
    fd = fs.openSync(file, 'r');
  } catch (e) {
    return (e as NodeJS.ErrnoException).code ?? String(e);
  }
  try {
    for (;;) {
      let n = 0;
      // (procfs makes the text at the first read: a file that fills the buffer is read again, whole)
      for (;;) {
        const got = fs.readSync(fd, buffer.bytes, n, buffer.bytes.length - n, n);
        if (got === 0) break;
        n += got;
        if (n === buffer.bytes.length) break;
      }
      if (n < buffer.bytes.length) return buffer.bytes.subarray(0, n);
      buffer.bytes = Buffer.alloc(buffer.bytes.length * 2);
    }
  } catch (e) {
    return (e as NodeJS.ErrnoException).code ?? String(e);
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * What program process `pid` runs: the 16 bytes at AT_RANDOM, new at each execve; 'gone' when
 * the process is gone or a zombie, or why it cannot be told (no permission).
 */
export function programIdentity(pid: number): ProgramIdentity | 'gone' | { why: string } {
  const auxv = readProc(`/proc/${pid}/auxv`);
  if (typeof auxv === 'string') {
    const err = targetErrorFromErrno(pid, Object.assign(new Error(auxv), { code: auxv }), 'auxv');
    return err.kind === 'no-process' ? 'gone' : { why: err.message };
  }
  // a zombie has no memory left: an empty auxv
  let address = 0n;
  for (let o = 0; o + 16 <= auxv.length; o += 16) {
    const type = auxv.readBigUInt64LE(o);
    if (type === 0n) break;
    if (type === AT_RANDOM) address = auxv.readBigUInt64LE(o + 8);
  }
  if (address === 0n) return 'gone';
  const bytes = readRandom(pid, address);
  if (bytes === null) return fs.existsSync(`/proc/${pid}`) ? { why: `cannot read memory of pid ${pid}` } : 'gone';
  return { address, bytes: bytes.slice() };
}

/**
 * Does process `pid` still run the program `id` was read from? One read of 16 bytes: after an
 * execve they are new (or no longer mapped there).
 */
export function sameProgram(pid: number, id: ProgramIdentity): boolean {
  const now = readRandom(pid, id.address);
  if (now === null) return false;
  for (let i = 0; i < 16; i++) if (now[i] !== id.bytes[i]) return false;
  return true;
}

/** The 16 AT_RANDOM bytes at `address` (null: unreadable). */
function readRandom(pid: number, address: bigint): Uint8Array | null {
  const native = loadNative();
  if (typeof native !== 'string') {
    const got = native.readv(pid, [{ address, length: 16 }])[0];
    if (got) return got;
  }
  let fd: number;
  try {
    fd = fs.openSync(`/proc/${pid}/mem`, 'r');
  } catch {
    return null;
  }
  try {
    const out = new Uint8Array(16);
    return fs.readSync(fd, out, 0, 16, address) === 16 ? out : null;
  } catch {
    return null;
  } finally {
    fs.closeSync(fd);
  }
}

/** CPU time of this thread (of the process, where it cannot be told), µs. */
function cpuMicros(): number {
  const native = loadNative();
  const own = typeof native === 'string' ? null : native.threadCpuMicros();
  if (own !== null) return own;
  const u = process.cpuUsage();
  return u.user + u.system;
}

/** The process's command line (argv), [] when it cannot be read. */
export function commandLine(pid: number): string[] {
  try {
    const raw = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    const args = raw.split('\0');
    if (args[args.length - 1] === '') args.pop();
    return args;
  } catch {
    return [];
  }
}

/**
 * The children of every thread of `pid` (null: the process is gone). `tasks`: its threads as
 * listed lately (listing them is a good part of a poll's cost), refreshed when stale or when
 * one is gone.
 */
function childrenOf(pid: number, tasks: { list: string[] | null; stale: boolean }): number[] | null {
  if (tasks.list === null || tasks.stale) {
    try {
      tasks.list = fs.readdirSync(`/proc/${pid}/task`);
    } catch {
      return null;
    }
    tasks.stale = false;
  }
  const out: number[] = [];
  let read = 0;
  for (const tid of tasks.list) {
    const got = readProc(`/proc/${pid}/task/${tid}/children`);
    if (typeof got === 'string') {
      tasks.stale = true; // the thread ended
      continue;
    }
    read++;
    for (const c of got.toString('latin1').split(' ')) {
      const n = Number(c);
      if (n > 0) out.push(n);
    }
  }
  return read > 0 ? out : null;
}

/**
 * The pid the kernel gave last (to a process or a thread), from /proc/loadavg: while it stays
 * the same, no process was made, and a poll need not list anyone's children. null: unknown.
 */
function lastPid(): number | null {
  const got = readProc('/proc/loadavg');
  if (typeof got === 'string') return null;
  const n = Number(got.toString('latin1').trim().split(' ').pop());
  return Number.isSafeInteger(n) && n > 0 ? n : null;
}

/** Does this kernel list a thread's children (CONFIG_PROC_CHILDREN)? */
function childrenFilesExist(): boolean {
  return fs.existsSync(`/proc/self/task/${process.pid}/children`);
}

/** Every process's parent, from /proc/N/stat: the slow way. */
function parentsByScan(): Map<number, number[]> {
  const byParent = new Map<number, number[]>();
  let names: string[];
  try {
    names = fs.readdirSync('/proc');
  } catch {
    return byParent;
  }
  for (const name of names) {
    const pid = Number(name);
    if (!(pid > 0)) continue;
    const got = readProc(`/proc/${pid}/stat`);
    if (typeof got === 'string') continue;
    const stat = got.toString('latin1');
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 4).split(' ', 1)[0]);
    const list = byParent.get(ppid);
    if (list) list.push(pid);
    else byParent.set(ppid, [pid]);
  }
  return byParent;
}

/** What `settled` returns for a descendant to be looked at again at the next poll (its program may not be loaded yet). */
export const LOOK_AGAIN = Symbol('look again');

/** What the recorder makes of a descendant that settled on a program. */
export interface WatcherEvents {
  /**
   * Descendant `pid` (a child of `parentPid`) has settled on a program: record it (null), say
   * in one line why it is not followed, or LOOK_AGAIN at the next poll.
   */
  settled(pid: number, parentPid: number): string | null | typeof LOOK_AGAIN;
  /** A recorded descendant ran a new program (execve): its recording must end; it is looked at again once it settles. */
  execed(pid: number): void;
}

/**
 * A new descendant whose program cannot be told (its memory unreadable) is tried again at this
 * many polls before the recorder is asked about it (and says why it is not followed). A process
 * caught in the middle of an execve is unreadable for a moment: its AT_RANDOM address read from
 * the old program's auxv, the bytes looked for in the new one's memory. (Seen: 1 in 100 shells
 * starting a child on a loaded machine; marked unreadable at once, such a child was never
 * looked at again.) A permission that is refused stays refused, and is reported this late.
 */
const UNREADABLE_POLLS = 3;

/** A process's threads are listed again at least every this many polls (a child started by a thread newer than that is found that much later). */
const TASKS_EVERY = 5;

interface Entry {
  parentPid: number;
  state: 'new' | 'recorded' | 'other';
  /** the program it runs (null: it cannot be read) */
  id: ProgramIdentity | null;
  /** the poll that saw this identity first */
  since: number;
}

/** Watches a process's descendants (see the file comment); call poll() every so often. */
export class DescendantWatcher {
  private readonly known = new Map<number, Entry>();
  /** each process's threads, as listed lately (see childrenOf) */
  private readonly tasks = new Map<number, { list: string[] | null; stale: boolean }>();
  private readonly byChildrenFiles = childrenFilesExist();
  private polls = 0;
  private micros = 0;
  /** the pid made last on the system, at the last poll */
  private lastPid: number | null = null;
  /** CPU time spent in the events' handlers (attaching a recorder) during a poll, µs: not the watching's cost */
  private handling = 0;

  constructor(
    readonly root: number,
    private readonly events: WatcherEvents,
    /** what program a process runs (tests stand in for a process caught mid-execve) */
    private readonly identify: typeof programIdentity = programIdentity,
  ) {}

  /** Polls made, and the CPU time they took (µs, without what the handlers of its events did): what watching cost the recorder. */
  get cost(): { polls: number; micros: number; viaChildrenFiles: boolean } {
    return { polls: this.polls, micros: Math.round(this.micros), viaChildrenFiles: this.byChildrenFiles };
  }

  /** Descendants seen and still there (recorded, not followed, or settling). */
  get watched(): number {
    return this.known.size;
  }

  /** The recording of `pid` ended because the process is gone: stop watching it. */
  forget(pid: number): void {
    this.known.delete(pid);
    this.tasks.delete(pid);
  }

  /**
   * A descendant `settled` took (null) is not recorded after all (it waited for something and
   * then failed): watched as one not followed, looked at again only if it runs a new program.
   */
  notRecorded(pid: number): void {
    const e = this.known.get(pid);
    if (e) e.state = 'other';
  }

  poll(): void {
    const t0 = cpuMicros();
    const poll = ++this.polls;
    // new descendants: children of the root and of every process watched — unless no process
    // (or thread) was made anywhere since the last poll
    const last = lastPid();
    const made = last === null || last !== this.lastPid || poll % TASKS_EVERY === 0;
    this.lastPid = last;
    const scan = !made || this.byChildrenFiles ? null : parentsByScan();
    for (const parent of made ? [this.root, ...this.known.keys()] : []) {
      let tasks = this.tasks.get(parent);
      if (!tasks) this.tasks.set(parent, (tasks = { list: null, stale: true }));
      if (poll % TASKS_EVERY === 0) tasks.stale = true;
      const children = scan ? (scan.get(parent) ?? []) : childrenOf(parent, tasks);
      if (children === null) continue;
      for (const pid of children) {
        if (pid === this.root || this.known.has(pid)) continue;
        const id = this.identify(pid);
        if (id === 'gone') continue;
        // (one that cannot be read yet is identified again at the next polls: see UNREADABLE_POLLS)
        this.known.set(pid, { parentPid: parent, state: 'new', id: 'why' in id ? null : id, since: poll });
      }
    }
    // what the others run now
    for (const [pid, e] of this.known) {
      if (e.since === poll) continue;
      if (e.id === null) {
        if (e.state !== 'new') continue;
        const id = this.identify(pid);
        if (id === 'gone') this.forget(pid);
        else if (!('why' in id)) {
          e.id = id;
          e.since = poll;
        } else if (poll - e.since >= UNREADABLE_POLLS) this.settle(pid, e.parentPid);
        continue;
      }
      if (!sameProgram(pid, e.id)) {
        const id = this.identify(pid);
        if (id === 'gone') {
          // (a recorded one is forgotten when its recording sees it gone)
          if (e.state !== 'recorded') this.forget(pid);
          continue;
        }
        if ('why' in id) continue;
        // a new program: wait until it settles, then look again
        if (e.state === 'recorded') this.handle(() => this.events.execed(pid));
        e.state = 'new';
        e.id = id;
        e.since = poll;
        continue;
      }
      if (e.state === 'new') this.settle(pid, e.parentPid);
    }
    this.micros += cpuMicros() - t0 - this.handling;
    this.handling = 0;
  }

  private handle<T>(f: () => T): T {
    const t0 = cpuMicros();
    try {
      return f();
    } finally {
      this.handling += cpuMicros() - t0;
    }
  }

  private settle(pid: number, parentPid: number): void {
    const verdict = this.handle(() => this.events.settled(pid, parentPid));
    // (LOOK_AGAIN: it stays new, and settles again at the next poll that finds the same program)
    if (verdict !== LOOK_AGAIN) this.known.get(pid)!.state = verdict === null ? 'recorded' : 'other';
  }
}
