// Processing of recorded samples: walk each with a walker (the WebAssembly kernel), give it
// its status — the recorder's `torn` first, else the walk's — and symbolize the frames of the
// trusted ones. Code objects arrive as records, each decoded on its own; a later record for an
// address replaces the earlier one (the address was reused).

import type { CodeRecord, SampleRecord } from '../capture/types.js';
import type { Layout } from '../layout/layout.js';
import { CodeTable } from '../symbols/code-table.js';
import type { SymbolizedFrame } from '../symbols/types.js';
import { walkParams, type WalkParams } from '../layout/walk-params.js';
import { TRUSTED, type Status } from '../walk/status.js';
import type { Walker } from '../walk/index.js';
import type { WalkResult } from '../walk/types.js';

export interface ProcessedSample {
  sample: SampleRecord;
  status: Status;
  /** innermost first; empty for rejected samples */
  frames: SymbolizedFrame[];
  /** the walk's own result (null for samples the recorder marked torn: not walked) */
  walk: WalkResult | null;
}

export class SampleProcessor {
  private readonly table: CodeTable;
  private readonly params: WalkParams;

  constructor(
    readonly layout: Layout,
    private readonly walker: Walker,
    maxDepth?: number,
    /** the code table to use (shared with a block engine that processes other blocks) */
    table?: CodeTable,
    /** name each frame's instruction (SymbolizedFrame.opcode) */
    private readonly opcodes = false,
  ) {
    this.params = walkParams(layout, maxDepth);
    this.table = table ?? new CodeTable(layout);
  }

  /** Code records, in recording order: each replaces any earlier one at its address. */
  addCodes(records: Iterable<CodeRecord>): void {
    for (const r of records) this.table.add(r);
  }

  get codeCount(): number {
    return this.table.size;
  }

  process(samples: readonly SampleRecord[]): ProcessedSample[] {
    const table = this.table;
    const toWalk = samples.filter((s) => s.recorderStatus !== 'torn');
    const results = toWalk.length
      ? this.walker.walk(
          this.params,
          table.ranges,
          toWalk.map((s) => ({ threadStateAddress: s.threadStateAddress, regions: s.regions })),
        )
      : [];
    let k = 0;
    return samples.map((sample) => {
      if (sample.recorderStatus === 'torn') return { sample, status: 'torn', frames: [], walk: null };
      const walk = results[k++]!;
      const frames = TRUSTED.has(walk.status) ? walk.frames.map((f) => table.frame(f.code, f.instrPtr, this.opcodes)) : [];
      return { sample, status: walk.status, frames, walk };
    });
  }
}
