// How copies are kept consistent — one set of rules for every command that copies a live
// target (record, dump).

import type { Consistency } from './consistency.js';
import { MemoryCopier, type CopierOptions } from './copier.js';
import type { Stopper } from '../linux/stopper.js';
import type { ThreadSnapshot } from './thread-snapshot.js';
import type { MemorySource } from './source.js';

/**
 * How copies of a running target are made and proven (consistency.ts):
 * - `adaptive`: a copy the anchor (3.15+) or the GIL does not prove is made again at once with
 *   the thread stopped, so no sample is lost and every sample is exact; without the anchor a
 *   thread that may be running Python is stopped first, as `blocking` does.
 * - `optimistic`: never stops the target; a copy nothing proves (after one immediate retry) is
 *   kept as `torn` — counted, never profiled — except where nothing could prove it (no anchor:
 *   before 3.15, or read-only), where one whose readings agree is kept: not exact.
 * - `blocking`: every thread that may be running Python is stopped for its copy.
 * - `interrupt`: a thread on a CPU is copied in the kernel, at the timer's interrupt (record
 *   only: bpf/copier.bpf.c, kernel-samples.ts) — one moment of it without a stop; the others,
 *   off their CPUs, are copied here as `optimistic` copies them, never stopped: a copy nothing
 *   proves is kept as `torn`.
 */
export type CopyMode = 'optimistic' | 'adaptive' | 'blocking' | 'interrupt';

export const COPY_MODES: readonly CopyMode[] = ['adaptive', 'optimistic', 'blocking', 'interrupt'];

/** Copy modes that never stop the target. */
export const neverStops = (copy: CopyMode): boolean => copy === 'optimistic' || copy === 'interrupt';

export interface CopyOptions {
  copy: CopyMode;
  /** stops and resumes the target (required for `adaptive` and `blocking`) */
  stopper?: Stopper;
  /** how a copy is checked (default: the anchor where the target has one and can be written) */
  consistency?: Consistency;
}

/** A copier that makes copies as `copy` says. */
export function copierFor(source: MemorySource, options: CopyOptions, more: Pick<CopierOptions, 'collectUsed' | 'tstateMin' | 'tstateCheck' | 'bytecode' | 'leaveOut'> = {}): MemoryCopier {
  if (!neverStops(options.copy) && !options.stopper) throw new Error(`copy mode ${options.copy} needs a way to stop the target`);
  if (options.copy === 'interrupt') {
    // the threads off their CPUs: never stopped, and a copy nothing proves is torn (exact); a
    // stopper, where one is given, serves only the blocking ticks of a sampler that alternates
    // with them (SamplerOptions.alternate)
    return new MemoryCopier(source, {
      ...more,
      ...(options.consistency ? { consistency: options.consistency } : {}),
      retries: 2,
      ...(options.stopper ? { stopper: options.stopper, stopsOnlyBlocking: true } : {}),
    });
  }
  return new MemoryCopier(source, {
    ...more,
    ...(options.consistency ? { consistency: options.consistency } : {}),
    // a copy nothing proves is made again at once, up to twice (the anchor it left on the
    // innermost frame proves the next unless that frame was gone within microseconds); then,
    // adaptive, with the thread stopped. A thread whose copies keep needing the stop is
    // stopped first (stop-policy.ts): a retry or a late stop lands after the transition that
    // defeated the copy, which biases the profile where frames live about as long as a copy
    // takes (docs/validation.md, point 3).
    ...(options.copy !== 'optimistic' ? { stopper: options.stopper!, retries: 2 } : { retries: 2, keepAgreeing: true }),
  });
}

/** Copy every thread once, as `copy` says (blocking: each thread that may run Python stopped for its copy). */
export function copyThreads(copier: MemoryCopier, options: CopyOptions): ThreadSnapshot[] {
  return copier.copyAll({ blocking: options.copy === 'blocking' });
}
