// A processing worker thread (Node): a BlockProcessor of its own (block engine, reference path, a
// replica of the code table) that inflates and processes the blocks the pool sends it and
// answers with what each adds (block-job.ts). Jobs are handled one after the other, in the
// order they came.

import { parentPort, workerData } from 'node:worker_threads';
import { BlockProcessor } from '../block-processor.js';
import { layoutFromSource } from '../../layout/index.js';
import { handleBlockJob, type WorkerState } from './block-job.js';
import type { WorkerJob, WorkerSetup } from './messages.js';
import { Profile } from '../../profile/index.js';

const setup = workerData as WorkerSetup;
const port = parentPort!;
const ready = BlockProcessor.load(layoutFromSource(setup.layoutSource), {
  ...(setup.thread === undefined ? {} : { thread: setup.thread }),
  ...(setup.mode === undefined ? {} : { mode: setup.mode }),
  ...(setup.gcFrames === undefined ? {} : { gcFrames: setup.gcFrames }),
  ...(setup.nativeFrames === undefined ? {} : { nativeFrames: setup.nativeFrames }),
  ...(setup.opcodes === undefined ? {} : { opcodes: setup.opcodes }),
  module: setup.module,
});
let chain: Promise<unknown> = Promise.resolve();
const state: WorkerState = { profile: new Profile() };

port.on('message', (job: WorkerJob | { close: true }) => {
  if ('close' in job) {
    // after the jobs before it: the thread then ends on its own, not in the middle of anything
    chain = chain.then(() => port.close());
    return;
  }
  chain = chain.then(async () => {
    let processor: BlockProcessor;
    try {
      processor = await ready;
    } catch (e) {
      port.postMessage({ id: job.id, error: e instanceof Error ? (e.stack ?? e.message) : String(e) });
      return;
    }
    const { reply, transfer } = handleBlockJob(processor, job, state);
    port.postMessage(reply, transfer);
  });
});
