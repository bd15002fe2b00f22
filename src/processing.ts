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
// Shared memory. Processing uses the kernel build without shared memory
// (pyunwind/kernel.wasm, build/kernel-unshared.wasm) everywhere: it works in every page,
// cross-origin-isolated or not. The shared-memory build (pyunwind/kernel-shared.wasm,
// build/kernel.wasm) is for a caller that walks samples itself with KernelWalker and wants the
// walk's memory to be a SharedArrayBuffer (to hand regions to it from other threads). A page can
// instantiate it only when `crossOriginIsolated` is true:
//
//   const walker = crossOriginIsolated
//     ? await KernelWalker.load({ shared: true, module: await loadKernel(new URL('pyunwind/kernel-shared.wasm', import.meta.url)) })
//     : await KernelWalker.load({ shared: false, module: await loadKernel(new URL('pyunwind/kernel.wasm', import.meta.url)) });
//
// Nothing in processing needs it.

export { reportCaptureBytes, recordingStats, type BytesReportOptions, type CaptureReport, type RecordingStats, type ReportOptions } from './report-core.js';
export { loadKernel } from './kernel-source.js';
export { SampleProcessor, type ProcessedSample } from './sample-processor.js';
export { unwindSnapshot, type ThreadStack, type SymbolizedFrame } from './unwind.js';
export { CaptureReader, decodeBlock, readCaptureBytes, type CaptureSource, type RawBlock } from './capture/reader.js';
export { CaptureWriter, memorySink, type CaptureSink, type CaptureWriterOptions } from './capture/writer.js';
export { CaptureError } from './capture/types.js';
export type { CaptureBlock, CaptureHeader, CaptureWarning, CodeRecord, SampleRecord, RecorderStatus } from './capture/types.js';
export { Profile, ProfileFormatError, ThreadProfile, PROFILE_FORMAT, PROFILE_VERSION, Timeline, type TimelineThread } from './profile/index.js';
export type { ProfileJSON, ThreadJSON, SourceFrame, StackJSON, ProfileStats, StatusCounts, ValidationStats, FunctionStat } from './profile/index.js';
export {
  exportCollapsed,
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
} from './export/index.js';
export type { CollapsedOptions, JsonOptions, SpeedscopeOptions, TextOptions, ExportMeta, DiffProfile } from './export/index.js';
export { KernelWalker, ReferenceWalker, walkParams, STATUS_NAMES, TRUSTED, type KernelOptions, type Walker, type WalkParams, type Status } from './walk/index.js';
export type { CodeRange, Region, WalkFrame, WalkResult, WalkSample } from './walk/index.js';
export { layoutFromSource, LayoutError, type Layout, type LayoutSource } from './layout/index.js';
export { VERSION } from './version.js';
