// One capture block at a time, from its inflated payload to what it adds to a profile: in the
// WebAssembly block engine by default, on the reference path (decode the block, walk each sample
// with a walker, add each) on request or for a block the engine will not take exactly. Used by
// `reportCapture` in the calling thread and by each processing worker (src/pipeline/workers/), so that a
// block gives the same profile wherever it is processed.
//
// Code records are the one thing a block shares with the blocks after it: the caller hands
// every block's code records to `addCodes`, in file order, before processing that block (a
// worker gets those of the blocks other workers process, too).

import { blockCodes, decodeBlock, unpack, type RawBlock } from '../capture/reader.js';
import { COMPRESSION } from '../capture/format.js';
import type { CaptureWarning, CodeRecord, SampleRecord } from '../capture/types.js';
import { FACT_FLAG, FACT_UNKNOWN_FLAG, type SamplingMode } from '../capture/types.js';
import type { Layout } from '../layout/layout.js';
import type { ProcessedSample } from './sample-processor.js';
import { SampleChain, type PseudoFrames } from './sample-chain.js';
import { Profile } from '../profile/index.js';
import type { SampleInput } from '../profile/types.js';
import { CodeTable } from '../symbols/code-table.js';
import { BlockEngine, CopyStats, type BlockResult, type PayloadBlock } from '../kernel/block-engine.js';
import type { Walker } from '../walk/index.js';
import { KernelWalker } from '../kernel/walker.js';
import type { AsyncioOffsets } from '../layout/asyncio-offsets.js';
import type { AsyncMode } from '../walk/task-graph.js';
import { ObjectSet } from '../native/object-set.js';
import { KernelNativeUnwinder } from '../kernel/native-unwinder.js';
import type { Unwind } from '../native/mixed-stack.js';

/** The kernel's native unwinder over the set's objects (their tables laid out again when the set changes). */
async function nativeUnwinder(set: ObjectSet, module?: WebAssembly.Module): Promise<Unwind> {
  const kernel = await KernelNativeUnwinder.load(module ? { module } : {});
  let laid = -1;
  return (regs, stack) => {
    if (laid !== set.version) {
      kernel.setObjects(set.objects);
      laid = set.version;
    }
    return kernel.unwind(regs, stack);
  };
}

export interface BlockProcessorOptions {
  /** keep only samples of this thread (native thread id, or thread_id) */
  thread?: bigint;
  /** keep only samples whose thread was on a CPU, held the GIL, handled an exception (default wall: all) */
  mode?: SamplingMode;
  /** a <GC> frame above the stack of a thread in which the collector was running */
  gcFrames?: boolean;
  /** a <native> frame between a frame and the callee it reached through C code */
  nativeFrames?: boolean;
  /**
   * C frames, from a capture with native stacks: every sample's native chain unwound and its
   * Python frames put in it (sample-chain.ts nativeInput); implies the reference path
   */
  nativeStacks?: boolean;
  /** name each frame's instruction (report --opcodes: the capture must hold bytecode) */
  opcodes?: boolean;
  /** walk every sample with this walker, on the reference path */
  walker?: Walker;
  /** called with every processed sample; implies the reference path */
  onSample?: (p: ProcessedSample) => void;
  /** process every block on the reference path */
  reference?: boolean;
  /** called with every input the profile takes, in order (reference path) */
  onInput?: (i: SampleInput) => void;
  /** async-aware stacks (src/pipeline/task-stacks.ts): implies the reference path */
  tasks?: { offsets: AsyncioOffsets; mode: AsyncMode };
  /** the compiled kernel, either build (a worker gets it from its parent instead of compiling it again; a browser from the page) */
  module?: WebAssembly.Module;
}

/** What one block adds: its counts and copy statistics, merged in block order, and its profile. */
export interface ProcessedBlock {
  result: BlockResult;
  /** the profile it added to (none from a worker: its blocks add to the worker's own, merged at the end) */
  profile?: Profile;
  copies: CopyStats;
}

/** A block processed in this thread: its profile is a Profile. */
export type LocalBlock = ProcessedBlock & { profile: Profile };

/** A block inflated, with its code records; or why it has no payload (the warning that says so). */
export function openBlock(raw: RawBlock): { block: PayloadBlock; codes: CodeRecord[] } | { warning: CaptureWarning } {
  const payload = unpack(raw);
  if (typeof payload === 'string') return { warning: { offset: raw.offset, message: `block ${raw.index} at byte ${raw.offset}: ${payload}; block skipped` } };
  return { block: { type: raw.type, index: raw.index, offset: raw.offset, payload }, codes: blockCodes(payload, raw.type) };
}

/** What a block that could not be inflated adds: its warning. */
export function skipped(warning: CaptureWarning): LocalBlock {
  return {
    result: { samples: 0, ticks: 0, undetermined: 0, cutTaskLists: 0, firstTime: null, lastTime: null, missed: 0, warnings: [warning], fallback: false, decoded: false, names: [] },
    profile: new Profile(),
    copies: new CopyStats(),
  };
}

/** The samples a profile keeps: of one thread (or every one), with the mode's flag (or every one). */
const keep = (thread: bigint | undefined, keepFlags: number) => (s: SampleRecord) =>
  (thread === undefined || s.nativeThreadId === thread || s.threadId === thread) && (keepFlags === 0 || (s.flags & keepFlags) !== 0);

/** The sample flag a mode keeps (0: every sample). */
export const modeFlag = (mode: SamplingMode | undefined): number => (mode === undefined || mode === 'wall' ? 0 : FACT_FLAG[mode]);

/** The sample flag that says the recorder could not tell the mode's fact (0: none). */
export const unknownFlag = (mode: SamplingMode | undefined): number => (mode === undefined || mode === 'wall' ? 0 : FACT_UNKNOWN_FLAG[mode]);

export class BlockProcessor {
  private constructor(
    readonly codes: CodeTable,
    private readonly chain: SampleChain,
    private readonly engine: BlockEngine | null,
    private readonly options: BlockProcessorOptions,
    /** the native objects described so far (captures with native stacks) */
    readonly objects: ObjectSet,
  ) {}

  static async load(layout: Layout, options: BlockProcessorOptions = {}): Promise<BlockProcessor> {
    const useEngine = !options.reference && !options.onSample && !options.walker && !options.tasks && !options.onInput && !options.nativeStacks;
    const engine = useEngine
      ? await BlockEngine.load(layout, {
          ...(options.thread === undefined ? {} : { thread: options.thread }),
          keepFlags: modeFlag(options.mode),
          unknownFlags: unknownFlag(options.mode),
          gcFrames: options.gcFrames === true,
          nativeFrames: options.nativeFrames === true,
          opcodes: options.opcodes === true,
          ...(options.module ? { module: options.module } : {}),
        })
      : null;
    const codes = engine?.codes ?? new CodeTable(layout);
    // (a module given may be either build: the walker takes the memory it imports)
    const walker = options.walker ?? (await KernelWalker.load(options.module ? { module: options.module } : {}));
    const objects = new ObjectSet();
    const native = options.nativeStacks ? { objects: () => objects.objects, unwind: await nativeUnwinder(objects, options.module) } : null;
    const chain = new SampleChain(layout, walker, codes, { pseudo: options, opcodes: options.opcodes === true, tasks: options.tasks ?? null, ...(native ? { native } : {}) });
    return new BlockProcessor(codes, chain, engine, options, objects);
  }

  /** Code records, in file order: each replaces any earlier one at its address. */
  addCodes(records: Iterable<CodeRecord>): void {
    for (const r of records) this.codes.add(r);
  }

  /**
   * What the block adds: into `into` where given (the calling thread's profile: the engine then
   * interns each stack there once, not once per block), else into a profile of its own.
   */
  process(block: PayloadBlock, into?: Profile): LocalBlock {
    const profile = into ?? new Profile();
    const copies = new CopyStats();
    const result = this.engine ? this.engine.processPayload(block, profile, copies, this.reference) : this.reference(block, profile, copies);
    return { result, profile, copies };
  }

  /** One block the reference way: decode it, walk each sample, add it. */
  private readonly reference = (block: PayloadBlock, into: Profile, copied: CopyStats): BlockResult => {
    const raw = { type: block.type, index: block.index, offset: block.offset, compression: COMPRESSION.NONE, flags: 0, rawLength: block.payload.length, stored: block.payload };
    const { block: decoded, warnings } = decodeBlock(raw);
    const result: BlockResult = { samples: 0, ticks: 0, undetermined: 0, cutTaskLists: 0, firstTime: null, lastTime: null, missed: 0, warnings, fallback: this.engine !== null, decoded: decoded !== null, names: [] };
    if (!decoded) return result;
    result.missed = decoded.missed;
    this.objects.add(decoded.objects);
    result.names = decoded.names;
    let last = -1;
    for (const s of decoded.samples) {
      if (s.time !== last) result.ticks++;
      last = s.time;
      result.firstTime ??= s.time;
      result.lastTime = s.time;
      result.samples++;
    }
    const keepFlags = modeFlag(this.options.mode);
    const chosen = decoded.samples.filter(keep(this.options.thread, keepFlags));
    // (as the engine counts them: of the thread kept, left out by the mode, the fact unknown)
    const unknown = unknownFlag(this.options.mode);
    const ofThread = keep(this.options.thread, 0);
    if (unknown) for (const s of decoded.samples) if ((s.flags & unknown) !== 0 && (s.flags & keepFlags) === 0 && ofThread(s)) result.undetermined++;
    for (const s of chosen) copied.add(s.copyMicros, s.flags);
    const cutBefore = this.chain.tasks?.cutLists ?? 0;
    for (const { processed, inputs } of this.chain.run(chosen)) {
      for (const i of inputs) {
        into.add(i);
        this.options.onInput?.(i);
      }
      this.options.onSample?.(processed);
    }
    result.cutTaskLists = (this.chain.tasks?.cutLists ?? 0) - cutBefore;
    return result;
  };
}
