// From a capture file to a profile, in Node: the file is streamed a block at a time
// (openCapture), processed in this thread, or — when asked for (`workers`) — by a pool of worker
// threads (src/pipeline/workers/), each adding its blocks to a profile of its own, merged at the
// end: the profile is the same whatever the worker count. The processing itself, and the report
// of a capture in memory that runs in every
// runtime (reportCaptureBytes), are in ./process-capture.ts.

import { openCapture } from '../capture/file.js';
import { WorkerPool } from './workers/pool.js';
import { processCapture, type ProcessHost } from './process-capture.js';
import type { CaptureReport, ReportOptions } from './process-capture.js';

export {
  recordingStats,
  reportCaptureBytes,
  sampleInput,
  type BytesReportOptions,
  type CaptureReport,
  type RecordingStats,
  type ReportOptions,
} from './process-capture.js';

/**
 * Node's worker threads, used only when asked for: the engine keeps its stack tree from one
 * block to the next, and two workers on two cores are no faster than one thread on the real
 * captures measured (docs/benchmarks.md, "Processing real captures": 0.56–1.01× on 3 MB, 0.76×
 * on 12 MB), so the default is the one that pays.
 */
const host: ProcessHost = {
  defaultWorkers: () => 0,
  pool: async (workers, setup) => new WorkerPool(workers, setup),
};

export function reportCapture(path: string, options: ReportOptions = {}): Promise<CaptureReport> {
  return processCapture(() => openCapture(path), options, host);
}
