// The sampler: copies every thread of a running interpreter at a rate, on an absolute
// schedule, into a capture sink. A tick that comes too late to keep the schedule is not
// made up for: the slots it skipped are counted as missed, so the recording says how much of
// the requested rate it really got.

import type { CodeRecord, SampleRecord } from '../capture/types.js';
import { SAMPLE_FLAG } from '../capture/types.js';
import { MemoryCopier, type Consistency, type Stopper, type ThreadSnapshot } from './copier.js';
import { ReadError, type MemorySource } from './source.js';

/** Where samples go (a CaptureWriter is one). */
export interface SampleSink {
  addCode(record: CodeRecord): void;
  addSample(record: SampleRecord): void;
  addMissed(n: number): void;
  /** end the current block: what was added so far becomes readable even if the process dies */
  flush(): void;
}

/**
 * How copies are kept consistent:
 * - `optimistic`: copy while the target runs; a copy that moved (after one immediate retry) is
 *   kept as `torn` — counted, never profiled.
 * - `adaptive`: a thread whose copy moved is copied again at once with the target stopped, so
 *   no sample is lost to the check; steady code is never stopped.
 * - `blocking`: stop the target for every tick's copy.
 */
export type SamplingMode = 'optimistic' | 'adaptive' | 'blocking';

export interface SamplerOptions {
  rateHz: number;
  mode?: SamplingMode;
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
  onTick?: (samples: SampleRecord[], threads: ThreadSnapshot[]) => void;
}

export type SamplerEnd = 'duration' | 'stopped' | 'target-exited';

export interface SamplerStats {
  /** sample times the schedule asked for so far */
  scheduled: number;
  /** ticks made (all threads copied at each) */
  ticks: number;
  /** scheduled ticks never attempted because the sampler was late */
  missed: number;
  /** thread samples written */
  samples: number;
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
}

const sab = new Int32Array(new SharedArrayBuffer(4));
/**
 * A thread put to sleep wakes up late by the kernel's timer slack (measured here: ~70 µs for
 * a 200 µs Atomics.wait); the last stretch before a tick is spun instead of slept.
 */
const SPIN_MS = 0.12;

/** Sleep until `performance.now()` reaches `until`: timers for the bulk, Atomics.wait, then a short spin. */
async function sleepUntil(until: number): Promise<void> {
  let left = until - performance.now();
  if (left > 3) {
    await new Promise((r) => setTimeout(r, left - 2));
    left = until - performance.now();
  }
  if (left > SPIN_MS) Atomics.wait(sab, 0, 0, left - SPIN_MS);
  while (performance.now() < until) {
    // spin: the tick is due within SPIN_MS
  }
}

/** Let the event loop run (signals, I/O) between ticks. */
const yieldNow = (): Promise<void> => new Promise((r) => setImmediate(r));

export async function runSampler(source: MemorySource, sink: SampleSink, options: SamplerOptions): Promise<SamplerStats> {
  if (!(options.rateHz > 0)) throw new RangeError(`rate ${options.rateHz} Hz`);
  const mode = options.mode ?? 'optimistic';
  if (mode !== 'optimistic' && !options.stopper) throw new Error(`sampling mode ${mode} needs a way to stop the target`);
  const copier = new MemoryCopier(source, {
    ...(options.consistency ? { consistency: options.consistency } : {}),
    // adaptive: a copy that moved is made again at once with the target stopped. Retrying
    // without stopping would bias the profile: a retry succeeds more often when the program is
    // in a long-lived frame, while the moment a stop lands is independent of the program.
    ...(mode === 'adaptive' ? { stopper: options.stopper!, retries: 0 } : {}),
  });
  try {
    return await sampleLoop(source, sink, options, copier, mode);
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
  mode: SamplingMode,
): Promise<SamplerStats> {
  const interval = 1000 / options.rateHz;
  const flushEvery = options.flushEveryMs ?? 1000;
  const progressEvery = options.progressEveryMs ?? 250;
  const stats: SamplerStats = {
    scheduled: 0,
    ticks: 0,
    missed: 0,
    samples: 0,
    torn: 0,
    failedTicks: 0,
    codeObjects: 0,
    copyMicros: { total: 0, max: 0 },
    retried: 0,
    stopped: 0,
    elapsedMs: 0,
    ended: null,
    anchorWriteFailure: null,
  };
  const start = performance.now();
  let next = start;
  let lastFlush = start;
  let lastProgress = start;
  let recent: SampleRecord[] = [];

  for (;;) {
    if (options.shouldStop?.()) {
      stats.ended = 'stopped';
      break;
    }
    if (options.durationMs !== undefined && next - start >= options.durationMs) {
      stats.ended = 'duration';
      break;
    }
    await sleepUntil(next);
    let now = performance.now();
    // slots that passed while we were late are missed, not made up for
    const late = Math.floor((now - next) / interval);
    if (late > 0) {
      stats.missed += late;
      stats.scheduled += late;
      sink.addMissed(late);
      next += late * interval;
    }
    stats.scheduled++;
    const tickTime = Math.round((next - start) * 1000);
    next += interval;

    let threads: ThreadSnapshot[];
    try {
      if (mode === 'blocking') {
        let stopped = false;
        try {
          stopped = options.stopper!.stop();
          threads = copier.copyAll();
        } finally {
          options.stopper!.resume();
        }
        if (stopped) {
          for (const t of threads) {
            t.stopped = true;
            t.moved = false;
          }
        }
      } else threads = copier.copyAll();
    } catch (e) {
      if (!(e instanceof ReadError)) throw e;
      if (options.isAlive && !options.isAlive()) {
        stats.ended = 'target-exited';
        break;
      }
      stats.failedTicks++;
      await yieldNow();
      continue;
    }
    stats.ticks++;
    const { codes, replaced } = copier.takeNewCodes();
    // samples must see the code object as it was when they were taken: a block holds one copy per address
    if (replaced) sink.flush();
    for (const c of codes) sink.addCode({ address: c.address, regions: c.regions });
    stats.codeObjects += codes.length;
    const samples: SampleRecord[] = threads.map((t) => ({
      time: tickTime,
      interpreterId: t.interpreterId,
      threadStateAddress: t.threadStateAddress,
      threadId: t.threadId,
      nativeThreadId: t.nativeThreadId,
      flags:
        (t.holdsGil ? SAMPLE_FLAG.GIL : 0) |
        (t.mainThread ? SAMPLE_FLAG.MAIN : 0) |
        (t.stopped ? SAMPLE_FLAG.STOPPED : 0) |
        (t.attempts > 1 ? SAMPLE_FLAG.RETRIED : 0),
      recorderStatus: t.moved ? 'torn' : 'ok',
      copyMicros: t.copyMicros,
      regions: t.regions,
      errors: t.errors,
    }));
    for (const s of samples) {
      sink.addSample(s);
      stats.samples++;
      if (s.recorderStatus === 'torn') stats.torn++;
      if (s.flags & SAMPLE_FLAG.STOPPED) stats.stopped++;
      if (s.flags & SAMPLE_FLAG.RETRIED) stats.retried++;
      stats.copyMicros.total += s.copyMicros;
      stats.copyMicros.max = Math.max(stats.copyMicros.max, s.copyMicros);
    }
    options.onTick?.(samples, threads);
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
    await yieldNow();
  }
  stats.elapsedMs = performance.now() - start;
  stats.anchorWriteFailure = copier.writeFailure;
  sink.flush();
  if (options.onProgress) options.onProgress(stats, recent);
  return stats;
}
