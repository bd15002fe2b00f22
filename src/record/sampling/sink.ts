// Where a recorder's records go (a CaptureWriter is a sink), and the one rule for their order.

import { SAMPLE_FLAG, type CodeRecord, type SampleRecord, type ThreadNameRecord } from '../../capture/types.js';
import type { ThreadSnapshot } from '../copy/thread-snapshot.js';

export interface SampleSink {
  addCode(record: CodeRecord): void;
  /** `immutable`: the caller never changes the record's bytes afterwards (see CaptureWriter.addSample) */
  addSample(record: SampleRecord, immutable?: boolean): void;
  addMissed(n: number): void;
  /** a thread's name as `threading` gave it (a sink without it gets no names) */
  addThreadName?(record: ThreadNameRecord): void;
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
  for (const c of thread.codes) sink.addCode(c);
}


/**
 * The sample record of a thread's copy taken at `time` (µs since the recording started) —
 * the one conversion from a copy to what a capture holds. `onlyThread`: the copy is of the
 * target's only thread state, the main thread whatever the interpreter says (Pyodide never
 * sets interp->threads.main).
 */
export function sampleRecord(t: ThreadSnapshot, time: number, onlyThread = false): SampleRecord {
  return {
    time,
    interpreterId: t.interpreterId,
    threadStateAddress: t.threadStateAddress,
    threadId: t.threadId,
    nativeThreadId: t.nativeThreadId,
    flags:
      (t.holdsGil ? SAMPLE_FLAG.GIL : 0) |
      (t.onCpu ? SAMPLE_FLAG.ON_CPU : 0) |
      (t.cpuUnknown ? SAMPLE_FLAG.CPU_UNKNOWN : 0) |
      (t.handlingException ? SAMPLE_FLAG.EXCEPTION : 0) |
      (t.inGc ? SAMPLE_FLAG.GC : 0) |
      (t.mainThread || onlyThread ? SAMPLE_FLAG.MAIN : 0) |
      (t.stopped ? SAMPLE_FLAG.STOPPED : 0) |
      (t.attempts > 1 ? SAMPLE_FLAG.RETRIED : 0),
    // a copy nothing proved is never passed off as a stack of one moment
    recorderStatus: t.unproven ? 'torn' : 'ok',
    copyMicros: t.copyMicros,
    regions: t.regions,
    errors: t.errors,
    ...(t.frames ? { frames: t.frames } : {}),
  };
}
