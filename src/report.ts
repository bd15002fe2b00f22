// From a capture file to a profile: read the blocks in order and process each — by default in
// the WebAssembly block engine (src/walk/engine.ts), which decodes, patches, walks and counts a
// block's samples without the host touching one; a block the engine would not decode exactly
// as the reference reader does goes the reference way (decode, walk each sample, add it), as
// every block does when a caller wants each sample (onSample) or brings its own walker. The
// recorder's `torn` verdict stands. Rejected samples are only counted.

import { decodeBlock, openCapture, type RawBlock } from './capture/reader.js';
import type { CaptureHeader, CaptureWarning, SampleRecord } from './capture/types.js';
import { SAMPLE_FLAG } from './capture/types.js';
import { layoutFromSource } from './layout/index.js';
import { SampleProcessor, type ProcessedSample } from './process.js';
import { Profile } from './profile/index.js';
import type { SampleInput } from './profile/types.js';
import { BlockEngine, CopyStats, type BlockResult } from './walk/engine.js';
import type { Walker } from './walk/index.js';
import { KernelWalker } from './walk/kernel-walker.js';

export interface ReportOptions {
  /** keep only samples of this thread (native thread id, or thread_id) */
  thread?: bigint;
  /** walk every sample with this walker, on the reference path (default: the block engine) */
  walker?: Walker;
  /** called after each block with the samples processed so far */
  onProgress?: (samples: number, blocks: number) => void;
  /** called with every processed sample (for tests and tools that want more than the profile); implies the reference path */
  onSample?: (p: ProcessedSample) => void;
  /** process every block on the reference path (decode, walk and add each sample) */
  reference?: boolean;
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
  warnings: CaptureWarning[];
  closedCleanly: boolean;
  blocks: number;
  /** blocks processed on the reference path although the engine was asked for */
  fallbackBlocks: number;
}

export function sampleInput(p: ProcessedSample): SampleInput {
  const s = p.sample;
  return {
    time: s.time,
    thread: {
      interpreterId: s.interpreterId,
      threadId: s.threadId,
      nativeThreadId: s.nativeThreadId,
      ...(s.flags & SAMPLE_FLAG.MAIN ? { name: 'MainThread' } : {}),
    },
    status: p.status,
    frames: p.frames.map((f) => ({ qualname: f.qualname, filename: f.filename, line: f.line })),
  };
}

const keep = (thread: bigint | undefined) => (s: SampleRecord) =>
  thread === undefined || s.nativeThreadId === thread || s.threadId === thread;

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

export async function reportCapture(path: string, options: ReportOptions = {}): Promise<CaptureReport> {
  const reader = await openCapture(path);
  try {
    const header = reader.header;
    const layout = layoutFromSource(header.layoutSource);
    const useEngine = !options.reference && !options.onSample && !options.walker;
    const engine = useEngine ? await BlockEngine.load(layout, options.thread === undefined ? {} : { thread: options.thread }) : null;
    const processor = new SampleProcessor(layout, options.walker ?? (await KernelWalker.load()), undefined, engine?.codes);
    const profile = new Profile();
    const copies = new CopyStats();

    /** One block the reference way: decode it, walk each sample, add it. */
    const reference = (raw: RawBlock, into: Profile, copied: CopyStats): BlockResult => {
      const { block, warnings } = decodeBlock(raw);
      const result: BlockResult = { samples: 0, ticks: 0, firstTime: null, lastTime: null, missed: 0, warnings, fallback: true, decoded: block !== null };
      if (!block) return result;
      result.missed = block.missed;
      let last = -1;
      for (const s of block.samples) {
        if (s.time !== last) result.ticks++;
        last = s.time;
        result.firstTime ??= s.time;
        result.lastTime = s.time;
        result.samples++;
      }
      processor.addCodes(block.codes);
      const chosen = block.samples.filter(keep(options.thread));
      for (const s of chosen) copied.add(s.copyMicros, s.flags);
      for (const p of processor.process(chosen)) {
        into.add(sampleInput(p));
        options.onSample?.(p);
      }
      return result;
    };

    let blocks = 0;
    let samples = 0;
    let fallbackBlocks = 0;
    // a tick samples every thread at one time: its samples share that time and follow each
    // other, also across the end of a block
    let lastTime: number | null = null;
    for (const raw of reader.rawBlocks()) {
      const r = engine ? engine.processBlock(raw, profile, copies, reference) : reference(raw, profile, copies);
      for (const w of r.warnings) reader.report(w);
      if (engine && r.fallback) fallbackBlocks++;
      if (!r.decoded) continue;
      blocks++;
      profile.addTicks(r.ticks - (r.firstTime !== null && r.firstTime === lastTime ? 1 : 0));
      if (r.lastTime !== null) lastTime = r.lastTime;
      if (r.missed) profile.addMissed(r.missed);
      samples += r.samples;
      options.onProgress?.(samples, blocks);
    }
    return { header, profile, recording: recordingStats(copies), warnings: [...reader.warnings], closedCleanly: reader.closedCleanly, blocks, fallbackBlocks };
  } finally {
    reader.close();
  }
}
