// A pool of processing workers (worker_threads), one BlockProcessor each. The caller submits
// blocks in file order and takes their results back in that same order (`next`), so merging
// them gives what processing the blocks one after the other in one thread gives.
//
// Code records are shared state: every worker must have applied the code records of every
// block before the one it processes. Each block's records go to every worker, with the next
// job it gets (they are few: a recording sends a code object once).

import os from 'node:os';
import { Worker } from 'node:worker_threads';
import type { CodeRecord } from '../capture/types.js';
import type { LayoutSource } from '../layout/layout.js';
import { Profile } from '../profile/profile.js';
import type { ProcessedBlock } from '../block-processor.js';
import { CopyStats, type PayloadBlock } from '../walk/engine.js';
import type { BlockJob, BlockReply, WorkerSetup } from './messages.js';

/** Jobs in flight per worker: enough to keep each busy while the parent reads the file. */
const DEPTH = 4;

/** The processors available: the default worker count. */
export function defaultWorkers(): number {
  return typeof os.availableParallelism === 'function' ? os.availableParallelism() : os.cpus().length;
}

interface Slot {
  worker: Worker;
  /** code records this worker has not been sent yet */
  codes: CodeRecord[];
  inFlight: number;
}

interface Pending {
  promise: Promise<ProcessedBlock>;
  resolve: (b: ProcessedBlock) => void;
  reject: (e: Error) => void;
  slot: Slot;
}

/**
 * The worker script beside this file (compiled); when running from the TypeScript sources (the
 * tests), a bootstrap that registers tsx in the worker first and then imports the source.
 */
function workerScript(): { script: URL | string; eval: boolean } {
  const here = import.meta.url;
  if (!here.endsWith('.ts')) return { script: new URL('./block-worker.js', here), eval: false };
  const source = new URL('./block-worker.ts', here).href;
  return { script: `import('tsx/esm/api').then((t) => { t.register(); return import(${JSON.stringify(source)}); });`, eval: true };
}

export class WorkerPool {
  private readonly slots: Slot[] = [];
  private readonly pending = new Map<number, Pending>();
  /** ids in submission order, not yet taken by `next` */
  private readonly order: number[] = [];
  private nextId = 0;
  private failure: Error | null = null;

  constructor(size: number, setup: WorkerSetup) {
    const { script, eval: isEval } = workerScript();
    for (let i = 0; i < size; i++) {
      const worker = new Worker(script, { workerData: setup, eval: isEval });
      const slot: Slot = { worker, codes: [], inFlight: 0 };
      worker.on('message', (m: BlockReply) => this.answer(m));
      worker.on('error', (e) => this.fail(new Error(`processing worker ${i} failed: ${e.message}`)));
      worker.on('exit', (code) => {
        if (this.pending.size > 0) this.fail(new Error(`processing worker ${i} exited (code ${code}) with blocks in flight`));
      });
      this.slots.push(slot);
    }
  }

  get size(): number {
    return this.slots.length;
  }

  /** Blocks submitted and not yet taken. */
  get queued(): number {
    return this.order.length;
  }

  /** True when every worker has as many jobs as it should hold: take a result first. */
  get full(): boolean {
    return this.order.length >= this.slots.length * DEPTH;
  }

  /** Send a block (with its own code records) to the least busy worker. */
  submit(block: PayloadBlock, codes: CodeRecord[]): void {
    if (this.failure) throw this.failure;
    let slot = this.slots[0]!;
    for (const s of this.slots) if (s.inFlight < slot.inFlight) slot = s;
    for (const s of this.slots) if (s !== slot) for (const c of codes) s.codes.push(c);
    const job: BlockJob = { id: this.nextId++, codes: slot.codes.length ? [...slot.codes, ...codes] : codes, block };
    slot.codes = [];
    let resolve!: (b: ProcessedBlock) => void;
    let reject!: (e: Error) => void;
    const promise = new Promise<ProcessedBlock>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    promise.catch(() => {}); // taken (and rethrown) by next()
    this.pending.set(job.id, { promise, resolve, reject, slot });
    this.order.push(job.id);
    slot.inFlight++;
    slot.worker.postMessage(job);
  }

  /** The result of the oldest block not yet taken. */
  async next(): Promise<ProcessedBlock> {
    const id = this.order.shift();
    if (id === undefined) throw new Error('WorkerPool.next: nothing submitted');
    const p = this.pending.get(id)!;
    try {
      return await p.promise;
    } finally {
      this.pending.delete(id);
    }
  }

  async close(): Promise<void> {
    await Promise.all(this.slots.map((s) => s.worker.terminate()));
  }

  private answer(m: BlockReply): void {
    const p = this.pending.get(m.id);
    if (!p) return;
    p.slot.inFlight--;
    if ('error' in m) {
      p.reject(new Error(`processing worker: ${m.error}`));
      return;
    }
    p.resolve({ result: m.result, profile: Profile.fromJSON(m.profile), copies: CopyStats.fromJSON(m.copies) });
  }

  private fail(e: Error): void {
    this.failure ??= e;
    for (const p of this.pending.values()) p.reject(e);
  }
}
