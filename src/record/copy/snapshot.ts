// A snapshot: the memory of every thread of every interpreter of a target at one moment,
// copied as regions (address, bytes), with each code object the stacks reach. Copies follow
// the same rules as a recording's (src/record/copy/modes.ts): a thread whose copy nothing proved is copied
// again with the target stopped (adaptive), or kept as unproven (optimistic) — never passed off
// as a stack of one moment.

import type { Layout } from '../../layout/layout.js';
import type { CopierOptions } from './copier.js';
import { MemoryCopier } from './copier.js';
import type { Stopper } from '../linux/stopper.js';
import type { CodeRecord } from '../../capture/types.js';
import type { ThreadSnapshot } from './thread-snapshot.js';
import { copierFor, copyThreads, type CopyMode } from './modes.js';
import type { MemorySource } from './source.js';
import type { TaskCopier } from './task-copy.js';
import { sampleRecord } from '../sampling/sink.js';
import type { SnapshotSamples } from '../../pipeline/snapshot-stacks.js';

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
   * one, copies are optimistic: a thread whose copy nothing proved is marked `unproven`.
   */
  copy?: CopyMode;
  stopper?: Stopper;
  /** also copy each thread's asyncio tasks (dump --async-aware; the copier made with asyncio's tstate options) */
  tasks?: TaskCopier;
  /** the caller has stopped the whole target for this snapshot (every copy is of one moment) */
  stopped?: boolean;
  /** the target cannot change while it is copied, without being stopped (a core file) */
  paused?: boolean;
}

export function takeSnapshot(source: MemorySource, options: SnapshotOptions = {}): Snapshot {
  const copy = options.copy ?? (options.stopper ? 'adaptive' : 'optimistic');
  const copyOptions = { copy, ...(options.stopper ? { stopper: options.stopper } : {}), ...(options.consistency ? { consistency: options.consistency } : {}) };
  // (without a stopper, as optimistic mode copies: see modes.ts)
  const copier = options.copier ?? (options.stopper || options.copy ? copierFor(source, copyOptions) : new MemoryCopier(source, { keepAgreeing: true, ...options }));
  const time = Date.now();
  const threads = options.stopped ? copier.copyAll({ stopped: true }) : options.paused ? copier.copyAll({ paused: true }) : copyThreads(copier, copyOptions);
  // (a copy nothing proved is not walked: its tasks would not be looked at)
  if (options.tasks) for (const t of threads) if (!t.unproven) options.tasks.copy(t);
  const codeObjects = [...copier.used].map((a) => copier.codeObject(a)).filter((c): c is CodeRecord => c !== null);
  // the suspended coroutines' code objects the task copies recorded
  for (const t of threads) for (const c of t.codes) if (!codeObjects.some((d) => d.address === c.address)) codeObjects.push(c);
  return { layout: source.layout, description: source.description, runtimeAddress: source.runtimeAddress, time, threads, codeObjects };
}

/** The snapshot as the samples a capture would hold, for src/pipeline/snapshot-stacks.ts. */
export function snapshotSamples(snapshot: Snapshot): SnapshotSamples {
  return { layout: snapshot.layout, codeObjects: snapshot.codeObjects, samples: snapshot.threads.map((t) => sampleRecord(t, snapshot.time)) };
}
