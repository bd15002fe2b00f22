// A processing worker of the viewer (a module Web Worker started by web/block-pool.ts): its own
// BlockProcessor, set up by the first message, then the blocks its pool sends it, handled one
// after the other as Node's worker threads handle them (src/pipeline/workers/block-job.ts). In a
// cross-origin-isolated page a block's bytes are a view into the capture's SharedArrayBuffer,
// read where they lie, and the kernel is the shared-memory build.
//
// Built by scripts/build-web.mjs into dist/web/block-worker.js.

import { BlockProcessor } from '../src/pipeline/block-processor.js';
import { layoutFromSource } from '../src/layout/index.js';
import { handleBlockJob, type WorkerState } from '../src/pipeline/workers/block-job.js';
import type { BlockReply, WorkerJob, WorkerSetup } from '../src/pipeline/workers/messages.js';
import { Profile } from '../src/profile/index.js';

let ready: Promise<BlockProcessor> | null = null;
let chain: Promise<unknown> = Promise.resolve();
const state: WorkerState = { profile: new Profile() };

function answer(reply: BlockReply, transfer: ArrayBuffer[] = []): void {
  self.postMessage(reply, { transfer });
}

self.onmessage = (ev: MessageEvent<{ setup: WorkerSetup } | WorkerJob>) => {
  const m = ev.data;
  if ('setup' in m) {
    const s = m.setup;
    ready = BlockProcessor.load(layoutFromSource(s.layoutSource), { module: s.module, ...(s.thread === undefined ? {} : { thread: s.thread }), ...(s.mode === undefined ? {} : { mode: s.mode }), ...(s.gcFrames === undefined ? {} : { gcFrames: s.gcFrames }), ...(s.nativeFrames === undefined ? {} : { nativeFrames: s.nativeFrames }), ...(s.opcodes === undefined ? {} : { opcodes: s.opcodes }) });
    ready.catch(() => undefined); // reported with the first job
    return;
  }
  chain = chain.then(async () => {
    let processor: BlockProcessor;
    try {
      if (!ready) throw new Error('a block came before the setup');
      processor = await ready;
    } catch (e) {
      answer({ id: m.id, error: e instanceof Error ? e.message : String(e) });
      return;
    }
    const { reply, transfer } = handleBlockJob(processor, m, state);
    answer(reply, transfer);
  });
};
