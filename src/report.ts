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

export interface CaptureReport {
  header: CaptureHeader;
  profile: Profile;
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
    for await (const block of reader.blocks()) {
      blocks++;
      processor.addCodes(block.codes);
      const chosen = block.samples.filter(keep(options.thread));
      for (const p of processor.process(chosen)) {
        profile.add(sampleInput(p));
        options.onSample?.(p);
      }
      if (block.missed) profile.addMissed(block.missed);
      samples += chosen.length;
      options.onProgress?.(samples, blocks);
    }
    return { header, profile, warnings: [...reader.warnings], closedCleanly: reader.closedCleanly, blocks };
  } finally {
    reader.close();
  }
}
