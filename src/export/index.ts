// Exports: one module per format, each a pure function of a Profile (+ options).
export { exportText, type TextOptions } from './text.js';
export {
  exportJson,
  jsonDocument,
  type JsonOptions,
  type JsonValue,
  type ProfileDocument,
  type ThreadDocument,
  type ThreadSummary,
} from './json.js';
export { exportCollapsed, exportCollapsedBytes, escapeCollapsed, unescapeCollapsed, type CollapsedOptions } from './collapsed.js';
export {
  exportSpeedscope,
  speedscopeDocument,
  SPEEDSCOPE_SCHEMA,
  type SpeedscopeOptions,
  type SpeedscopeFile,
  type SpeedscopeFrame,
  type SpeedscopeSampledProfile,
} from './speedscope.js';
export { threadLabel, frameLabel, processLabel, IDLE_FRAME } from './common.js';
export { exportGecko, geckoDocument, GECKO_PROCESSED_VERSION, GECKO_FORMAT_VERSION, type GeckoProfile, type GeckoThread } from './gecko.js';
export { exportCpuprofile, cpuprofileDocument, type Cpuprofile, type CpuprofileNode, type CpuprofileCallFrame } from './cpuprofile.js';
export { exportJsonl, mergeByTime, timelineStats, jsonId, JSONL_FORMAT, JSONL_VERSION, type TimelineSampleRef } from './jsonl.js';
export { exportPprof, pprofProfile } from './pprof.js';
export { exportPstats, pstatsFunctions, pstatsInterval, type PstatsFunction } from './pstats.js';
export { exportFlamegraph, flamegraphData, flameView, flameViews, mergedThreads, FlameFrameTable } from './flamegraph.js';
export { exportHeatmap, heatmapData, lineCounts, type LineCounts } from './heatmap.js';
export {
  FLAMEGRAPH_CSS,
  FLAMEGRAPH_SCRIPT,
  flamegraphBody,
  type FlameGraphData,
  type FlameView,
  type FlameFrame,
  type FlameFunction,
  type FlameColumn,
  type FlameColor,
  type FlamegraphBodyOptions,
} from './html/flamegraph-script.js';
export { HEATMAP_CSS, HEATMAP_SCRIPT, heatmapBody, type HeatmapData, type HeatmapView, type HeatmapFile, type HeatmapFileCounts } from './html/heatmap-script.js';
export { htmlPage, escapeHtml, jsonForScript, BASE_CSS, DATA_ELEMENT_ID, recordingFacts, type PageParts } from './html/page.js';
export { validationPanel, type ValidationPanelOptions } from './html/validation.js';
export { exportDiffFlamegraph, exportDiffCollapsed, diffFlamegraphData } from './diff.js';
export { diffProfiles, type DiffProfile, type DiffThread, type DiffStack, type DiffFunction, type DiffSide, type DiffOptions } from './diff-model.js';
export { metaFromHeader, validationLines, type ExportMeta } from './meta.js';
export { mergedFunctions, type MergedFunction } from './functions.js';
