// Node's processing pool: worker threads (block-worker.ts), each a BlockProcessor, behind the
// runtime-neutral OrderedBlockPool (ordered-pool.ts: blocks in, results out in file order).

import os from 'node:os';
import { Worker } from 'node:worker_threads';
import { OrderedBlockPool, type BlockPort } from './ordered-pool.js';
import type { BlockReply, WorkerSetup } from './messages.js';


/** How long a worker may take to finish its jobs and exit when the pool closes. */
const CLOSE_MS = 30_000;

/** The processors available: the default worker count. */
export function defaultWorkers(): number {
  return typeof os.availableParallelism === 'function' ? os.availableParallelism() : os.cpus().length;
}

/**
 * The worker script beside this file (compiled); when running from the TypeScript sources (the
 * tests), a bootstrap that registers tsx in the worker first and then imports the source.
 */
function workerScript(): { script: URL | string; eval: boolean } {
  const here = import.meta.url;
  if (!here.endsWith('.ts')) return { script: new URL('./block-worker.js', here), eval: false };
  const source = new URL('./block-worker.ts', here).href;
  return { script: `import('tsx/esm/api').then((t) => { t.register(); return import(${JSON.stringify(source)}); });`, eval: true };
}

export class WorkerPool extends OrderedBlockPool {
  constructor(size: number, setup: WorkerSetup) {
    const { script, eval: isEval } = workerScript();
    super(size, (i, events): BlockPort => {
      const worker = new Worker(script, { workerData: setup, eval: isEval });
      worker.on('message', (m: BlockReply) => events.reply(m));
      worker.on('error', (e) => events.fail(`failed: ${e.message}`));
      worker.on('exit', (code) => {
        if (this.busy(i)) events.fail(`exited (code ${code}) with blocks in flight`);
      });
      return {
        post: (job, transfer) => worker.postMessage(job, transfer),
        // the worker is asked to finish and exits on its own (one stopped in the middle of
        // loading its modules can take the process down with it); one that does not within
        // CLOSE_MS is terminated
        close: () =>
          new Promise<void>((resolve) => {
            const timer = setTimeout(() => void worker.terminate().then(() => resolve()), CLOSE_MS);
            worker.once('exit', () => {
              clearTimeout(timer);
              resolve();
            });
            worker.postMessage({ close: true });
          }),
      };
    });
  }
}
