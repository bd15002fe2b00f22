// From a capture file to a profile, in Node: the file is streamed a block at a time
// (openCapture), processed in this thread, or — when asked for (`workers`) — by a pool of worker
// threads (src/pipeline/workers/), each adding its blocks to a profile of its own, merged at the
// end: the profile is the same whatever the worker count. The processing itself, and the report
// of a capture in memory that runs in every
// runtime (reportCaptureBytes), are in ./process-capture.ts.

import { openCapture } from '../capture/file.js';
import { WorkerPool, defaultWorkers } from './workers/pool.js';
import { processCapture, workersThatPay, type ProcessHost } from './process-capture.js';
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
 * Node's worker threads, as many as pay for the capture's size (workersThatPay: none below
 * 16 MB on two cores), one per processor at most.
 */
const host: ProcessHost = {
  defaultWorkers: (bytes) => workersThatPay(bytes, defaultWorkers()),
  pool: async (workers, setup) => new WorkerPool(workers, setup),
};

export function reportCapture(path: string, options: ReportOptions = {}): Promise<CaptureReport> {
  return processCapture(() => openCapture(path), options, host);
}
