// Recording a Linux process into a capture file, as a library function: what `pyunwind
// record` does, without its options parsing and terminal output.

import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { CaptureWriter, type CaptureSink } from '../../capture/writer.js';
import { fileSink } from '../../capture/file.js';
import type { CodeRecord, SampleRecord, ThreadNameRecord } from '../../capture/types.js';
import type { Layout } from '../../layout/index.js';
import { captureHeader, type RecordingFields } from '../sampling/capture-header.js';
import { asyncioOffsetsNow, openLinuxProcess, processIsRunning, TargetError, type AsyncioFound, type LinuxProcessSource } from './process.js';
import type { AsyncioOffsets } from '../../layout/asyncio-offsets.js';
import type { AsyncMode } from '../../walk/task-graph.js';
import { neverStops, type CopyMode } from '../copy/modes.js';
import { bpfObjectPath, KERNEL_NATIVE_MAX, KernelCopier, kernelCopiesReach, mayLoadKernelCopier } from './kernel-copier.js';
import { kernelTstateSize } from '../copy/kernel-samples.js';
import { CpuStates } from './cpu-states.js';
import type { SampleFact, SamplingMode } from '../../capture/types.js';
import { SamplerGroup, TargetSampler, type SamplerStats } from '../sampling/sampler.js';
import { openStopper, stopperLike, ThreadStopper, type AnyStopper } from './stopper.js';
import { NativeRecorder } from './native-recorder.js';
import type { NativeObject } from '../../native/objects.js';
import { DEFAULT_STACK_BYTES } from './native-stack.js';
import { commandLine, DescendantWatcher, LOOK_AGAIN } from './subprocesses.js';
import { RECORDER } from '../../version.js';

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
  /** with `native`: each native object record as it is written, in order with onRecord's */
  onObject?: (object: NativeObject) => void;
  /**
   * the target's layout and description (e.g. "pid 1234 (python3.15, 3.15.2)"), once it is
   * attached and before the first record; with `asyncio`, the asyncio offsets its tasks are
   * read with (else null)
   */
  onStart?: (layout: Layout, description: string, tasks: { offsets: AsyncioOffsets; mode: AsyncMode } | null) => void;
  /**
   * called every `progressEveryMs` (default 250) with the stats so far: the main target's, and
   * those of the subprocesses followed so far (recorded, or being recorded)
   */
  onProgress?: (stats: SamplerStats, subprocesses: readonly SamplerStats[]) => void;
  progressEveryMs?: number;
  /**
   * also copy each thread's asyncio tasks, for async-aware stacks (CPython 3.14+; RangeError
   * before): the running task of each thread, or every task. The recording starts once the
   * program has imported asyncio; with `subprocesses`, each subprocess's recording likewise (one
   * that exits, or runs another program, before it has is listed in `notFollowed`).
   */
  asyncio?: AsyncMode;
  /** a started command's standard streams (default: inherited) */
  stdio?: 'inherit' | 'ignore';
  /**
   * also copy each thread's registers and native stack (up to `stackBytes`, default
   * DEFAULT_STACK_BYTES) at every tick, with every thread held stopped, and the mapped objects'
   * unwind tables and symbols (native-recorder.ts): for C frames offline. Needs ptrace and a
   * copy mode that stops (not optimistic); not with `subprocesses`.
   */
  native?: { stackBytes?: number };
  /**
   * also record every descendant of the target that runs a CPython this recorder can read
   * (`true`: with the defaults of SubprocessOptions), each into a capture of its own, with the
   * same rate, copy mode and sampling mode, by the same sampling loop
   */
  subprocesses?: boolean | SubprocessOptions;
}

/** How record --subprocesses follows the target's descendants (src/record/linux/subprocesses.ts). */
export interface SubprocessOptions {
  /**
   * where the capture of subprocess `pid` goes (`nth`: 2 and more for the same pid recorded
   * again, after it ran a new program); default, for an output file: subprocessOutput beside it
   */
  output?: (pid: number, nth: number) => string | CaptureSink;
  /** how often to look for new descendants, ms (default SUBPROCESS_POLL_MS) */
  pollEveryMs?: number;
  /** a subprocess is attached and its recording starts */
  onStart?: (s: Pick<SubprocessResult, 'pid' | 'parentPid' | 'command' | 'target' | 'output'>) => void;
  /**
   * a subprocess's recording ended (its capture is closed) — but for one dropped: a process
   * that ran a new program within PRE_EXEC_MS of being attached (a copy of its parent on its
   * way to exec) loses its capture, and its new program's recording (onStart again) takes it
   */
  onEnd?: (r: SubprocessResult) => void;
}

/** A subprocess recorded by record --subprocesses. */
export interface SubprocessResult {
  pid: number;
  /** the process that started it (when it was found) */
  parentPid: number;
  /** its command line, from /proc/PID/cmdline (a fork child shows its parent's) */
  command: string[];
  /** as its capture names it, e.g. "pid 1235 (python3.15, 3.15.2)" */
  target: string;
  /** its capture file (null: the output function gave a sink) */
  output: string | null;
  stats: SamplerStats;
  stoppedMicros: number;
  /**
   * why its recording ended: it exited; it ran a new program (exec: a new recording of the pid
   * follows once that is seen to be Python); the main recording ended; or a failure (`error`)
   */
  ended: 'exited' | 'exec' | 'recording-ended' | 'failed';
  error?: string;
}

/** A descendant that was not recorded, and why (not Python, no permission, …). */
export interface NotFollowed {
  pid: number;
  parentPid: number;
  command: string[];
  why: string;
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
  /** with `subprocesses`: each descendant recorded, by pid */
  subprocesses: SubprocessResult[];
  /** with `subprocesses`: each descendant looked at and not recorded, in the order found */
  notFollowed: NotFollowed[];
  /** with `subprocesses`: what looking for descendants cost the recorder (polls made, time they took) */
  watching?: { polls: number; micros: number; viaChildrenFiles: boolean };
  /**
   * Copies at the interrupt look possible for this recording, made another way (a 64-bit
   * Python, the BPF program built, the rights to load it, a rate and options that mode takes): a
   * CLI that stopped the target much then says so (a hint, never a choice made for the user).
   */
  interruptPossible: boolean;
}

/** What a recording of this target tells of each sample besides its memory. */
export function recordableFacts(layout: Layout, pid: number): SampleFact[] {
  const facts: SampleFact[] = [];
  if (CpuStates.available(pid)) facts.push('cpu');
  if (layout.tstate.holdsGil !== null || layout.gil !== null) facts.push('gil');
  if (layout.tstate.currentException !== null && layout.tstate.handledException !== null) facts.push('exception');
  if (facts.includes('gil') && layout.interp.gcCollecting !== null) facts.push('gc');
  return facts;
}

/** Why a fact cannot be told, for a refused mode. */
export const FACT_MISSING: Readonly<Record<SamplingMode, string>> = {
  wall: '',
  cpu: "the threads' states cannot be read from /proc",
  gil: 'which thread holds the GIL is not known for this Python (CPython 3.11 and 3.12 compiled to WebAssembly)',
  exception: "a thread's exception is published in the debug offsets from CPython 3.15 on",
};

/** Largest rate a recording may ask for. */
export const MAX_RATE_HZ = 100_000;

/** Is which thread holds the GIL copied at the interrupt's tick: in the thread state (3.15+), or the GIL's fields — through the interpreter's pointer (3.12+), or in _PyRuntime (3.11)? */
function gilAtTick(layout: Layout): boolean {
  return layout.tstate.holdsGil !== null || (layout.gil?.interpPointer ?? null) !== null || (layout.gil?.runtime ?? null) !== null;
}

/**
 * The copier in the kernel for `source` (the main target, or a subprocess), once what its
 * samples need of the moment can be copied there; throws with the one line that says why not.
 */
function openKernelCopier(source: LinuxProcessSource, sampling: SamplingMode, options: { rateHz: number; nativeStackBytes?: number; ringBytes?: number }): KernelCopier {
  if (sampling === 'gil' && !gilAtTick(source.layout)) throw new RangeError(`--mode gil with copy interrupt: which thread holds the GIL cannot be copied at the tick (${source.description})`);
  if (!CpuStates.available(source.pid)) throw new TargetError('unsupported', `${source.description}: copies at the interrupt need the threads' states from /proc, which cannot be read here`);
  return KernelCopier.open(source.pid, { ...options, layout: source.layout, tstateSize: kernelTstateSize(source), runtimeAddress: source.runtimeAddress });
}

/** The kernel's copies of a running thread's asyncio tasks, of the tick (task-copy.ts). */
function copyTasksInKernel(kernel: KernelCopier, found: AsyncioFound, source: LinuxProcessSource, mode: AsyncMode): void {
  if (!kernel.copyTasks(found.offsets, source.layout, mode)) throw new TargetError('unsupported', `${source.description}: --async-aware with copy interrupt: its thread state's asyncio fields or task objects are larger than the kernel's copy takes`);
}

/** The ring buffer of a subprocess's copier in the kernel (the main target's: 64 MiB), bytes. */
const SUBPROCESS_RING_BYTES = 16 << 20;

/**
 * Largest rate of copies at the interrupt: every CPU's timer fires at the rate, and the
 * recorder turns about 10,000 of the kernel's copies a second into samples here (measured: at
 * 20 kHz its ticks fell to a few a second and most records were dropped with the stretches they
 * missed; at 50 kHz the ring buffer overflowed).
 */
export const MAX_INTERRUPT_RATE_HZ = 10_000;

/**
 * Where a followed subprocess's capture goes, beside the main capture `main`: its pid before
 * the last extension (`out.pyuw` → `out.1234.pyuw`; a name without one gets it appended:
 * `out` → `out.1234`), and `1234-2` for the second recording of the same pid (the process ran
 * a new program, or the pid was reused).
 */
export function subprocessOutput(main: string, pid: number, nth = 1): string {
  const tag = nth > 1 ? `${pid}-${nth}` : String(pid);
  const base = path.basename(main);
  const dir = main.slice(0, main.length - base.length);
  const dot = base.lastIndexOf('.');
  return dir + (dot > 0 ? `${base.slice(0, dot)}.${tag}${base.slice(dot)}` : `${base}.${tag}`);
}

/** What one process's recording holds open besides its memory source. */
interface Recorder {
  writer: CaptureWriter;
  stopper: AnyStopper | null;
  cpuStates: CpuStates | null;
}

/**
 * The capture writer, stopper and thread-state reader of a recording of `source`; throws
 * (having closed what it opened, but not the source) when the target cannot be recorded so.
 */
function openRecorder(
  source: LinuxProcessSource,
  output: string | CaptureSink,
  fields: Omit<RecordingFields, 'facts' | 'startTime' | 'recorder' | 'copy' | 'sampling'>,
  how: { copy: CopyMode; sampling: SamplingMode; readOnly: boolean; bytecode: boolean },
  /** the main target's stopper, whose kind a subprocess's takes (without trying ptrace on it again) */
  like?: AnyStopper | null,
): Recorder {
  const pid = source.pid;
  let writer: CaptureWriter | undefined;
  let cpuStates: CpuStates | null = null;
  try {
    const facts = recordableFacts(source.layout, pid);
    if (how.sampling !== 'wall' && !facts.includes(how.sampling)) throw new RangeError(`--mode ${how.sampling}: ${FACT_MISSING[how.sampling]} (${source.description})`);
    if (facts.includes('cpu')) cpuStates = new CpuStates(pid);
    writer = new CaptureWriter(typeof output === 'string' ? fileSink(output) : output, captureHeader(source, {
      ...fields,
      startTime: Date.now(),
      recorder: RECORDER,
      copy: `${how.copy}${how.readOnly ? ', read-only' : ''}`,
      sampling: how.sampling,
      facts,
      ...(how.bytecode ? {} : { bytecode: false }),
    }));
    const stopper = neverStops(how.copy) ? null : like ? stopperLike(like, pid) : openStopper(pid);
    return { writer, stopper, cpuStates };
  } catch (e) {
    try {
      writer?.close();
    } catch {
      // the first failure is the one reported
    }
    cpuStates?.close();
    throw e;
  }
}

/** Close what a recording held; the first failure (the file's last writes) is thrown. */
function closeRecorder(r: Recorder, source: LinuxProcessSource): void {
  r.stopper?.close();
  r.cpuStates?.close();
  source.close();
  r.writer.close();
}

/**
 * Record a Python process into a capture file until `durationMs` has passed, `signal` aborts
 * or the target exits. A command started here is ended (SIGTERM) when the recording ends
 * before it does. With `subprocesses`, every descendant that runs a CPython this recorder can
 * read is recorded too, into a capture of its own (see SubprocessOptions), until it exits or
 * the main recording ends. Throws TargetError when the target cannot be recorded (not Python,
 * gone, no permission), RangeError on bad options.
 */
export async function recordProcess(options: RecordProcessOptions): Promise<RecordProcessResult> {
  const rateHz = options.rateHz ?? 1000;
  if (!(rateHz > 0 && rateHz <= MAX_RATE_HZ)) throw new RangeError(`rate ${rateHz} Hz is not in (0, ${MAX_RATE_HZ}]`);
  if ((options.pid === undefined) === (options.command === undefined || options.command.length === 0)) {
    throw new RangeError('recordProcess needs either a pid or a command');
  }
  const follow = options.subprocesses === true ? {} : options.subprocesses || null;
  if (follow && !follow.output && typeof options.output !== 'string') {
    throw new RangeError('recordProcess: subprocesses need an output function when the output is not a file name');
  }
  const copy = options.copy ?? 'adaptive';
  if (copy === 'interrupt') {
    if (rateHz > MAX_INTERRUPT_RATE_HZ) throw new RangeError(`copies at the interrupt: at most ${MAX_INTERRUPT_RATE_HZ} Hz (the recorder makes about that many of the kernel's copies into samples a second; more fill its ring buffer and are lost)`);
    // (each needs what is read with a thread's frames at the same moment: not copied in the kernel yet)
    if (options.native && (options.native.stackBytes ?? DEFAULT_STACK_BYTES) > KERNEL_NATIVE_MAX) throw new RangeError(`native stacks copied at the interrupt: at most ${KERNEL_NATIVE_MAX} bytes a thread`);
  }
  if (options.native && copy === 'optimistic') throw new RangeError('native stacks need the threads stopped: not with copy optimistic');
  if (options.native && follow) throw new RangeError('native stacks are not recorded with subprocesses');
  const stackBytes = options.native ? (options.native.stackBytes ?? DEFAULT_STACK_BYTES) : 0;
  if (options.native && !(Number.isInteger(stackBytes) && stackBytes >= 4096 && stackBytes <= 64 << 20)) throw new RangeError(`native stack bytes ${stackBytes} is not an integer in [4096, 64 MiB]`);
  const sampling = options.sampling ?? 'wall';
  const how = { copy, sampling, readOnly: options.readOnly === true, bytecode: options.bytecode !== false };
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

  let main: Recorder;
  let asyncio: AsyncioFound | null = null;
  let kernel: KernelCopier | null = null;
  try {
    if (copy === 'interrupt') {
      // (before the capture file: a recorder that cannot copy at the interrupt writes nothing)
      kernel = openKernelCopier(source, sampling, { rateHz, ...(options.native ? { nativeStackBytes: stackBytes } : {}) });
    }
    if (options.asyncio) asyncio = await asyncioOffsets(source, options.signal, alive);
    if (asyncio && kernel && options.asyncio) copyTasksInKernel(kernel, asyncio, source, options.asyncio);
    main = openRecorder(
      source,
      options.output,
      {
        ...(command ? { command } : {}),
        pid,
        rateHz,
        ...(asyncio ? { asyncio: asyncioField(asyncio, options.asyncio!) } : {}),
        ...(options.native ? { native: { stackBytes } } : {}),
      },
      how,
    );
    // (copies at the interrupt stop nothing: the kernel gives the registers)
    if (options.native && copy !== 'interrupt' && !(main.stopper instanceof ThreadStopper)) {
      closeRecorder(main, source);
      throw new TargetError('unsupported', `${source.description}: native stacks need ptrace (for each thread's registers), which is not allowed on this process here`);
    }
  } catch (e) {
    kernel?.close();
    source.close();
    if (child && alive()) child.kill('SIGTERM');
    throw e;
  }
  const { writer, stopper, cpuStates } = main;
  const native = options.native
    ? new NativeRecorder(pid, copy === 'interrupt' ? null : (stopper as ThreadStopper), (o) => {
        writer.addObject(o);
        options.onObject?.(o);
      }, stackBytes)
    : null;
  native?.refreshObjects(true);
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
  const followed: Followed[] = [];
  const notFollowed: NotFollowed[] = [];
  const onProgress = options.onProgress;
  let stats: SamplerStats;
  let watcher: DescendantWatcher | null = null;
  const results: SubprocessResult[] = [];
  // the first failure is the one reported (closing a file whose writes fail fails again)
  let failure: { error: unknown } | null = null;
  try {
    const sampler = new TargetSampler(source, sink, {
      rateHz,
      copy,
      sampling,
      ...(cpuStates ? { cpuStates } : {}),
      ...(options.readOnly ? { consistency: 'reread' as const } : {}),
      ...(asyncio ? { asyncio: { offsets: asyncio.offsets, mode: options.asyncio! } } : {}),
      ...(options.bytecode === false ? { bytecode: false } : {}),
      ...(stopper ? { stopper } : {}),
      ...(native ? { native } : {}),
      ...(kernel ? { kernel } : {}),
      ...(options.durationMs !== undefined ? { durationMs: options.durationMs } : {}),
      // a target that exits makes the next read fail, and the sampler then asks isAlive
      shouldStop: () => options.signal?.aborted === true || childEnded(),
      isAlive: alive,
      ...(onProgress ? { onProgress: (s: SamplerStats) => onProgress(s, followed.map((f) => f.sampler.stats)) } : {}),
      ...(options.progressEveryMs !== undefined ? { progressEveryMs: options.progressEveryMs } : {}),
    });
    options.onStart?.(source.layout, source.description, asyncio ? { offsets: asyncio.offsets, mode: options.asyncio! } : null);
    if (!follow) {
      stats = await new SamplerGroup().run(sampler);
    } else {
      // with --async-aware, a subprocess that has not imported asyncio yet: looked at again
      // (its memory source kept open) until it has, runs a new program, or exits
      const waiting = new Map<number, AsyncioWait>();
      const lookAtWaiting = (): void => {
        const now = performance.now();
        for (const [cpid, w] of waiting) {
          if (now < w.next) continue;
          let found: AsyncioFound | string | Error;
          try {
            found = processIsRunning(cpid) ? asyncioOffsetsNow(w.source) : new Error('--async-aware: it exited before it imported asyncio');
          } catch (e) {
            // (gone between the two looks, most likely)
            found = e instanceof Error ? e : new Error(String(e));
          }
          if (typeof found === 'string') {
            w.every = Math.min(2 * w.every, ASYNCIO_LOOK_MAX_MS);
            w.next = now + w.every;
            continue;
          }
          waiting.delete(cpid);
          if (found instanceof Error) {
            w.source.close();
            refuse(cpid, w.parentPid, w.command, found);
            watcher!.notRecorded(cpid);
          } else if (startFollowing(w.source, cpid, w.parentPid, w.command, found) !== null) watcher!.notRecorded(cpid);
        }
      };
      const group = new SamplerGroup({
        poll: () => {
          watcher!.poll();
          if (waiting.size) lookAtWaiting();
        },
        pollEveryMs: follow.pollEveryMs ?? SUBPROCESS_POLL_MS,
      });
      const recordings = new Map<number, number>();
      // when each descendant found "not Python" was first looked at (see settled)
      const firstLook = new Map<number, number>();
      const settled = (cpid: number, parentPid: number): string | null | typeof LOOK_AGAIN => {
        const cmd = commandLine(cpid);
        let src: LinuxProcessSource;
        try {
          src = openLinuxProcess(cpid);
        } catch (e) {
          // A program that has just been exec'd may still be loading: its interpreter library
          // (libpython3.N) not yet mapped beside its executable, on a busy machine for longer
          // than the poll that saw it settle. What is not Python is looked at again for a while.
          if (e instanceof TargetError && e.kind === 'not-python' && processIsRunning(cpid)) {
            const now = performance.now();
            const first = firstLook.get(cpid) ?? now;
            firstLook.set(cpid, first);
            if (now - first < LOADING_WAIT_MS) return LOOK_AGAIN;
          }
          firstLook.delete(cpid);
          return refuse(cpid, parentPid, cmd, attachFailure(cpid, e));
        }
        firstLook.delete(cpid);
        if (!options.asyncio) return startFollowing(src, cpid, parentPid, cmd, null);
        let found: AsyncioFound | string;
        try {
          found = asyncioOffsetsNow(src);
        } catch (e) {
          src.close();
          return refuse(cpid, parentPid, cmd, attachFailure(cpid, e));
        }
        if (typeof found !== 'string') return startFollowing(src, cpid, parentPid, cmd, found);
        waiting.set(cpid, { source: src, parentPid, command: cmd, every: SUBPROCESS_POLL_MS, next: performance.now() + SUBPROCESS_POLL_MS });
        return null;
      };
      const refuse = (cpid: number, parentPid: number, cmd: string[], e: unknown): string => {
        const why = e instanceof Error ? e.message : String(e);
        notFollowed.push({ pid: cpid, parentPid, command: cmd, why });
        return why;
      };
      /** Record subprocess `cpid` (its source open; with its asyncio offsets when --async-aware): null, or why it is not followed. */
      const startFollowing = (src: LinuxProcessSource, cpid: number, parentPid: number, cmd: string[], tasks: AsyncioFound | null): string | null => {
        const nth = (recordings.get(cpid) ?? 0) + 1;
        let out: string | CaptureSink;
        let rec: Recorder;
        // its own copier in the kernel (before its capture file: one that cannot copy at the
        // interrupt is not followed, and writes nothing), with a smaller ring buffer than the
        // main target's: a pool of workers each holds one
        let kern: KernelCopier | null = null;
        try {
          if (copy === 'interrupt') kern = openKernelCopier(src, sampling, { rateHz, ringBytes: SUBPROCESS_RING_BYTES });
          if (kern && tasks && options.asyncio) copyTasksInKernel(kern, tasks, src, options.asyncio);
        } catch (e) {
          kern?.close();
          src.close();
          return refuse(cpid, parentPid, cmd, attachFailure(cpid, e));
        }
        try {
          out = follow.output ? follow.output(cpid, nth) : subprocessOutput(options.output as string, cpid, nth);
          rec = openRecorder(
            src,
            out,
            { ...(cmd.length ? { command: cmd } : {}), pid: cpid, parentPid, rootPid: pid, rateHz, ...(tasks ? { asyncio: asyncioField(tasks, options.asyncio!) } : {}) },
            how,
            stopper,
          );
        } catch (e) {
          kern?.close();
          src.close();
          return refuse(cpid, parentPid, cmd, attachFailure(cpid, e));
        }
        recordings.set(cpid, nth);
        const f: Followed = { pid: cpid, parentPid, command: cmd, target: src.description, output: typeof out === 'string' ? out : null, execed: false, sampler: null! };
        try {
          f.sampler = new TargetSampler(src, rec.writer, {
            rateHz,
            copy,
            sampling,
            ...(rec.cpuStates ? { cpuStates: rec.cpuStates } : {}),
            ...(options.readOnly ? { consistency: 'reread' as const } : {}),
            ...(rec.stopper ? { stopper: rec.stopper } : {}),
            ...(options.bytecode === false ? { bytecode: false } : {}),
            ...(tasks ? { asyncio: { offsets: tasks.offsets, mode: options.asyncio! } } : {}),
            ...(kern ? { kernel: kern } : {}),
            shouldStop: () => f.execed,
            isAlive: () => processIsRunning(cpid),
          });
        } catch (e) {
          kern?.close();
          try {
            closeRecorder(rec, src);
          } catch {
            // the first failure is the one reported
          }
          return refuse(cpid, parentPid, cmd, e);
        }
        followed.push(f);
        follow.onStart?.({ pid: cpid, parentPid, command: cmd, target: f.target, output: f.output });
        const attached = performance.now();
        group.add(f.sampler, (s, error) => {
          let why = error;
          kern?.close();
          try {
            closeRecorder(rec, src);
          } catch (e) {
            why ??= e;
          }
          const ended: SubprocessResult['ended'] = why ? 'failed' : s.ended === 'target-exited' ? 'exited' : f.execed ? 'exec' : 'recording-ended';
          if (ended === 'exited') watcher!.forget(cpid);
          if (ended === 'exec' && performance.now() - attached < PRE_EXEC_MS && f.output !== null) {
            // a copy of its parent on its way to exec (a Popen child found before its exec, on a
            // busy machine): no capture of its own — the program it runs now takes the name
            followed.splice(followed.indexOf(f), 1);
            recordings.set(cpid, nth - 1);
            fs.rmSync(f.output, { force: true });
            return;
          }
          const r: SubprocessResult = {
            pid: cpid,
            parentPid,
            command: cmd,
            target: f.target,
            output: f.output,
            stats: s,
            stoppedMicros: rec.stopper?.stoppedMicros ?? 0,
            ended,
            ...(why ? { error: why instanceof Error ? why.message : String(why) } : {}),
          };
          results.push(r);
          follow.onEnd?.(r);
        });
        return null;
      };
      watcher = new DescendantWatcher(pid, {
        settled,
        execed: (cpid) => {
          for (const f of followed) if (f.pid === cpid) f.execed = true;
          // (one still waiting for asyncio is looked at again as the program it runs now)
          const w = waiting.get(cpid);
          if (w) {
            waiting.delete(cpid);
            w.source.close();
          }
        },
      });
      try {
        stats = await group.run(sampler);
      } finally {
        for (const [cpid, w] of waiting) {
          w.source.close();
          notFollowed.push({ pid: cpid, parentPid: w.parentPid, command: w.command, why: '--async-aware: it had not imported asyncio when the recording ended' });
        }
        waiting.clear();
      }
    }
    if (stats.ended === 'stopped' && !alive()) stats.ended = 'target-exited';
  } catch (e) {
    failure = { error: e };
    throw e;
  } finally {
    // a command started here does not outlive a recording that failed
    if (failure && child && alive()) child.kill('SIGTERM');
    native?.close();
    kernel?.close();
    try {
      closeRecorder(main, source);
    } catch (e) {
      if (!failure) throw e;
    }
  }
  if (child && alive()) child.kill('SIGTERM');
  return {
    target: source.description,
    pid,
    stats,
    stoppedMicros: stopper?.stoppedMicros ?? 0,
    targetExited: stats.ended === 'target-exited',
    interruptPossible:
      copy !== 'interrupt' &&
      kernelCopiesReach(source.layout) &&
      rateHz <= MAX_INTERRUPT_RATE_HZ &&
      !options.readOnly &&
      mayLoadKernelCopier() &&
      fs.existsSync(bpfObjectPath()),
    subprocesses: results.sort((a, b) => a.pid - b.pid),
    notFollowed,
    ...(watcher ? { watching: watcher.cost } : {}),
  };
}

/** How often record --subprocesses looks for new descendants (ms). */
export const SUBPROCESS_POLL_MS = 20;
/** How long a descendant that does not look like Python is looked at again (at every poll) before it is left unfollowed: its program may still be loading. */
const LOADING_WAIT_MS = 300;

/**
 * A subprocess that runs a new program within this long of being attached was a copy of its
 * parent on its way to exec (a subprocess.Popen child seen twice before its exec, which a
 * busy machine can delay): its capture is dropped, and the new program's takes its name.
 */
const PRE_EXEC_MS = 500;

/** A subprocess being recorded. */
interface Followed {
  pid: number;
  parentPid: number;
  command: string[];
  target: string;
  output: string | null;
  /** it ran a new program: its recording ends */
  execed: boolean;
  sampler: TargetSampler;
}

/** A subprocess waiting to import asyncio (record --subprocesses --async-aware). */
interface AsyncioWait {
  source: LinuxProcessSource;
  parentPid: number;
  command: string[];
  /** looked at again at `next` (performance.now()), then `every` ms later, doubling up to ASYNCIO_LOOK_MAX_MS */
  every: number;
  next: number;
}

/**
 * A subprocess that has not imported asyncio is looked at at doubling intervals up to this
 * (ms): one that never does costs a /proc/PID/maps read this often, one that does is recorded
 * at most this late.
 */
const ASYNCIO_LOOK_MAX_MS = 160;

/** The capture header's asyncio field. */
function asyncioField(found: AsyncioFound, mode: AsyncMode): { mode: AsyncMode; debugOffsets: string } {
  return { mode, debugOffsets: Buffer.from(found.debugOffsets).toString('hex') };
}

/**
 * Why a child could not be attached. One that ends meanwhile loses its /proc files (also while
 * it is still exiting, before it is a zombie) or fails a read part-way: it is said to have
 * exited, with the failure it caused when that says more.
 */
function attachFailure(cpid: number, e: unknown): string {
  if (e instanceof TargetError && e.kind === 'no-process') return 'it exited while it was being attached';
  const message = e instanceof Error ? e.message : String(e);
  return processIsRunning(cpid) && !memoryReleased(cpid) ? message : `it exited while it was being attached (${message})`;
}

/** Has process `pid` (a child seen running a program) let go of its memory: it is exiting? */
function memoryReleased(pid: number): boolean {
  try {
    return fs.readFileSync(`/proc/${pid}/maps`, 'latin1').length === 0;
  } catch {
    return true;
  }
}

/**
 * The asyncio module's debug offsets of a target (3.14+), once it has imported asyncio: polled
 * until then (or until the recording is stopped or the target exits).
 */
async function asyncioOffsets(source: LinuxProcessSource, signal: AbortSignal | undefined, alive: () => boolean): Promise<AsyncioFound> {
  for (;;) {
    const found = asyncioOffsetsNow(source);
    if (typeof found !== 'string') return found;
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
