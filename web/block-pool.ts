// The viewer's processing pool: `size` module Web Workers (web/block-worker.ts), each a
// BlockProcessor, behind the same ordered pool Node's worker threads use
// (src/pipeline/workers/ordered-pool.ts): blocks go out in file order, results come back in it, so the
// profile is the one a single thread makes.

import { OrderedBlockPool, type BlockPort } from '../src/pipeline/workers/ordered-pool.js';
import type { BlockReply, WorkerSetup } from '../src/pipeline/workers/messages.js';

export function webBlockPool(size: number, setup: WorkerSetup): OrderedBlockPool {
  return new OrderedBlockPool(size, (i, events): BlockPort => {
    const worker = new Worker(new URL('block-worker.js', import.meta.url), { type: 'module', name: `pyunwind processing ${i}` });
    worker.onmessage = (ev: MessageEvent<BlockReply>) => events.reply(ev.data);
    worker.onerror = (ev) => {
      ev.preventDefault();
      events.fail(ev.message || 'the worker could not start');
    };
    worker.onmessageerror = () => events.fail('a message could not be read');
    // the compiled kernel crosses as it is (nothing compiled again)
    worker.postMessage({ setup });
    return {
      post: (job, transfer) => worker.postMessage(job, transfer),
      // closed once every answer is taken: nothing is lost by stopping it now
      close: async () => worker.terminate(),
    };
  });
}
