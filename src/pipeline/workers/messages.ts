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

/**
 * A block to process, or (`flush`) a request for the profile the worker has built from the blocks
 * it processed since the last one: each worker adds its blocks to one profile of its own, which
 * crosses once at the end (a profile per block, merged in the parent, made the parent the
 * bottleneck: every worker's stacks interned again, block after block).
 */
export type WorkerJob = BlockJob | FlushJob;

export interface FlushJob {
  id: number;
  flush: true;
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
  | { id: number; result: BlockResult; copies: CopyStatsJSON }
  /** the answer to a FlushJob */
  | { id: number; profile: ProfileTransfer }
  /** the block holds code records after other records: blocks processed meanwhile may have missed them */
  | { id: number; lateCodes: true }
  | { id: number; error: string };
