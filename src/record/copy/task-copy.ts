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
import { NAME_PROBE, TaskFault, TaskGraph, type AsyncMode, type ByteSource } from '../../walk/task-graph.js';
import { pyStringHeaderSize } from '../../symbols/strings.js';
import type { MemoryCopier } from './copier.js';
import type { PendingCodes } from './code-cache.js';
import type { CodeRecord } from '../../capture/types.js';
import type { ThreadSnapshot } from './thread-snapshot.js';
import { readMany, type MemorySource } from './source.js';

type Range = { address: bigint; length: number };

/** Reads read ahead for a thread at most (a thread's task view needs a few dozen). */
const MAX_PREFETCH = 512;

/** A source with nothing in it: a copy made earlier is all there is. */
const NOTHING: Pick<MemorySource, 'tryRead'> = { tryRead: () => null };

/** What the kernel copies with a thread at each tick at most (bpf/copier.bpf.c: MAX_EXTRAS, MAX_EXTRA_BYTES, EXTRA_ROOM; KernelCopier.setReads). */
export const TICK_READS = { count: 128, bytes: 4096, room: 1 << 16 };

/** What the kernel follows of a thread's tasks at each tick, itself (bpf/copier.bpf.c: MAX_LIST_TASKS, MAX_AWAITED, TASK_ROOM; tickTaskFollow). */
export const TICK_FOLLOW = { tasks: 128, awaited: 8, room: 1 << 17 };

/** A range named for a thread that no view of it read in this many is let go (copyAtTick). */
const UNUSED_VIEWS = 256;

/**
 * Reads of the target, each kept as a region of the sample. Regions are found by their start
 * (the last region starting at or below an address), so they must not overlap: those held
 * that do (a copy's own and the ranges the kernel copied with it) are made one (disjoint), and a
 * read that overlaps regions the sample holds becomes one region spanning them all, in which the
 * bytes the sample already held win (the thread's walk sees exactly the bytes it saw before). They are
 * kept sorted and found by binary search: a thread with hundreds of tasks makes thousands of
 * reads a sample (a linear search made a tick of 300 tasks take 80 ms).
 */
export class RecordingReads implements ByteSource {
  /** sorted by address, none overlapping */
  readonly regions: Region[];
  changed = false;
  /** the reads made from the target (or taken from `prefetched`), in order */
  readonly made: Range[] = [];
  /** reads that found nothing (unreadable, or — from copies made earlier — not copied) */
  missed = 0;
  /** where set: the address of each read found in the regions held (TaskCopier.copyAtTick: which of the tick's ranges a view used) */
  touched: bigint[] | null = null;
  constructor(
    private readonly source: Pick<MemorySource, 'tryRead'>,
    held: readonly Region[],
    /** bytes read ahead in one gathered read, by `address:length` */
    private readonly prefetched: Map<string, Uint8Array | null>,
  ) {
    this.regions = disjoint(held);
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
      this.touched?.push(address);
      const o = Number(address - first.address);
      return first.bytes.subarray(o, o + length);
    }
    const key = `${address}:${length}`;
    const read = this.prefetched.has(key) ? this.prefetched.get(key)! : this.source.tryRead(address, length);
    this.made.push({ address, length });
    if (!read) {
      this.missed++;
      return null;
    }
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

/**
 * The regions as disjoint ones, sorted by address: where some overlap they become one spanning
 * them, in which the bytes of the one listed first win (all are of the same moment here).
 */
export function disjoint(regions: readonly Region[]): Region[] {
  const sorted = regions.map((r, i) => ({ r, i })).sort((a, b) => (a.r.address < b.r.address ? -1 : a.r.address > b.r.address ? 1 : a.i - b.i));
  const out: Region[] = [];
  let group: { r: Region; i: number }[] = [];
  let end = 0n;
  const flush = (): void => {
    if (group.length === 1) out.push(group[0]!.r);
    else if (group.length > 1) {
      const lo = group[0]!.r.address;
      const bytes = new Uint8Array(Number(end - lo));
      // (the later-listed first, so that the earlier-listed overwrite them)
      for (const { r } of [...group].sort((a, b) => b.i - a.i)) bytes.set(r.bytes, Number(r.address - lo));
      out.push({ address: lo, bytes });
    }
    group = [];
  };
  for (const x of sorted) {
    const xEnd = x.r.address + BigInt(x.r.bytes.length);
    if (group.length > 0 && x.r.address < end) {
      group.push(x);
      if (xEnd > end) end = xEnd;
    } else {
      flush();
      group = [x];
      end = xEnd;
    }
  }
  flush();
  return out;
}

/**
 * Of `regions` (sorted, disjoint), those that hold an address in `touched` or overlap one of
 * `own` (the copy's own regions, before the tick's ranges were added to them).
 */
export function readOrOwn(regions: readonly Region[], own: readonly Region[], touched: readonly bigint[]): Region[] {
  const marks = [...touched].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const mine = [...own].sort((a, b) => (a.address < b.address ? -1 : a.address > b.address ? 1 : 0));
  const out: Region[] = [];
  let m = 0;
  let o = 0;
  for (const r of regions) {
    const end = r.address + BigInt(r.bytes.length);
    while (m < marks.length && marks[m]! < r.address) m++;
    while (o < mine.length && mine[o]!.address + BigInt(mine[o]!.bytes.length) <= r.address) o++;
    if ((m < marks.length && marks[m]! < end) || (o < mine.length && mine[o]!.address < end)) out.push(r);
  }
  return out;
}

/**
 * What the kernel follows of a thread's tasks at each tick (bpf/copier.bpf.c: struct config's
 * task fields, in order; KernelCopier.copyTasks), each read as the task view reads it: the
 * running task's object and its name's first bytes (a short str whole, or an int) — a task new
 * since the thread's last sample, which no range named for the thread holds; and in `all`
 * mode every task on the thread's list, its name and the coroutines it awaits, each awaiting
 * one's slot that holds the next — a task's object stays where it was while its name or the
 * coroutines it awaits are new (a round of tasks made where the last one's were freed).
 */
export function tickTaskFollow(offsets: AsyncioOffsets, layout: Layout, mode: AsyncMode): { words: number[]; fits: boolean } {
  const P = layout.pointerSize;
  const gen = layout.gen!;
  const o = layout.objects!;
  const nameSpan = pyStringHeaderSize(layout) + NAME_PROBE;
  const coroSpan = gen.iframe + layout.frame.size;
  const running = [offsets.tstate.runningTask, offsets.task.size, offsets.task.name, nameSpan];
  // (each object within what the kernel copies of a range, and the fields the program takes
  // from its copy inside it)
  const fits =
    Math.max(offsets.task.size, nameSpan, coroSpan) <= TICK_READS.bytes &&
    Math.max(offsets.task.name, offsets.task.coro) + P <= offsets.task.size &&
    Math.max(gen.frameState + 1, gen.iframe + o.stackpointer + P) <= coroSpan;
  if (mode !== 'all') return { words: [...running, ...NO_LIST_FOLLOW], fits };
  const words = [
    ...running,
    offsets.tstate.tasksHead,
    offsets.task.node,
    offsets.task.coro,
    layout.object.obType,
    coroSpan,
    gen.frameState,
    gen.iframe + o.stackpointer,
    gen.iframe + layout.frame.localsplus,
    o.awaitedSlot * P,
    o.frameStates.suspendedYieldFrom & 0xff,
  ];
  return { words, fits };
}

/** struct config's list fields when the list is not followed (tasks_head 0) */
const NO_LIST_FOLLOW = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0];

/** Add code records to a copy's, each address once. */
function addCodes(t: ThreadSnapshot, fresh: readonly CodeRecord[], replaced: boolean): void {
  t.codes.push(...fresh.filter((c) => !t.codes.some((d) => d.address === c.address)));
  t.codeReplaced ||= replaced;
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

  /**
   * Add to a thread's copy what its task view needs (and the code objects of suspended
   * coroutines), read now. `later`: what was read is kept aside, for settle() to put in the
   * copy once it is kept (a copy made inside the recorder's pass over the thread list, which
   * reads the copy's first region as its thread state, and which may still drop it:
   * CopierOptions.inWindow) — the code objects read, but not recorded until then.
   */
  copy(t: ThreadSnapshot, later = false): void {
    const ahead = this.lastReads.get(t.threadStateAddress) ?? [];
    const prefetched = new Map<string, Uint8Array | null>();
    if (ahead.length) readMany(this.source, ahead).forEach((b, i) => prefetched.set(`${ahead[i]!.address}:${ahead[i]!.length}`, b));
    const reads = new RecordingReads(this.source, t.regions, prefetched);
    const frames = this.walk(reads, t.threadStateAddress);
    if (this.lastReads.size > 4096 && !this.lastReads.has(t.threadStateAddress)) this.lastReads.clear(); // threads come and go
    this.lastReads.set(t.threadStateAddress, reads.made.slice(0, MAX_PREFETCH));
    const interp = this.interpOf(reads, t);
    const codes = frames.length === 0 || interp === 0n ? null : this.copier.checkCodes(this.codesOf(reads, frames), interp);
    if (later) {
      t.withTasks = { regions: reads.changed ? reads.regions : null, codes };
      return;
    }
    if (reads.changed) t.regions = reads.regions;
    if (codes) this.record(t, codes);
  }

  /** Put in a copy what copy(t, true) kept aside for it. */
  settle(t: ThreadSnapshot): void {
    const w = t.withTasks;
    if (!w) return;
    delete t.withTasks;
    if (w.regions) t.regions = w.regions;
    if (w.codes) this.record(t, w.codes);
  }

  private record(t: ThreadSnapshot, codes: PendingCodes): void {
    const { fresh, replaced } = this.copier.commitCodes(codes);
    addCodes(t, fresh, replaced);
  }

  /**
   * The task view of a copy made in the kernel at the interrupt (record --copy interrupt), from
   * what the kernel copied with it at the tick — the ranges named for its thread (`tickReads`,
   * KernelCopier.setReads) — and nothing read now: the tasks are of the tick, as its stack is.
   * Where the view needs a range the kernel did not copy (a task new since the thread's last
   * sample, an object moved), the copy gets none of it — its running task then points outside
   * the copy, and the report rejects the sample's task view (`dangling`) — and `whole` is
   * false. `needed`: the ranges the thread's view reads, for the kernel to copy at its next
   * ticks — read now, when the tick's did not hold them all. The code objects of the suspended
   * coroutines are read now and recorded; where one died since the tick (the interpreter's count
   * of code-object deaths moved), each must be one recorded before and unchanged, or the view
   * is dropped as well (kernel-samples.ts does the same for the stack's).
   */
  copyAtTick(t: ThreadSnapshot, tickReads: readonly Region[], interp: bigint, tickGeneration: bigint | null): { whole: boolean; tell: Range[] | null } {
    const { whole, needed, touched } = this.viewAtTick(t, tickReads, interp, tickGeneration);
    const at = t.threadStateAddress;
    const had = this.tickRanges.get(at) ?? [];
    const n = (this.viewsOf.get(at) ?? 0) + 1;
    this.viewsOf.set(at, n);
    // which of the ranges named the view read (a range is used by the views of the thread's
    // tasks while they live; a task gone leaves its ranges unused)
    const key = (r: Range): string => `${r.address}:${r.length}`;
    let used = this.usedAt.get(at);
    if (!used) this.usedAt.set(at, (used = new Map()));
    if (touched.length > 0 && had.length > 0) {
      const sorted = [...touched].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
      for (const r of had) {
        // (the first read at or after its start, inside it)
        let lo = 0;
        let hi = sorted.length;
        while (lo < hi) {
          const mid = (lo + hi) >>> 1;
          if (sorted[mid]! < r.address) lo = mid + 1;
          else hi = mid;
        }
        if (lo < sorted.length && sorted[lo]! < r.address + BigInt(r.length)) used.set(key(r), n);
      }
    }
    for (const r of needed) used.set(key(r), n);
    // The list is made again when the view needed a range it did not hold, or, every
    // UNUSED_VIEWS views, to let go of ranges no view read for that long: those needed now
    // first, then those held that views still read, as many as the kernel copies.
    const stale = n % UNUSED_VIEWS === 0 && had.some((r) => n - (used.get(key(r)) ?? 0) > UNUSED_VIEWS);
    if ((whole && !stale && had.length > 0) || (whole && had.length === 0 && needed.length === 0)) return { whole, tell: null };
    const seen = new Set<string>();
    const list: Range[] = [];
    let room = TICK_READS.room;
    for (const r of [...needed, ...had]) {
      const k = key(r);
      if (seen.has(k) || r.length <= 0 || r.length > TICK_READS.bytes || n - (used.get(k) ?? 0) > UNUSED_VIEWS) continue;
      seen.add(k);
      const cost = 16 + ((r.length + 7) & ~7);
      if (list.length >= TICK_READS.count || cost > room) break;
      room -= cost;
      list.push(r);
    }
    for (const k of [...used.keys()]) if (!seen.has(k)) used.delete(k);
    if (this.tickRanges.size > 4096 && !this.tickRanges.has(at)) {
      // threads come and go
      this.tickRanges.clear();
      this.usedAt.clear();
      this.viewsOf.clear();
      this.tooManyUntil.clear();
    }
    this.tickRanges.set(at, list);
    const same = list.length === had.length && list.every((r, i) => key(r) === key(had[i]!));
    return { whole, tell: same ? null : list };
  }

  /**
   * What the kernel should copy with a thread it has not copied yet (record --copy interrupt:
   * told before its first tick, so that its first samples have their tasks): its task view's
   * reads now. Null: the kernel was told already.
   */
  firstReads(threadStateAddress: bigint, tstateBytes: number): Range[] | null {
    if (this.tickRanges.has(threadStateAddress)) return null;
    const list = this.readsNow(threadStateAddress, tstateBytes).filter((r) => r.length > 0 && r.length <= TICK_READS.bytes);
    this.tickRanges.set(threadStateAddress, list);
    // (named before any view: as if read by the thread's view 0)
    this.usedAt.set(threadStateAddress, new Map(list.map((r) => [`${r.address}:${r.length}`, 0])));
    return list;
  }

  /**
   * What a thread's view that missed a range needs the kernel to copy: its reads now. A view
   * that reads more ranges than the kernel copies (a thread of hundreds of tasks, beyond what
   * the program follows itself) will miss again, and reading it live costs the recorder a read
   * per object: it is read again only every UNUSED_VIEWS views (nothing new told meanwhile).
   */
  private neededNow(t: ThreadSnapshot): Range[] {
    const at = t.threadStateAddress;
    const n = this.viewsOf.get(at) ?? 0;
    const until = this.tooManyUntil.get(at);
    if (until !== undefined && n < until) return [];
    const needed = this.readsNow(at, t.regions[0]?.bytes.length ?? 0);
    if (needed.length > TICK_READS.count) this.tooManyUntil.set(at, n + UNUSED_VIEWS);
    else this.tooManyUntil.delete(at);
    return needed;
  }

  /** threads whose views read more ranges than the kernel copies: not read live again before their view count reaches this (neededNow) */
  private readonly tooManyUntil = new Map<bigint, number>();

  /** The ranges the thread's task view reads now, from its thread state as it is now (past its first `tstateBytes`, which the kernel copies anyway). */
  private readsNow(threadStateAddress: bigint, tstateBytes: number): Range[] {
    const live = new RecordingReads(this.source, [], new Map());
    this.walk(live, threadStateAddress);
    const end = threadStateAddress + BigInt(tstateBytes);
    return live.made.filter((r) => !(r.address >= threadStateAddress && r.address + BigInt(r.length) <= end));
  }

  /** each thread's views made at the tick, and when (in those) each range named for it was last read */
  private readonly viewsOf = new Map<bigint, number>();
  private readonly usedAt = new Map<bigint, Map<string, number>>();

  /** What the kernel is told to copy with each thread (thread state address → ranges): copyAtTick */
  private readonly tickRanges = new Map<bigint, Range[]>();

  private viewAtTick(t: ThreadSnapshot, tickReads: readonly Region[], interp: bigint, tickGeneration: bigint | null): { whole: boolean; needed: Range[]; touched: bigint[] } {
    // (the tick's ranges held as the copy's own regions: a read inside any of them is of the tick)
    const reads = new RecordingReads(NOTHING, [...t.regions, ...tickReads], new Map());
    reads.touched = [];
    const frames = this.walk(reads, t.threadStateAddress);
    const touched = reads.touched;
    if (reads.missed > 0) return { whole: false, needed: this.neededNow(t), touched };
    const needed = reads.made;
    if (frames.length > 0) {
      const codes = this.codesOf(reads, frames);
      // (as the stack's: where a code object may have died since the tick, each must be one
      // recorded before and unchanged — MemoryCopier.recordCodesAtTicks)
      const { fresh, replaced, proven } = this.copier.recordCodesAtTicks(interp, [{ codes, generation: tickGeneration }]);
      // (recorded either way: the cache holds them now, and the writer must too)
      addCodes(t, fresh, replaced);
      if (!proven[0]) return { whole: false, needed, touched };
    }
    // (the tick's ranges the view read are the copy's regions now: the report's view reads the
    // same, and a range named for a task gone is not kept with every sample until it is let go)
    t.regions = readOrOwn(reads.regions, t.regions, touched);
    return { whole: true, needed, touched };
  }

  /** Follow the thread's task view through `reads`; the frames of the suspended coroutines it holds. */
  private walk(reads: RecordingReads, threadStateAddress: bigint): bigint[] {
    const graph = new TaskGraph(this.layout, this.offsets, reads);
    const frames: bigint[] = [];
    try {
      const running = graph.running(threadStateAddress);
      const tasks = this.mode === 'all' ? graph.tasks(threadStateAddress) : [];
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
    return frames;
  }

  /** The code objects of these frames (their `f_executable`, untagged), as the reads hold them. */
  private codesOf(reads: RecordingReads, frames: readonly bigint[]): Set<bigint> {
    const L = this.layout;
    const codes = new Set<bigint>();
    for (const f of frames) {
      const b = reads.bytes(f + BigInt(L.frame.executable), L.pointerSize);
      if (!b) continue;
      const v = new DataView(b.buffer, b.byteOffset, b.length);
      const code = (L.pointerSize === 8 ? v.getBigUint64(0, true) : BigInt(v.getUint32(0, true))) & ~BigInt(L.executableTagMask);
      if (code !== 0n) codes.add(code);
    }
    return codes;
  }

  /** The interpreter state's address, from the thread state the copy holds (0: none). */
  private interpOf(reads: RecordingReads, t: ThreadSnapshot): bigint {
    const L = this.layout;
    const b = reads.bytes(t.threadStateAddress + BigInt(L.tstate.interp), L.pointerSize);
    return b ? readPointer(b, 0, L.pointerSize) : 0n;
  }
}
