// pyunwind as a library: processing captures (the package's root entry, `pyunwind`).
// Recording has its own entries: `pyunwind/record` (a Linux process) and `pyunwind/pyodide`
// (CPython in WebAssembly). Everything not exported from an entry is internal.

export { reportCapture, reportCaptureBytes, recordingStats, type CaptureReport, type RecordingStats, type ReportOptions, type BytesReportOptions } from './report.js';
export { SampleProcessor, type ProcessedSample } from './sample-processor.js';
export { unwindSnapshot, type ThreadStack, type SymbolizedFrame } from './unwind.js';
export {
  CaptureReader,
  CaptureWriter,
  decodeBlock,
  fileSink,
  memorySink,
  openCapture,
  readCaptureBytes,
  type CaptureSink,
  type CaptureSource,
  type CaptureWriterOptions,
} from './capture/index.js';
export type { CaptureBlock, CaptureHeader, CaptureWarning, CodeRecord, SampleRecord, RecorderStatus } from './capture/types.js';
export { Profile, ProfileFormatError, ThreadProfile, PROFILE_FORMAT, PROFILE_VERSION } from './profile/index.js';
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
export { Timeline, type TimelineThread } from './profile/index.js';
export { KernelWalker, ReferenceWalker, walkParams, STATUS_NAMES, TRUSTED, type Walker, type WalkParams, type Status } from './walk/index.js';
export type { CodeRange, Region, WalkFrame, WalkResult, WalkSample } from './walk/index.js';
export { layoutFromSource, LayoutError, type Layout, type LayoutSource } from './layout/index.js';
export { VERSION } from './version.js';
