// A pool of block processors elsewhere (Node's worker threads, a page's Web Workers), one
// BlockProcessor each, behind the BlockPool that processCapture drives. The caller submits blocks
// in file order and takes their results back in that same order (`takeReady`), so merging them
// gives what processing the blocks one after the other in one thread gives. A block goes to the
// least busy worker; a slow one holds back only the taking, not the others.
//
// Code records are shared state: every worker must have applied the code records of every block
// before the one it processes. Each block's records go to every worker, with the next job it
// gets (they are few: a recording sends a code object once).
//
// No runtime API here: each runtime gives a `BlockPort` per worker (src/pipeline/workers/pool.ts for
// Node, web/block-pool.ts for a page).

import type { CodeRecord } from '../../capture/types.js';
import type { RawBlock } from '../../capture/reader.js';
import type { ProcessedBlock } from '../block-processor.js';
import { CopyStats } from '../../kernel/block-engine.js';
import type { BlockPool, LateCodes } from '../process-capture.js';
import type { BlockJob, BlockReply, WorkerJob } from './messages.js';
import type { ProfileTransfer } from '../../profile/profile.js';

/** Jobs in flight per worker: enough to keep each busy while the parent reads the file. */
const DEPTH = 4;

/** One worker, as the pool sees it. */
export interface BlockPort {
  post(job: WorkerJob, transfer: ArrayBuffer[]): void;
  /** ask the worker to finish its jobs and end; resolves when it has (or was stopped) */
  close(): Promise<void>;
}

/** What a worker tells the pool: its answers, and that it failed. */
export interface PortEvents {
  reply(m: BlockReply): void;
  fail(message: string): void;
}


interface Slot {
  port: BlockPort;
  /** code records this worker has not been sent yet */
  codes: CodeRecord[];
  inFlight: number;
}

interface Pending {
  slot: Slot;
  /** the answer, once there */
  done?: ProcessedBlock | LateCodes | Error;
}

/**
 * The bytes a job carries, and what moves rather than being copied. A block that is a whole
 * buffer of its own (a file reader's) moves; a view into a shared buffer (a capture in a
 * SharedArrayBuffer) crosses as that view, nothing copied; a view into a bigger plain buffer (a
 * capture in memory) is copied out first — posted as it is, the whole buffer would be cloned.
 */
function storedForJob(stored: Uint8Array): { stored: Uint8Array; transfer: ArrayBuffer[] } {
  const buffer = stored.buffer;
  if (!(buffer instanceof ArrayBuffer)) return { stored, transfer: [] };
  if (stored.byteOffset === 0 && stored.byteLength === buffer.byteLength) return { stored, transfer: [buffer] };
  const own = stored.slice();
  return { stored: own, transfer: [own.buffer] };
}

export class OrderedBlockPool implements BlockPool {
  private readonly slots: Slot[] = [];
  private readonly pending = new Map<number, Pending>();
  /** ids in submission order, not yet taken */
  private readonly order: number[] = [];
  private nextId = 0;
  private failure: Error | null = null;
  private waiters: (() => void)[] = [];
  /** the flush jobs sent (profiles()), by id: the worker's profile once it answered */
  private readonly flushed = new Map<number, { slot: Slot; profile: ProfileTransfer | null }>();

  /** `connect(i, events)`: start worker i, its messages reported through `events`. */
  constructor(size: number, connect: (i: number, events: PortEvents) => BlockPort) {
    for (let i = 0; i < size; i++) {
      const port = connect(i, {
        reply: (m) => this.answer(m),
        fail: (message) => this.fail(new Error(`processing worker ${i}: ${message}`)),
      });
      this.slots.push({ port, codes: [], inFlight: 0 });
    }
  }

  get size(): number {
    return this.slots.length;
  }

  /** Blocks submitted and not yet taken. */
  get queued(): number {
    return this.order.length;
  }

  /** Whether worker i has jobs it has not answered (a worker that ends then has failed). */
  busy(i: number): boolean {
    return (this.slots[i]?.inFlight ?? 0) > 0;
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
    const { stored, transfer } = storedForJob(raw.stored);
    const job: BlockJob = { id: this.nextId++, codes: slot.codes, raw: { ...raw, stored }, leading: leading.map((c) => c.address) };
    slot.codes = [];
    this.pending.set(job.id, { slot });
    this.order.push(job.id);
    slot.inFlight++;
    slot.port.post(job, transfer);
  }

  /** Resolves at the next answer from any worker (at once after a failure). */
  answered(): Promise<void> {
    if (this.failure) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /** The answers of the oldest blocks not yet taken, in submission order, as far as they are there. Throws a failed block's error. */
  *takeReady(): Generator<ProcessedBlock | LateCodes> {
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
   * The profile each worker built from the blocks it processed (each worker adds its blocks to
   * one profile of its own: the answers of the blocks carry only their counts). Asked after the
   * blocks' answers were taken; the workers start new profiles.
   */
  async profiles(): Promise<ProfileTransfer[]> {
    const ids = this.slots.map((slot) => {
      const id = this.nextId++;
      this.flushed.set(id, { slot, profile: null });
      slot.inFlight++;
      slot.port.post({ id, flush: true }, []);
      return id;
    });
    while (!this.failure && ids.some((id) => this.flushed.get(id)!.profile === null)) await this.answered();
    if (this.failure) throw this.failure;
    const out = ids.map((id) => this.flushed.get(id)!.profile!);
    for (const id of ids) this.flushed.delete(id);
    return out;
  }

  /** End the workers, each after the jobs it has. */
  async close(): Promise<void> {
    await Promise.all(this.slots.map((s) => s.port.close()));
  }

  private answer(m: BlockReply): void {
    const flush = this.flushed.get(m.id);
    if (flush) {
      flush.slot.inFlight--;
      if ('profile' in m) flush.profile = m.profile;
      else this.failure ??= new Error(`processing worker: ${'error' in m ? m.error : 'no profile in its answer'}`);
      this.wake();
      return;
    }
    const p = this.pending.get(m.id);
    if (!p) return;
    p.slot.inFlight--;
    if ('error' in m) p.done = new Error(`processing worker: ${m.error}`);
    else if ('lateCodes' in m) p.done = { lateCodes: true };
    else if ('result' in m) p.done = { result: m.result, copies: CopyStats.fromJSON(m.copies) };
    else p.done = new Error('processing worker: a profile where the answer to a block was expected');
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
