// The asyncio tasks of a thread, read from target memory (CPython 3.14+): the task it is
// running, the tasks on its list, each task's name, the chain of coroutines it is suspended in,
// and the task awaiting it. The same code serves the recorder (over live reads, each one kept
// as a region of the sample) and the report (over the sample's regions), so the report reads
// exactly what the recorder copied.
//
// Untrusted input: every read goes through `mem`, which answers null outside what it has; every
// loop is bounded; a chain that comes back to a task or coroutine already on it is a cycle.

import type { AsyncioOffsets } from '../layout/asyncio-offsets.js';
import type { AsyncObjects, Layout } from '../layout/layout.js';
import { readPyString, pyStringExtent, pyStringHeaderSize } from '../symbols/strings.js';
import { RegionMemory } from './region-memory.js';

/** Which tasks a sample's async-aware view shows: the running task of each thread, or every task of its list. */
export type AsyncMode = 'running' | 'all';
export const ASYNC_MODES: readonly AsyncMode[] = ['running', 'all'];

/** Tasks followed on a thread's list (`all`). */
export const MAX_TASKS = 256;
/** Tasks on one awaited-by chain, the task itself included. */
export const MAX_AWAITERS = 64;
/** Coroutines in one task's await chain. */
export const MAX_COROUTINES = 64;
/** Slots of an awaiters set's table read (a set of more awaiters than this half fills is not followed). */
export const MAX_SET_SLOTS = 1024;
/** Bytes of a task name's text copied. */
export const MAX_NAME_BYTES = 1024;

/** Bytes at an address, or null where there are none (not copied, not readable). */
export interface ByteSource {
  bytes(address: bigint, length: number): Uint8Array | null;
}

/** Why the tasks of a sample could not be read: a walk status, the address and what it was. */
export class TaskFault extends Error {
  override name = 'TaskFault';
  constructor(
    readonly status: 'dangling' | 'cycle' | 'too-deep' | 'corrupt' | 'torn',
    readonly address: bigint,
    what: string,
  ) {
    super(`${what} at 0x${address.toString(16)}`);
  }
}

export interface TaskNode {
  address: bigint;
  /** a Task (not a plain Future) */
  isTask: boolean;
  /** its name (str, or an int n shown as Task-n); null where it could not be read */
  name: string | null;
  /** its coroutine (0: none) */
  coro: bigint;
  /** the first task awaiting it, as its awaited_by holds them (0: none) */
  awaiter: bigint;
  /** how many tasks await it (0, 1, or the size of its awaited_by set): a stack follows the first */
  awaiters: number;
}

/** Bytes past a str header read with it: most task names fit. */
export const NAME_PROBE = 48;

/** Py_TPFLAGS_LONG_SUBCLASS and Py_TPFLAGS_UNICODE_SUBCLASS */
const LONG_SUBCLASS = 1n << 24n;
const UNICODE_SUBCLASS = 1n << 28n;
/** object pointers and _PyStackRef tags: objects are at least 8-aligned */
const TAG = 7n;

export class TaskGraph {
  private readonly P: 4 | 8;
  private readonly o: AsyncObjects;

  constructor(
    readonly layout: Layout,
    readonly offsets: AsyncioOffsets,
    private readonly mem: ByteSource,
  ) {
    if (!layout.objects || !layout.gen) throw new RangeError(`async-aware stacks need CPython 3.14+ (this is ${layout.version.major}.${layout.version.minor})`);
    this.o = layout.objects;
    this.P = layout.pointerSize;
  }

  private read(address: bigint, length: number, what: string): Uint8Array {
    if (address === 0n) throw new TaskFault('dangling', address, `NULL ${what}`);
    const b = this.mem.bytes(address, length);
    if (!b) throw new TaskFault('dangling', address, `${what} (${length} bytes) not in memory`);
    return b;
  }

  private word(bytes: Uint8Array, offset: number): bigint {
    const v = new DataView(bytes.buffer, bytes.byteOffset + offset, this.P);
    return this.P === 8 ? v.getBigUint64(0, true) : BigInt(v.getUint32(0, true));
  }

  private pointer(address: bigint, what: string): bigint {
    return this.word(this.read(address, this.P, what), 0);
  }

  /** The task the thread is running (0: none; no loop running counts as none). */
  running(tstate: bigint): bigint {
    const t = this.offsets.tstate;
    // the thread state's asyncio fields in one read (each is then found in it)
    const lo = Math.min(t.runningLoop, t.runningTask, t.tasksHead);
    this.mem.bytes(tstate + BigInt(lo), Math.max(t.runningLoop, t.runningTask, t.tasksHead) + 2 * this.P - lo);
    const loop = this.pointer(tstate + BigInt(t.runningLoop), 'thread state asyncio_running_loop');
    if (loop === 0n) return 0n;
    return this.pointer(tstate + BigInt(t.runningTask), 'thread state asyncio_running_task') & ~TAG;
  }

  /** tasks() found more than MAX_TASKS tasks on the list, and cut it there */
  listCut = false;

  /** The tasks on the thread's list, in list order (at most MAX_TASKS: a longer list is cut there, and listCut set). */
  tasks(tstate: bigint): bigint[] {
    const head = tstate + BigInt(this.offsets.tstate.tasksHead);
    const nodeAt = BigInt(this.offsets.task.node);
    const out: bigint[] = [];
    const seen = new Set<bigint>([head]);
    let node = this.pointer(head, 'thread state asyncio_tasks_head');
    while (node !== head && out.length < MAX_TASKS) {
      if (node === 0n || node % BigInt(this.P) !== 0n) throw new TaskFault('corrupt', node, 'task list node');
      if (seen.has(node)) throw new TaskFault('cycle', node, 'task list node seen before');
      seen.add(node);
      out.push(node - nodeAt);
      node = this.pointer(node, 'task list node');
    }
    if (node !== head) this.listCut = true;
    return out;
  }

  /** One task (or future) object: its name, coroutine and first awaiter. */
  task(address: bigint): TaskNode {
    if (address % BigInt(this.P) !== 0n) throw new TaskFault('corrupt', address, 'misaligned task');
    const k = this.offsets.task;
    const obj = this.read(address, k.size, 'task object');
    const isTask = obj[k.isTask] !== 0;
    const coro = isTask ? this.word(obj, k.coro) & ~TAG : 0n;
    const awaitedBy = this.word(obj, k.awaitedBy) & ~TAG;
    let awaiter = 0n;
    let awaiters = 0;
    if (awaitedBy !== 0n) {
      if (obj[k.awaitedByIsSet] !== 0) ({ first: awaiter, count: awaiters } = this.setKeys(awaitedBy));
      else [awaiter, awaiters] = [awaitedBy, 1];
    }
    return { address, isTask, name: isTask ? this.name(this.word(obj, k.name) & ~TAG) : null, coro, awaiter, awaiters };
  }

  /** A set's first key, in table order (0: empty), and how many keys it holds. */
  private setKeys(set: bigint): { first: bigint; count: number } {
    const s = this.o.set;
    const hdr = this.read(set, Math.max(s.used, s.table, s.mask) + this.P, 'awaiters set');
    const mask = this.word(hdr, s.mask);
    const table = this.word(hdr, s.table);
    if (mask >= BigInt(MAX_SET_SLOTS) || ((mask + 1n) & mask) !== 0n) throw new TaskFault('corrupt', set, `awaiters set with mask ${mask}`);
    const slots = Number(mask) + 1;
    const entries = this.read(table, slots * 2 * this.P, 'awaiters set table');
    const dummy = this.P === 8 ? 0xffffffffffffffffn : 0xffffffffn; // hash -1 marks a deleted entry
    let first = 0n;
    let count = 0;
    for (let i = 0; i < slots; i++) {
      const key = this.word(entries, i * 2 * this.P);
      if (key === 0n || this.word(entries, (i * 2 + 1) * this.P) === dummy) continue;
      if (count++ === 0) first = key & ~TAG;
    }
    return { first, count };
  }

  /** A task's name: a str, or an int n (a task not named yet) shown as Task-n; null if unreadable. */
  private name(address: bigint): string | null {
    const L = this.layout;
    if (address === 0n) return null;
    // a short name's header and text, or an int's digits, in one read where the memory allows
    this.mem.bytes(address, pyStringHeaderSize(L) + NAME_PROBE);
    const head = this.mem.bytes(address, L.object.obType + this.P);
    if (!head) return null;
    const type = this.word(head, L.object.obType);
    const flagBytes = this.mem.bytes(type + BigInt(L.type.tpFlags), this.P);
    if (!flagBytes) return null;
    const flags = this.word(flagBytes, 0);
    if (flags & LONG_SUBCLASS) {
      const l = this.o.long;
      const tagBytes = this.mem.bytes(address + BigInt(l.lvTag), this.P);
      if (!tagBytes) return null;
      const tag = this.word(tagBytes, 0);
      const digits = Number(tag >> 3n);
      if ((tag & 3n) !== 0n || digits > 2) return (tag & 3n) === 1n ? 'Task-0' : null; // 1: zero; 2: negative
      const d = this.mem.bytes(address + BigInt(l.obDigit), 4 * Math.max(digits, 1));
      if (!d) return null;
      const v = new DataView(d.buffer, d.byteOffset, d.length);
      let n = 0;
      for (let i = digits - 1; i >= 0; i--) n = n * 2 ** 30 + (v.getUint32(i * 4, true) & 0x3fffffff);
      return `Task-${n}`;
    }
    if (!(flags & UNICODE_SUBCLASS)) return null;
    const header = this.mem.bytes(address, pyStringHeaderSize(L));
    if (!header) return null;
    try {
      const ext = pyStringExtent(header, L, address);
      if (ext.dataAddress !== null || ext.dataLength > MAX_NAME_BYTES) return null;
      const whole = this.mem.bytes(address, ext.headerSize + ext.dataLength);
      if (!whole) return null;
      return readPyString(new RegionMemory([{ address, bytes: whole }], this.P), L, address);
    } catch {
      return null; // a str header that makes no sense: no name
    }
  }

  /**
   * The frames of a suspended coroutine and of the coroutines it awaits, outermost first: each
   * frame lives inside its coroutine object; a coroutine suspended in `await` keeps the awaited
   * object on its frame's stack, followed while it is a coroutine of the same type.
   */
  coroFrames(coro: bigint): bigint[] {
    const L = this.layout;
    const gen = L.gen!;
    const o = this.o;
    const frames: bigint[] = [];
    const seen = new Set<bigint>();
    let type: bigint | null = null;
    for (let at = coro; at !== 0n; ) {
      if (frames.length >= MAX_COROUTINES) throw new TaskFault('too-deep', at, `more than ${MAX_COROUTINES} coroutines awaiting each other`);
      if (seen.has(at)) throw new TaskFault('cycle', at, 'coroutine awaited twice on one chain');
      seen.add(at);
      const obj = this.read(at, gen.iframe + L.frame.size, 'coroutine object');
      const ownType = this.word(obj, L.object.obType);
      if (type !== null && ownType !== type) break; // awaiting something else than a coroutine: the chain ends
      type = ownType;
      const state = (obj[gen.frameState]! << 24) >> 24;
      if (state === o.frameStates.cleared) {
        // a coroutine suspended in `await` on one that has finished: the two were read at two
        // moments (the awaiter's step began, and the awaited one returned, in between)
        if (frames.length > 0) throw new TaskFault('torn', at, 'an awaited coroutine had finished when it was read');
        break;
      }
      // a waiting task's coroutines are suspended: one running (or being resumed) was read at
      // another moment than the sample's — after the task's step had begun
      if (state === o.frameStates.executing || state === o.frameStates.suspendedYieldFromLocked) {
        throw new TaskFault('torn', at, "a waiting task's coroutine was running when it was read");
      }
      const frame = at + BigInt(gen.iframe);
      if (obj[gen.iframe + L.frame.owner] !== L.owners.generator) throw new TaskFault('corrupt', frame, 'coroutine frame not owned by its coroutine');
      frames.push(frame);
      if (state !== o.frameStates.suspendedYieldFrom) break;
      const sp = this.word(obj, gen.iframe + o.stackpointer) & ~TAG;
      const localsplus = frame + BigInt(L.frame.localsplus);
      if (sp === 0n || sp < localsplus + BigInt(o.awaitedSlot * this.P)) break;
      const awaited = this.pointer(sp - BigInt(o.awaitedSlot * this.P), 'awaited object') & ~TAG;
      if (awaited === 0n) break;
      const head = this.read(awaited, L.object.obType + this.P, 'awaited object');
      if (this.word(head, L.object.obType) !== type) break;
      at = awaited;
    }
    return frames;
  }

  /** A task and the tasks awaiting it, first awaiter after first awaiter, to the root: innermost first. */
  awaitChain(task: bigint): TaskNode[] {
    const chain: TaskNode[] = [];
    const seen = new Set<bigint>();
    for (let at = task; at !== 0n; ) {
      if (chain.length >= MAX_AWAITERS) throw new TaskFault('too-deep', at, `more than ${MAX_AWAITERS} tasks awaiting each other`);
      if (seen.has(at)) throw new TaskFault('cycle', at, 'task awaits itself through its awaiters');
      seen.add(at);
      const node = this.task(at);
      if (!node.isTask) break; // a plain future awaiting: its waiter is not known from here
      chain.push(node);
      at = node.awaiter;
    }
    return chain;
  }
}
