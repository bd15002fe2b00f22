// From a capture file to a profile, in Node: the file is streamed a block at a time
// (openCapture), and a large capture's blocks are processed by a pool of worker threads
// (src/pipeline/workers/), their results merged in file order — the profile is the same whatever the
// worker count. The processing itself, and the report of a capture in memory that runs in every
// runtime (reportCaptureBytes), are in ./process-capture.ts.

import { openCapture } from '../capture/file.js';
import { defaultWorkers, WorkerPool } from './workers/pool.js';
import { processCapture, WORKERS_FROM_BYTES, type ProcessHost } from './process-capture.js';
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

/** Node's worker threads. */
const host: ProcessHost = {
  defaultWorkers: (bytes) => (bytes >= WORKERS_FROM_BYTES ? defaultWorkers() : 0),
  pool: async (workers, setup) => new WorkerPool(workers, setup),
};

export function reportCapture(path: string, options: ReportOptions = {}): Promise<CaptureReport> {
  return processCapture(() => openCapture(path), options, host);
}
