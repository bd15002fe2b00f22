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
export { exportCollapsed, escapeCollapsed, unescapeCollapsed, type CollapsedOptions } from './collapsed.js';
export {
  exportSpeedscope,
  speedscopeDocument,
  SPEEDSCOPE_SCHEMA,
  type SpeedscopeOptions,
  type SpeedscopeFile,
  type SpeedscopeFrame,
  type SpeedscopeSampledProfile,
} from './speedscope.js';
export { threadLabel, frameLabel, IDLE_FRAME } from './common.js';
