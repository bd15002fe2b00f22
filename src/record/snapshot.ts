// A snapshot: the memory of every thread of every interpreter of a target at one moment,
// copied as regions (address, bytes), with each code object the stacks reach.

import type { Layout } from '../layout/layout.js';
import { MemoryCopier, type CodeObjectSnapshot, type CopierOptions, type ThreadSnapshot } from './copier.js';
import type { MemorySource } from './source.js';

export type { CodeObjectSnapshot, ThreadSnapshot } from './copier.js';

export interface Snapshot {
  layout: Layout;
  description: string;
  runtimeAddress: bigint;
  /** wall-clock time of the copy, ms since the epoch */
  time: number;
  threads: ThreadSnapshot[];
  /** the code objects the threads' stacks reach */
  codeObjects: CodeObjectSnapshot[];
}

export interface SnapshotOptions extends CopierOptions {
  /** a copier to reuse (its code objects are copied once across snapshots) */
  copier?: MemoryCopier;
}

export function takeSnapshot(source: MemorySource, options: SnapshotOptions = {}): Snapshot {
  const copier = options.copier ?? new MemoryCopier(source, options);
  const time = Date.now();
  const threads = copier.copyAll();
  const codeObjects = [...copier.used].map((a) => copier.codeObject(a)).filter((c): c is CodeObjectSnapshot => c !== null);
  return { layout: source.layout, description: source.description, runtimeAddress: source.runtimeAddress, time, threads, codeObjects };
}
