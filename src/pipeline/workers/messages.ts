// What the processing pool (pool.ts) and its workers (block-worker.ts) say to each other. All
// plain data: it crosses threads by structured clone.

import type { LayoutSource } from '../../layout/layout.js';
import type { CodeRecord, SamplingMode } from '../../capture/types.js';
import type { ProfileTransfer } from '../../profile/profile.js';
import type { RawBlock } from '../../capture/reader.js';
import type { BlockResult, CopyStatsJSON } from '../../kernel/block-engine.js';

export interface WorkerSetup {
  layoutSource: LayoutSource;
  thread?: bigint;
  /** the samples kept (report --mode) */
  mode?: SamplingMode;
  /** <GC> frames (report without --no-gc) */
  gcFrames?: boolean;
  /** <native> frames (report --native) */
  nativeFrames?: boolean;
  /** frames named with their instruction (report --opcodes) */
  opcodes?: boolean;
  /** the compiled kernel, compiled once by the parent */
  module: WebAssembly.Module;
}

export interface BlockJob {
  id: number;
  /** code records of the blocks before this one that this worker has not been sent, in file order */
  codes: CodeRecord[];
  /** the block as stored in the file: the worker inflates it */
  raw: RawBlock;
  /** addresses of the code records the parent found at the block's start (leadingCodes) */
  leading: bigint[];
}

export type BlockReply =
  | { id: number; result: BlockResult; profile: ProfileTransfer; copies: CopyStatsJSON }
  /** the block holds code records after other records: blocks processed meanwhile may have missed them */
  | { id: number; lateCodes: true }
  | { id: number; error: string };
