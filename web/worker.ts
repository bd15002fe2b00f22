// The viewer's Web Worker: it receives a capture's bytes, processes them with reportCaptureBytes,
// posts progress while it works, then what the page shows (web/protocol.ts: ViewerResult), and
// on request any export format's bytes — the same bytes `pyunwind report --format F` writes
// (src/export/formats.ts makes both).
//
// Where: a large capture's blocks are spread over processing workers (web/block-pool.ts), one
// per core; a small one is processed in this thread. In a cross-origin-isolated page (`pyunwind
// view` serves it so) the capture is put in one SharedArrayBuffer that every processing worker
// reads its blocks from, nothing copied per block, and the kernel is its shared-memory build
// (./kernel.wasm); elsewhere each block is copied to its worker and the plain build runs
// (./kernel-unshared.wasm). The profile is the same either way.
//
// Built by scripts/build-web.mjs into dist/web/worker.js (an ES module worker).

import { BLOCK_HEADER_SIZE } from '../src/capture/format.js';
import { readCaptureBytes } from '../src/capture/reader.js';
import { SAMPLING_MODES, type CaptureHeader, type CaptureWarning, type SamplingMode } from '../src/capture/types.js';
import { FORMAT_NAMES, FORMATS, type FormatSpec } from '../src/export/formats.js';
import { threadLabel } from '../src/export/common.js';
import { flamegraphData } from '../src/export/flamegraph.js';
import { recordingFacts } from '../src/export/html/page.js';
import { metaFromReport, type ExportMeta } from '../src/export/meta.js';
import { reportCaptureBytes, WORKERS_FROM_BYTES, type CaptureReport, type ReportOptions } from '../src/pipeline/process-capture.js';
import { webBlockPool } from './block-pool.js';
import type { FormatInfo, FromWorker, Processing, ToWorker, ViewChoice, ViewerResult } from './protocol.js';

/** The capture opened last: exports are made from it. */
interface Opened {
  id: number;
  name: string;
  bytes: Uint8Array;
  report: CaptureReport;
  meta: ExportMeta;
  /** the report with every sample in time order, made when a format needs it */
  timeline?: Promise<CaptureReport>;
  /** the processing workers asked for (?workers=N), and how the samples are shown */
  asked: number | undefined;
  view: ViewChoice;
}

/** The modes a capture can be shown in: a wall capture's facts, or the one mode it was recorded in. */
function modesOf(h: CaptureHeader): SamplingMode[] {
  if (h.sampling !== undefined && h.sampling !== 'wall') return [h.sampling];
  return SAMPLING_MODES.filter((m) => m === 'wall' || (h.facts ?? []).includes(m));
}

/** report's options for a view */
const viewOptions = (v: ViewChoice): Pick<ReportOptions, 'mode' | 'gc' | 'native'> => ({ mode: v.mode, gc: v.gc, native: v.native });

let current: Opened | null = null;
let kernel: { shared: boolean; module: Promise<WebAssembly.Module> } | null = null;

/** Processing workers at most (a capture's blocks are independent; more than this gains little). */
const MAX_WORKERS = 8;

/** SharedArrayBuffer can be used here: the page is cross-origin isolated. */
const isolated = (): boolean => (self as { crossOriginIsolated?: boolean }).crossOriginIsolated === true && typeof SharedArrayBuffer !== 'undefined';

function post(message: FromWorker, transfer: Transferable[] = []): void {
  self.postMessage(message, { transfer });
}

/** The walk kernel, compiled once (streaming when the server says application/wasm): the shared-memory build where it can run. */
function loadKernel(): Promise<WebAssembly.Module> {
  const shared = isolated();
  if (kernel && kernel.shared === shared) return kernel.module;
  const module = (async () => {
    const url = new URL(shared ? 'kernel.wasm' : 'kernel-unshared.wasm', import.meta.url);
    const response = await fetch(url);
    if (!response.ok) throw new Error(`cannot load the walk kernel ${url.pathname}: HTTP ${response.status}`);
    if (typeof WebAssembly.compileStreaming === 'function' && response.headers.get('content-type')?.split(';')[0] === 'application/wasm') {
      return WebAssembly.compileStreaming(response);
    }
    return WebAssembly.compile(await response.arrayBuffer());
  })();
  kernel = { shared, module };
  module.catch(() => (kernel = null)); // a failed load is tried again next time
  return module;
}

/** Processing workers for a capture of `size` bytes: the page's choice (?workers=N), else one per core for a large capture. */
function workerCount(size: number, asked: number | undefined): number {
  if (asked !== undefined && Number.isInteger(asked) && asked >= 0) return Math.min(asked, MAX_WORKERS * 4);
  const cores = typeof navigator !== 'undefined' && navigator.hardwareConcurrency > 1 ? navigator.hardwareConcurrency : 0;
  return size >= WORKERS_FROM_BYTES ? Math.min(cores, MAX_WORKERS) : 0;
}

/** The capture where it will be processed: in isolated pages, a SharedArrayBuffer the processing workers read. */
const inShared = (bytes: Uint8Array): boolean => typeof SharedArrayBuffer !== 'undefined' && bytes.buffer instanceof SharedArrayBuffer;

function placed(bytes: Uint8Array, workers: number): Uint8Array {
  // (a capture shown again another way is there already)
  if (workers === 0 || !isolated() || inShared(bytes)) return bytes;
  const shared = new Uint8Array(new SharedArrayBuffer(bytes.length));
  shared.set(bytes);
  return shared;
}

const baseName = (name: string): string => name.replace(/\.pyuw$/i, '') || 'capture';

/** FILE.ext, or FILE.FORMAT.ext when another format has the same extension. */
function fileName(name: string, format: string): string {
  const ext = (FORMATS[format as keyof typeof FORMATS] as FormatSpec).extension;
  const shared = FORMAT_NAMES.some((f) => f !== format && (FORMATS[f] as FormatSpec).extension === ext);
  return `${baseName(name)}.${shared ? `${format}.` : ''}${ext}`;
}

function formats(name: string): FormatInfo[] {
  return FORMAT_NAMES.map((f) => {
    const spec: FormatSpec = FORMATS[f];
    return { name: f, extension: spec.extension, fileName: fileName(name, f), help: spec.help[0]!, timeline: spec.timeline === true };
  });
}

/**
 * Where block `blocks` ends in the file, for progress in bytes: the blocks' end offsets, found
 * by a pass over the block headers (cheap next to walking every sample).
 */
function blockEnds(bytes: Uint8Array, name: string): number[] {
  const reader = readCaptureBytes(bytes, name);
  const ends: number[] = [];
  for (const raw of reader.rawBlocks()) ends.push(raw.offset + BLOCK_HEADER_SIZE + raw.stored.length);
  return ends;
}

/** onProgress for reportCaptureBytes: a progress message at most every 40 ms (and the last one). */
function progress(id: number, bytes: Uint8Array, ends: number[], phase: string): { onProgress: (samples: number, blocks: number) => void; flush: () => void } {
  let last = 0;
  let pending: FromWorker | null = null;
  const flush = (): void => {
    if (pending) post(pending);
    pending = null;
  };
  return {
    onProgress(samples, blocks) {
      const at = blocks > 0 ? (ends[Math.min(blocks, ends.length) - 1] ?? bytes.length) : 0;
      pending = { type: 'progress', id, samples, blocks, bytes: at, total: bytes.length, phase };
      const now = performance.now();
      if (now - last >= 40) {
        last = now;
        flush();
      }
    },
    flush,
  };
}

async function open(id: number, name: string, given: Uint8Array, asked: number | undefined, chosen: Partial<ViewChoice> = {}): Promise<void> {
  current = null;
  const started = performance.now();
  post({ type: 'progress', id, samples: 0, blocks: 0, bytes: 0, total: given.length, phase: 'loading the walk kernel' });
  const module = await loadKernel();
  const workers = workerCount(given.length, asked);
  const bytes = placed(given, workers);
  const processing: Processing = { workers, sharedCapture: inShared(bytes), sharedKernel: kernel?.shared === true };
  let ends: number[];
  try {
    ends = blockEnds(bytes, name);
  } catch (e) {
    // the header cannot be used: nothing in the file means anything
    post({ type: 'error', id, message: e instanceof Error ? e.message : String(e), warnings: [] });
    return;
  }
  const h = readCaptureBytes(bytes, name).header;
  const modes = modesOf(h);
  const view: ViewChoice = { mode: chosen.mode ?? modes[0]!, gc: chosen.gc ?? true, native: chosen.native ?? false };
  const p = progress(id, bytes, ends, 'processing');
  const report = await reportCaptureBytes(bytes, { module, name, onProgress: p.onProgress, workers, pool: async (n, setup) => webBlockPool(n, setup), ...viewOptions(view) });
  p.flush();
  const profile = report.profile;
  const meta = metaFromReport(report);
  const flame = flamegraphData(profile);
  const result: ViewerResult = {
    name,
    size: bytes.length,
    meta,
    header: {
      target: h.target,
      pythonVersion: h.pythonVersion,
      rateHz: h.rateHz,
      startTime: h.startTime,
      recorder: h.recorder,
      copy: h.copy ?? null,
      sampling: h.sampling ?? 'wall',
      pid: h.pid ?? null,
      command: h.command ?? null,
    },
    facts: recordingFacts(profile, meta),
    stats: profile.stats(),
    recording: report.recording,
    threads: profile.threads().map((t) => {
      const s = t.stats();
      return { key: t.key, label: threadLabel(t), samples: s.attempted, trusted: s.trusted, rejected: s.rejected, statuses: { ...s.statuses } };
    }),
    topFunctions: (flame.views[0]?.functions ?? []).slice(0, 50).map(([qualname, filename, self, total]) => ({ qualname, filename, self, total })),
    flame,
    warnings: report.warnings,
    closedCleanly: report.closedCleanly,
    blocks: report.blocks,
    formats: formats(name),
    millis: Math.round(performance.now() - started),
    processing,
    view,
    modes,
    gcKnown: (h.facts ?? []).includes('gc'),
  };
  current = { id, name, bytes, report, meta, asked, view };
  post({ type: 'result', id, result });
}

const MIME: Record<string, string> = { json: 'application/json', html: 'text/html' };

async function makeExport(id: number, format: string): Promise<void> {
  const opened = current;
  if (!opened) throw new Error('no capture is open');
  if (!(FORMAT_NAMES as string[]).includes(format)) throw new Error(`unknown format "${format}"`);
  const spec: FormatSpec = FORMATS[format as keyof typeof FORMATS];
  let report = opened.report;
  if (spec.timeline) {
    // the timeline formats need every sample in time order: processed again, once, on the reference path
    opened.timeline ??= (async () => {
      const p = progress(id, opened.bytes, blockEnds(opened.bytes, opened.name), `time order for ${format}`);
      const r = await reportCaptureBytes(opened.bytes, { module: await loadKernel(), name: opened.name, timeline: true, onProgress: p.onProgress, ...viewOptions(opened.view) });
      p.flush();
      return r;
    })();
    report = await opened.timeline;
  }
  const made = await spec.make({ report, meta: opened.meta, top: 15 });
  const bytes = typeof made === 'string' ? new TextEncoder().encode(made) : made;
  // a buffer of its own to transfer
  const buffer = bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength && bytes.buffer instanceof ArrayBuffer ? bytes.buffer : bytes.slice().buffer;
  const ext = spec.extension.split('.').pop()!;
  const mime = spec.binary ? 'application/octet-stream' : (MIME[ext] ?? 'text/plain');
  post({ type: 'export', id, format, fileName: fileName(opened.name, format), mime: `${mime}${spec.binary ? '' : ';charset=utf-8'}`, bytes: buffer }, [buffer]);
}

self.onmessage = (ev: MessageEvent<ToWorker>) => {
  const m = ev.data;
  if (m.type === 'open') {
    open(m.id, m.name, new Uint8Array(m.bytes), m.workers).catch((e: unknown) => {
      const warnings: CaptureWarning[] = [];
      post({ type: 'error', id: m.id, message: e instanceof Error ? e.message : String(e), warnings });
    });
  } else if (m.type === 'view') {
    const opened = current;
    if (!opened) {
      post({ type: 'error', id: m.id, message: 'no capture is open', warnings: [] });
      return;
    }
    open(m.id, opened.name, opened.bytes, opened.asked, { ...opened.view, ...m.view }).catch((e: unknown) => post({ type: 'error', id: m.id, message: e instanceof Error ? e.message : String(e), warnings: [] }));
  } else if (m.type === 'export') {
    makeExport(m.id, m.format).catch((e: unknown) => post({ type: 'export-error', id: m.id, format: m.format, message: e instanceof Error ? e.message : String(e) }));
  }
};
