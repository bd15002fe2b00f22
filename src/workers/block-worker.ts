// A processing worker: a BlockProcessor of its own (block engine, reference path, a replica of
// the code table) that inflates and processes the blocks the pool sends it and answers with
// what each adds. Jobs are handled one after the other, in the order they came. A block whose
// code records are not all at its start (the parent sent the other workers only those) is not
// processed: the answer says so, and the parent processes the capture in one thread instead.

import { parentPort, workerData } from 'node:worker_threads';
import { BlockProcessor, openBlock, skipped } from '../block-processor.js';
import { layoutFromSource } from '../layout/index.js';
import type { BlockJob, BlockReply, WorkerSetup } from './messages.js';

const setup = workerData as WorkerSetup;
const port = parentPort!;
const ready = BlockProcessor.load(layoutFromSource(setup.layoutSource), {
  ...(setup.thread === undefined ? {} : { thread: setup.thread }),
  module: setup.module,
});
let chain: Promise<unknown> = Promise.resolve();

port.on('message', (job: BlockJob | { close: true }) => {
  if ('close' in job) {
    // after the jobs before it: the thread then ends on its own, not in the middle of anything
    chain = chain.then(() => port.close());
    return;
  }
  chain = chain.then(async () => {
    let reply: BlockReply;
    let transfer: ArrayBuffer[] = [];
    try {
      const processor = await ready;
      processor.addCodes(job.codes);
      const opened = openBlock(job.raw);
      const codes = 'block' in opened ? opened.codes : [];
      if (codes.length !== job.leading.length || codes.some((c, i) => c.address !== job.leading[i])) {
        reply = { id: job.id, lateCodes: true };
      } else {
        processor.addCodes(codes);
        const done = 'block' in opened ? processor.process(opened.block) : skipped(opened.warning);
        const profile = done.profile.toTransfer();
        reply = { id: job.id, result: done.result, profile, copies: done.copies.toJSON() };
        // the stack tables move rather than being copied
        transfer = profile.threads.flatMap((t) => [t.stackParent.buffer, t.stackFrame.buffer, t.stackWeight.buffer] as ArrayBuffer[]);
      }
    } catch (e) {
      reply = { id: job.id, error: e instanceof Error ? (e.stack ?? e.message) : String(e) };
    }
    port.postMessage(reply, transfer);
  });
});
