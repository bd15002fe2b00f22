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

import { ByteReader, RECORD_TYPE, readCodeRecord, readThreadNameRecord } from '../capture/format.js';
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
import { FrameIdCache } from './frame-id-cache.js';
import { instantiateKernel, loadKernel } from './load.js';
import {
  CODE_SIZE,
  COPY_BUCKETS,
  C_COPY_HIST,
  C_COPY_TOUCHED,
  C_COUNT,
  C_DATA,
  C_DATA_SIZE,
  C_DESCS,
  C_DESCS_SIZE,
  C_FILTER,
  C_FILTER_HI,
  C_FILTER_LO,
  C_FRAMES,
  C_GC_LEAF,
  C_HASH,
  C_HASH_CAP,
  C_KEEP_FLAGS,
  C_UNKNOWN_FLAGS,
  C_WEIGHTED,
  C_NATIVE,
  C_NODES,
  C_NODES_CAP,
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
  NODE_SIZE,
  N_CODE,
  N_IP,
  N_PARENT,
  N_SLOT,
  N_WEIGHT,
  P_COUNT,
  PSEUDO_CODE_HI,
  REGION_SIZE,
  SLOT_SIZE,
  STOP_CODE,
  STOP_END,
  STOP_FULL,
  STOP_MALFORMED,
  S_COUNTS,
  S_FIRST,
  S_INTERP,
  S_LAST,
  S_MAIN_TIME,
  S_NTID,
  S_TID,
  THREAD_SIZE,
  TRACE_SIZE,
} from './abi.js';
import { SAMPLE_FLAG } from '../capture/types.js';

const PAGE = 65536;

const STOP = { END: STOP_END, CODE: STOP_CODE, MALFORMED: STOP_MALFORMED, FULL: STOP_FULL } as const;

/** The image arena never needs more than a block's region bytes may add up to (the format's limit), twice. */
const MAX_DATA_BYTES = 128 << 20;

/** Capacities of the engine's tables: what one block may need before a harvest. */
const CAPACITY = {
  threads: 8192,
  descBytes: 4 << 20,
  slots: 8192,
  /**
   * stack nodes (at least a whole walk more than maxDepth: see nodeCapacity); they outlive
   * harvests and blocks, so this holds the distinct stacks of most captures (a node is 32 bytes,
   * its hash entries 8, its place in the weighted list 4)
   */
  nodes: 1 << 18,
  /** the data arena's first size; it grows (with memory) when a block needs more */
  dataBytes: 8 << 20,
};

interface EngineExports {
  engineInit(config: number, params: number): number;
  engineSetCodes(table: number, count: number): void;
  engineGrowData(size: number): void;
  engineBeginBlock(): void;
  engineClearOutputs(): void;
  engineResetTree(): void;
  engineTreeFull(): number;
  engineWeightedCount(): number;
  engineRun(start: number, end: number): number;
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
   * nodes [0, mappedCount) have their stack there (stackOf), in the thread of their slot (threadOf).
   * The engine keeps its nodes from one harvest and block to the next, so each is named and
   * interned once, and a harvest adds only weights.
   */
  private mapped: Profile | null = null;
  private mappedCount = 0;
  private stackOf = new Int32Array(1024);
  private threadOf: (ThreadProfile | undefined)[] = [];
  private dataSize = CAPACITY.dataBytes;

  private constructor(
    private readonly exports: EngineExports,
    private readonly memory: WebAssembly.Memory,
    readonly codes: CodeTable,
    private readonly params: WalkParams,
    private readonly options: EngineOptions,
  ) {}

  static async load(layout: Layout, options: EngineOptions = {}): Promise<BlockEngine> {
    const module = options.module ?? (await loadKernel());
    const { instance, memory } = await instantiateKernel(module);
    const params = walkParams(layout, options.maxDepth);
    const bad = checkParams(params);
    if (bad) throw new RangeError(`walk parameters: ${bad}`);
    const engine = new BlockEngine(instance.exports as unknown as EngineExports, memory, new CodeTable(layout), params, options);
    engine.lay();
    return engine;
  }

  /** Node table size: a power of two with room for a few whole walks (the hash is twice as big). */
  private get nodeCapacity(): number {
    let n = CAPACITY.nodes;
    while (n < this.params.maxDepth * 8) n *= 2;
    return n;
  }

  /** Place every area, the growable data arena last. */
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
      ['nodes', this.nodeCapacity * NODE_SIZE],
      ['copyTouched', COPY_BUCKETS * 4],
      ['hash', this.nodeCapacity * 2 * 4],
      ['weighted', this.nodeCapacity * 4],
      ['copyHist', COPY_BUCKETS * 4],
    ];
    let at = align(e.heapBase(), 16);
    for (const [name, size] of areas) {
      this.layout.set(name, at);
      at = align(at + size, 16);
    }
    // then the code table (rewritten when it changes: placed after, growing), payload, data
    this.layout.set('end', at);
    this.placeTail(0, 0);
  }

  /** Lay out code table, payload and data arena after the fixed areas, for these sizes. */
  private placeTail(codeBytes: number, payloadBytes: number): void {
    const end = this.layout.get('end')!;
    const codes = end;
    const payload = align(codes + Math.max(codeBytes, 64 * CODE_SIZE), 16);
    const data = align(payload + Math.max(payloadBytes, 1 << 20), 16);
    this.layout.set('codes', codes);
    this.layout.set('payload', payload);
    this.layout.set('data', data);
    this.ensure(data + this.dataSize);
    this.writeConfig();
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
    slots[C_DATA] = L.get('data')!;
    slots[C_DATA_SIZE] = this.dataSize;
    slots[C_SLOTS] = L.get('slots')!;
    slots[C_SLOTS_CAP] = CAPACITY.slots;
    slots[C_NODES] = L.get('nodes')!;
    slots[C_NODES_CAP] = this.nodeCapacity;
    slots[C_COPY_TOUCHED] = L.get('copyTouched')!;
    slots[C_HASH] = L.get('hash')!;
    slots[C_HASH_CAP] = this.nodeCapacity * 2;
    slots[C_WEIGHTED] = L.get('weighted')!;
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
    this.codesVersion = -1;
  }

  /** Write the code table (sorted ranges) where the engine reads it, if it changed. */
  private syncCodes(): void {
    if (this.codesVersion === this.codes.version) return;
    const ranges = this.codes.ranges;
    const need = ranges.length * CODE_SIZE;
    if (this.layout.get('payload')! - this.layout.get('codes')! < need) this.placeTail(need * 2, this.payloadRoom());
    const at = this.layout.get('codes')!;
    writeCodeTable(new DataView(this.memory.buffer), at, ranges);
    this.exports.engineSetCodes(at, ranges.length);
    this.codesVersion = this.codes.version;
  }

  private payloadRoom(): number {
    return this.layout.get('data')! - this.layout.get('payload')!;
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
      this.names.clear();
      this.frameIds = new WeakMap();
      this.renamedSeen = renamed;
    }
    // (a block given up on: what the engine counted of it is dropped, with the nodes it made)
    const fallback = (): BlockResult => {
      this.resetTree();
      return reference(block, profile, copies);
    };
    if (this.payloadRoom() < payload.length) this.placeTail(this.layout.get('payload')! - this.layout.get('codes')!, payload.length * 2);
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
        if (e.engineTreeFull()) {
          // (kept apart: the rest of the block may still be given up on)
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

  /** Walks the engine made, and how many of them ended by splicing the thread's previous walk. */
  walkStats(): { walks: number; spliced: number } {
    return { walks: this.exports.engineWalks(), spliced: this.exports.engineSpliced() };
  }

  /** Give the image arena more room; false past what a block can need (then its tables are full). */
  private growData(): boolean {
    if (this.dataSize >= MAX_DATA_BYTES) return false;
    this.dataSize *= 2;
    this.ensure(this.layout.get('data')! + this.dataSize);
    this.exports.engineGrowData(this.dataSize);
    return true;
  }

  /** Frame names by code address, then instruction address (numbers: exact below 2^53), until an address is renamed. */
  private names = new Map<number, Map<number, SourceFrame>>();
  /** each thread's frame index of each name in `names` (cleared with it) */
  private frameIds = new WeakMap<ThreadProfile, FrameIdCache>();

  /**
   * The name of (code, instruction), from the code table as it is now; each named once while
   * no address is given another code object (a code object added names nothing named before).
   */
  private frameName(codeLo: number, codeHi: number, ipLo: number, ipHi: number): SourceFrame {
    if (codeHi >= 1 << 21 || ipHi >= 1 << 21) return this.nameOf(codeLo, codeHi, ipLo, ipHi); // past 2^53: not cached
    const code = codeHi * 2 ** 32 + codeLo;
    const ip = ipHi * 2 ** 32 + ipLo;
    let byIp = this.names.get(code);
    if (!byIp) this.names.set(code, (byIp = new Map()));
    let f = byIp.get(ip);
    if (!f) byIp.set(ip, (f = this.nameOf(codeLo, codeHi, ipLo, ipHi)));
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
  }

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
    const nodesAt = L.get('nodes')! >>> 2;
    const weightedAt = L.get('weighted')! >>> 2;
    const weightedCount = e.engineWeightedCount();
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
    // (u32 words of a node: the 64-bit code and instruction as low, high halves)
    const [parentAt, slotAt, codeAt, ipAt, weightAt] = [N_PARENT, N_SLOT, N_CODE, N_IP, N_WEIGHT].map((o) => o >>> 2) as [number, number, number, number, number];
    const W = NODE_SIZE >>> 2;
    // each slot's frame indices by (code, instruction)
    const cacheOf: FrameIdCache[] = [];
    /** intern node i (its caller interned already) in `stackOf` */
    const intern = (i: number, stackOf: Int32Array): void => {
      const n = nodesAt + i * W;
      const parent = u32[n + parentAt]!;
      const slot = u32[n + slotAt]!;
      const t = threadOf[slot];
      // (a node is made by a sample counted in its slot, since the outputs were last cleared)
      if (!t) throw new Error(`block engine: node ${i} of a slot that counted nothing (a bug in the engine)`);
      let cache = cacheOf[slot];
      if (!cache) {
        cache = this.frameIds.get(t);
        if (!cache) this.frameIds.set(t, (cache = new FrameIdCache()));
        cacheOf[slot] = cache;
      }
      const codeLo = u32[n + codeAt]!;
      const codeHi = u32[n + codeAt + 1]!;
      const ipLo = u32[n + ipAt]!;
      const ipHi = u32[n + ipAt + 1]!;
      let frame = cache.get(codeLo, codeHi, ipLo, ipHi);
      if (frame < 0) cache.set(codeLo, codeHi, ipLo, ipHi, (frame = t.internFrame(this.frameName(codeLo, codeHi, ipLo, ipHi))));
      stackOf[i] = t.internStack(parent === 0xffffffff ? -1 : stackOf[parent]!, frame);
    };
    let stackOf: Int32Array;
    if (persistent) {
      this.mapped = profile;
      if (this.stackOf.length < nodeCount) {
        const grown = new Int32Array(Math.max(nodeCount, this.stackOf.length * 2));
        grown.set(this.stackOf);
        this.stackOf = grown;
      }
      stackOf = this.stackOf;
      // room in each thread's stack table for as many stacks as it has new nodes (at most that
      // many are new there): a table that grows a doubling at a time rehashes every stack again
      const fresh: number[] = [];
      for (let i = this.mappedCount; i < nodeCount; i++) {
        const slot = u32[nodesAt + i * W + slotAt]!;
        fresh[slot] = (fresh[slot] ?? 0) + 1;
      }
      fresh.forEach((n, slot) => threadOf[slot]?.reserveStacks(n));
      // (parents come before children: a node is made after its caller's)
      for (let i = this.mappedCount; i < nodeCount; i++) intern(i, stackOf);
      this.mappedCount = nodeCount;
    } else {
      // only what this harvest weighs, and the callers of it
      stackOf = new Int32Array(nodeCount).fill(-1);
      const path: number[] = [];
      for (let k = 0; k < weightedCount; k++) {
        for (let i = u32[weightedAt + k]!; i !== 0xffffffff && stackOf[i] === -1; i = u32[nodesAt + i * W + parentAt]!) path.push(i);
        while (path.length) intern(path.pop()!, stackOf);
      }
    }
    for (let k = 0; k < weightedCount; k++) {
      const i = u32[weightedAt + k]!;
      const n = nodesAt + i * W;
      threadOf[u32[n + slotAt]!]!.addStackWeight(stackOf[i]!, u32[n + weightAt]!);
    }
    const block = new CopyStats();
    block.samples = e.engineCounted();
    block.sum = Number(e.engineCopySum());
    block.max = e.engineCopyMax();
    block.stopped = e.engineStopped();
    block.retried = e.engineRetried();
    const hist = L.get('copyHist')! >>> 2;
    const touched = L.get('copyTouched')! >>> 2;
    for (let i = 0, n = e.engineTouchedCount(); i < n; i++) {
      const b = u32[touched + i]!;
      block.hist.set(b, u32[hist + b]!);
    }
    copies.merge(block);
    e.engineClearOutputs();
  }
}

const align = (n: number, a: number): number => Math.ceil(n / a) * a;
