// How copies are kept consistent — one set of rules for every command that copies a live
// target (record, dump).

import type { Consistency } from './consistency.js';
import { MemoryCopier, type CopierOptions } from './copier.js';
import type { Stopper } from './stopper.js';
import type { ThreadSnapshot } from './thread-snapshot.js';
import type { MemorySource } from './source.js';

/**
 * - `optimistic`: copy while the target runs; a copy that moved (after one immediate retry) is
 *   kept as `torn` — counted, never profiled or shown as a stack.
 * - `adaptive`: a thread whose copy moved is copied again at once with the target stopped, so
 *   no sample is lost to the check; steady code is never stopped.
 * - `blocking`: stop the target for every copy.
 */
export type CopyMode = 'optimistic' | 'adaptive' | 'blocking';

export const COPY_MODES: readonly CopyMode[] = ['adaptive', 'optimistic', 'blocking'];

export interface CopyOptions {
  copy: CopyMode;
  /** stops and resumes the target (required for `adaptive` and `blocking`) */
  stopper?: Stopper;
  /** how a copy is checked (default: the anchor where the target has one and can be written) */
  consistency?: Consistency;
}

/** A copier that makes copies as `copy` says. */
export function copierFor(source: MemorySource, options: CopyOptions, more: Pick<CopierOptions, 'collectUsed' | 'tstateMin' | 'tstateCheck' | 'bytecode'> = {}): MemoryCopier {
  if (options.copy !== 'optimistic' && !options.stopper) throw new Error(`copy mode ${options.copy} needs a way to stop the target`);
  return new MemoryCopier(source, {
    ...more,
    ...(options.consistency ? { consistency: options.consistency } : {}),
    // adaptive: a copy that moved is made again at once with the target stopped. Retrying
    // without stopping would bias the profile: a retry lands just after the transition that
    // moved the copy, and which retries succeed depends on how long the program's frames live
    // (measured in docs/validation.md, point 3), while every stop succeeds.
    ...(options.copy !== 'optimistic' ? { stopper: options.stopper!, retries: 0 } : {}),
  });
}

/** Copy every thread once, as `copy` says (blocking: each thread that may run Python stopped for its copy). */
export function copyThreads(copier: MemoryCopier, options: CopyOptions): ThreadSnapshot[] {
  return copier.copyAll({ blocking: options.copy === 'blocking' });
}
