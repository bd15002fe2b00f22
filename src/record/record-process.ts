// Recording a Linux process into a capture file, as a library function: what `pyunwind
// record` does, without its options parsing and terminal output.

import { spawn, type ChildProcess } from 'node:child_process';
import { CaptureWriter, type CaptureSink } from '../capture/writer.js';
import { fileSink } from '../capture/file.js';
import type { CodeRecord, SampleRecord, ThreadNameRecord } from '../capture/types.js';
import type { Layout } from '../layout/index.js';
import { captureHeader } from './capture-header.js';
import { locateAsyncioDebug, openLinuxProcess, processIsRunning, TargetError, type LinuxProcessSource } from './linux-process.js';
import { ASYNCIO_OFFSETS_SIZE, parseAsyncioOffsets, type AsyncioOffsets } from '../layout/asyncio-offsets.js';
import type { AsyncMode } from '../walk/task-graph.js';
import type { CopyMode } from './modes.js';
import { CpuStates } from './cpu-states.js';
import type { SampleFact, SamplingMode } from '../capture/types.js';
import { runSampler, type SamplerStats } from './sampler.js';
import { openStopper } from './stopper.js';
import { RECORDER } from '../version.js';

export interface RecordProcessOptions {
  /** the process to record: a running one (`pid`), or a command to start (`command`: argv) */
  pid?: number;
  command?: readonly string[];
  /** the capture file's path, or where its bytes go */
  output: string | CaptureSink;
  /** samples per second asked for (default 1000; at most 100,000) */
  rateHz?: number;
  /** stop after this long (default: until `signal` aborts or the target exits) */
  durationMs?: number;
  /** how copies are kept consistent (default `adaptive`, see modes.ts) */
  copy?: CopyMode;
  /**
   * which threads' samples to keep (default `wall`: every one). Another mode copies every thread
   * still, and writes only the samples whose fact holds; a mode whose fact this target cannot
   * tell (gil before 3.13, exception before 3.15) is refused with a RangeError.
   */
  sampling?: SamplingMode;
  /** never write into the target: no profiler anchor, copies checked by re-reading alone */
  readOnly?: boolean;
  /** false: code records without their bytecode (no opcodes; for measuring what keeping it costs) */
  bytecode?: boolean;
  /** ends the recording (the file is then closed properly) */
  signal?: AbortSignal;
  /** every record as it is written (code records come before the samples that need them; thread names when read) */
  onRecord?: (record: CodeRecord | SampleRecord | ThreadNameRecord) => void;
  /** the target's layout and description (e.g. "pid 1234 (python3.15, 3.15.2)"), once it is attached and before the first record */
  onStart?: (layout: Layout, description: string) => void;
  /** called every `progressEveryMs` (default 250) with the stats so far */
  onProgress?: (stats: SamplerStats) => void;
  progressEveryMs?: number;
  /**
   * also copy each thread's asyncio tasks, for async-aware stacks (CPython 3.14+; RangeError
   * before): the running task of each thread, or every task. The recording starts once the
   * program has imported asyncio.
   */
  asyncio?: AsyncMode;
  /** a started command's standard streams (default: inherited) */
  stdio?: 'inherit' | 'ignore';
}

export interface RecordProcessResult {
  /** the target as the capture names it, e.g. "pid 1234 (python3.15, 3.15.2)" */
  target: string;
  pid: number;
  stats: SamplerStats;
  /** time the target spent stopped by the recorder, µs */
  stoppedMicros: number;
  /** the recording ended because the target exited */
  targetExited: boolean;
}

/** What a recording of this target tells of each sample besides its memory. */
export function recordableFacts(layout: Layout, pid: number): SampleFact[] {
  const facts: SampleFact[] = [];
  if (CpuStates.available(pid)) facts.push('cpu');
  if (layout.tstate.holdsGil !== null || (layout.interp.gilHolder !== null && layout.interp.gilLocked !== null)) facts.push('gil');
  if (layout.tstate.currentException !== null && layout.tstate.handledException !== null) facts.push('exception');
  if (facts.includes('gil') && layout.interp.gcCollecting !== null) facts.push('gc');
  return facts;
}

/** Why a fact cannot be told, for a refused mode. */
export const FACT_MISSING: Readonly<Record<SamplingMode, string>> = {
  wall: '',
  cpu: "the threads' states cannot be read from /proc",
  gil: 'which thread holds the GIL is published from CPython 3.13 on',
  exception: "a thread's exception is published in the debug offsets from CPython 3.15 on",
};

/** Largest rate a recording may ask for. */
export const MAX_RATE_HZ = 100_000;

/**
 * Record a Python process into a capture file until `durationMs` has passed, `signal` aborts
 * or the target exits. A command started here is ended (SIGTERM) when the recording ends
 * before it does. Throws TargetError when the target cannot be recorded (not Python, gone, no
 * permission), RangeError on bad options.
 */
export async function recordProcess(options: RecordProcessOptions): Promise<RecordProcessResult> {
  const rateHz = options.rateHz ?? 1000;
  if (!(rateHz > 0 && rateHz <= MAX_RATE_HZ)) throw new RangeError(`rate ${rateHz} Hz is not in (0, ${MAX_RATE_HZ}]`);
  if ((options.pid === undefined) === (options.command === undefined || options.command.length === 0)) {
    throw new RangeError('recordProcess needs either a pid or a command');
  }
  const copy = options.copy ?? 'adaptive';
  const sampling = options.sampling ?? 'wall';
  const command = options.command ? [...options.command] : null;

  let child: ChildProcess | null = null;
  let source: LinuxProcessSource;
  if (command) {
    child = spawn(command[0]!, command.slice(1), { stdio: options.stdio ?? 'inherit' });
    source = await attachToChild(child, command[0]!);
  } else {
    source = openLinuxProcess(options.pid!);
  }
  const pid = source.pid;
  const started = child;
  const childEnded = (): boolean => started !== null && (started.exitCode !== null || started.signalCode !== null);
  const alive = (): boolean => !childEnded() && processIsRunning(pid);

  let writer: CaptureWriter | undefined;
  let stopper: ReturnType<typeof openStopper> | null = null;
  let cpuStates: CpuStates | null = null;
  let asyncio: { offsets: AsyncioOffsets; debugOffsets: Uint8Array } | null = null;
  try {
    if (options.asyncio) asyncio = await asyncioOffsets(source, options.signal, alive);
    const facts = recordableFacts(source.layout, pid);
    if (sampling !== 'wall' && !facts.includes(sampling)) throw new RangeError(`--mode ${sampling}: ${FACT_MISSING[sampling]} (${source.description})`);
    if (facts.includes('cpu')) cpuStates = new CpuStates(pid);
    writer = new CaptureWriter(typeof options.output === 'string' ? fileSink(options.output) : options.output, captureHeader(source, {
      ...(command ? { command } : {}),
      pid,
      rateHz,
      startTime: Date.now(),
      recorder: RECORDER,
      copy: `${copy}${options.readOnly ? ', read-only' : ''}`,
      sampling,
      facts,
      ...(asyncio ? { asyncio: { mode: options.asyncio!, debugOffsets: Buffer.from(asyncio.debugOffsets).toString('hex') } } : {}),
      ...(options.bytecode === false ? { bytecode: false } : {}),
    }));
    stopper = copy === 'optimistic' ? null : openStopper(pid);
  } catch (e) {
    try {
      writer?.close();
    } catch {
      // the first failure is the one reported
    }
    source.close();
    cpuStates?.close();
    if (child && alive()) child.kill('SIGTERM');
    throw e;
  }
  const tap = options.onRecord;
  const sink = tap
    ? {
        addCode: (r: CodeRecord) => (writer.addCode(r), tap(r)),
        addSample: (r: SampleRecord, immutable?: boolean) => (writer.addSample(r, immutable), tap(r)),
        addMissed: (n: number) => writer.addMissed(n),
        addThreadName: (r: ThreadNameRecord) => (writer.addThreadName(r), tap(r)),
        flush: () => writer.flush(),
      }
    : writer;
  let stats: SamplerStats;
  // the first failure is the one reported (closing a file whose writes fail fails again)
  let failure: { error: unknown } | null = null;
  try {
    options.onStart?.(source.layout, source.description);
    stats = await runSampler(source, sink, {
      rateHz,
      copy,
      sampling,
      ...(cpuStates ? { cpuStates } : {}),
      ...(options.readOnly ? { consistency: 'reread' as const } : {}),
      ...(asyncio ? { asyncio: { offsets: asyncio.offsets, mode: options.asyncio! } } : {}),
      ...(options.bytecode === false ? { bytecode: false } : {}),
      ...(stopper ? { stopper } : {}),
      ...(options.durationMs !== undefined ? { durationMs: options.durationMs } : {}),
      // a target that exits makes the next read fail, and the sampler then asks isAlive
      shouldStop: () => options.signal?.aborted === true || childEnded(),
      isAlive: alive,
      ...(options.onProgress ? { onProgress: (s: SamplerStats) => options.onProgress!(s) } : {}),
      ...(options.progressEveryMs !== undefined ? { progressEveryMs: options.progressEveryMs } : {}),
    });
    if (stats.ended === 'stopped' && !alive()) stats.ended = 'target-exited';
  } catch (e) {
    failure = { error: e };
    throw e;
  } finally {
    stopper?.close();
    cpuStates?.close();
    source.close();
    // a command started here does not outlive a recording that failed
    if (failure && child && alive()) child.kill('SIGTERM');
    try {
      writer.close();
    } catch (e) {
      if (!failure) throw e;
    }
  }
  if (child && alive()) child.kill('SIGTERM');
  return { target: source.description, pid, stats, stoppedMicros: stopper?.stoppedMicros ?? 0, targetExited: stats.ended === 'target-exited' };
}

/**
 * The asyncio module's debug offsets of a target (3.14+), once it has imported asyncio: polled
 * until then (or until the recording is stopped or the target exits).
 */
async function asyncioOffsets(source: LinuxProcessSource, signal: AbortSignal | undefined, alive: () => boolean): Promise<{ offsets: AsyncioOffsets; debugOffsets: Uint8Array }> {
  if (!source.layout.objects) {
    throw new TargetError('unsupported', `--async-aware: CPython publishes asyncio tasks to profilers from 3.14 on (${source.description})`);
  }
  for (;;) {
    const found = locateAsyncioDebug(source.pid);
    if (typeof found !== 'string') {
      const bytes = source.read(found.address, ASYNCIO_OFFSETS_SIZE);
      return { offsets: parseAsyncioOffsets(bytes), debugOffsets: bytes };
    }
    if (signal?.aborted) throw new TargetError('no-process', `--async-aware: stopped before ${source.description} imported asyncio (${found})`);
    if (!alive()) throw new TargetError('no-process', `--async-aware: ${source.description} exited before it imported asyncio`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/**
 * A command just started: wait until it is a Python we can read (its interpreter binary is
 * mapped), polling; fail if it exits first or takes too long.
 */
async function attachToChild(child: ChildProcess, name: string): Promise<LinuxProcessSource> {
  const started = Date.now();
  const spawnError = new Promise<never>((_, reject) => child.once('error', (e) => reject(new TargetError('no-process', `cannot start ${name}: ${e.message}`))));
  spawnError.catch(() => {});
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new TargetError('no-process', `${name} exited (${child.exitCode ?? child.signalCode}) before it could be recorded`);
    }
    if (child.pid !== undefined) {
      try {
        return openLinuxProcess(child.pid);
      } catch (e) {
        if (!(e instanceof TargetError) || Date.now() - started > 10_000) {
          child.kill('SIGTERM');
          throw e;
        }
      }
    }
    await Promise.race([new Promise((r) => setTimeout(r, 5)), spawnError]);
  }
}
