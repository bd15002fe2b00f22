// From a capture to a profile: read the blocks in order (a file is streamed, a block at a
// time), inflate each, and process it — by default in the WebAssembly block engine
// (src/kernel/block-engine.ts), which decodes, patches, walks and counts a block's samples without the
// host touching one; a block the engine would not decode exactly as the reference reader does
// goes the reference way (decode, walk each sample, add it), as every block does when a caller
// wants each sample (onSample) or brings its own walker (src/pipeline/block-processor.ts). Given a pool
// (Node: worker threads, src/pipeline/workers/, through src/pipeline/report-file.ts), blocks are processed by it:
// their counts taken in file order, and each worker's profile (its blocks add to one of its own)
// merged at the end: the profile is the same whatever the worker count. The
// recorder's `torn` verdict stands. Rejected samples are only counted.
//
// Nothing here imports a Node module (the processing entry, src/processing.ts, runs in every
// runtime): reportCaptureBytes is the whole report of a capture in memory; src/pipeline/report-file.ts adds
// files and worker threads for Node.

import { leadingCodes, readCaptureBytes, type CaptureReader, type RawBlock } from '../capture/reader.js';
import type { CaptureHeader, CaptureWarning, CodeRecord, SamplingMode } from '../capture/types.js';
import type { LayoutSource } from '../layout/layout.js';
import { layoutFromSource } from '../layout/index.js';
import { OPCODE_TABLES, opcodeTable } from '../symbols/opcodes.js';
import { BlockProcessor, openBlock, skipped, type ProcessedBlock } from './block-processor.js';
import { sampleInput, type PseudoFrames } from './sample-chain.js';
import type { ProcessedSample } from './sample-processor.js';
import { Profile, ThreadNameTable, Timeline } from '../profile/index.js';
import type { ProfileTransfer } from '../profile/profile.js';
import type { SampleInput } from '../profile/types.js';
import { CopyStats } from '../kernel/block-engine.js';
import type { Walker } from '../walk/index.js';
import { loadKernel } from '../kernel/load.js';
import { parseAsyncioOffsets, type AsyncioOffsets } from '../layout/asyncio-offsets.js';
import type { AsyncMode } from '../walk/task-graph.js';
import type { NativeObject } from '../native/objects.js';

export { sampleInput };

export interface ReportOptions {
  /** keep only samples of this thread (native thread id, or thread_id) */
  thread?: bigint;
  /**
   * keep only the samples of threads on a CPU, holding the GIL, or handling an exception (default:
   * the capture's own mode, wall for most). Refused (RangeError) for a fact the capture does not
   * record, and for another mode than a capture recorded in a mode other than wall.
   */
  mode?: SamplingMode;
  /** a <GC> frame above the stack of a thread in which the garbage collector was running (default true; the capture must tell it: 3.13+) */
  gc?: boolean;
  /**
   * Native frames (default false). On a capture recorded with native stacks (header.native): the
   * C frames, in one stack with the Python frames, unwound from each sample's registers and stack
   * copy with the capture's own unwind tables and named by its symbols (src/native/); a sample
   * that cannot be shown so is counted native-incomplete or native-unmatched. On any other
   * capture: a <native> frame between a Python frame and the frame it called through C code
   * (sorted's key, map, a C module's callback) — every capture can tell that: the entry frames
   * (3.12+) and is_entry flags (3.11) are in the copied memory.
   */
  native?: boolean;
  /**
   * name each frame's instruction as well (SourceFrame.opcode: a frame is then (function, line,
   * instruction)). Refused (RangeError) for a capture whose code records hold no bytecode.
   */
  opcodes?: boolean;
  /** walk every sample with this walker, on the reference path (default: the block engine) */
  walker?: Walker;
  /** called after each block with the samples processed so far */
  onProgress?: (samples: number, blocks: number) => void;
  /** called with every processed sample (for tests and tools that want more than the profile); implies the reference path */
  onSample?: (p: ProcessedSample) => void;
  /** process every block on the reference path (decode, walk and add each sample) */
  reference?: boolean;
  /**
   * worker threads to process blocks in (Node; the engine path only), exactly; 0: this thread.
   * Default: as many as pay for the capture's size, up to `maxWorkers` (the host's rule — Node:
   * workersThatPay; the viewer: one per core from WORKERS_FROM_BYTES).
   */
  workers?: number;
  /** with no `workers`: at most this many (report -j N); the host picks as many as pay, up to it */
  maxWorkers?: number;
  /** stop after the block in which this many samples have been processed (a quick look, benchmarks) */
  maxSamples?: number;
  /**
   * async-aware stacks (src/pipeline/task-stacks.ts): each running task's stack (`running`), or every
   * task's (`all`), from the tasks a capture recorded with --async-aware (RangeError otherwise).
   * `recorded`: the mode the capture was recorded in. Processed on the reference path.
   */
  asyncAware?: AsyncMode | 'recorded';
  /** also collect every sample in time order (CaptureReport.timeline); implies the reference path */
  timeline?: boolean;
}

/** How the samples were copied: what the recorder measured, over the samples reported. */
export interface RecordingStats {
  samples: number;
  /** time each copy took, µs (the copy that was kept) */
  copyMicros: { mean: number; p50: number; p99: number; max: number };
  /** samples copied with the target stopped (blocking, or adaptive after a copy moved) */
  stopped: number;
  /** samples whose first copy moved and was made again */
  retried: number;
}

export interface CaptureReport {
  header: CaptureHeader;
  profile: Profile;
  recording: RecordingStats;
  /** every problem reading the capture found, in file order */
  warnings: CaptureWarning[];
  /** the file ends with the recorder's end block (otherwise it was cut short) */
  closedCleanly: boolean;
  /** record blocks whose samples are in the profile */
  blocks: number;
  /**
   * record blocks skipped as damaged: those seen but not decoded, or, when the file has an end
   * block and every block was read, as many as it counts beyond those read
   */
  skippedBlocks: number;
  /** sample records lost in damaged blocks, from the end block's count; null when it cannot be counted */
  lostSamples: number | null;
  /** samples the mode left out because the recorder could not tell whether its fact held (cpu: the thread's state unreadable) */
  undetermined: number;
  /** samples whose thread had more asyncio tasks on its list than a report follows (MAX_TASKS, async mode all) */
  cutTaskLists: number;
  /** blocks processed on the reference path although the engine was asked for */
  fallbackBlocks: number;
  /** every sample in time order (with the `timeline` option) */
  timeline?: Timeline;
  /** the samples the profile holds: every thread's (wall), or those a fact held for */
  mode: SamplingMode;
  /** with native frames (report --native on a capture with native stacks): the objects it described, as the last samples saw them */
  objects?: readonly NativeObject[];
}

/** The pseudo-frames a report shows: <GC> unless told not to, <native> when asked. */
export function pseudoFrames(options: Pick<ReportOptions, 'gc' | 'native'>): Required<PseudoFrames> {
  return { gcFrames: options.gc !== false, nativeFrames: options.native === true };
}

/** The mode a report of this capture keeps (see ReportOptions.mode), or why it cannot. */
export function reportMode(header: CaptureHeader, asked: SamplingMode | undefined): SamplingMode {
  const recorded = header.sampling ?? 'wall';
  if (asked === undefined || asked === recorded) return recorded;
  if (recorded !== 'wall') throw new RangeError(`mode ${asked}: the capture was recorded in mode ${recorded}, and holds only those samples`);
  if (asked !== 'wall' && !(header.facts ?? []).includes(asked)) {
    const told = header.facts?.length ? `it tells only ${header.facts.join(', ')}` : 'it tells none (recorded before pyunwind 0.2, or by the Pyodide recorder)';
    throw new RangeError(`mode ${asked}: the capture does not tell which samples had it: ${told}`);
  }
  return asked;
}

/** The asyncio offsets a capture recorded its tasks with, for an async-aware report in `mode`; RangeError where it cannot give one. */
export function asyncioOffsetsOf(header: CaptureHeader, mode: AsyncMode): AsyncioOffsets {
  const a = header.asyncio;
  if (!a) throw new RangeError('async-aware: the capture holds no asyncio tasks (record it with --async-aware, CPython 3.14+)');
  if (mode === 'all' && a.mode !== 'all') throw new RangeError(`async mode all: the capture holds only the running tasks (recorded with --async-mode ${a.mode})`);
  // (the header's reader checked it is hex; no Buffer here: this runs in every runtime)
  const bytes = new Uint8Array(a.debugOffsets.length >> 1);
  for (let i = 0; i < bytes.length; i++) bytes[i] = parseInt(a.debugOffsets.slice(2 * i, 2 * i + 2), 16);
  return parseAsyncioOffsets(bytes);
}

/** Can frames of this capture be named with their instruction (report --opcodes)? Throws RangeError saying why not. */
export function checkBytecode(header: CaptureHeader): void {
  if (header.bytecode === true) {
    const layout = layoutFromSource(header.layoutSource);
    if (opcodeTable(layout.code.opcodes) !== null) return;
    throw new RangeError(`--opcodes: this pyunwind has no opcode table for Python ${header.pythonVersion} (it has ${OPCODE_TABLES.join(', ')})`);
  }
  const why = header.bytecode === false ? `${header.recorder} recorded it without` : `recorded by ${header.recorder}, before captures kept it`;
  throw new RangeError(`--opcodes: the capture does not hold bytecode (${why}): record the program again to name its instructions`);
}

export function recordingStats(copies: CopyStats): RecordingStats {
  return {
    samples: copies.samples,
    copyMicros: {
      mean: copies.samples ? Math.round(copies.sum / copies.samples) : 0,
      p50: copies.quantile(0.5),
      p99: copies.quantile(0.99),
      max: copies.samples ? copies.max : 0,
    },
    stopped: copies.stopped,
    retried: copies.retried,
  };
}

/** Where no file system is (a browser, a worker, an edge runtime): what the kernel is made from, and where blocks are processed. */
export interface BytesReportOptions extends Omit<ReportOptions, 'workers'> {
  /** the walk kernel — either build, compiled or as bytes (see loadKernel); default: build/kernel-unshared.wasm next to the package (Node, Deno, Bun) */
  module?: WebAssembly.Module | BufferSource;
  /** names the capture in warnings (default "capture") */
  name?: string;
  /** workers to spread the blocks over, with `pool` (default 0: this thread) */
  workers?: number;
  /** makes a pool of `workers` block processors (a page: Web Workers running web/block-worker.ts's handler) */
  pool?: ProcessHost['pool'];
}

/**
 * The same report from a capture in memory: no file system — what a browser, a Web Worker or
 * an edge runtime can run. In this thread, or spread over the workers of the caller's `pool`.
 * The bytes may be a view into a SharedArrayBuffer: a pool's workers then read each block from
 * it where it is, nothing copied.
 */
export async function reportCaptureBytes(bytes: Uint8Array, options: BytesReportOptions = {}): Promise<CaptureReport> {
  const { module, name, pool, workers = 0, ...rest } = options;
  const host: ProcessHost = { module: await loadKernel(module), ...(pool ? { pool } : {}) };
  return processCapture(() => readCaptureBytes(bytes, name), { ...rest, workers }, host);
}

/** Captures smaller than this are processed in the calling thread by default: workers would cost more than they save. */
export const WORKERS_FROM_BYTES = 4 << 20;

/**
 * Capture bytes a Node worker thread must have for its share to pay (docs/benchmarks.md,
 * "Section blocks"): a pool of two costs about 0.2 s to start, stop and merge, and a worker runs its
 * blocks colder than the calling thread; on this machine a 12.6 MB recording of configs.py (the
 * fastest to process per byte: 11 MB/s in one thread) broke even with two workers.
 */
export const WORKER_BYTES = 8 << 20;

/**
 * How many worker threads pay for a capture of this size, out of `available`: none (one worker
 * is only slower than this thread), or two and more, each with WORKER_BYTES of the capture.
 */
export function workersThatPay(captureBytes: number, available: number): number {
  const n = Math.min(available, Math.floor(captureBytes / WORKER_BYTES));
  return n >= 2 ? n : 0;
}

/** A pool that processes blocks elsewhere (Node: worker threads, src/pipeline/workers/pool.ts). */
export interface BlockPool {
  /** blocks submitted and not yet taken */
  readonly queued: number;
  /** a block can be submitted */
  readonly hasRoom: boolean;
  /** a block as stored, with the code records at its start (leadingCodes) */
  submit(raw: RawBlock, leading: CodeRecord[]): void;
  /** resolves at the next answer */
  answered(): Promise<void>;
  /** the answers of the oldest blocks, in submission order, as far as they are there */
  takeReady(): Iterable<ProcessedBlock | LateCodes>;
  /** what the blocks added, one profile per worker: asked once every answer is taken */
  profiles(): Promise<ProfileTransfer[]>;
  close(): Promise<void>;
}

/**
 * A pool's answer for a block whose code records are not all at its start (pyunwind never
 * writes one, but a capture may hold it): the blocks processed meanwhile by other workers may
 * have needed them, so the capture is processed again in one thread (processCapture).
 */
export interface LateCodes {
  lateCodes: true;
}

/** What the runtime offers processCapture besides this thread. */
export interface ProcessHost {
  /** the compiled kernel, either build (default: loadKernel(), the unshared one) */
  module?: WebAssembly.Module;
  /** the worker count when the caller names none, for a capture of this many bytes (default 0) */
  defaultWorkers?(captureBytes: number): number;
  /** a pool of `workers` block processors (none: workers >= 1 is refused) */
  pool?(workers: number, setup: { layoutSource: LayoutSource; module: WebAssembly.Module; thread?: bigint; mode?: SamplingMode; gcFrames?: boolean; nativeFrames?: boolean; opcodes?: boolean }): Promise<BlockPool>;
}

/**
 * The report of a capture, read from the reader `open` gives (closed at the end; opened again,
 * to be processed in this thread, if a pool met a block it cannot take: LateCodes).
 */
export async function processCapture(open: () => CaptureReader | Promise<CaptureReader>, options: ReportOptions, host: ProcessHost = {}): Promise<CaptureReport> {
  const reader = await open();
  let timeline: Timeline | undefined;
  // every sample as the profile takes it, in time order (the reference path)
  let onInput: ((i: SampleInput) => void) | undefined;
  if (options.timeline) {
    const t = (timeline = new Timeline());
    onInput = (i) => t.add(i);
    options = { ...options, reference: true };
  }
  let pool: BlockPool | null = null;
  try {
    const header = reader.header;
    const mode = reportMode(header, options.mode);
    // --native: C frames where the capture has native stacks, else <native> markers
    const nativeStacks = options.native === true && header.native !== undefined;
    const { gcFrames, nativeFrames: markers } = pseudoFrames(options);
    const nativeFrames = markers && !nativeStacks;
    if (nativeStacks && options.asyncAware) throw new RangeError('native frames and async-aware stacks are not shown together: --native or --async-aware');
    const opcodes = options.opcodes === true;
    if (opcodes) checkBytecode(header);
    const layout = layoutFromSource(header.layoutSource);
    const asyncMode = options.asyncAware === 'recorded' ? (header.asyncio?.mode ?? 'running') : options.asyncAware;
    const tasks = asyncMode ? { offsets: asyncioOffsetsOf(header, asyncMode), mode: asyncMode } : null;
    const engineOnly = !options.reference && !options.onSample && !options.walker && !tasks && !nativeStacks;
    const workers = options.workers ?? Math.min(options.maxWorkers ?? Infinity, host.defaultWorkers?.(reader.size) ?? 0);
    if (!(Number.isInteger(workers) && workers >= 0)) throw new RangeError(`workers must be a whole number >= 0 (got ${workers})`);
    if (engineOnly && workers >= 1 && !host.pool) throw new RangeError(`workers: ${workers} asked for, but this runtime has no worker pool here (process in this thread: workers 0)`);
    // (a caller's own walker needs no kernel)
    const module = host.module ?? (options.walker ? undefined : await loadKernel());
    let local: BlockProcessor | null = null;
    if (engineOnly && workers >= 1 && host.pool && module) {
      pool = await host.pool(workers, { layoutSource: header.layoutSource, module, mode, gcFrames, nativeFrames, opcodes, ...(options.thread === undefined ? {} : { thread: options.thread }) });
    } else {
      local = await BlockProcessor.load(layout, {
        ...(module ? { module } : {}),
        ...(options.thread === undefined ? {} : { thread: options.thread }),
        mode,
        gcFrames,
        nativeFrames,
        ...(nativeStacks ? { nativeStacks: true } : {}),
        opcodes,
        ...(options.walker ? { walker: options.walker } : {}),
        ...(options.onSample ? { onSample: options.onSample } : {}),
        ...(options.reference ? { reference: true } : {}),
        ...(tasks ? { tasks } : {}),
        ...(onInput ? { onInput } : {}),
      });
    }

    const profile = new Profile();
    const copies = new CopyStats();
    // the names threading gave the threads: applied once every block is in (thread-names.ts)
    const names = new ThreadNameTable();
    let blocks = 0;
    let undecoded = 0;
    let undetermined = 0;
    let cutTaskLists = 0;
    let samples = 0;
    let fallbackBlocks = 0;
    // a tick samples every thread at one time: its samples share that time and follow each
    // other, also across the end of a block
    let lastTime: number | null = null;
    let late = false;
    const take = (done: ProcessedBlock | LateCodes): void => {
      if ('lateCodes' in done) {
        late = true;
        return;
      }
      const r = done.result;
      for (const w of r.warnings) reader.report(w);
      if (engineOnly && r.fallback) fallbackBlocks++;
      if (!r.decoded) {
        undecoded++;
        return;
      }
      names.addAll(r.names ?? []);
      // (a block processed in this thread added to the profile itself; a worker adds to its own,
      // merged at the end)
      if (done.profile && done.profile !== profile) profile.merge(done.profile);
      copies.merge(done.copies);
      blocks++;
      profile.addTicks(r.ticks - (r.firstTime !== null && r.firstTime === lastTime ? 1 : 0));
      if (r.lastTime !== null) lastTime = r.lastTime;
      if (r.missed) profile.addMissed(r.missed);
      samples += r.samples;
      undetermined += r.undetermined;
      cutTaskLists += r.cutTaskLists;
      perBlock = samples / blocks;
      options.onProgress?.(samples, blocks);
    };
    const enough = (): boolean => options.maxSamples !== undefined && samples + (pool ? pool.queued * perBlock : 0) >= options.maxSamples;
    let perBlock = 0;
    let readAll = true;
    for (const raw of reader.rawBlocks()) {
      if (enough() || late) {
        readAll = false;
        break;
      }
      if (pool) {
        while (!pool.hasRoom) {
          await pool.answered();
          for (const done of pool.takeReady()) take(done);
        }
        pool.submit(raw, leadingCodes(raw));
        for (const done of pool.takeReady()) take(done);
        continue;
      }
      const opened = openBlock(raw);
      if ('warning' in opened) {
        take(skipped(opened.warning));
        continue;
      }
      local!.addCodes(opened.codes);
      take(local!.process(opened.block, profile));
    }
    while (pool && pool.queued > 0 && !late) {
      await pool.answered();
      for (const done of pool.takeReady()) take(done);
    }
    if (late) {
      await pool?.close();
      pool = null;
      reader.close();
      return processCapture(open, { ...options, workers: 0 }, host);
    }
    // (the profile does not depend on the order its parts are merged in)
    if (pool) for (const part of await pool.profiles()) profile.mergeTransfer(part);
    names.nameProfile(profile);
    if (timeline) names.nameTimeline(timeline);
    // in file order, whichever thread found them when
    const warnings = [...reader.warnings].sort((a, b) => a.offset - b.offset);
    // the end block counts what the recorder wrote: the difference is what damage took (a
    // damaged block header loses the blocks up to the next intact one, unseen)
    const trailer = readAll ? reader.trailer : null;
    const skippedBlocks = trailer ? Math.max(undecoded, trailer.blocks - blocks) : undecoded;
    // (without it, what a damaged or cut block held is unknown)
    const lostSamples = trailer ? Math.max(0, trailer.samples - samples) : skippedBlocks === 0 && warnings.length === 0 ? 0 : null;
    return {
      header,
      profile,
      ...(local && nativeStacks ? { objects: local.objects.objects } : {}),
      recording: recordingStats(copies),
      warnings,
      closedCleanly: reader.closedCleanly,
      blocks,
      skippedBlocks,
      lostSamples,
      undetermined,
      cutTaskLists,
      fallbackBlocks,
      mode,
      ...(timeline ? { timeline } : {}),
    };
  } finally {
    reader.close();
    await pool?.close();
  }
}
