export { ReferenceWalker } from './reference-walker.js';
export { KernelWalker, type KernelOptions } from '../kernel/walker.js';
export { walkParams, encodeParams, DEFAULT_MAX_DEPTH, type WalkParams } from '../layout/walk-params.js';
export { RegionMemory } from './region-memory.js';
export { STATUS_NAMES, STATUS_CODE, TRUSTED, statusName, type Status } from './status.js';
export type { Region, CodeRange, WalkSample, WalkFrame, WalkResult } from './types.js';

import type { WalkParams } from '../layout/walk-params.js';
import type { CodeRange, WalkResult, WalkSample } from './types.js';

/** What both walkers offer. */
export interface Walker {
  readonly kind: string;
  walk(params: WalkParams, codeRanges: Iterable<CodeRange>, samples: readonly WalkSample[]): WalkResult[];
}
