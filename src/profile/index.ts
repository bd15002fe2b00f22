// Aggregation: per-thread frame and stack tables, validation statistics, exact merge.
export { Profile, ProfileFormatError, threadToJSON, PROFILE_FORMAT, PROFILE_VERSION } from './profile.js';
export type { ProfileJSON, ThreadJSON, StackJSON } from './profile.js';
export { ThreadProfile, threadKey, compareThreads, compareFrames } from './thread.js';
export type { FunctionId, ProcessTag, ThreadIds } from './thread.js';
export { emptyStatusCounts } from './types.js';
export { ThreadNameTable } from './thread-names.js';
export { Timeline, IDLE_STACK, REJECTED_STACK, type TimelineThread } from './timeline.js';
export type {
  SampleInput,
  SourceFrame,
  SampleThread,
  StatusCounts,
  ValidationStats,
  ProfileStats,
  FunctionStat,
  Status,
} from './types.js';
