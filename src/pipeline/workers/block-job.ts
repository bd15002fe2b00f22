// What a processing worker does with one job, in any runtime (Node's block-worker.ts, a page's
// web/block-worker.ts): apply the code records it was sent, inflate the block, check that its
// code records are all at its start (the other workers were sent only those), process it, and
// answer with what it adds. The answer's stack tables move rather than being copied.

import { BlockProcessor, openBlock, skipped } from '../block-processor.js';
import type { BlockJob, BlockReply } from './messages.js';

export function handleBlockJob(processor: BlockProcessor, job: BlockJob): { reply: BlockReply; transfer: ArrayBuffer[] } {
  try {
    processor.addCodes(job.codes);
    const opened = openBlock(job.raw);
    const codes = 'block' in opened ? opened.codes : [];
    if (codes.length !== job.leading.length || codes.some((c, i) => c.address !== job.leading[i])) return { reply: { id: job.id, lateCodes: true }, transfer: [] };
    processor.addCodes(codes);
    const done = 'block' in opened ? processor.process(opened.block) : skipped(opened.warning);
    const profile = done.profile.toTransfer();
    return {
      reply: { id: job.id, result: done.result, profile, copies: done.copies.toJSON() },
      transfer: profile.threads.flatMap((t) => [t.stackParent.buffer, t.stackFrame.buffer, t.stackWeight.buffer] as ArrayBuffer[]),
    };
  } catch (e) {
    return { reply: { id: job.id, error: e instanceof Error ? (e.stack ?? e.message) : String(e) }, transfer: [] };
  }
}
