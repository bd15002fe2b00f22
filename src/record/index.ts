// `pyunwind/record`: recording a Linux process (and taking one-off snapshots of it).

export {
  recordProcess,
  subprocessOutput,
  MAX_RATE_HZ,
  SUBPROCESS_POLL_MS,
  type RecordProcessOptions,
  type RecordProcessResult,
  type SubprocessOptions,
  type SubprocessResult,
  type NotFollowed,
} from './linux/record-process.js';
export { openLinuxProcess, processIsRunning, TargetError, type LinuxProcessSource, type TargetErrorKind } from './linux/process.js';
export { snapshotSamples, takeSnapshot, type Snapshot, type SnapshotOptions, type ThreadSnapshot } from './copy/snapshot.js';
export type { CodeRecord } from '../capture/types.js';
export { COPY_MODES, type CopyMode } from './copy/modes.js';
export { ASYNC_MODES, type AsyncMode } from '../walk/task-graph.js';
export { SAMPLING_MODES, SAMPLE_FACTS, type SamplingMode, type SampleFact } from '../capture/types.js';
export type { SamplerStats, SamplerEnd } from './sampling/sampler.js';
export type { MemorySource } from './copy/source.js';
export { readThreadNames, ThreadNamer, type ThreadName } from './copy/thread-names.js';
export { openCore, readCoreBytes, CoreSource, type CoreOptions, type CoreFileCheck, type OpenedCore, type ZeroStack } from './core/core-source.js';
export { parseCore, CoreError, type CoreFile, type CoreThread, type CoreSegment, type CoreMappedFile } from './core/core-file.js';
export { ObjectReader, type ObjectValue } from '../objects/object-reader.js';
export { frameLocals, type LocalVariable } from '../objects/frame-locals.js';
