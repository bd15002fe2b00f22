// Host side of the block engine (assembly/engine.ts): lays out its memory, feeds it a block's
// payload, and turns what it counted — per thread, the tree of stacks with how many samples
// ended on each node, and the counts per status — into a profile. The host names each
// distinct (code, instruction) once while the code table stays the same; it never touches a
// sample.
//
// A block the engine does not decode exactly as the reference reader would (anything
// malformed) is processed on the reference path instead (decodeBlock + a walker), so every
// block gives the same profile either way: test/engine.test.ts checks it on real captures,
// test/engine-property.test.ts on edited ones.

import { BLOCK_TYPE, ByteReader, RECORD_TYPE, readCodeRecord, readThreadNameRecord } from '../capture/format.js';
import type { CaptureWarning, ThreadNameRecord } from '../capture/types.js';
import type { Layout } from '../layout/layout.js';
import { Profile } from '../profile/profile.js';
import type { ThreadProfile } from '../profile/thread.js';
import type { SourceFrame } from '../profile/types.js';
import { CodeTable } from '../symbols/code-table.js';
import { GC_FRAME, NATIVE_FRAME } from '../symbols/pseudo-frames.js';
import { sourceFrame } from '../symbols/types.js';
import { STATUS_NAMES } from '../walk/status.js';
import { checkParams, encodeParams, walkParams, type WalkParams } from '../layout/walk-params.js';
import { writeCodeTable } from './walker.js';
import { instantiateKernel, loadKernel } from './load.js';
import {
  CODE_SIZE,
  COPY_BUCKETS,
  C_COPY_HIST,
  C_COPY_TOUCHED,
  C_COUNT,
  C_DESCS,
  C_DESCS_SIZE,
  C_FILTER,
  C_FILTER_HI,
  C_FILTER_LO,
  C_FRAMES,
  C_GC_LEAF,
  C_KEEP_FLAGS,
  C_UNKNOWN_FLAGS,
  C_NATIVE,
  C_SLOTS,
  C_SLOTS_CAP,
  C_THREADS,
  C_THREADS_CAP,
  C_TRACE,
  DESC_SIZE,
  FILTER_ALL,
  FILTER_THREAD,
  FRAME_SIZE,
  GC_CODE_LO,
  NATIVE_CODE_LO,
  NODE_CHUNK_BITS,
  NODE_SIZE,
  KEY_SIZE,
  N_FRAME,
  N_PARENT,
  N_SLOT,
  N_STACK,
  N_WEIGHT,
  P_COUNT,
  PSEUDO_CODE_HI,
  REGION_SIZE,
  SLOT_SIZE,
  STOP_CODE,
  STOP_END,
  STOP_FULL,
  STOP_MALFORMED,
  STOP_RESTART,
  S_COUNTS,
  S_FIRST,
  S_INTERP,
  S_LAST,
  S_MAIN_TIME,
  S_NTID,
  S_TID,
  THREAD_SIZE,
  TRACE_SIZE,
  TREE_HASH,
  TREE_KEYS,
  TREE_NODES,
} from './abi.js';
import { SAMPLE_FLAG } from '../capture/types.js';
import { SECTION_COUNT, SEC_RECORDS } from '../capture/codes.js';
import { sectionBounds } from '../capture/section-block.js';

const PAGE = 65536;

const STOP = { END: STOP_END, CODE: STOP_CODE, MALFORMED: STOP_MALFORMED, FULL: STOP_FULL } as const;

/** The image arena never needs more than a block's region bytes may add up to (the format's limit), twice. */
const MAX_DATA_BYTES = 128 << 20;

/** nodes a chunk of the tree holds */
const NODE_CHUNK = 1 << NODE_CHUNK_BITS;

/** Capacities of the engine's tables: what one block may need before a harvest. */
const CAPACITY = {
  threads: 8192,
  descBytes: 4 << 20,
  slots: 8192,
  /**
   * most stack nodes (the tree grows a chunk at a time, NODE_CHUNK nodes of 40 bytes and their 4
   * bytes in the weighted list; past this many it is harvested and begun again). The nodes
   * outlive harvests and blocks, so each distinct stack is named once.
   */
  maxNodes: 1 << 22,
  /** the hash of the nodes the child lists do not find, to start with (entries of 4 bytes; it doubles) */
  hashEntries: 1 << 15,
  /** frame keys to start with (KEY_SIZE bytes each, and a hash of twice as many 4-byte entries; they double) */
  keys: 1 << 14,
  /** the data arena's first segment; more are added (with memory) when a block needs more */
  dataBytes: 8 << 20,
};

interface EngineExports {
  engineInit(config: number, params: number): number;
  engineSetCodes(table: number, count: number): void;
  engineBeginBlock(): void;
  engineClearOutputs(): void;
  engineResetTree(): void;
  engineTreeFull(): number;
  engineTreeNeed(): number;
  engineAddSegment(at: number, size: number): number;
  engineDataBytes(): bigint;
  engineDataNeed(): number;
  engineAddNodeChunk(nodesAt: number, weightedAt: number): number;
  engineSetHash(at: number, cap: number): number;
  engineSetKeys(at: number, cap: number, hashAt: number, hashCap: number, copy: number): number;
  engineKeyCount(): number;
  engineWeightedCount(): number;
  engineRun(start: number, end: number): number;
  engineRunSections(table: number): number;
  engineResumeSections(): number;
  engineStopAt(): number;
  engineSamples(): number;
  engineTicks(): number;
  engineUndetermined(): number;
  engineFirstTime(): bigint;
  engineLastTime(): bigint;
  engineSlotCount(): number;
  engineNodeCount(): number;
  engineTouchedCount(): number;
  engineCounted(): number;
  engineCopySum(): bigint;
  engineCopyMax(): number;
  engineStopped(): number;
  engineRetried(): number;
  engineWalks(): number;
  engineSpliced(): number;
  heapBase(): number;
}

/** What the samples of a stretch of blocks say about how they were copied (report's RecordingStats). */
export class CopyStats {
  samples = 0;
  stopped = 0;
  retried = 0;
  sum = 0;
  max = 0;
  /** samples per copy time in µs (COPY_BUCKETS - 1: that or more); sparse, a block has few */
  readonly hist = new Map<number, number>();

  add(copyMicros: number, flags: number): void {
    this.samples++;
    this.sum += copyMicros;
    if (copyMicros > this.max) this.max = copyMicros;
    const b = Math.min(copyMicros, COPY_BUCKETS - 1);
    this.hist.set(b, (this.hist.get(b) ?? 0) + 1);
    if (flags & SAMPLE_FLAG.STOPPED) this.stopped++;
    if (flags & SAMPLE_FLAG.RETRIED) this.retried++;
  }

  merge(o: CopyStats): void {
    this.samples += o.samples;
    this.stopped += o.stopped;
    this.retried += o.retried;
    this.sum += o.sum;
    this.max = Math.max(this.max, o.max);
    for (const [b, n] of o.hist) this.hist.set(b, (this.hist.get(b) ?? 0) + n);
  }

  /** The copy time below which a share `q` of the samples fall (index floor(q·n) of the sorted times). */
  quantile(q: number): number {
    if (this.samples === 0) return 0;
    const rank = Math.min(this.samples - 1, Math.floor(q * this.samples));
    let seen = 0;
    for (const b of [...this.hist.keys()].sort((x, y) => x - y)) {
      seen += this.hist.get(b)!;
      if (seen > rank) return b === COPY_BUCKETS - 1 ? this.max : b;
    }
    return this.max;
  }

  /** Plain data, to cross to another thread. */
  toJSON(): CopyStatsJSON {
    return { samples: this.samples, stopped: this.stopped, retried: this.retried, sum: this.sum, max: this.max, hist: [...this.hist] };
  }

  static fromJSON(j: CopyStatsJSON): CopyStats {
    const c = new CopyStats();
    c.samples = j.samples;
    c.stopped = j.stopped;
    c.retried = j.retried;
    c.sum = j.sum;
    c.max = j.max;
    for (const [b, n] of j.hist) c.hist.set(b, n);
    return c;
  }
}

export interface CopyStatsJSON {
  samples: number;
  stopped: number;
  retried: number;
  sum: number;
  max: number;
  hist: [bucket: number, samples: number][];
}

/** What processing a block gave besides the profile. */
export interface BlockResult {
  /** samples in the block, of every thread (the filter aside) */
  samples: number;
  /** ticks among them: runs of samples with one time */
  ticks: number;
  /** samples the mode left out because the recorder could not tell whether its fact held (EngineOptions.unknownFlags) */
  undetermined: number;
  /** samples whose thread's task list was cut at MAX_TASKS (async-aware, reference path) */
  cutTaskLists: number;
  /** time of the block's first and last sample (null: none) */
  firstTime: number | null;
  lastTime: number | null;
  missed: number;
  warnings: CaptureWarning[];
  /** the block went to the reference path (the engine would not decode it exactly) */
  fallback: boolean;
  /** anything of the block could be decoded at all */
  decoded: boolean;
  /** the thread names the block holds, in its order (applied once every block is in: ThreadNameTable) */
  names: ThreadNameRecord[];
}

export interface EngineOptions {
  /** keep only samples of this thread (native thread id, or thread_id) */
  thread?: bigint;
  /** keep only samples with this SAMPLE_FLAG bit (report --mode: FACT_FLAG of the mode); 0 or none: all */
  keepFlags?: number;
  /** with keepFlags: the SAMPLE_FLAG bit that says the recorder could not tell the mode's fact (FACT_UNKNOWN_FLAG); such samples left out are counted */
  unknownFlags?: number;
  /** a sample whose thread was collecting garbage (SAMPLE_FLAG.GC) gets a <GC> frame above its stack */
  gcFrames?: boolean;
  /** a frame whose callee it reached through C code gets a <native> frame between them (report --native) */
  nativeFrames?: boolean;
  /** frames are named with their instruction: resolved here, from (code, instruction pointer) like the line */
  opcodes?: boolean;
  /** the compiled kernel, either build (default: build/kernel-unshared.wasm next to the package) */
  module?: WebAssembly.Module;
  maxDepth?: number;
}

/**
 * The reference path for one block: decode it with the reference reader and add each sample to
 * the profile as report always did. `process` walks and symbolizes a batch of samples.
 */
export type ReferencePath = (block: PayloadBlock, profile: Profile, copies: CopyStats) => BlockResult;

/** A block's payload, inflated, with where it came from (for messages). */
export interface PayloadBlock {
  /** BLOCK_TYPE.RECORDS or BLOCK_TYPE.SECTIONS */
  type: number;
  /** the writer's 0-based block number */
  index: number;
  /** byte offset of the block's header in the file */
  offset: number;
  payload: Uint8Array;
}

export class BlockEngine {
  private readonly layout = new Map<string, number>();
  private codesVersion = -1;
  /** the code table's count of addresses given another code object, when the tree was last reset for it */
  private renamedSeen = 0;
  /**
   * The profile the engine's nodes are interned in (null: none yet, or the tree was reset): its
   * nodes [0, mappedCount) have their stack there (N_STACK), in the thread of their slot (threadOf).
   * The engine keeps its nodes from one harvest and block to the next, so each is named and
   * interned once, and a harvest adds only weights.
   */
  private mapped: Profile | null = null;
  private mappedCount = 0;
  private threadOf: (ThreadProfile | undefined)[] = [];
  /** where each chunk of the tree's nodes and of its weighted list lies */
  private nodeChunks: number[] = [];
  private weightedChunks: number[] = [];
  private hashEntries = CAPACITY.hashEntries;
  private keys = { at: 0, cap: 0 };
  /**
   * the end of what the areas use: every growable area — code table, payload, data segments,
   * node chunks, hash — is placed here when it is made or grows (memory the old one leaves
   * unused; fixed areas first)
   */
  private top = 0;

  private constructor(
    private readonly exports: EngineExports,
    private readonly memory: WebAssembly.Memory,
    readonly codes: CodeTable,
    private readonly params: WalkParams,
    private readonly options: EngineOptions,
  ) {}

  static async load(layout: Layout, options: EngineOptions = {}): Promise<BlockEngine> {
    const module = options.module ?? (await loadKernel());
    // (the engine asks its host to name each (code, instruction) it first meets: the one call out)
    let engine: BlockEngine | null = null;
    const nameFrame = (codeLo: number, codeHi: number, ipLo: number, ipHi: number): number => engine!.frameNumber(codeLo >>> 0, codeHi >>> 0, ipLo >>> 0, ipHi >>> 0);
    const { instance, memory } = await instantiateKernel(module, { nameFrame });
    const params = walkParams(layout, options.maxDepth);
    const bad = checkParams(params);
    if (bad) throw new RangeError(`walk parameters: ${bad}`);
    engine = new BlockEngine(instance.exports as unknown as EngineExports, memory, new CodeTable(layout), params, options);
    engine.lay();
    return engine;
  }

  /** Place the fixed areas, then the first of each growable one. */
  private lay(): void {
    const e = this.exports;
    const areas: [string, number][] = [
      ['params', P_COUNT * 4],
      ['config', C_COUNT * 4],
      ['frames', this.params.maxDepth * FRAME_SIZE],
      ['trace', this.params.maxDepth * TRACE_SIZE],
      ['threads', CAPACITY.threads * THREAD_SIZE],
      ['descs', CAPACITY.descBytes],
      ['slots', CAPACITY.slots * SLOT_SIZE],
      ['copyTouched', COPY_BUCKETS * 4],
      ['copyHist', COPY_BUCKETS * 4],
      ['sectionTable', SECTION_COUNT * 8],
    ];
    let at = align(e.heapBase(), 16);
    for (const [name, size] of areas) {
      this.layout.set(name, at);
      at = align(at + size, 16);
    }
    this.top = at;
    this.ensure(at);
    this.writeConfig();
    this.layout.set('codes', this.place(64 * CODE_SIZE));
    this.layout.set('codesEnd', this.top);
    this.layout.set('payload', this.place(1 << 20));
    this.layout.set('payloadEnd', this.top);
    this.addSegment(CAPACITY.dataBytes);
    while (this.exports.engineTreeNeed() === TREE_NODES) this.addNodeChunk();
    this.setHash(this.hashEntries);
    this.setKeys(CAPACITY.keys, false);
  }

  /** `bytes` of memory at the top, grown if need be. */
  private place(bytes: number): number {
    const at = align(this.top, 16);
    this.top = at + bytes;
    this.ensure(this.top);
    return at;
  }

  private addSegment(bytes: number): void {
    if (!this.exports.engineAddSegment(this.place(bytes), bytes)) throw new Error('block engine: a data segment does not fit (a bug in the host)');
  }

  private addNodeChunk(): void {
    const nodes = this.place(NODE_CHUNK * NODE_SIZE);
    const weighted = this.place(NODE_CHUNK * 4);
    if (!this.exports.engineAddNodeChunk(nodes, weighted)) throw new Error('block engine: a node chunk does not fit (a bug in the host)');
    this.nodeChunks.push(nodes);
    this.weightedChunks.push(weighted);
  }

  /** Frame keys for `cap` of them, the ones the engine holds copied (or none: every name forgotten). */
  private setKeys(cap: number, copy: boolean): void {
    const at = this.place(cap * KEY_SIZE);
    const hashAt = this.place(cap * 2 * 4);
    if (copy) new Uint8Array(this.memory.buffer).copyWithin(at, this.keys.at, this.keys.at + this.exports.engineKeyCount() * KEY_SIZE);
    if (!this.exports.engineSetKeys(at, cap, hashAt, cap * 2, copy ? 1 : 0)) throw new Error('block engine: the frame keys do not fit (a bug in the host)');
    this.keys = { at, cap };
  }

  private setHash(entries: number): void {
    if (!this.exports.engineSetHash(this.place(entries * 4), entries)) throw new Error('block engine: the hash does not fit (a bug in the host)');
    this.hashEntries = entries;
  }

  private ensure(bytes: number): void {
    const have = this.memory.buffer.byteLength;
    if (bytes > have) this.memory.grow(Math.ceil((bytes - have) / PAGE));
  }

  private writeConfig(): void {
    const L = this.layout;
    const dv = new DataView(this.memory.buffer);
    const cfg = L.get('config')!;
    const filter = this.options.thread;
    const slots = new Uint32Array(C_COUNT);
    slots[C_THREADS] = L.get('threads')!;
    slots[C_THREADS_CAP] = CAPACITY.threads;
    slots[C_DESCS] = L.get('descs')!;
    slots[C_DESCS_SIZE] = CAPACITY.descBytes;
    slots[C_SLOTS] = L.get('slots')!;
    slots[C_SLOTS_CAP] = CAPACITY.slots;
    slots[C_COPY_TOUCHED] = L.get('copyTouched')!;
    slots[C_FRAMES] = L.get('frames')!;
    slots[C_FILTER] = filter === undefined ? FILTER_ALL : FILTER_THREAD;
    slots[C_FILTER_LO] = filter === undefined ? 0 : Number(filter & 0xffffffffn);
    slots[C_FILTER_HI] = filter === undefined ? 0 : Number((filter >> 32n) & 0xffffffffn);
    slots[C_COPY_HIST] = L.get('copyHist')!;
    slots[C_TRACE] = L.get('trace')!;
    slots[C_KEEP_FLAGS] = this.options.keepFlags ?? 0;
    slots[C_UNKNOWN_FLAGS] = this.options.unknownFlags ?? 0;
    slots[C_GC_LEAF] = this.options.gcFrames ? 1 : 0;
    slots[C_NATIVE] = this.options.nativeFrames ? 1 : 0;
    slots.forEach((v, i) => dv.setUint32(cfg + i * 4, v, true));
    new Int32Array(this.memory.buffer, L.get('params')!, P_COUNT).set(encodeParams(this.params));
    if (!this.exports.engineInit(cfg, L.get('params')!)) throw new Error('block engine: its memory layout does not fit (a bug in the host)');
  }

  /** Write the code table (sorted ranges) where the engine reads it, if it changed. */
  private syncCodes(): void {
    if (this.codesVersion === this.codes.version) return;
    const ranges = this.codes.ranges;
    const need = ranges.length * CODE_SIZE;
    if (this.layout.get('codesEnd')! - this.layout.get('codes')! < need) {
      this.layout.set('codes', this.place(need * 2));
      this.layout.set('codesEnd', this.top);
    }
    const at = this.layout.get('codes')!;
    writeCodeTable(new DataView(this.memory.buffer), at, ranges);
    this.exports.engineSetCodes(at, ranges.length);
    this.codesVersion = this.codes.version;
  }


  /**
   * Process one block's payload into `profile` (and the copy statistics into `copies`). The
   * block's code records must already be in `codes` (the reference path applies a block's code
   * records before its samples, whatever their place: so does this). A block the engine will
   * not take exactly is processed by `reference` instead.
   */
  processPayload(block: PayloadBlock, profile: Profile, copies: CopyStats, reference: ReferencePath): BlockResult {
    const payload = block.payload;
    const e = this.exports;
    // the code table first: a bigger one moves the payload area
    this.syncCodes();
    // a node names a (code address, instruction): where an address now holds another code
    // object, what the host named stands no more
    const renamed = this.codes.renamed + (this.options.opcodes ? this.codes.recoded : 0);
    if (renamed !== this.renamedSeen) {
      this.resetTree();
      // (in place: the old keys' room is theirs again)
      if (!e.engineSetKeys(this.keys.at, this.keys.cap, this.keys.at + this.keys.cap * KEY_SIZE, this.keys.cap * 2, 0)) throw new Error('block engine: the frame keys do not fit (a bug in the host)');
      this.renamedSeen = renamed;
    }
    // (a block given up on: what the engine counted of it is dropped, with the nodes it made)
    const fallback = (): BlockResult => {
      this.resetTree();
      return reference(block, profile, copies);
    };
    if (block.type === BLOCK_TYPE.SECTIONS) return this.processSections(block, profile, copies, fallback);
    if (block.type !== BLOCK_TYPE.RECORDS) return fallback();
    if (this.layout.get('payloadEnd')! - this.layout.get('payload')! < payload.length) {
      this.layout.set('payload', this.place(payload.length * 2));
      this.layout.set('payloadEnd', this.top);
    }
    const base = this.layout.get('payload')!;
    new Uint8Array(this.memory.buffer, base, payload.length).set(payload);
    const head = new ByteReader(payload);
    let missed: number;
    try {
      missed = head.uint('missed count');
    } catch {
      return fallback();
    }
    // What this block adds is kept apart until the block is done: a block the engine gives up
    // on goes to the reference path whole.
    // (created at the first harvest before the block's end: the common block has none, and its
    // one harvest goes straight into `profile`, once the block can no longer be given up on)
    let local: Profile | null = null;
    let localCopies: CopyStats | null = null;
    const names: ThreadNameRecord[] = [];
    e.engineBeginBlock();
    let pos = base + head.pos;
    const end = base + payload.length;
    for (;;) {
      const stop = e.engineRun(pos, end);
      if (stop === STOP.END) break;
      if (stop === STOP.CODE) {
        // a code record, applied before the block: step over it — a record that does not decode
        // (skipped when the block's codes were applied) sends the block to the reference path,
        // which says so in its warning (found by fuzzing: the engine stepped over it in silence);
        // a thread-name record: collect it (one that does not decode: the reference path too)
        const r = new ByteReader(payload, e.engineStopAt() - base);
        try {
          const type = r.u8('record type');
          const length = r.uint('record length');
          if (length > r.remaining) return fallback();
          const body = new ByteReader(payload, r.pos, r.pos + length);
          if (type === RECORD_TYPE.THREAD_NAME) names.push(readThreadNameRecord(body));
          else readCodeRecord(body);
          pos = base + r.pos + length;
        } catch {
          return fallback();
        }
        continue;
      }
      if (stop === STOP.FULL) {
        // at a record boundary, nothing of the record applied: harvest what was counted and go
        // on from there; if nothing was counted, the image arena is what is full: grow it
        const at = e.engineStopAt();
        const need = e.engineTreeNeed();
        if (need === TREE_NODES && this.nodeChunks.length * NODE_CHUNK < CAPACITY.maxNodes) {
          this.addNodeChunk();
        } else if (need === TREE_HASH) {
          this.setHash(this.hashEntries * 2);
        } else if (need === TREE_KEYS) {
          this.setKeys(this.keys.cap * 2, true);
        } else if (need !== 0) {
          // the slots, or the nodes at their most: a harvest, and a new tree — kept apart: the
          // rest of the block may still be given up on
          this.harvest((local ??= new Profile()), (localCopies ??= new CopyStats()));
          this.resetTree();
        } else if (!this.growData()) {
          return fallback();
        }
        pos = at;
        continue;
      }
      return fallback();
    }
    if (local && localCopies) {
      this.harvest(local, localCopies);
      this.resetTree();
      profile.merge(local);
      copies.merge(localCopies);
    } else {
      this.harvest(profile, copies);
    }
    const samples = e.engineSamples();
    return {
      samples,
      ticks: e.engineTicks(),
      undetermined: e.engineUndetermined(),
      cutTaskLists: 0,
      firstTime: samples ? Number(e.engineFirstTime()) : null,
      lastTime: samples ? Number(e.engineLastTime()) : null,
      missed,
      warnings: [],
      fallback: false,
      decoded: true,
      names,
    };
  }

  /**
   * A section block (format 1.4): its records section read here (thread names; its code records
   * are in the code table already), its samples by the engine from the sections where they lie.
   */
  private processSections(block: PayloadBlock, profile: Profile, copies: CopyStats, fallback: () => BlockResult): BlockResult {
    const payload = block.payload;
    const e = this.exports;
    let bounds: { at: number; length: number }[];
    try {
      bounds = sectionBounds(payload);
    } catch {
      return fallback();
    }
    if (bounds.length < SECTION_COUNT) return fallback();
    // the records: every one must decode (the reference path says which does not)
    const records = payload.subarray(bounds[SEC_RECORDS]!.at, bounds[SEC_RECORDS]!.at + bounds[SEC_RECORDS]!.length);
    const names: ThreadNameRecord[] = [];
    let missed: number;
    try {
      const r = new ByteReader(records);
      missed = r.uint('missed count');
      while (r.pos < r.end) {
        const type = r.u8('record type');
        const length = r.uint('record length');
        if (length > r.remaining) return fallback();
        const body = new ByteReader(records, r.pos, r.pos + length);
        if (type === RECORD_TYPE.THREAD_NAME) names.push(readThreadNameRecord(body));
        else if (type === RECORD_TYPE.CODE) readCodeRecord(body);
        else return fallback();
        r.pos += length;
      }
    } catch {
      return fallback();
    }
    if (this.layout.get('payloadEnd')! - this.layout.get('payload')! < payload.length) {
      this.layout.set('payload', this.place(payload.length * 2));
      this.layout.set('payloadEnd', this.top);
    }
    const base = this.layout.get('payload')!;
    new Uint8Array(this.memory.buffer, base, payload.length).set(payload);
    const table = new Uint32Array(SECTION_COUNT * 2);
    for (let k = 0; k < SECTION_COUNT; k++) {
      table[2 * k] = base + bounds[k]!.at;
      table[2 * k + 1] = base + bounds[k]!.at + bounds[k]!.length;
    }
    const tableAt = this.layout.get('sectionTable')!;
    new Uint32Array(this.memory.buffer, tableAt, SECTION_COUNT * 2).set(table);
    // what the block adds, apart until it is done (as for record blocks)
    let local: Profile | null = null;
    let localCopies: CopyStats | null = null;
    let stop = e.engineRunSections(tableAt);
    for (;;) {
      if (stop === STOP.END) break;
      if (stop === STOP.FULL) {
        const need = e.engineTreeNeed();
        if (need === TREE_NODES && this.nodeChunks.length * NODE_CHUNK < CAPACITY.maxNodes) this.addNodeChunk();
        else if (need === TREE_HASH) this.setHash(this.hashEntries * 2);
        else if (need === TREE_KEYS) this.setKeys(this.keys.cap * 2, true);
        else if (need !== 0) {
          this.harvest((local ??= new Profile()), (localCopies ??= new CopyStats()));
          this.resetTree();
        } else return fallback();
        stop = e.engineResumeSections();
        continue;
      }
      if (stop === STOP_RESTART) {
        // the arena, grown; the block from its start: what it counted so far is dropped (its
        // nodes stay: the same samples find them again), and what a harvest took of it
        if (!this.growData()) return fallback();
        if (local) {
          local = localCopies = null;
          this.resetTree();
        }
        stop = e.engineRunSections(tableAt);
        continue;
      }
      return fallback();
    }
    if (local && localCopies) {
      this.harvest(local, localCopies);
      this.resetTree();
      profile.merge(local);
      copies.merge(localCopies);
    } else {
      this.harvest(profile, copies);
    }
    const samples = e.engineSamples();
    return {
      samples,
      ticks: e.engineTicks(),
      undetermined: e.engineUndetermined(),
      cutTaskLists: 0,
      firstTime: samples ? Number(e.engineFirstTime()) : null,
      lastTime: samples ? Number(e.engineLastTime()) : null,
      missed,
      warnings: [],
      fallback: false,
      decoded: true,
      names,
    };
  }

  /** Walks the engine made, and how many of them ended by splicing the thread's previous walk. */
  walkStats(): { walks: number; spliced: number } {
    return { walks: this.exports.engineWalks(), spliced: this.exports.engineSpliced() };
  }

  /** Another segment for the image arena, as big as what the arena has and what the sample that stopped wants; false past what a block can need. */
  private growData(): boolean {
    const have = Number(this.exports.engineDataBytes());
    if (have >= MAX_DATA_BYTES) return false;
    this.addSegment(align(Math.max(have, this.exports.engineDataNeed()), 16));
    return true;
  }

  /**
   * Every frame the engine's keys have named, numbered: one number per name (function, file,
   * line, instruction), whatever the (code, instruction) that gave it — so that the engine's
   * nodes, keyed by these numbers, are each exactly one stack of a thread. Numbers stand for the
   * engine's life (a name means the same whatever code object gave it).
   */
  private frames: SourceFrame[] = [];
  private frameNumbers = new Map<string, number>();
  /** each thread's frame index of each frame number (−1: not yet in the thread) */
  private frameIndexOf = new WeakMap<ThreadProfile, Int32Array>();

  /** The frame number of (code, instruction), from the code table as it is now (the engine asks once per key). */
  private frameNumber(codeLo: number, codeHi: number, ipLo: number, ipHi: number): number {
    const f = this.nameOf(codeLo, codeHi, ipLo, ipHi);
    const key = `${f.qualname.length}:${f.qualname}${f.filename.length}:${f.filename}${f.line ?? ''}:${f.opcode ?? ''}`;
    let n = this.frameNumbers.get(key);
    if (n === undefined) {
      n = this.frames.length;
      this.frames.push(f);
      this.frameNumbers.set(key, n);
    }
    return n;
  }

  /** Thread t's frame index of frame number g (interned there if it is not yet). */
  private threadFrame(t: ThreadProfile, g: number): number {
    let map = this.frameIndexOf.get(t);
    if (!map || map.length <= g) {
      const grown = new Int32Array(Math.max(64, (g + 1) * 2)).fill(-1);
      if (map) grown.set(map);
      this.frameIndexOf.set(t, (map = grown));
    }
    let f = map[g]!;
    if (f < 0) f = map[g] = t.internFrame(this.frames[g]!);
    return f;
  }

  private nameOf(codeLo: number, codeHi: number, ipLo: number, ipHi: number): SourceFrame {
    if (codeHi === PSEUDO_CODE_HI && codeLo === GC_CODE_LO) return { ...GC_FRAME };
    if (codeHi === PSEUDO_CODE_HI && codeLo === NATIVE_CODE_LO) return { ...NATIVE_FRAME };
    const sf = this.codes.frame((BigInt(codeHi) << 32n) | BigInt(codeLo), (BigInt(ipHi) << 32n) | BigInt(ipLo), this.options.opcodes === true);
    return sourceFrame(sf);
  }

  /** Forget the engine's slots and nodes, and where they were interned. */
  private resetTree(): void {
    this.exports.engineResetTree();
    this.mapped = null;
    this.mappedCount = 0;
    this.threadOf = [];
    this.appending = new WeakMap();
  }

  /**
   * The threads whose stacks are all the engine's nodes of one slot, appended in order since the
   * tree began (appendStack: no lookup), and how many they have; a thread whose stacks came
   * otherwise too — the reference path, a merge, another slot, an earlier tree — has its nodes
   * looked up (internStack).
   */
  private appending = new WeakMap<ThreadProfile, { slot: number; count: number } | null>();

  /**
   * Add what the engine counted since its outputs were last cleared to `profile`, and clear them.
   * Into the profile its nodes are interned in (or a first one): the nodes made since are
   * interned, and the weights added. Into another (a block's own, kept apart until the block is
   * done): the weighted nodes and their callers are interned there, the mapping left as it was.
   */
  private harvest(profile: Profile, copies: CopyStats): void {
    const e = this.exports;
    const L = this.layout;
    const buf = this.memory.buffer;
    const u32 = new Uint32Array(buf);
    const dv = new DataView(buf);
    const slotCount = e.engineSlotCount();
    const nodeCount = e.engineNodeCount();
    const slotsAt = L.get('slots')!;
    // (a node's and a weighted entry's u32 word, through the chunks)
    const MASK = NODE_CHUNK - 1;
    const nodeWords = this.nodeChunks.map((at) => at >>> 2);
    const weightedWords = this.weightedChunks.map((at) => at >>> 2);
    const nodeAt = (i: number): number => nodeWords[i >>> NODE_CHUNK_BITS]! + (i & MASK) * W;
    const weightedAt = (k: number): number => weightedWords[k >>> NODE_CHUNK_BITS]! + (k & MASK);
    const weightedCount = e.engineWeightedCount();
    const W = NODE_SIZE >>> 2;
    const persistent = this.mapped === null || this.mapped === profile;
    // the slots that counted samples since the outputs were cleared: their counts, and their thread
    const threadOf: (ThreadProfile | undefined)[] = persistent ? this.threadOf : [];
    for (let s = 0; s < slotCount; s++) {
      const sl = slotsAt + s * SLOT_SIZE;
      if (dv.getBigUint64(sl + S_FIRST, true) === 0xffffffffffffffffn) continue; // none
      const counts = STATUS_NAMES.map((_, k) => dv.getUint32(sl + S_COUNTS + k * 4, true));
      const mainTime = Number(dv.getBigInt64(sl + S_MAIN_TIME, true));
      const t = profile.addCounted({
        thread: {
          interpreterId: dv.getBigUint64(sl + S_INTERP, true),
          threadId: dv.getBigUint64(sl + S_TID, true),
          nativeThreadId: dv.getBigUint64(sl + S_NTID, true),
        },
        firstTime: Number(dv.getBigUint64(sl + S_FIRST, true)),
        lastTime: Number(dv.getBigUint64(sl + S_LAST, true)),
        ...(mainTime >= 0 ? { name: 'MainThread', nameTime: mainTime } : {}),
        statuses: counts,
      });
      threadOf[s] ??= t;
    }
    const [parentAt, slotAt, frameAt, weightAt, stackAt] = [N_PARENT, N_SLOT, N_FRAME, N_WEIGHT, N_STACK].map((o) => o >>> 2) as [number, number, number, number, number];
    const NONE = 0xffffffff;
    if (persistent) {
      this.mapped = profile;
      // per slot: append its nodes as stacks, or look them up
      const append: boolean[] = [];
      for (let s = 0; s < slotCount; s++) {
        const t = threadOf[s];
        if (!t) continue;
        let a = this.appending.get(t);
        if (a === undefined) this.appending.set(t, (a = t.stackCount === 0 ? { slot: s, count: 0 } : null));
        append[s] = a !== null && a.slot === s && a.count === t.stackCount;
        if (!append[s]) this.appending.set(t, null);
      }
      // (parents come before children: a node is made after its caller's)
      for (let i = this.mappedCount; i < nodeCount; i++) {
        const n = nodeAt(i);
        const slot = u32[n + slotAt]!;
        const t = threadOf[slot];
        // (a node is made by a sample counted in its slot, since the outputs were last cleared)
        if (!t) throw new Error(`block engine: node ${i} of a slot that counted nothing (a bug in the engine)`);
        const parent = u32[n + parentAt]!;
        const caller = parent === NONE ? -1 : u32[nodeAt(parent) + stackAt]!;
        const frame = this.threadFrame(t, u32[n + frameAt]!);
        u32[n + stackAt] = append[slot] ? t.appendStack(caller, frame) : t.internStack(caller, frame);
      }
      this.mappedCount = nodeCount;
      for (let s = 0; s < slotCount; s++) if (append[s]) this.appending.set(threadOf[s]!, { slot: s, count: threadOf[s]!.stackCount });
      for (let k = 0; k < weightedCount; k++) {
        const n = nodeAt(u32[weightedAt(k)]!);
        threadOf[u32[n + slotAt]!]!.addStackWeight(u32[n + stackAt]!, u32[n + weightAt]!);
      }
    } else {
      // only what this harvest weighs, and the callers of it, looked up in `profile` (the
      // nodes' own stacks are those of the profile they were mapped into: left as they are)
      const stackOf = new Map<number, number>();
      const path: number[] = [];
      for (let k = 0; k < weightedCount; k++) {
        const w = u32[weightedAt(k)]!;
        for (let i = w; i !== NONE && !stackOf.has(i); i = u32[nodeAt(i) + parentAt]!) path.push(i);
        while (path.length) {
          const i = path.pop()!;
          const n = nodeAt(i);
          const t = threadOf[u32[n + slotAt]!];
          if (!t) throw new Error(`block engine: node ${i} of a slot that counted nothing (a bug in the engine)`);
          const parent = u32[n + parentAt]!;
          stackOf.set(i, t.internStack(parent === NONE ? -1 : stackOf.get(parent)!, this.threadFrame(t, u32[n + frameAt]!)));
        }
        const n = nodeAt(w);
        threadOf[u32[n + slotAt]!]!.addStackWeight(stackOf.get(w)!, u32[n + weightAt]!);
      }
    }
    // (straight into `copies`: a CopyStats per harvest, merged, cost a map of its own per block)
    copies.samples += e.engineCounted();
    copies.sum += Number(e.engineCopySum());
    copies.max = Math.max(copies.max, e.engineCopyMax());
    copies.stopped += e.engineStopped();
    copies.retried += e.engineRetried();
    const hist = L.get('copyHist')! >>> 2;
    const touched = L.get('copyTouched')! >>> 2;
    for (let i = 0, n = e.engineTouchedCount(); i < n; i++) {
      const b = u32[touched + i]!;
      copies.hist.set(b, (copies.hist.get(b) ?? 0) + u32[hist + b]!);
    }
    e.engineClearOutputs();
  }
}

const align = (n: number, a: number): number => Math.ceil(n / a) * a;
