// A snapshot: the memory of every thread of every interpreter of a target at one moment,
// copied as regions (address, bytes), with each code object the stacks reach. Copies follow
// the same rules as a recording's (src/record/modes.ts): a thread whose copy moved is copied
// again with the target stopped (adaptive), or kept as moved (optimistic) — never passed off
// as a stack of one moment.

import type { Layout } from '../layout/layout.js';
import type { CopierOptions } from './copier.js';
import { MemoryCopier } from './copier.js';
import type { Stopper } from './stopper.js';
import type { CodeRecord } from '../capture/types.js';
import type { ThreadSnapshot } from './thread-snapshot.js';
import { copierFor, copyThreads, type CopyMode } from './modes.js';
import type { MemorySource } from './source.js';

export type { ThreadSnapshot } from './thread-snapshot.js';

export interface Snapshot {
  layout: Layout;
  description: string;
  runtimeAddress: bigint;
  /** wall-clock time of the copy, ms since the epoch */
  time: number;
  threads: ThreadSnapshot[];
  /** the code objects the threads' stacks reach */
  codeObjects: CodeRecord[];
}

export interface SnapshotOptions extends CopierOptions {
  /** a copier to reuse (its code objects are copied once across snapshots) */
  copier?: MemoryCopier;
  /**
   * With a stopper: `adaptive` (the default then) or `blocking`, as `record` does. Without
   * one, copies are optimistic: a thread whose copy moved is marked `moved`.
   */
  copy?: CopyMode;
  stopper?: Stopper;
}

export function takeSnapshot(source: MemorySource, options: SnapshotOptions = {}): Snapshot {
  const copy = options.copy ?? (options.stopper ? 'adaptive' : 'optimistic');
  const copyOptions = { copy, ...(options.stopper ? { stopper: options.stopper } : {}), ...(options.consistency ? { consistency: options.consistency } : {}) };
  const copier = options.copier ?? (options.stopper || options.copy ? copierFor(source, copyOptions) : new MemoryCopier(source, options));
  const time = Date.now();
  const threads = copyThreads(copier, copyOptions);
  const codeObjects = [...copier.used].map((a) => copier.codeObject(a)).filter((c): c is CodeRecord => c !== null);
  return { layout: source.layout, description: source.description, runtimeAddress: source.runtimeAddress, time, threads, codeObjects };
}
