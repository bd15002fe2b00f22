// A profile of a recording while it runs: the records the recorder writes (code objects and
// samples, in file order) are walked as they come, a batch at a time, into a Profile — what the
// record progress line and `pyunwind top` show. Thread names, as the recorder reads them, name
// the profile's threads after each batch (src/profile/thread-names.ts).

import type { CodeRecord, SampleRecord, ThreadNameRecord } from '../capture/types.js';
import type { Layout } from '../layout/index.js';
import { sampleInput, type PseudoFrames } from '../pipeline/block-processor.js';
import { Profile } from '../profile/profile.js';
import { ThreadNameTable } from '../profile/thread-names.js';
import { SampleProcessor } from '../pipeline/sample-processor.js';
import { CodeTable } from '../symbols/code-table.js';
import { TaskStacks } from '../pipeline/task-stacks.js';
import type { AsyncioOffsets } from '../layout/asyncio-offsets.js';
import type { KernelWalker } from '../kernel/walker.js';
import { TRUSTED } from '../walk/status.js';
import type { AsyncMode } from '../walk/task-graph.js';

export class LiveProfile {
  readonly profile = new Profile();
  /** samples walked so far, and of those rejected */
  walked = 0;
  rejected = 0;
  private processor: SampleProcessor | null = null;
  /** with tasks recorded (--async-aware): each sample's task stacks instead of its thread stack */
  private tasks: TaskStacks | null = null;
  private queued: (CodeRecord | SampleRecord)[] = [];
  private readonly names = new ThreadNameTable();

  constructor(
    private readonly walker: KernelWalker,
    private readonly pseudo: PseudoFrames = { gcFrames: true },
    /** frames named with their instruction (top --opcodes) */
    private readonly opcodes = false,
  ) {}

  /** The target's layout, once attached, and the asyncio offsets its tasks are recorded with (recordProcess's onStart). */
  start(layout: Layout, tasks: { offsets: AsyncioOffsets; mode: AsyncMode } | null = null): void {
    const table = new CodeTable(layout);
    this.processor = new SampleProcessor(layout, this.walker, undefined, table, this.opcodes);
    this.tasks = tasks ? new TaskStacks(layout, tasks.offsets, tasks.mode, table) : null;
  }

  /** A record as it is written (recordProcess's onRecord). */
  add(record: CodeRecord | SampleRecord | ThreadNameRecord): void {
    if ('name' in record) this.names.add(record);
    else this.queued.push(record);
  }

  /** Walk what came since the last call, in recording order (a code record applies to the samples after it). */
  drain(): void {
    const processor = this.processor;
    if (!processor) return;
    let samples: SampleRecord[] = [];
    const walk = (): void => {
      for (const p of processor.process(samples)) {
        this.walked++;
        const input = sampleInput(p, this.pseudo);
        // (a sample whose tasks fail comes back from TaskStacks rejected, with that status)
        const inputs = this.tasks ? this.tasks.inputs(p, input) : [input];
        if (inputs.some((i) => !TRUSTED.has(i.status))) this.rejected++;
        for (const i of inputs) this.profile.add(i);
      }
      samples = [];
    };
    for (const r of this.queued) {
      if ('threadStateAddress' in r) samples.push(r);
      else {
        walk();
        processor.addCodes([r]);
      }
    }
    walk();
    this.queued = [];
    this.names.nameProfile(this.profile);
  }
}
