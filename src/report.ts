// From a capture file to a profile: read the blocks in order, walk every sample with the
// WebAssembly kernel (the recorder's `torn` verdict stands), symbolize the trusted ones and
// aggregate them. Rejected samples are only counted.

import { openCapture } from './capture/index.js';
import type { CaptureHeader, CaptureWarning, SampleRecord } from './capture/types.js';
import { SAMPLE_FLAG } from './capture/types.js';
import { layoutFromSource } from './layout/index.js';
import { SampleProcessor, type ProcessedSample } from './process.js';
import { Profile } from './profile/index.js';
import type { SampleInput } from './profile/types.js';
import type { Walker } from './walk/index.js';
import { KernelWalker } from './walk/kernel-walker.js';

export interface ReportOptions {
  /** keep only samples of this thread (native thread id, or thread_id) */
  thread?: bigint;
  walker?: Walker;
  /** called after each block with the samples processed so far */
  onProgress?: (samples: number, blocks: number) => void;
  /** called with every processed sample (for tests and tools that want more than the profile) */
  onSample?: (p: ProcessedSample) => void;
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

export async function reportCapture(path: string, options: ReportOptions = {}): Promise<CaptureReport> {
  const reader = await openCapture(path);
  try {
    const header = reader.header;
    const layout = layoutFromSource(header.layoutSource);
    const processor = new SampleProcessor(layout, options.walker ?? (await KernelWalker.load()));
    const profile = new Profile();
    let blocks = 0;
    let samples = 0;
    const copy: number[] = [];
    let stopped = 0;
    let retried = 0;
    // a tick samples every thread at one time: its samples share that time, and follow each other
    let lastTime = -1;
    for await (const block of reader.blocks()) {
      blocks++;
      for (const s of block.samples) {
        if (s.time !== lastTime) profile.addTicks(1);
        lastTime = s.time;
      }
      processor.addCodes(block.codes);
      const chosen = block.samples.filter(keep(options.thread));
      for (const s of chosen) {
        copy.push(s.copyMicros);
        if (s.flags & SAMPLE_FLAG.STOPPED) stopped++;
        if (s.flags & SAMPLE_FLAG.RETRIED) retried++;
      }
      for (const p of processor.process(chosen)) {
        profile.add(sampleInput(p));
        options.onSample?.(p);
      }
      if (block.missed) profile.addMissed(block.missed);
      samples += chosen.length;
      options.onProgress?.(samples, blocks);
    }
    copy.sort((a, b) => a - b);
    const at = (q: number): number => (copy.length ? copy[Math.min(copy.length - 1, Math.floor(q * copy.length))]! : 0);
    const recording: RecordingStats = {
      samples: copy.length,
      copyMicros: { mean: copy.length ? Math.round(copy.reduce((a, b) => a + b, 0) / copy.length) : 0, p50: at(0.5), p99: at(0.99), max: at(1) },
      stopped,
      retried,
    };
    return { header, profile, recording, warnings: [...reader.warnings], closedCleanly: reader.closedCleanly, blocks };
  } finally {
    reader.close();
  }
}
