// The one chain a recorded sample goes through on its way into a profile, wherever it is taken:
// walked and named (SampleProcessor), given the pseudo-frames asked for (sampleInput: <GC>,
// <native>), and — with asyncio tasks recorded — turned into its task stacks (TaskStacks). The
// reference path of block processing, the live view of a recording (cli/live-profile.ts) and
// dump's task stacks (snapshot-stacks.ts) all run it.

import type { CodeRecord, SampleRecord } from '../capture/types.js';
import { SAMPLE_FLAG } from '../capture/types.js';
import type { AsyncioOffsets } from '../layout/asyncio-offsets.js';
import type { Layout } from '../layout/layout.js';
import type { SampleInput, SourceFrame } from '../profile/types.js';
import type { CodeTable } from '../symbols/code-table.js';
import { GC_FRAME, NATIVE_FRAME } from '../symbols/pseudo-frames.js';
import { sourceFrame } from '../symbols/types.js';
import type { Walker } from '../walk/index.js';
import { TRUSTED } from '../walk/status.js';
import type { AsyncMode } from '../walk/task-graph.js';
import { SampleProcessor, type ProcessedSample } from './sample-processor.js';
import { mixStack, type Unwind } from '../native/mixed-stack.js';
import { nativeLabel } from '../native/symbolize.js';
import type { NativeObject } from '../native/objects.js';
import { TaskStacks } from './task-stacks.js';

/** The frames that are not code objects a profile shows (pseudo-frames.ts). */
export interface PseudoFrames {
  /** <GC> above the stack of a thread in which the collector was running (SAMPLE_FLAG.GC) */
  gcFrames?: boolean;
  /** <native> between a frame and the callee it reached through C code (WalkFrame.callsThroughC) */
  nativeFrames?: boolean;
}

/** A processed sample as the profile takes it, with the pseudo-frames asked for, as the engine counts them. */
export function sampleInput(p: ProcessedSample, pseudo: PseudoFrames = {}): SampleInput {
  const s = p.sample;
  const walked = pseudo.nativeFrames && p.walk ? p.walk.frames : null;
  const frames: SourceFrame[] = [];
  p.frames.forEach((f, k) => {
    // (innermost first: a caller's <native> goes before it, above its callee)
    if (walked?.[k]?.callsThroughC) frames.push({ ...NATIVE_FRAME });
    frames.push(sourceFrame(f));
  });
  if (pseudo.gcFrames && (s.flags & SAMPLE_FLAG.GC) !== 0 && frames.length > 0 && TRUSTED.has(p.status)) frames.unshift({ ...GC_FRAME });
  return {
    time: s.time,
    thread: {
      interpreterId: s.interpreterId,
      threadId: s.threadId,
      nativeThreadId: s.nativeThreadId,
      ...(s.flags & SAMPLE_FLAG.MAIN ? { name: 'MainThread' } : {}),
    },
    status: p.status,
    frames,
  };
}

/**
 * Native frames (report --native on a capture with native stacks): each trusted sample's C and
 * Python frames in one stack (src/native/mixed-stack.ts), or the sample rejected as
 * native-incomplete (no native stack, or one that did not unwind to its outermost frame) or
 * native-unmatched (its Python frames could not be placed in it).
 */
export interface NativeFrames {
  /** the objects described so far (the capture's object records, in file order) */
  objects(): readonly NativeObject[];
  unwind: Unwind;
}

/** A processed sample with its native frames: the profile's input (an idle sample stays idle, without frames). */
export function nativeInput(layout: Layout, p: ProcessedSample, native: NativeFrames): SampleInput {
  const base = sampleInput(p);
  if (!TRUSTED.has(p.status) || p.status === 'idle' || !p.walk) return base;
  const s = p.sample;
  if (!s.registers) return { ...base, status: 'native-incomplete', frames: [] };
  const objects = native.objects();
  const m = mixStack(layout, objects, native.unwind, { registers: s.registers, regions: s.regions, threadStateAddress: s.threadStateAddress }, p.walk.frames);
  if (m.status !== 'mixed') return { ...base, status: m.status === 'native-unmatched' ? 'native-unmatched' : 'native-incomplete', frames: [] };
  const frames: SourceFrame[] = m.frames.map((f) =>
    f.kind === 'python'
      ? sourceFrame(p.frames[f.index]!)
      : { qualname: nativeLabel(f.name), filename: f.name.object ?? '', line: null, native: true },
  );
  return { ...base, frames };
}

export interface SampleChainOptions {
  pseudo?: PseudoFrames;
  /** native frames (the pseudo <native> markers are then not shown) */
  native?: NativeFrames;
  /** name each frame's instruction (SymbolizedFrame.opcode) */
  opcodes?: boolean;
  /** the samples carry asyncio tasks (record --async-aware): their task stacks, in this mode */
  tasks?: { offsets: AsyncioOffsets; mode: AsyncMode } | null;
}

/** One sample through the chain. */
export interface ChainedSample {
  processed: ProcessedSample;
  /** the thread's stack as the profile takes it */
  input: SampleInput;
  /** what the profile adds: `input`, or with tasks recorded each of its task stacks (a failed task read comes back rejected, with its status) */
  inputs: SampleInput[];
}

export class SampleChain {
  readonly processor: SampleProcessor;
  readonly tasks: TaskStacks | null;

  constructor(
    layout: Layout,
    walker: Walker,
    /** the code table to name frames with (shared with a block engine that processes other blocks) */
    codes: CodeTable,
    private readonly options: SampleChainOptions = {},
  ) {
    this.processor = new SampleProcessor(layout, walker, undefined, codes, options.opcodes === true);
    this.tasks = options.tasks ? new TaskStacks(layout, options.tasks.offsets, options.tasks.mode, codes) : null;
  }

  /** Code records, in recording order: each applies to the samples after it. */
  addCodes(records: Iterable<CodeRecord>): void {
    this.processor.addCodes(records);
  }

  /** The samples, walked and named, each with what a profile takes of it. */
  *run(samples: readonly SampleRecord[]): Generator<ChainedSample> {
    for (const processed of this.processor.process(samples)) {
      const input = this.options.native ? nativeInput(this.processor.layout, processed, this.options.native) : sampleInput(processed, this.options.pseudo);
      yield { processed, input, inputs: this.tasks ? this.tasks.inputs(processed, input) : [input] };
    }
  }
}
