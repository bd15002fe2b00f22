// A profile of a recording while it runs: the records the recorder writes (code objects and
// samples, in file order) are walked as they come, a batch at a time, into a Profile — what the
// record progress line and `pyunwind top` show. Thread names, as the recorder reads them, name
// the profile's threads after each batch (src/profile/thread-names.ts).

import type { CodeRecord, SampleRecord, ThreadNameRecord } from '../capture/types.js';
import type { Layout } from '../layout/index.js';
import { sampleInput, type PseudoFrames } from '../block-processor.js';
import { Profile } from '../profile/profile.js';
import { ThreadNameTable } from '../profile/thread-names.js';
import { SampleProcessor } from '../sample-processor.js';
import type { KernelWalker } from '../walk/kernel-walker.js';
import { TRUSTED } from '../walk/status.js';

export class LiveProfile {
  readonly profile = new Profile();
  /** samples walked so far, and of those rejected */
  walked = 0;
  rejected = 0;
  private processor: SampleProcessor | null = null;
  private queued: (CodeRecord | SampleRecord)[] = [];
  private readonly names = new ThreadNameTable();

  constructor(
    private readonly walker: KernelWalker,
    private readonly pseudo: PseudoFrames = { gcFrames: true },
    /** frames named with their instruction (top --opcodes) */
    private readonly opcodes = false,
  ) {}

  /** The target's layout, once attached (recordProcess's onStart). */
  start(layout: Layout): void {
    this.processor = new SampleProcessor(layout, this.walker, undefined, undefined, this.opcodes);
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
        if (!TRUSTED.has(p.status)) this.rejected++;
        this.profile.add(sampleInput(p, this.pseudo));
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
