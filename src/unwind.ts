// From a snapshot to validated, symbolized stacks: lay the code objects out as ranges, walk
// every thread's sample with a walker (the WebAssembly kernel or the reference), and turn each
// trusted frame into (qualname, filename, line).

import type { Layout } from './layout/layout.js';
import type { Snapshot } from './record/snapshot.js';
import { codeRange, SymbolError, Symbolizer } from './symbols/index.js';
import { walkParams, type Walker } from './walk/index.js';
import { RegionMemory } from './walk/region-memory.js';
import type { Status } from './walk/status.js';
import type { CodeRange, Region, WalkResult } from './walk/types.js';

export interface StackFrame {
  qualname: string;
  filename: string;
  /** null where CPython has no line for the instruction */
  line: number | null;
  code: bigint;
  instrPtr: bigint;
}

export interface ThreadStack {
  interpreterId: bigint;
  threadStateAddress: bigint;
  threadId: bigint;
  nativeThreadId: bigint;
  status: Status;
  /** innermost first */
  frames: StackFrame[];
  walk: WalkResult;
  /** what the copy could not read, if anything */
  copyErrors: string[];
}

/** Decoded code objects of a set of code regions, and their ranges for the walk. */
export class CodeTable {
  readonly symbolizer: Symbolizer;
  readonly ranges: CodeRange[] = [];
  readonly errors = new Map<bigint, SymbolError>();

  constructor(layout: Layout, codeObjects: Iterable<{ address: bigint; regions: Region[] }>) {
    const regions: Region[] = [];
    const addresses: bigint[] = [];
    for (const c of codeObjects) {
      addresses.push(c.address);
      regions.push(...c.regions);
    }
    this.symbolizer = new Symbolizer(new RegionMemory(dedupeRegions(regions), layout.pointerSize), layout);
    for (const a of addresses) {
      const info = this.symbolizer.code(a);
      if (info instanceof SymbolError) this.errors.set(a, info);
      else this.ranges.push(codeRange(info));
    }
  }

  frame(code: bigint, instrPtr: bigint): StackFrame {
    const info = this.symbolizer.code(code);
    if (info instanceof SymbolError) throw info;
    return { qualname: info.qualname, filename: info.filename, line: this.symbolizer.line(code, instrPtr), code, instrPtr };
  }
}

/** Identical regions (the same str shared by two code objects) are kept once. */
function dedupeRegions(regions: Region[]): Region[] {
  const seen = new Map<bigint, Region>();
  for (const r of regions) {
    const had = seen.get(r.address);
    if (!had || had.bytes.length < r.bytes.length) seen.set(r.address, r);
  }
  return [...seen.values()];
}

export function unwindSnapshot(snapshot: Snapshot, walker: Walker, maxDepth?: number): ThreadStack[] {
  const layout = snapshot.layout;
  const codes = new CodeTable(layout, snapshot.codeObjects);
  const results = walker.walk(
    walkParams(layout, maxDepth),
    codes.ranges,
    snapshot.threads.map((t) => ({ threadStateAddress: t.threadStateAddress, regions: t.regions })),
  );
  return snapshot.threads.map((t, i) => {
    const walk = results[i]!;
    return {
      interpreterId: t.interpreterId,
      threadStateAddress: t.threadStateAddress,
      threadId: t.threadId,
      nativeThreadId: t.nativeThreadId,
      status: walk.status,
      frames: walk.frames.map((f) => codes.frame(f.code, f.instrPtr)),
      walk,
      copyErrors: t.errors,
    };
  });
}
