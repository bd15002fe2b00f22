// Where a recorder's records go (a CaptureWriter is a sink), and the one rule for their order.

import type { CodeRecord, SampleRecord } from '../capture/types.js';
import type { ThreadSnapshot } from './copier.js';

export interface SampleSink {
  addCode(record: CodeRecord): void;
  /** `immutable`: the caller never changes the record's bytes afterwards (see CaptureWriter.addSample) */
  addSample(record: SampleRecord, immutable?: boolean): void;
  addMissed(n: number): void;
  /** end the current block: what was added so far becomes readable even if the process dies */
  flush(): void;
}

/**
 * Add the code objects a thread's sample needs before the sample. A sample must be symbolized
 * with the code object that was at each address when it was taken: a block holds one record
 * per address, so a record that replaces an earlier one starts a new block.
 */
export function emitCodes(sink: Pick<SampleSink, 'addCode' | 'flush'>, thread: ThreadSnapshot): void {
  if (thread.codeReplaced) sink.flush();
  for (const c of thread.codes) sink.addCode({ address: c.address, regions: c.regions });
}

