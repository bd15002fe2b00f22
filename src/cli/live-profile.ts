// A profile of a recording while it runs: the records the recorder writes (code objects and
// samples, in file order) are walked as they come, a batch at a time, into a Profile — what the
// record progress line and `pyunwind top` show. Thread names, as the recorder reads them, name
// the profile's threads after each batch (src/profile/thread-names.ts).

import type { CodeRecord, SampleRecord, ThreadNameRecord } from '../capture/types.js';
import type { NativeObject } from '../native/objects.js';
import { ObjectSet } from '../native/object-set.js';
import type { KernelNativeUnwinder } from '../kernel/native-unwinder.js';
import type { Layout } from '../layout/index.js';
import { SampleChain, type PseudoFrames } from '../pipeline/sample-chain.js';
import { Profile } from '../profile/profile.js';
import { ThreadNameTable } from '../profile/thread-names.js';
import { CodeTable } from '../symbols/code-table.js';
import type { AsyncioOffsets } from '../layout/asyncio-offsets.js';
import type { KernelWalker } from '../kernel/walker.js';
import { TRUSTED } from '../walk/status.js';
import type { AsyncMode } from '../walk/task-graph.js';

export class LiveProfile {
  readonly profile = new Profile();
  /** samples walked so far, and of those rejected */
  walked = 0;
  rejected = 0;
  /** (with tasks recorded, --async-aware: each sample's task stacks instead of its thread stack) */
  private chain: SampleChain | null = null;
  private queued: (CodeRecord | SampleRecord | NativeObject)[] = [];
  /** the native objects recorded so far (record --native) */
  private readonly objects = new ObjectSet();
  private readonly names = new ThreadNameTable();

  constructor(
    private readonly walker: KernelWalker,
    private readonly pseudo: PseudoFrames = { gcFrames: true },
    /** frames named with their instruction (top --opcodes) */
    private readonly opcodes = false,
    /** C frames, from the native stacks recorded (top --native), unwound by this kernel unwinder */
    private readonly native: KernelNativeUnwinder | null = null,
  ) {}

  /** The target's layout, once attached, and the asyncio offsets its tasks are recorded with (recordProcess's onStart). */
  start(layout: Layout, tasks: { offsets: AsyncioOffsets; mode: AsyncMode } | null = null): void {
    const unwinder = this.native;
    const objects = this.objects;
    let laid = -1;
    const native = unwinder
      ? {
          objects: () => objects.objects,
          unwind: (regs: Parameters<KernelNativeUnwinder['unwind']>[0], stack: Parameters<KernelNativeUnwinder['unwind']>[1]) => {
            if (laid !== objects.version) {
              unwinder.setObjects(objects.objects);
              laid = objects.version;
            }
            return unwinder.unwind(regs, stack);
          },
        }
      : null;
    this.chain = new SampleChain(layout, this.walker, new CodeTable(layout), { pseudo: this.pseudo, opcodes: this.opcodes, tasks, ...(native ? { native } : {}) });
  }

  /** A record as it is written (recordProcess's onRecord). */
  add(record: CodeRecord | SampleRecord | ThreadNameRecord | NativeObject): void {
    if ('table' in record) this.queued.push(record);
    else if ('name' in record) this.names.add(record);
    else this.queued.push(record);
  }

  /** Walk what came since the last call, in recording order (a code record applies to the samples after it). */
  drain(): void {
    const chain = this.chain;
    if (!chain) return;
    let samples: SampleRecord[] = [];
    const walk = (): void => {
      for (const { inputs } of chain.run(samples)) {
        this.walked++;
        if (inputs.some((i) => !TRUSTED.has(i.status))) this.rejected++;
        for (const i of inputs) this.profile.add(i);
      }
      samples = [];
    };
    for (const r of this.queued) {
      if ('threadStateAddress' in r) samples.push(r);
      else if ('table' in r) {
        // (an object applies to the samples after it)
        walk();
        this.objects.add([r]);
      } else {
        walk();
        chain.addCodes([r]);
      }
    }
    walk();
    this.queued = [];
    this.names.nameProfile(this.profile);
  }
}
