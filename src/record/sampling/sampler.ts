// The sampler: copies every thread of a running interpreter at a rate, on an absolute
// schedule (schedule.ts: dithered, late ticks made up for up to CATCH_UP_MS, further ones
// counted as missed), into a capture sink, so the recording says how much of the requested
// rate it really got.
//
// The schedule runs on the target's own clock: time the recorder kept the target stopped does
// not count toward it. Each sample then stands for the same stretch of the program's own
// running time, wherever the program was. On the wall clock a stop would stretch whatever the
// program was doing when stopped — and the default mode stops only copies nothing proved, i.e.
// call-heavy Python code — so that code would collect extra samples (measured in
// docs/validation.md: 4 points on a real program).

import type { Region, SampleRecord, SamplingMode } from '../../capture/types.js';
import type { NativeCopy, NativeHold } from '../linux/native-recorder.js';
import type { OffCpuWatch } from '../linux/off-cpu.js';
import type { NativeRegisters } from '../../native/unwind.js';
import { withStackRegion } from '../../native/stack-region.js';
import { FACT_FLAG, FACT_UNKNOWN_FLAG, SAMPLE_FLAG } from '../../capture/types.js';
import type { Consistency } from '../copy/consistency.js';
import type { MemoryCopier } from '../copy/copier.js';
import type { Stopper } from '../linux/stopper.js';
import type { ThreadSnapshot } from '../copy/thread-snapshot.js';
import { copierFor, copyThreads, type CopyOptions, type CopyMode } from '../copy/modes.js';
import { emitCodes, sampleRecord, type SampleSink } from './sink.js';
import { loadNative } from '../linux/native.js';
import { Sleeper } from './sleeper.js';
import { TickSchedule } from './schedule.js';
import { ReadError, type MemorySource } from '../copy/source.js';
import { ThreadNamer } from '../copy/thread-names.js';
import { asyncioTstateCheck, asyncioTstateEnd, TaskCopier } from '../copy/task-copy.js';
import type { AsyncioOffsets } from '../../layout/asyncio-offsets.js';
import type { AsyncMode } from '../../walk/task-graph.js';
import type { KernelRecord, RunState } from '../linux/kernel-copier.js';
import { KernelSamples } from '../copy/kernel-samples.js';

export type { SampleSink } from './sink.js';
export type { CopyMode } from '../copy/modes.js';


export interface SamplerOptions {
  rateHz: number;
  /** how copies are kept consistent (default optimistic) */
  copy?: CopyMode;
  /** which threads' samples are written (default wall: all); the others are copied and left out */
  sampling?: SamplingMode;
  /** false: code records without bytecode (CopierOptions.bytecode; the header must say so) */
  bytecode?: boolean;
  /** tells whether a thread is on a CPU (Linux: /proc), for the ON_CPU flag of its sample */
  cpuStates?: { onCpu(nativeThreadId: bigint): boolean | null };
  /** how a copy is checked (default: the anchor where the target has one and can be written) */
  consistency?: Consistency;
  /** stops and resumes the target (required for `adaptive` and `blocking`) */
  stopper?: Stopper;
  /** stop after this long (default: until stopped or the target exits) */
  durationMs?: number;
  /** end a block at least this often, so a killed recorder loses little (default 1000 ms) */
  flushEveryMs?: number;
  /** polled every tick */
  shouldStop?: () => boolean;
  /** asked when a read fails: is the target still there? */
  isAlive?: () => boolean;
  /** called every `progressEveryMs` with the stats so far */
  onProgress?: (stats: SamplerStats, recent: SampleRecord[]) => void;
  progressEveryMs?: number;
  /** called with each tick's samples (after they went to the sink) */
  onTick?: (samples: SampleRecord[], threads: ThreadSnapshot[], copy: CopyMode) => void;
  /**
   * Every other tick copies as this mode instead (it must be able to stop the target if the
   * main mode can): two modes sampled from one run of a program, tick by tick, compare without
   * the run-to-run differences of the program or of the machine's load. onTick says which.
   * With copies at the interrupt (`kernel`), such a tick copies every thread itself, and the
   * kernel's records of the stretch after it are left out (stats.kernel.alternated; see tick).
   */
  alternate?: CopyMode;
  /** false: read no thread names (default: read them where the sink takes them, see ThreadNamer) */
  threadNames?: boolean;
  /** also copy each thread's asyncio tasks for async-aware stacks (CPython 3.14+; see task-copy.ts) */
  asyncio?: { offsets: AsyncioOffsets; mode: AsyncMode };
  /**
   * also copy each thread's registers and native stack (record --native): every tick then holds
   * stopped every thread that the kernel does not show blocked where its stack unwinds without a
   * stop (holdNeeded), as the copy of their native stacks needs (see native-recorder.ts)
   */
  native?: {
    copyHeld(): Map<bigint, NativeCopy>;
    holdNeeded?(watch: OffCpuWatch | null): NativeHold | null;
    /** record the objects mapped since (with copies at the interrupt, which call nothing else) */
    refreshObjects?(): void;
    /** the native copy of a thread off its CPU, from `registers` (with copies at the interrupt) */
    copyStack?(tid: number, registers: NativeRegisters): NativeCopy | null;
  };
  /**
   * copy `interrupt`: the copies made in the kernel at the timer's interrupt (KernelCopier). A
   * thread on a CPU (cpuStates, required) is left to them; each tick takes the records made
   * before the next tick's time as samples, at the times they were made (those of stretches
   * whose ticks were missed are dropped), and copies the threads off their CPUs as usual.
   * Records the kernel lost (its ring buffer full) are missed ticks.
   */
  kernel?: {
    poll(): KernelRecord[];
    lost(): bigint;
    setThreadStates(map: ReadonlyMap<number, bigint>): void;
    /** the ranges to copy with a thread at its ticks (--async-aware: its task view's); false: refused */
    setReads(tid: number, ranges: readonly { address: bigint; length: number }[]): boolean;
    runState(tid: number): RunState | null;
    mayRun(tid: number): boolean | null;
    /** the registers thread `tid` resumes with, off its CPU since `mark` (with native stacks; null: not known) */
    registersOff?(tid: number, mark: bigint): NativeRegisters | null;
    watch: { mark(tid: number): bigint | null; stillOff(tid: number, mark: bigint): boolean } | null;
  };
}

export type SamplerEnd = 'duration' | 'stopped' | 'target-exited';

export interface SamplerStats {
  /** ticks the schedule asked for so far: ticks + missed */
  scheduled: number;
  /** ticks made (all threads copied at each) */
  ticks: number;
  /**
   * scheduled ticks that gave no samples: the sampler was too late for them (more than
   * CATCH_UP_MS behind the schedule), or their copy failed (failedTicks). The one meaning of
   * "missed" in records, reports and exports.
   */
  missed: number;
  /** thread samples written */
  samples: number;
  /** thread samples copied but not written: the sampling mode leaves their thread out (not on a CPU, …) */
  leftOut: number;
  /** of which nothing proved the copy (torn) */
  torn: number;
  /** ticks whose copy failed before any thread (e.g. the interpreter list was unreadable) */
  failedTicks: number;
  codeObjects: number;
  /** copy time per thread sample (the copy that was kept), µs */
  copyMicros: { total: number; max: number };
  /** thread samples that needed more than one copy */
  retried: number;
  /** thread samples copied with the target stopped */
  stopped: number;
  /** thread samples proven by the thread being off its CPU throughout the copy, without a stop (off-cpu.ts) */
  offCpu: number;
  elapsedMs: number;
  ended: SamplerEnd | null;
  /** why the profiler anchor could not be written (copies were then checked by re-reading) */
  anchorWriteFailure: string | null;
  /** thread names: reads of `threading`'s names made, the time they took (µs), records written */
  names: { reads: number; micros: number; records: number };
  /**
   * copy `interrupt`: samples copied in the kernel, of `samples`; records it lost (in `missed`);
   * records of a thread gone (dropped, in `missed`); records in a stretch of missed ticks (left
   * out with it); records of the stretches after the `alternate` mode's ticks (left out: see
   * tick)
   */
  kernel: {
    samples: number;
    lost: number;
    stale: number;
    skipped: number;
    alternated: number;
    /**
     * --async-aware: the kernel's samples whose task view was made (of those proven), those of
     * them that needed memory the kernel had not copied at their tick — their task view left
     * out, rejected by the report (`dangling`) — and the kernel's refusals of a thread's ranges
     * (its table full)
     */
    taskViews: number;
    taskViewsShort: number;
    taskReadsRefused: number;
  };
}

/** How long stretches of skipped ticks are kept for the kernel's records in them (µs): records are taken at every tick. */
const SKIPPED_KEPT_US = 2_000_000;

/** Copies at the interrupt: how often the thread lists are read while every thread runs (ms; see allRunning). */
const FULL_PASS_MS = 5;

/** How often the kernel's count of lost records is read (ms): a system call, not needed at every tick. */
const LOST_EVERY_MS = 10;

/** How far behind its schedule the sampler may take a tick; slots further behind are missed. */
export const CATCH_UP_MS = 10;

/** Most time between two turns of the event loop while sampling. */
const YIELD_MS = 2;

/**
 * The first copies of a target are slow: they read its code objects, and run the recorder's
 * code for the first time (measured: 12 ms, then 3 ms, then 0.2-1.3 ms for the next few,
 * against ~20 µs once warm) — at 10 kHz, a hundred and more ticks missed at the start of
 * every recording. So the recorder copies the target before its schedule starts, for up to
 * WARM_UP_MS or WARM_UP_PASSES passes. Those copies are not samples (no tick asked for them);
 * the code objects they read are recorded, as every later sample may need them.
 */
const WARM_UP_MS = 30;
const WARM_UP_PASSES = 200;

/**
 * Copy the target before the schedule starts (see WARM_UP_MS); code records written: returned.
 * `look`: stopping nothing (a target added to a running group: a stop that waits for a CPU on
 * a busy machine would hold up the other targets' ticks, for copies that are no samples).
 * The thread names are read once then too (the first read runs cold code: measured 20 ms), at
 * time 0, so that the schedule's first ticks do not wait for it.
 */
function warmUp(copier: MemoryCopier, copyOptions: CopyOptions, sink: SampleSink, namer: ThreadNamer | null, budgetMs: number, look = false): { codes: number; names: number } {
  const until = performance.now() + budgetMs;
  let codes = 0;
  let last: ThreadSnapshot[] = [];
  for (let i = 0; i < WARM_UP_PASSES && performance.now() < until; i++) {
    let threads: ThreadSnapshot[];
    try {
      threads = look ? copier.copyAll({ look: true }) : copyThreads(copier, copyOptions);
    } catch (e) {
      if (e instanceof ReadError) break; // the schedule's first tick meets it again, and says why
      throw e;
    }
    last = threads;
    for (const t of threads) {
      if (t.codes.length > 0 || t.codeReplaced) emitCodes(sink, t);
      codes += t.codes.length;
    }
  }
  let names = 0;
  if (namer) {
    for (const r of namer.tick(last, 0)) {
      sink.addThreadName!(r);
      names++;
    }
  }
  return { codes, names };
}

/** Let the event loop run (signals, I/O) between ticks. */
const yieldNow = (): Promise<void> => new Promise((r) => setImmediate(r));

/** Shorter sleeps wake closer to the tick (where the native calls are available). */
function lowerTimerSlack(): void {
  const native = loadNative();
  if (typeof native !== 'string') native.setTimerSlack(1);
}

/**
 * The native copy of a thread off its CPU since `mark` (record --native --copy interrupt): the
 * registers the kernel saw it leave its CPU with (what it resumes with), its stack read from
 * them — and the registers looked at again after, the same (not a look at the kernel's entry
 * while a context switch wrote it). The copier proves the thread stayed off throughout.
 */
function quietNative(kernel: NonNullable<SamplerOptions['kernel']>, native: NonNullable<SamplerOptions['native']>): (tid: number, mark: bigint) => NativeCopy | null {
  return (tid, mark) => {
    const regs = kernel.registersOff!(tid, mark);
    const copy = regs && native.copyStack!(tid, regs);
    if (!copy) return null;
    const again = kernel.registersOff!(tid, mark);
    return again && again.rip === regs.rip && again.rsp === regs.rsp && again.rbp === regs.rbp ? copy : null;
  };
}

/**
 * One target's sampling: its schedule, copier and statistics. A loop drives it — runSampler
 * (one target), or SamplerGroup (several, one loop: the ticks of every target in time order)
 * — by asking `due`, and taking the tick with `tick` once it is.
 */
export class TargetSampler {
  readonly stats: SamplerStats = {
    scheduled: 0,
    ticks: 0,
    missed: 0,
    samples: 0,
    leftOut: 0,
    torn: 0,
    failedTicks: 0,
    codeObjects: 0,
    copyMicros: { total: 0, max: 0 },
    retried: 0,
    stopped: 0,
    offCpu: 0,
    elapsedMs: 0,
    ended: null,
    anchorWriteFailure: null,
    names: { reads: 0, micros: 0, records: 0 },
    kernel: { samples: 0, lost: 0, stale: 0, skipped: 0, alternated: 0, taskViews: 0, taskViewsShort: 0, taskReadsRefused: 0 },
  };
  private readonly copyOptions: CopyOptions;
  private readonly copier: MemoryCopier;
  private readonly keepFlag: number;
  private readonly unknownFlag: number;
  private readonly cpuStates: SamplerOptions['cpuStates'] | null;
  private schedule: TickSchedule | null = null;
  private start = 0;
  private stoppedMicros = 0;
  private turn = 0;
  private lastFlush = 0;
  private lastProgress = 0;
  private recent: SampleRecord[] = [];
  private readonly tasks: TaskCopier | null;
  private readonly namer: ThreadNamer | null;
  /** copy `interrupt`: the kernel's records made samples, and the clock they are timed on (CLOCK_MONOTONIC at start, ns) */
  private readonly kernelSamples: KernelSamples | null = null;
  private hrStart = 0n;
  /** stretches of skipped ticks [from, to) (µs since the start), for the kernel's records in them */
  private readonly skipped: [number, number][] = [];
  /** the kernel's records of times the schedule has not reached yet (see tick) */
  private heldRecords: KernelRecord[] = [];
  /** with an `alternate` mode: the time of its last tick (µs since the start; see tick) */
  private lastAlternateTick = 0;
  /**
   * copy `interrupt`: the tick being taken, on the kernel's clock (ns) — or when the recorder
   * took a CPU to take it, if earlier (it spins before a tick, and works between ticks)
   */
  private tickNs = 0n;
  /** when the loop driving this sampler last got a CPU back before this tick (performance.now(), ms; set by SamplerGroup) */
  awakeSince: number | null = null;
  private kernelLost = 0n;
  /** when the kernel's count of lost records was last read (performance.now(), ms) */
  private lostReadAt = 0;

  constructor(
    readonly source: MemorySource,
    private readonly sink: SampleSink,
    private readonly options: SamplerOptions,
  ) {
    if (!(options.rateHz > 0)) throw new RangeError(`rate ${options.rateHz} Hz`);
    this.copyOptions = {
      copy: options.copy ?? 'optimistic',
      ...(options.stopper ? { stopper: options.stopper } : {}),
      ...(options.consistency ? { consistency: options.consistency } : {}),
    };
    // (the code objects a pass used are the snapshot's business, not the sampler's)
    this.copier = copierFor(source, this.copyOptions, {
      collectUsed: false,
      // the running task in the same read as the stack (see task-copy.ts)
      ...(options.asyncio ? { tstateMin: asyncioTstateEnd(options.asyncio.offsets, source.layout.pointerSize), tstateCheck: asyncioTstateCheck(options.asyncio.offsets) } : {}),
      ...(options.bytecode === false ? { bytecode: false } : {}),
      // (a thread on a CPU is the kernel's to copy: as its context switches tell, or before one
      // was seen, as /proc does; the others' copies are proven by those switches)
      ...(options.kernel
        ? {
            leaveOut: (tid: bigint) => {
              const may = options.kernel!.mayRun(Number(tid));
              if (may) return true;
              const run = may === null ? null : options.kernel!.runState(Number(tid));
              // One preempted since the recorder took a CPU for this tick was running then: the
              // recorder may be what took its CPU, and the tick would see it off its CPU far
              // more often than it is (measured: 13 % too many samples of a thread running C at
              // 200 Hz, preempted by the recorder's spin). Its samples are the kernel's.
              return run ? run.preempted && run.offNs >= this.tickNs : this.cpuStates?.onCpu(tid) === true;
            },
            ...(options.kernel.watch ? { quiet: options.kernel.watch } : {}),
            ...(options.native?.copyStack && options.kernel.registersOff ? { quietNative: quietNative(options.kernel, options.native) } : {}),
            // (the tasks of a thread off its CPU: only it changes them, so they are copied while it stays off)
            ...(options.asyncio ? { inWindow: (snap: ThreadSnapshot) => this.tasks?.copy(snap, true) } : {}),
          }
        : {}),
    });
    if (options.kernel) {
      if (!options.cpuStates) throw new Error('copies at the interrupt need the threads\' CPU states');
      this.kernelSamples = new KernelSamples(source, this.copier);
    }
    this.tasks = options.asyncio ? new TaskCopier(source, source.layout, options.asyncio.offsets, options.asyncio.mode, this.copier) : null;
    this.namer = options.threadNames !== false && sink.addThreadName ? new ThreadNamer(source) : null;
    const mode = options.sampling ?? 'wall';
    this.keepFlag = mode === 'wall' ? 0 : FACT_FLAG[mode];
    this.unknownFlag = mode === 'wall' ? 0 : FACT_UNKNOWN_FLAG[mode];
    this.cpuStates = options.cpuStates ?? null;
  }

  /** Running threads are copied in the kernel (copy `interrupt`). */
  get kernelCopies(): boolean {
    return this.kernelSamples !== null;
  }

  /** Copy the target for up to `warmUpMs` (see WARM_UP_MS; `look`: stopping nothing), then start the schedule now. */
  begin(warmUpMs = WARM_UP_MS, look = false): void {
    const warm = warmUp(this.copier, this.copyOptions, this.sink, this.namer, warmUpMs, look);
    this.stats.codeObjects += warm.codes;
    this.stats.names.records += warm.names;
    this.start = performance.now();
    // (performance.now() and hrtime count on the same clock as the kernel's, CLOCK_MONOTONIC)
    this.hrStart = process.hrtime.bigint();
    this.schedule = new TickSchedule(1000 / this.options.rateHz, this.start, CATCH_UP_MS);
    this.stoppedMicros = this.options.stopper?.stoppedMicros ?? 0;
    this.lastFlush = this.start;
    this.lastProgress = this.start;
  }

  /** When the next tick is due (performance.now() ms). */
  get due(): number {
    return this.schedule!.due;
  }

  /** Why the recording ends before its next tick (stopped, or its duration reached), else null. */
  checkEnd(): SamplerEnd | null {
    if (this.stats.ended) return this.stats.ended;
    if (this.options.shouldStop?.()) this.stats.ended = 'stopped';
    else if (this.options.durationMs !== undefined && this.schedule!.elapsed >= this.options.durationMs) this.stats.ended = 'duration';
    return this.stats.ended;
  }

  /**
   * Take the tick that is due (`now` at or after `due`). True when the loop should let the event
   * loop run at once (the tick failed or found no thread). A target found gone ends the
   * recording (`stats.ended` is then 'target-exited').
   */
  tick(now: number): boolean {
    const { options, stats, sink } = this;
    const schedule = this.schedule!;
    const { missed: late, time: tickTime, skippedFrom } = schedule.take(now);
    // (copies at the interrupt: the kernel's records of a skipped stretch are left out with it)
    if (late > 0 && this.kernelSamples) this.skipped.push([skippedFrom, tickTime]);
    if (late > 0) {
      stats.missed += late;
      stats.scheduled += late;
      sink.addMissed(late);
    }
    stats.scheduled++;
    // (from when the recorder took a CPU for this tick, if that was earlier: see leaveOut)
    const fromMs = Math.min(this.awakeSince ?? now, this.start + tickTime / 1000);
    this.tickNs = this.hrStart + BigInt(Math.round((fromMs - this.start) * 1e6));

    const tickMode = options.alternate && this.turn++ % 2 === 1 ? { ...this.copyOptions, copy: options.alternate } : this.copyOptions;
    const { cpuStates, tasks, namer } = this;
    let threads: ThreadSnapshot[];
    // With tasks: the target stopped for the whole copy — threads and tasks — where it can be.
    // The tasks are other objects than the thread's frames, read after them: a task that
    // resumed, or one that finished, in between would give a waiting task's stack that never
    // was (a coroutine running, an awaited one gone: see task-graph.ts, which rejects those it
    // can tell as torn). With copies that stop nothing (optimistic) they are read live.
    // With native stacks: every thread that runs stopped, for its registers and its stack of
    // one moment with its Python frames (a blocked one, where the kernel's word is enough, not:
    // below).
    // (copies at the interrupt stop nothing: the native copies come with the kernel's records,
    // and with the copies of threads off their CPUs — CopierOptions.quietNative)
    const hold = (tasks !== null || options.native !== undefined) && options.stopper !== undefined && tickMode.copy !== 'optimistic' && this.kernelSamples === null;
    if (this.kernelSamples && options.native) options.native.refreshObjects?.();
    // (held: every thread to stop was seen stopped; a stop that timed out is resumed all the same)
    let held = false;
    let natives: Map<bigint, NativeCopy> | null = null;
    // (native stacks without tasks: the blocked threads whose stacks the kernel's word is enough
    // for are copied without a stop, proven by staying off their CPUs until their Python frames
    // are copied too — NativeRecorder.holdNeeded)
    try {
      const some = hold && tasks === null ? (options.native?.holdNeeded?.(options.stopper!.offCpu) ?? null) : null;
      if (some) {
        held = some.held;
        natives = some.copies;
      } else if (hold) {
        held = options.stopper!.stopAll();
        if (options.native) natives = options.native.copyHeld();
      }
      // (an `alternate` tick copies every thread its own way: none is left to the kernel)
      const running = hold || tickMode !== this.copyOptions ? null : this.allRunning(now);
      if (running) threads = running;
      else {
        threads = held ? this.copier.copyAll({ stopped: true, ...(some ? { some } : {}) }) : copyThreads(this.copier, tickMode);
        if (this.kernelSamples) {
          this.lastPass = threads;
          this.lastPassAt = now;
        }
      }
      // (a copy nothing proved is not walked: its tasks would not be looked at; one proven by the
      // kernel's word that its thread stayed off its CPU has its tasks already, copied within
      // that proof's window — CopierOptions.inWindow)
      if (tasks) {
        for (const t of threads) {
          if (t.withTasks) tasks.settle(t);
          else if (!t.unproven && !(this.kernelSamples && t.offCpuProof)) tasks.copy(t);
        }
      }
    } catch (e) {
      if (!(e instanceof ReadError)) throw e;
      if (options.isAlive && !options.isAlive()) {
        stats.scheduled--; // not a tick of this target's life
        stats.ended = 'target-exited';
        return false;
      }
      stats.failedTicks++;
      stats.missed++;
      sink.addMissed(1);
      return true;
    } finally {
      if (hold) options.stopper!.resume();
      // the target's clock stood still while it was stopped: so does the schedule
      const stoppedNow = options.stopper?.stoppedMicros ?? 0;
      schedule.stood((stoppedNow - this.stoppedMicros) / 1000);
      this.stoppedMicros = stoppedNow;
    }
    if (threads.length === 0) {
      // no thread to sample (an interpreter starting or ending): a tick with no samples
      stats.missed++;
      sink.addMissed(1);
      return true;
    }
    stats.ticks++;
    const samples: SampleRecord[] = [];
    const all = threads;
    const kernel = this.kernelSamples;
    if (kernel) {
      // the threads on a CPU: their samples are the kernel's records since the last tick
      options.kernel!.setThreadStates(kernel.know(threads));
      // (--async-aware: a thread new to the kernel is told what its tasks' view reads, before its first tick)
      if (tasks) {
        for (const t of threads) {
          if (t.nativeThreadId <= 0n || t.nativeThreadId > 0xffffffffn) continue;
          const first = tasks.firstReads(t.threadStateAddress, t.regions[0]?.bytes.length ?? 0);
          if (first && !options.kernel!.setReads(Number(t.nativeThreadId), first)) stats.kernel.taskReadsRefused++;
        }
      }
      const stale = kernel.stale;
      // A tick stands for the stretch of time up to the next one, and no further: the kernel's
      // records made after the next tick's time wait for it (a recorder behind its schedule
      // polls records of the time it has not reached yet), and those of a stretch whose ticks
      // were missed are dropped — that stretch gave no sample of the threads off their CPUs, so
      // it gives none of the running ones either, or they would weigh more than the others
      // whenever the recorder falls behind (measured at 10 kHz here: 25 times the main
      // thread's count). Its ticks are counted missed. Dropped before they are made samples:
      // a recorder behind sheds their cost too.
      const until = schedule.elapsed * 1000;
      const polled = options.kernel!.poll();
      const records = this.heldRecords.length > 0 ? this.heldRecords.concat(polled) : polled;
      const batch: KernelRecord[] = [];
      const held: KernelRecord[] = [];
      // With an `alternate` mode (its ticks copy every thread themselves, stopping the target),
      // the kernel's records of a stretch that ends at an alternate tick are this mode's
      // samples, taken at the tick after it; those of a stretch that begins at one are left
      // out: the alternate tick's stop lands in it, and the program resumes where that stop
      // caught it (a stop lands late, at a system call's return: validation.md), which would
      // bias the records just after it. Each mode then has every other stretch.
      const alternateTick = options.alternate !== undefined && tickMode !== this.copyOptions;
      const cut = this.lastAlternateTick;
      for (const k of records) {
        const time = this.kernelTime(k.timeNs);
        if (time >= until || alternateTick || (options.alternate !== undefined && time > tickTime)) held.push(k);
        else if (time < tickTime && this.inSkipped(time)) stats.kernel.skipped++;
        else if (options.alternate !== undefined && time > cut) stats.kernel.alternated++;
        else batch.push(k);
      }
      this.heldRecords = held;
      if (alternateTick) this.lastAlternateTick = tickTime;
      for (const k of kernel.take(batch)) {
        // its tasks as the kernel copied them with it at the tick (task-copy.ts: copyAtTick)
        if (tasks && !k.snap.unproven) {
          const { whole, tell } = tasks.copyAtTick(k.snap, k.reads, k.interp, k.tickGeneration);
          stats.kernel.taskViews++;
          if (!whole) stats.kernel.taskViewsShort++;
          if (tell && !options.kernel!.setReads(k.tid, tell)) stats.kernel.taskReadsRefused++;
        }
        this.addSample(k.snap, this.kernelTime(k.timeNs), samples, null);
        stats.kernel.samples++;
      }
      // (records come within a poll or two of their time: older stretches are done with)
      while (this.skipped.length > 0 && this.skipped[0]![1] < tickTime - SKIPPED_KEPT_US) this.skipped.shift();
      stats.kernel.stale = kernel.stale;
      if (kernel.stale > stale) {
        // (a record of a thread gone is a tick of it that gave no sample)
        stats.missed += kernel.stale - stale;
        stats.scheduled += kernel.stale - stale;
        sink.addMissed(kernel.stale - stale);
      }
      // (a system call: read every LOST_EVERY_MS, and once more at the end)
      if (now - this.lostReadAt >= LOST_EVERY_MS) this.countLost(now);
      threads = threads.filter((t) => !t.leftToKernel);
    }
    for (const t of threads) this.addSample(t, tickTime, samples, cpuStates, natives);
    if (namer) {
      // (after the copies: reading names never delays this tick's copies)
      for (const r of namer.tick(all, tickTime)) {
        sink.addThreadName!(r);
        stats.names.records++;
      }
      stats.names.reads = namer.reads;
      stats.names.micros = namer.micros;
    }
    options.onTick?.(samples, threads, tickMode.copy);
    if (options.onProgress) this.recent.push(...samples);

    now = performance.now();
    stats.elapsedMs = now - this.start;
    if (now - this.lastFlush >= (options.flushEveryMs ?? 1000)) {
      sink.flush();
      this.lastFlush = now;
    }
    if (options.onProgress && now - this.lastProgress >= (options.progressEveryMs ?? 250)) {
      options.onProgress(stats, this.recent);
      this.recent = [];
      this.lastProgress = now;
    }
    return false;
  }

  /**
   * Copies at the interrupt: the last pass's threads, when every one of them was left to the
   * kernel and still runs (the kernel takes their samples at this tick too) and that pass is
   * less than FULL_PASS_MS old — this tick then reads nothing of the target. Null: make a pass.
   * A pass reads the thread lists and each thread state (a process_vm_readv that pins every
   * page it reads: a seventh of the recorder's time at 10 kHz); the lists are read again every
   * FULL_PASS_MS, so a thread started meanwhile is sampled from at most that long after.
   */
  private allRunning(now: number): ThreadSnapshot[] | null {
    const last = this.lastPass;
    const kernel = this.options.kernel;
    if (!kernel || !last || last.length === 0 || now - this.lastPassAt >= FULL_PASS_MS) return null;
    for (const t of last) if (!t.leftToKernel || kernel.mayRun(Number(t.nativeThreadId)) !== true) return null;
    return last;
  }

  /** copy `interrupt`: the threads of the last pass over the thread lists, and when it was made (performance.now(), ms) */
  private lastPass: ThreadSnapshot[] | null = null;
  private lastPassAt = 0;

  /** A kernel record's time (CLOCK_MONOTONIC, ns) as a sample's: µs since the start, never before it. */
  private kernelTime(timeNs: bigint): number {
    return Math.max(0, Math.floor(Number(timeNs - this.hrStart) / 1000));
  }

  /**
   * Is `time` (µs) in a stretch of skipped ticks? The stretches are in time order and do not
   * overlap: a binary search (a recorder far behind keeps thousands of them).
   */
  private inSkipped(time: number): boolean {
    const s = this.skipped;
    let lo = 0;
    let hi = s.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (s[mid]![0] <= time) lo = mid + 1;
      else hi = mid;
    }
    // (lo - 1: the last stretch that begins at or before `time`)
    return lo > 0 && time < s[lo - 1]![1];
  }

  /** Count the records the kernel lost since the last look (its ring buffer full) as missed ticks. */
  private countLost(now: number): void {
    const { stats, sink } = this;
    this.lostReadAt = now;
    const lost = this.options.kernel!.lost();
    if (lost <= this.kernelLost) return;
    const n = Number(lost - this.kernelLost);
    this.kernelLost = lost;
    stats.kernel.lost += n;
    stats.missed += n;
    stats.scheduled += n;
    sink.addMissed(n);
  }

  /** Write the sample of a thread's copy taken at `time` (µs), as the sampling mode says; `cpuStates`: tell its ON_CPU flag now. */
  private addSample(t: ThreadSnapshot, time: number, samples: SampleRecord[], cpuStates: SamplerOptions['cpuStates'] | null, natives: Map<bigint, NativeCopy> | null = null): void {
    const { stats, sink, keepFlag } = this;
    if (cpuStates) {
      const on = cpuStates.onCpu(t.nativeThreadId);
      t.onCpu = on === true;
      t.cpuUnknown = on === null;
    }
    let s = sampleRecord(t, time);
    const n = t.native ?? natives?.get(t.nativeThreadId);
    // (its native stack among its regions: the entry frames its Python copy holds are in it)
    if (n) s = { ...s, registers: n.registers, regions: withStackRegion(s.regions, n.stack) };
    // (the code objects go to the file whatever the mode keeps: the copier sends each once)
    if (t.codes.length > 0 || t.codeReplaced) emitCodes(sink, t);
    stats.codeObjects += t.codes.length;
    // (a sample whose fact could not be told is written: the report counts it, as left out)
    if (keepFlag !== 0 && (s.flags & keepFlag) === 0 && (s.flags & this.unknownFlag) === 0) {
      stats.leftOut++;
      return;
    }
    samples.push(s);
    // a copy's bytes are never changed once copied (fresh, or carved from a slab once)
    sink.addSample(s, true);
    stats.samples++;
    if (s.recorderStatus === 'torn') stats.torn++;
    if (s.flags & SAMPLE_FLAG.STOPPED) stats.stopped++;
    if (s.flags & SAMPLE_FLAG.RETRIED) stats.retried++;
    if (t.offCpuProof) stats.offCpu++;
    stats.copyMicros.total += s.copyMicros;
    if (s.copyMicros > stats.copyMicros.max) stats.copyMicros.max = s.copyMicros;
  }

  /** The recording is over: the last block is ended, and the final stats reported and returned. */
  finish(): SamplerStats {
    const { stats } = this;
    if (this.schedule) stats.elapsedMs = performance.now() - this.start;
    if (this.kernelSamples) this.countLost(performance.now());
    stats.anchorWriteFailure = this.copier.writeFailure;
    this.sink.flush();
    if (this.options.onProgress) this.options.onProgress(stats, this.recent);
    this.recent = [];
    return stats;
  }

  /** Put back what was written into the target (the profiler anchor): on every path, once sampling is over. */
  clearAnchors(): void {
    this.copier.clearAnchors();
  }
}

/** Sample one target until its recording ends (see SamplerOptions); its stats. */
export async function runSampler(source: MemorySource, sink: SampleSink, options: SamplerOptions): Promise<SamplerStats> {
  return new SamplerGroup().run(new TargetSampler(source, sink, options));
}

/** How long a target added to a running group is copied before its schedule starts (see WARM_UP_MS): the recorder's code is warm by then, and the other targets wait meanwhile. */
const ADDED_WARM_UP_MS = 5;

interface Member {
  target: TargetSampler;
  /** the target's recording is over (stats; the error that ended it, if one did) */
  onEnd: (stats: SamplerStats, error: unknown) => void;
}

export interface SamplerGroupOptions {
  /** called between ticks about every `pollEveryMs` (it may add targets) */
  poll?: () => void;
  pollEveryMs?: number;
}

/**
 * Several targets sampled by one loop (record --subprocesses): each keeps its own schedule
 * (dithered, on its own clock: a stop of one target does not move another's ticks) and
 * statistics, and the loop takes whichever tick is due first — one sleeper for all of them,
 * so the recorder spins before the next tick of any target, not once per target. The group
 * runs as long as its main target: when that one ends (stopped, duration, exited), so do the
 * others ('stopped', or 'duration'). Another target that exits ends on its own, and one whose
 * tick fails for another reason than its memory (a bug, a full disk) ends with that error,
 * while the rest go on; the main target's failure ends them all and is thrown.
 */
export class SamplerGroup {
  private readonly members: Member[] = [];

  constructor(private readonly options: SamplerGroupOptions = {}) {}

  /**
   * Start sampling another target: warmed up briefly (stopping nothing), then on its own
   * schedule. If even that fails, onEnd is called at once with the error.
   */
  add(target: TargetSampler, onEnd: Member['onEnd'], warmUpMs = ADDED_WARM_UP_MS): void {
    try {
      target.begin(warmUpMs, true);
    } catch (e) {
      this.close({ target, onEnd }, e);
      return;
    }
    this.members.push({ target, onEnd });
  }

  /** Sample `main` and every target added, until `main`'s recording ends; its stats. */
  async run(main: TargetSampler): Promise<SamplerStats> {
    lowerTimerSlack();
    const loaded = loadNative();
    const native = typeof loaded === 'string' ? null : loaded;
    const { poll } = this.options;
    const pollEvery = this.options.pollEveryMs ?? 20;
    // Copies at the interrupt: this thread takes the kernel's records and copies the threads off
    // their CPUs at every tick, and naps in between (no spin). Under the normal policy a thread
    // that wakes may wait for the task on its CPU to end its turn — the program, or this
    // process's own collector and compiler threads — and at 10 kHz 2-CPU machines lost 5-15 %
    // of ticks to those waits (in stretches of 3-12 ms), 1 % with it real-time. The lowest
    // real-time priority, this thread alone, where allowed (CAP_SYS_NICE, as root): the kernel
    // keeps 5 % of every CPU for the rest (sched_rt_runtime_us), and the program has the others.
    const realtime = main.kernelCopies && native !== null && native.setRealtime(1);
    try {
      main.begin();
      // (copies at the interrupt: the kernel takes the running threads' samples on time; the
      // recorder's own ticks copy threads off their CPUs, whose frames do not change — no spin
      // before them, which would take a CPU from the program)
      const sleeper = new Sleeper(!main.kernelCopies);
      // (a wake-up to poll needs no spin: nothing is sampled at that moment)
      const quiet = new Sleeper(false);
      let lastYield = performance.now();
      let nextPoll = lastYield;
      /** since when the loop has had a CPU (it last came back from a wait), ms */
      let busySince = lastYield;
      for (;;) {
        if (main.checkEnd()) break;
        for (let i = this.members.length - 1; i >= 0; i--) {
          const m = this.members[i]!;
          if (m.target.checkEnd()) this.end(i, null);
        }
        let now = performance.now();
        if (poll && now >= nextPoll) {
          poll();
          now = performance.now();
          nextPoll = now + pollEvery;
        }
        let next = main;
        let at = -1;
        this.members.forEach((m, i) => {
          if (m.target.due < next.due) {
            next = m.target;
            at = i;
          }
        });
        // (no await when the tick is already due, as it is whenever the sampler runs behind: a
        // turn through a promise costs a good part of a tick at the highest rates)
        if (poll && nextPoll < next.due) {
          if (nextPoll > now) {
            await quiet.until(nextPoll);
            busySince = quiet.woke;
          }
        } else if (next.due > now) {
          await sleeper.until(next.due);
          busySince = sleeper.woke;
        }
        now = performance.now();
        next.awakeSince = busySince;
        if (next.due > now) continue; // woken to look for new targets
        let yieldAtOnce: boolean;
        if (next === main) {
          yieldAtOnce = main.tick(now);
          if (main.stats.ended) break;
        } else {
          try {
            yieldAtOnce = next.tick(now);
          } catch (e) {
            this.end(at, e);
            continue;
          }
          if (next.stats.ended) {
            this.end(at, null);
            continue;
          }
        }
        // let the event loop run (signals, I/O) every YIELD_MS, not every tick: a yield costs a
        // turn of the loop, which at 10 kHz is a good part of the interval
        if (yieldAtOnce || performance.now() - lastYield >= YIELD_MS) {
          // a thread that stopped too late for its copy must not stay stopped until the next copy that stops one
          if (native) native.releaseLingering(0);
          await yieldNow();
          lastYield = performance.now();
          busySince = lastYield;
        }
      }
      const rest: SamplerEnd = main.stats.ended === 'duration' ? 'duration' : 'stopped';
      while (this.members.length > 0) {
        const m = this.members[this.members.length - 1]!;
        m.target.stats.ended ??= rest;
        this.end(this.members.length - 1, null);
      }
      return main.finish();
    } finally {
      if (realtime) native!.setRealtime(null);
      // the anchors are the one thing written into the targets: put them back, on every path
      main.clearAnchors();
      while (this.members.length > 0) {
        this.members[this.members.length - 1]!.target.stats.ended ??= 'stopped';
        this.end(this.members.length - 1, null);
      }
    }
  }

  private end(i: number, error: unknown): void {
    const [m] = this.members.splice(i, 1);
    this.close(m!, error);
  }

  private close(m: Member, error: unknown): void {
    let stats = m.target.stats;
    let failure = error;
    try {
      stats = m.target.finish();
    } catch (e) {
      failure ??= e;
    }
    try {
      m.target.clearAnchors();
    } catch (e) {
      failure ??= e;
    }
    m.onEnd(stats, failure);
  }
}
