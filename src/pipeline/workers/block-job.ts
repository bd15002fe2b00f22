// What a processing worker does with one job, in any runtime (Node's block-worker.ts, a page's
// web/block-worker.ts): apply the code records it was sent, inflate the block, check that its
// code records are all at its start (the other workers were sent only those), process it into
// the worker's own profile, and answer with the block's counts; asked to flush, answer with that
// profile (its stack tables move rather than being copied) and start another.

import { BlockProcessor, openBlock, skipped } from '../block-processor.js';
import { Profile } from '../../profile/index.js';
import type { BlockReply, WorkerJob } from './messages.js';

/** What a worker keeps between jobs: the profile its blocks add to. */
export interface WorkerState {
  profile: Profile;
}

export function handleBlockJob(processor: BlockProcessor, job: WorkerJob, state: WorkerState): { reply: BlockReply; transfer: ArrayBuffer[] } {
  try {
    if ('flush' in job) {
      const profile = state.profile.toTransfer();
      state.profile = new Profile();
      return {
        reply: { id: job.id, profile },
        transfer: profile.threads.flatMap((t) => [t.stackParent.buffer, t.stackFrame.buffer, t.stackWeight.buffer] as ArrayBuffer[]),
      };
    }
    processor.addCodes(job.codes);
    const opened = openBlock(job.raw);
    const codes = 'block' in opened ? opened.codes : [];
    if (codes.length !== job.leading.length || codes.some((c, i) => c.address !== job.leading[i])) return { reply: { id: job.id, lateCodes: true }, transfer: [] };
    processor.addCodes(codes);
    // (a block the engine gives up on goes to the reference path, which adds to the same profile)
    const done = 'block' in opened ? processor.process(opened.block, state.profile) : skipped(opened.warning);
    return { reply: { id: job.id, result: done.result, copies: done.copies.toJSON() }, transfer: [] };
  } catch (e) {
    return { reply: { id: job.id, error: e instanceof Error ? (e.stack ?? e.message) : String(e) }, transfer: [] };
  }
}
