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

export async function reportCapture(path: string, options: ReportOptions = {}): Promise<CaptureReport> {
  try {
    return await processCapture(await openCapture(path), options, host);
  } catch (e) {
    // a block whose code records are not all at its start cannot be spread over workers
    // (blocks processed meanwhile may have needed them): one thread then, exactly
    if (e instanceof Error && e.name === 'LateCodes') return processCapture(await openCapture(path), { ...options, workers: 0 }, host);
    throw e;
  }
}
