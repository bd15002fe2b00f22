// What the processing pool (pool.ts) and its workers (block-worker.ts) say to each other. All
// plain data: it crosses threads by structured clone.

import type { LayoutSource } from '../layout/layout.js';
import type { CodeRecord } from '../capture/types.js';
import type { ProfileJSON } from '../profile/profile.js';
import type { BlockResult, CopyStatsJSON, PayloadBlock } from '../walk/engine.js';

export interface WorkerSetup {
  layoutSource: LayoutSource;
  thread?: bigint;
  /** the compiled kernel, compiled once by the parent */
  module: WebAssembly.Module;
}

export interface BlockJob {
  id: number;
  /** code records of the blocks before this one that this worker has not seen, then this block's, in file order */
  codes: CodeRecord[];
  block: PayloadBlock;
}

export type BlockReply =
  | { id: number; result: BlockResult; profile: ProfileJSON; copies: CopyStatsJSON }
  | { id: number; error: string };
