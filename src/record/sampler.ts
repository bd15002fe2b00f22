// The sampler: copies every thread of a running interpreter at a rate, on an absolute
// schedule (schedule.ts: dithered, late ticks made up for up to CATCH_UP_MS, further ones
// counted as missed), into a capture sink, so the recording says how much of the requested
// rate it really got.
//
// The schedule runs on the target's own clock: time the recorder kept the target stopped does
// not count toward it. Each sample then stands for the same stretch of the program's own
// running time, wherever the program was. On the wall clock a stop would stretch whatever the
// program was doing when stopped — and the default mode stops only copies that moved, i.e.
// call-heavy Python code — so that code would collect extra samples (measured in
// docs/validation.md: 4 points on a real program).

import type { SampleRecord, SamplingMode } from '../capture/types.js';
import { FACT_FLAG, SAMPLE_FLAG } from '../capture/types.js';
import type { Consistency } from './consistency.js';
import type { MemoryCopier } from './copier.js';
import type { Stopper } from './stopper.js';
import type { ThreadSnapshot } from './thread-snapshot.js';
import { copierFor, copyThreads, type CopyOptions, type CopyMode } from './modes.js';
import { emitCodes, sampleRecord, type SampleSink } from './sink.js';
import { loadNative } from './native.js';
import { Sleeper } from './sleeper.js';
import { TickSchedule } from './schedule.js';
import { ReadError, type MemorySource } from './source.js';
import { ThreadNamer } from './thread-names.js';
import { asyncioTstateEnd, TaskCopier } from './task-copy.js';
import type { AsyncioOffsets } from '../layout/asyncio-offsets.js';
import type { AsyncMode } from '../walk/task-graph.js';

export type { SampleSink } from './sink.js';
export type { CopyMode } from './modes.js';


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
   */
  alternate?: CopyMode;
  /** false: read no thread names (default: read them where the sink takes them, see ThreadNamer) */
  threadNames?: boolean;
  /** also copy each thread's asyncio tasks for async-aware stacks (CPython 3.14+; see task-copy.ts) */
  asyncio?: { offsets: AsyncioOffsets; mode: AsyncMode };
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
  /** of which the stack moved during the copy */
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
  elapsedMs: number;
  ended: SamplerEnd | null;
  /** why the profiler anchor could not be written (copies were then checked by re-reading) */
  anchorWriteFailure: string | null;
  /** thread names: reads of `threading`'s names made, the time they took (µs), records written */
  names: { reads: number; micros: number; records: number };
}

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
 * The thread names are read once then too (the first read runs cold code: measured 20 ms), at
 * time 0, so that the schedule's first ticks do not wait for it.
 */
function warmUp(copier: MemoryCopier, copyOptions: CopyOptions, sink: SampleSink, namer: ThreadNamer | null): { codes: number; names: number } {
  const until = performance.now() + WARM_UP_MS;
  let codes = 0;
  let last: ThreadSnapshot[] = [];
  for (let i = 0; i < WARM_UP_PASSES && performance.now() < until; i++) {
    let threads: ThreadSnapshot[];
    try {
      threads = copyThreads(copier, copyOptions);
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

export async function runSampler(source: MemorySource, sink: SampleSink, options: SamplerOptions): Promise<SamplerStats> {
  if (!(options.rateHz > 0)) throw new RangeError(`rate ${options.rateHz} Hz`);
  const copyOptions: CopyOptions = {
    copy: options.copy ?? 'optimistic',
    ...(options.stopper ? { stopper: options.stopper } : {}),
    ...(options.consistency ? { consistency: options.consistency } : {}),
  };
  // (the code objects a pass used are the snapshot's business, not the sampler's)
  const copier = copierFor(source, copyOptions, {
    collectUsed: false,
    // the running task in the same read as the stack (see task-copy.ts)
    ...(options.asyncio ? { tstateMin: asyncioTstateEnd(options.asyncio.offsets, source.layout.pointerSize) } : {}),
    ...(options.bytecode === false ? { bytecode: false } : {}),
  });
  // shorter sleeps wake closer to the tick (where the native calls are available)
  const native = loadNative();
  if (typeof native !== 'string') native.setTimerSlack(1);
  try {
    const tasks = options.asyncio ? new TaskCopier(source, source.layout, options.asyncio.offsets, options.asyncio.mode, copier) : null;
    return await sampleLoop(source, sink, options, copier, copyOptions, tasks);
  } finally {
    // the anchor is the one thing written into the target: put it back, on every path
    copier.clearAnchors();
  }
}

async function sampleLoop(
  source: MemorySource,
  sink: SampleSink,
  options: SamplerOptions,
  copier: MemoryCopier,
  copyOptions: CopyOptions,
  tasks: TaskCopier | null,
): Promise<SamplerStats> {
  const interval = 1000 / options.rateHz;
  const flushEvery = options.flushEveryMs ?? 1000;
  const progressEvery = options.progressEveryMs ?? 250;
  const stats: SamplerStats = {
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
    elapsedMs: 0,
    ended: null,
    anchorWriteFailure: null,
    names: { reads: 0, micros: 0, records: 0 },
  };
  const namer = options.threadNames !== false && sink.addThreadName ? new ThreadNamer(source) : null;
  const warm = warmUp(copier, copyOptions, sink, namer);
  stats.codeObjects += warm.codes;
  stats.names.records += warm.names;
  const cpuStates = options.cpuStates ?? null;
  const mode = options.sampling ?? 'wall';
  const keepFlag = mode === 'wall' ? 0 : FACT_FLAG[mode];
  const start = performance.now();
  const schedule = new TickSchedule(interval, start, CATCH_UP_MS);
  let stoppedMicros = options.stopper?.stoppedMicros ?? 0;
  let turn = 0;
  let lastFlush = start;
  let lastProgress = start;
  let recent: SampleRecord[] = [];
  let lastYield = start;
  const sleeper = new Sleeper();

  for (;;) {
    if (options.shouldStop?.()) {
      stats.ended = 'stopped';
      break;
    }
    if (options.durationMs !== undefined && schedule.elapsed >= options.durationMs) {
      stats.ended = 'duration';
      break;
    }
    // (no await when the tick is already due, as it is whenever the sampler runs behind: a
    // turn through a promise costs a good part of a tick at the highest rates)
    if (schedule.due > performance.now()) await sleeper.until(schedule.due);
    let now = performance.now();
    const { missed: late, time: tickTime } = schedule.take(now);
    if (late > 0) {
      stats.missed += late;
      stats.scheduled += late;
      sink.addMissed(late);
    }
    stats.scheduled++;

    const tickMode = options.alternate && turn++ % 2 === 1 ? { ...copyOptions, copy: options.alternate } : copyOptions;
    let threads: ThreadSnapshot[];
    try {
      threads = copyThreads(copier, tickMode);
    } catch (e) {
      if (!(e instanceof ReadError)) throw e;
      if (options.isAlive && !options.isAlive()) {
        stats.scheduled--; // not a tick of this target's life
        stats.ended = 'target-exited';
        break;
      }
      stats.failedTicks++;
      stats.missed++;
      sink.addMissed(1);
      await yieldNow();
      continue;
    } finally {
      // the target's clock stood still while it was stopped: so does the schedule
      const stoppedNow = options.stopper?.stoppedMicros ?? 0;
      schedule.stood((stoppedNow - stoppedMicros) / 1000);
      stoppedMicros = stoppedNow;
    }
    if (threads.length === 0) {
      // no thread to sample (an interpreter starting or ending): a tick with no samples
      stats.missed++;
      sink.addMissed(1);
      await yieldNow();
      continue;
    }
    stats.ticks++;
    const samples: SampleRecord[] = [];
    for (const t of threads) {
      if (cpuStates) t.onCpu = cpuStates.onCpu(t.nativeThreadId) === true;
      // (a copy that moved is not walked: its tasks would not be looked at)
      if (tasks && !t.moved) tasks.copy(t);
      const s = sampleRecord(t, tickTime);
      // (the code objects go to the file whatever the mode keeps: the copier sends each once)
      if (t.codes.length > 0 || t.codeReplaced) emitCodes(sink, t);
      stats.codeObjects += t.codes.length;
      if (keepFlag !== 0 && (s.flags & keepFlag) === 0) {
        stats.leftOut++;
        continue;
      }
      samples.push(s);
      // a copy's bytes are never changed once copied (fresh, or carved from a slab once)
      sink.addSample(s, true);
      stats.samples++;
      if (s.recorderStatus === 'torn') stats.torn++;
      if (s.flags & SAMPLE_FLAG.STOPPED) stats.stopped++;
      if (s.flags & SAMPLE_FLAG.RETRIED) stats.retried++;
      stats.copyMicros.total += s.copyMicros;
      if (s.copyMicros > stats.copyMicros.max) stats.copyMicros.max = s.copyMicros;
    }
    if (namer) {
      // (after the copies: reading names never delays this tick's copies)
      for (const r of namer.tick(threads, tickTime)) {
        sink.addThreadName!(r);
        stats.names.records++;
      }
      stats.names.reads = namer.reads;
      stats.names.micros = namer.micros;
    }
    options.onTick?.(samples, threads, tickMode.copy);
    if (options.onProgress) recent.push(...samples);

    now = performance.now();
    stats.elapsedMs = now - start;
    if (now - lastFlush >= flushEvery) {
      sink.flush();
      lastFlush = now;
    }
    if (options.onProgress && now - lastProgress >= progressEvery) {
      options.onProgress(stats, recent);
      recent = [];
      lastProgress = now;
    }
    // let the event loop run (signals, I/O) every YIELD_MS, not every tick: a yield costs a
    // turn of the loop, which at 10 kHz is a good part of the interval
    if (now - lastYield >= YIELD_MS) {
      await yieldNow();
      lastYield = performance.now();
    }
  }
  stats.elapsedMs = performance.now() - start;
  stats.anchorWriteFailure = copier.writeFailure;
  sink.flush();
  if (options.onProgress) options.onProgress(stats, recent);
  return stats;
}
