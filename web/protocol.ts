// The messages between the viewer's page (web/viewer.ts) and its worker (web/worker.ts). The
// worker owns the capture's bytes and the profile; the page gets plain data to show.

import type { CaptureWarning, SamplingMode } from '../src/capture/types.js';
import type { FlameGraphData } from '../src/export/html/flamegraph-script.js';
import type { ExportMeta } from '../src/export/meta.js';
import type { ProfileStats, StatusCounts } from '../src/profile/types.js';
import type { RecordingStats } from '../src/pipeline/report-file.js';

/** The export formats of `pyunwind report --format` (src/export/formats.ts), by name. */
export interface FormatInfo {
  name: string;
  /** the usual file extension */
  extension: string;
  /** the download's name: FILE.ext, or FILE.FORMAT.ext where formats share an extension (text and collapsed, flamegraph and heatmap) */
  fileName: string;
  /** the first line of the format's help */
  help: string;
  /** made on the reference path with every sample in time order (slower) */
  timeline: boolean;
}

export interface ThreadInfo {
  /** the profile's thread key (the flame graph's view id) */
  key: string;
  label: string;
  /** samples attempted in this thread */
  samples: number;
  trusted: number;
  rejected: number;
  statuses: StatusCounts;
}

/** How the samples are shown: `pyunwind report`'s --mode, --no-gc (gc false) and --native. */
export interface ViewChoice {
  mode: SamplingMode;
  gc: boolean;
  native: boolean;
}

export interface ViewerResult {
  name: string;
  size: number;
  meta: ExportMeta;
  /** the capture's header, what a person reads of it */
  header: { target: string; pythonVersion: string; rateHz: number; startTime: number; recorder: string; copy: string | null; sampling: SamplingMode; pid: number | null; command: string[] | null };
  /** the facts the HTML exports show under their title */
  facts: string[];
  /** the validation numbers (= `report --format json`'s summary without the time span) */
  stats: ProfileStats;
  recording: RecordingStats;
  threads: ThreadInfo[];
  /** functions of all threads, by total weight (the "all threads" view's table, first rows) */
  topFunctions: { qualname: string; filename: string; self: number; total: number }[];
  flame: FlameGraphData;
  /** what the reader found wrong, in file order (a damaged capture: the rest is reported) */
  warnings: CaptureWarning[];
  closedCleanly: boolean;
  blocks: number;
  formats: FormatInfo[];
  /** processing time in this browser, ms */
  millis: number;
  processing: Processing;
  /** how the samples are shown */
  view: ViewChoice;
  /** the modes this capture can be shown in (a wall capture: wall and each fact it records; else its own mode) */
  modes: SamplingMode[];
  /** the capture tells when the collector ran (the `gc` fact: CPython 3.13+), so <GC> frames can be shown */
  gcKnown: boolean;
}

/** Where the capture was processed. */
export interface Processing {
  /** processing workers its blocks were spread over (0: the viewer's own worker) */
  workers: number;
  /** the capture lay in one SharedArrayBuffer the workers read (a cross-origin-isolated page) */
  sharedCapture: boolean;
  /** the kernel's shared-memory build ran (kernel.wasm; else kernel-unshared.wasm) */
  sharedKernel: boolean;
}

export type ToWorker =
  /** process a capture (the buffer is transferred) */
  | { type: 'open'; id: number; name: string; bytes: ArrayBuffer; workers?: number; view?: Partial<ViewChoice> }
  /** the capture opened last, processed again to be shown another way */
  | { type: 'view'; id: number; view: Partial<ViewChoice> }
  /** the bytes of one export format of the capture opened last */
  | { type: 'export'; id: number; format: string };

export type FromWorker =
  | { type: 'progress'; id: number; samples: number; blocks: number; bytes: number; total: number; phase: string }
  | { type: 'result'; id: number; result: ViewerResult }
  /** the capture cannot be read at all (warnings: any found before it failed) */
  | { type: 'error'; id: number; message: string; warnings: CaptureWarning[] }
  | { type: 'export'; id: number; format: string; fileName: string; mime: string; bytes: ArrayBuffer }
  | { type: 'export-error'; id: number; format: string; message: string };
