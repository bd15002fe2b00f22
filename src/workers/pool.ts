// A pool of processing workers (worker_threads), one BlockProcessor each. The caller submits
// blocks in file order and takes their results back in that same order (`takeReady`), so
// merging them gives what processing the blocks one after the other in one thread gives. A
// block goes to the least busy worker; a slow one holds back only the taking, not the others.
//
// Code records are shared state: every worker must have applied the code records of every
// block before the one it processes. Each block's records go to every worker, with the next
// job it gets (they are few: a recording sends a code object once).

import os from 'node:os';
import { Worker } from 'node:worker_threads';
import type { CodeRecord } from '../capture/types.js';
import type { ProcessedBlock } from '../block-processor.js';
import { CopyStats } from '../block-engine.js';
import type { RawBlock } from '../capture/reader.js';
import type { BlockJob, BlockReply, WorkerSetup } from './messages.js';

/** How long a worker may take to finish its jobs and exit when the pool closes. */
const CLOSE_MS = 30_000;

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
  slot: Slot;
  /** the answer, once there */
  done?: ProcessedBlock | Error;
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

/** A block held code records after other records: process the capture in one thread instead. */
export class LateCodes extends Error {
  constructor() {
    super('a block holds code records after its samples');
    this.name = 'LateCodes';
  }
}

export class WorkerPool {
  private readonly slots: Slot[] = [];
  private readonly pending = new Map<number, Pending>();
  /** ids in submission order, not yet taken */
  private readonly order: number[] = [];
  private nextId = 0;
  private failure: Error | null = null;
  private waiters: (() => void)[] = [];

  constructor(size: number, setup: WorkerSetup) {
    const { script, eval: isEval } = workerScript();
    for (let i = 0; i < size; i++) {
      const worker = new Worker(script, { workerData: setup, eval: isEval });
      const slot: Slot = { worker, codes: [], inFlight: 0 };
      worker.on('message', (m: BlockReply) => this.answer(m));
      worker.on('error', (e) => this.fail(new Error(`processing worker ${i} failed: ${e.message}`)));
      worker.on('exit', (code) => {
        if (slot.inFlight > 0) this.fail(new Error(`processing worker ${i} exited (code ${code}) with blocks in flight`));
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

  /**
   * A block can be submitted: a worker has fewer than DEPTH jobs, and the answers kept for
   * order's sake (a slow block holds back those after it) stay bounded.
   */
  get hasRoom(): boolean {
    return this.order.length < this.slots.length * DEPTH * 4 && this.slots.some((s) => s.inFlight < DEPTH);
  }

  /**
   * Send a block as stored (the worker inflates it) to the least busy worker; `leading` are the
   * code records at its start (leadingCodes), which every other worker gets with its next job.
   */
  submit(raw: RawBlock, leading: CodeRecord[]): void {
    if (this.failure) throw this.failure;
    let slot = this.slots[0]!;
    for (const s of this.slots) if (s.inFlight < slot.inFlight) slot = s;
    for (const s of this.slots) if (s !== slot) for (const c of leading) s.codes.push(c);
    const job: BlockJob = { id: this.nextId++, codes: slot.codes, raw, leading: leading.map((c) => c.address) };
    slot.codes = [];
    this.pending.set(job.id, { slot });
    this.order.push(job.id);
    slot.inFlight++;
    // the stored bytes move to the worker (a reader's buffer of its own: nothing else holds it)
    const stored = raw.stored;
    const whole = stored.byteOffset === 0 && stored.buffer instanceof ArrayBuffer && stored.byteLength === stored.buffer.byteLength;
    slot.worker.postMessage(job, whole ? [stored.buffer as ArrayBuffer] : []);
  }

  /** Resolves at the next answer from any worker (at once after a failure). */
  answered(): Promise<void> {
    if (this.failure) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /** The answers of the oldest blocks not yet taken, in submission order, as far as they are there. Throws a failed block's error. */
  *takeReady(): Generator<ProcessedBlock> {
    if (this.failure) throw this.failure;
    while (this.order.length > 0) {
      const id = this.order[0]!;
      const p = this.pending.get(id)!;
      if (p.done === undefined) return;
      this.order.shift();
      this.pending.delete(id);
      if (p.done instanceof Error) throw p.done;
      yield p.done;
    }
  }

  /**
   * End the workers. Each is asked to finish and exits on its own (a worker stopped in the
   * middle of loading its modules can take the process down with it); one that does not within
   * CLOSE_MS is terminated.
   */
  async close(): Promise<void> {
    await Promise.all(
      this.slots.map(
        (s) =>
          new Promise<void>((resolve) => {
            const timer = setTimeout(() => void s.worker.terminate().then(() => resolve()), CLOSE_MS);
            s.worker.once('exit', () => {
              clearTimeout(timer);
              resolve();
            });
            s.worker.postMessage({ close: true });
          }),
      ),
    );
  }

  private answer(m: BlockReply): void {
    const p = this.pending.get(m.id);
    if (!p) return;
    p.slot.inFlight--;
    if ('error' in m) p.done = new Error(`processing worker: ${m.error}`);
    else if ('lateCodes' in m) p.done = new LateCodes();
    else p.done = { result: m.result, profile: m.profile, copies: CopyStats.fromJSON(m.copies) };
    this.wake();
  }

  private fail(e: Error): void {
    this.failure ??= e;
    this.wake();
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const r of w) r();
  }
}
