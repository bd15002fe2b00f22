// The recorder's part of async-aware stacks (CPython 3.14+): after a thread's copy, copy what
// the task view of that sample needs — the thread state's asyncio fields, the running task (or,
// in `all` mode, every task on the thread's list), each task's name, its suspended coroutines
// (their frames live inside the coroutine objects) and the tasks awaiting it, first awaiter after
// first awaiter — as extra regions of the thread's sample, so that the capture alone can be
// processed again. The reads follow the same TaskGraph the report walks (src/walk/task-graph.ts):
// every read it makes is a region, so the report finds exactly what was read. Bounded as the
// graph is (MAX_TASKS, MAX_AWAITERS, MAX_COROUTINES).
//
// Tasks move while they are copied, like stacks: a chain read across a change may not hold
// together; the report then rejects the sample (dangling, cycle, corrupt), and counts it.

import type { AsyncioOffsets } from '../../layout/asyncio-offsets.js';
import type { Layout } from '../../layout/layout.js';
import type { Region } from '../../walk/types.js';
import { readPointer } from '../../walk/region-memory.js';
import { TaskFault, TaskGraph, type AsyncMode, type ByteSource } from '../../walk/task-graph.js';
import type { MemoryCopier } from './copier.js';
import { readMany, type MemorySource } from './source.js';

type Range = { address: bigint; length: number };

/** Reads read ahead for a thread at most (a thread's task view needs a few dozen). */
const MAX_PREFETCH = 512;
import type { ThreadSnapshot } from './thread-snapshot.js';

/**
 * Reads of the target, each kept as a region of the sample. Regions are found by their start
 * (the last region starting at or below an address), so they must not overlap: a read that
 * overlaps regions the sample holds becomes one region spanning them all, in which the bytes the
 * sample already held win (the thread's walk sees exactly the bytes it saw before). They are
 * kept sorted and found by binary search: a thread with hundreds of tasks makes thousands of
 * reads a sample (a linear search made a tick of 300 tasks take 80 ms).
 */
export class RecordingReads implements ByteSource {
  /** sorted by address, none overlapping */
  readonly regions: Region[];
  changed = false;
  /** the reads made from the target (or taken from `prefetched`), in order */
  readonly made: Range[] = [];
  constructor(
    private readonly source: MemorySource,
    held: readonly Region[],
    /** bytes read ahead in one gathered read, by `address:length` */
    private readonly prefetched: Map<string, Uint8Array | null>,
  ) {
    this.regions = [...held].sort((a, b) => (a.address < b.address ? -1 : a.address > b.address ? 1 : 0));
  }

  /** The index of the first region that ends after `address` (regions.length: none). */
  private firstEndingAfter(address: bigint): number {
    let lo = 0;
    let hi = this.regions.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const r = this.regions[mid]!;
      if (r.address + BigInt(r.bytes.length) <= address) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  bytes(address: bigint, length: number): Uint8Array | null {
    if (address === 0n || length <= 0) return null;
    const end = address + BigInt(length);
    const at = this.firstEndingAfter(address);
    const first = this.regions[at];
    if (first && first.address <= address && end <= first.address + BigInt(first.bytes.length)) {
      const o = Number(address - first.address);
      return first.bytes.subarray(o, o + length);
    }
    const key = `${address}:${length}`;
    const read = this.prefetched.has(key) ? this.prefetched.get(key)! : this.source.tryRead(address, length);
    this.made.push({ address, length });
    if (!read) return null;
    // the regions it overlaps follow each other from `at`
    let stop = at;
    while (stop < this.regions.length && this.regions[stop]!.address < end) stop++;
    const overlapping = this.regions.slice(at, stop);
    let lo = address;
    let hi = end;
    for (const r of overlapping) {
      if (r.address < lo) lo = r.address;
      const rEnd = r.address + BigInt(r.bytes.length);
      if (rEnd > hi) hi = rEnd;
    }
    const merged = new Uint8Array(Number(hi - lo));
    merged.set(read, Number(address - lo));
    for (const r of overlapping) merged.set(r.bytes, Number(r.address - lo));
    this.regions.splice(at, stop - at, { address: lo, bytes: merged });
    this.changed = true;
    const o = Number(address - lo);
    return merged.subarray(o, o + length);
  }
}

/** Where the thread state's asyncio fields end: the copier copies each thread state through here. */
export function asyncioTstateEnd(offsets: AsyncioOffsets, pointerSize: 4 | 8): number {
  const t = offsets.tstate;
  return Math.max(t.runningLoop, t.runningTask, t.tasksHead) + 2 * pointerSize;
}

/**
 * The thread-state fields a copy must find unchanged at its second reading (CopierOptions.
 * tstateCheck): the running loop and task are read with the thread state, a moment before the
 * stack; a task's step that began in that moment at the same frame address (the next callback's
 * frame where the last one's was) leaves the stack check nothing to see, and would pair the new
 * task's stack with no running task.
 */
export function asyncioTstateCheck(offsets: AsyncioOffsets): number[] {
  return [offsets.tstate.runningLoop, offsets.tstate.runningTask];
}

export class TaskCopier {
  /**
   * The reads each thread's last copy made (thread state address → ranges). A task view is
   * mostly the same objects from one sample to the next: the next copy makes those reads first,
   * together in one system call where the source can (process_vm_readv), and then reads only
   * what they did not cover. Bytes read ahead but not asked for are not kept.
   */
  private readonly lastReads = new Map<bigint, Range[]>();

  constructor(
    private readonly source: MemorySource,
    private readonly layout: Layout,
    private readonly offsets: AsyncioOffsets,
    readonly mode: AsyncMode,
    private readonly copier: MemoryCopier,
  ) {}

  /** Add to a thread's copy what its task view needs (and the code objects of suspended coroutines). */
  copy(t: ThreadSnapshot): void {
    const ahead = this.lastReads.get(t.threadStateAddress) ?? [];
    const prefetched = new Map<string, Uint8Array | null>();
    if (ahead.length) readMany(this.source, ahead).forEach((b, i) => prefetched.set(`${ahead[i]!.address}:${ahead[i]!.length}`, b));
    const reads = new RecordingReads(this.source, t.regions, prefetched);
    const graph = new TaskGraph(this.layout, this.offsets, reads);
    const frames: bigint[] = [];
    try {
      const running = graph.running(t.threadStateAddress);
      const tasks = this.mode === 'all' ? graph.tasks(t.threadStateAddress) : [];
      if (running !== 0n && !tasks.includes(running)) tasks.unshift(running);
      for (const task of tasks) {
        try {
          const chain = graph.awaitChain(task);
          chain.forEach((node, i) => {
            if (node.coro === 0n) return;
            // the running task's coroutine runs in the thread: its frames are the thread's own.
            // In `all` mode it is copied too, for the moment the loop's own code runs for the
            // task (its coroutine suspended, not on the stack): the view then shows the chain it
            // is suspended in. Caught running (the read stops at it), it is on the stack.
            const own = i === 0 && task === running;
            if (own && this.mode !== 'all') return;
            try {
              frames.push(...graph.coroFrames(node.coro));
            } catch (e) {
              if (!own || !(e instanceof TaskFault)) throw e;
            }
          });
        } catch (e) {
          // one task that cannot be read (a waiting one caught running: torn) leaves the
          // others to read: each waiting task's stack is judged on its own (task-stacks.ts)
          if (!(e instanceof TaskFault) || task === running) throw e;
        }
      }
    } catch (e) {
      // what could not be read is the report's to reject; the regions read so far stay
      if (!(e instanceof TaskFault)) throw e;
    }
    if (reads.changed) t.regions = reads.regions;
    if (this.lastReads.size > 4096 && !this.lastReads.has(t.threadStateAddress)) this.lastReads.clear(); // threads come and go
    this.lastReads.set(t.threadStateAddress, reads.made.slice(0, MAX_PREFETCH));
    if (frames.length === 0) return;
    const L = this.layout;
    const codes = new Set<bigint>();
    for (const f of frames) {
      const b = reads.bytes(f + BigInt(L.frame.executable), L.pointerSize);
      if (!b) continue;
      const v = new DataView(b.buffer, b.byteOffset, b.length);
      const code = (L.pointerSize === 8 ? v.getBigUint64(0, true) : BigInt(v.getUint32(0, true))) & ~BigInt(L.executableTagMask);
      if (code !== 0n) codes.add(code);
    }
    const interp = reads.bytes(t.threadStateAddress + BigInt(L.tstate.interp), L.pointerSize);
    if (!interp) return;
    const { fresh, replaced } = this.copier.recordCodes(codes, readPointer(interp, 0, L.pointerSize));
    t.codes.push(...fresh.filter((c) => !t.codes.some((d) => d.address === c.address)));
    t.codeReplaced ||= replaced;
  }
}
