// pyunwind's processing, for every runtime that runs JavaScript and WebAssembly: Node, Deno,
// Bun, browsers and Web Workers, workerd (Cloudflare Workers). No module reachable from here
// imports a Node API (test/runtimes.test.ts bundles it with esbuild --platform=neutral, which
// refuses node: imports, and runs it in Deno, Bun and workerd). It is the package root
// (`pyunwind`) under the browser, worker, workerd and deno conditions, and `pyunwind/processing`
// everywhere; Node's root entry (./index.ts) is this plus files and worker threads
// (reportCapture, openCapture, fileSink).
//
// A capture is processed from its bytes, in the calling thread:
//
//   const module = await loadKernel(source);          // the walk kernel, compiled
//   const { profile, header } = await reportCaptureBytes(bytes, { module });
//   const json = exportJson(profile);                  // or any other format, with metaFromHeader(header)
//
// The kernel (`source`): by default the build next to the package, read with fetch() in Deno and
// Bun and with node:fs in Node; in a page, a URL to fetch — bundlers resolve
// `new URL('pyunwind/kernel.wasm', import.meta.url)` — or the bytes; in workerd, which compiles
// no WebAssembly at run time, the module imported precompiled (`import kernel from
// 'pyunwind/kernel.wasm'`) and passed as it is.
//
// Workers and shared memory. reportCaptureBytes processes in the calling thread, or, given
// `workers` and a `pool` (OrderedBlockPool over the runtime's workers, each running
// handleBlockJob), spreads the blocks over them; the profile is the same. Either kernel build
// works (loadKernel compiles it, the engine takes the memory it imports): the plain one
// (pyunwind/kernel.wasm, build/kernel-unshared.wasm) in every page; the shared-memory one
// (pyunwind/kernel-shared.wasm, build/kernel.wasm) only where SharedArrayBuffer exists — a page
// whose `crossOriginIsolated` is true. There, the viewer (web/worker.ts) puts the capture in a
// SharedArrayBuffer, which its workers read each block from where it lies, and runs the
// shared-memory build:
//
//   const shared = crossOriginIsolated;
//   const module = await loadKernel(new URL(shared ? 'pyunwind/kernel-shared.wasm' : 'pyunwind/kernel.wasm', import.meta.url));
//   const report = await reportCaptureBytes(shared ? inSharedMemory(bytes) : bytes, { module, workers: 4, pool: (n, setup) => myPool(n, setup) });

export { reportCaptureBytes, recordingStats, WORKERS_FROM_BYTES, type BlockPool, type BytesReportOptions, type CaptureReport, type ProcessHost, type RecordingStats, type ReportOptions } from './pipeline/process-capture.js';
// a pool of processing workers of the caller's runtime (a page's Web Workers): the ordered pool,
// and what each worker runs
export { OrderedBlockPool, type BlockPort, type PortEvents } from './pipeline/workers/ordered-pool.js';
export { handleBlockJob } from './pipeline/workers/block-job.js';
export { BlockProcessor } from './pipeline/block-processor.js';
export type { BlockJob, BlockReply, WorkerSetup } from './pipeline/workers/messages.js';
export { loadKernel, instantiateKernel } from './kernel/load.js';
export { SampleProcessor, type ProcessedSample } from './pipeline/sample-processor.js';
export { unwindSnapshot, type ThreadStack, type SymbolizedFrame } from './pipeline/snapshot-stacks.js';
export { CaptureReader, decodeBlock, readCaptureBytes, type CaptureSource, type RawBlock } from './capture/reader.js';
export { CaptureWriter, memorySink, type CaptureSink, type CaptureWriterOptions } from './capture/writer.js';
export { CaptureError, SAMPLE_FLAG, FACT_FLAG, SAMPLE_FACTS, SAMPLING_MODES } from './capture/types.js';
export { ASYNC_MODES, type AsyncMode } from './walk/task-graph.js';
export { taskFrame } from './pipeline/task-stacks.js';
export type { CaptureBlock, CaptureHeader, CaptureWarning, CodeRecord, SampleRecord, ThreadNameRecord, RecorderStatus, SampleFact, SamplingMode } from './capture/types.js';
export { Profile, ProfileFormatError, ThreadProfile, PROFILE_FORMAT, PROFILE_VERSION, Timeline, ThreadNameTable, type TimelineThread } from './profile/index.js';
export type { ProfileJSON, ThreadJSON, SourceFrame, StackJSON, ProfileStats, StatusCounts, ValidationStats, FunctionStat, ProcessTag } from './profile/index.js';
export { combineProcesses, makeSeveral, type ProcessInput } from './export/formats.js';
export {
  exportCollapsed,
  exportCollapsedBytes,
  exportJson,
  exportSpeedscope,
  exportText,
  jsonDocument,
  speedscopeDocument,
  exportPprof,
  exportPstats,
  exportGecko,
  exportCpuprofile,
  exportJsonl,
  exportFlamegraph,
  exportHeatmap,
  exportDiffFlamegraph,
  exportDiffCollapsed,
  diffProfiles,
  metaFromHeader,
  validationLines,
  processLabel,
} from './export/index.js';
export type { CollapsedOptions, JsonOptions, SpeedscopeOptions, TextOptions, ExportMeta, DiffProfile } from './export/index.js';
export { KernelWalker, ReferenceWalker, walkParams, STATUS_NAMES, TRUSTED, type KernelOptions, type Walker, type WalkParams, type Status } from './walk/index.js';
export type { CodeRange, Region, WalkFrame, WalkResult, WalkSample } from './walk/index.js';
export { layoutFromSource, LayoutError, type Layout, type LayoutSource } from './layout/index.js';
export { VERSION } from './version.js';
