// Walk benchmark: the WebAssembly kernel against the TypeScript reference walker, side by side
// in one run, over real samples. A live interpreter (the newest available native one) runs
// test/fixtures/known_stack.py; its snapshot (two threads, the main one ~50 frames deep) is
// repeated into batches, and each walker walks the same batches.
//
//   npm run bench                 (figures go to docs/benchmarks.md by hand, with date and machine)
import os from 'node:os';
import path from 'node:path';
import { Bench } from 'tinybench';
import { openLinuxProcess } from '../src/record/linux/process.js';
import { takeSnapshot } from '../src/record/copy/snapshot.js';
import { CodeTable } from '../src/pipeline/snapshot-stacks.js';
import { KernelWalker, ReferenceWalker, walkParams } from '../src/walk/index.js';
import type { WalkSample } from '../src/walk/types.js';
import { nativeInterpreters } from '../harness/interpreters.js';
import { spawnUntilReady } from '../harness/spawn.js';

const BATCH = 1000;

async function main(): Promise<void> {
  const py = [...nativeInterpreters()].reverse().find((p) => !p.missing);
  if (!py) throw new Error('no native interpreter available');
  const target = await spawnUntilReady(py.command, [path.resolve('test/fixtures/known_stack.py')]);
  try {
    const source = openLinuxProcess(target.pid);
    const snap = takeSnapshot(source);
    const codes = new CodeTable(snap.layout, snap.codeObjects);
    const params = walkParams(snap.layout);
    const one: WalkSample[] = snap.threads.map((t) => ({ threadStateAddress: t.threadStateAddress, regions: t.regions }));
    const batch: WalkSample[] = Array.from({ length: BATCH }, (_, i) => one[i % one.length]!);
    const kernel = await KernelWalker.load();
    const reference = new ReferenceWalker();
    const frames = kernel.walk(params, codes.ranges, batch).reduce((n, r) => n + r.visited, 0);

    const bench = new Bench({ time: 2000, warmup: true });
    bench
      .add('kernel (WebAssembly)', () => void kernel.walk(params, codes.ranges, batch))
      .add('reference (TypeScript)', () => void reference.walk(params, codes.ranges, batch));
    await bench.run();

    const rate = (name: string): number => {
      const t = bench.tasks.find((t) => t.name === name)!;
      const r = t.result as { state: string; throughput?: { mean: number } };
      if (r.state !== 'completed' || !r.throughput) throw new Error(`${name}: ${r.state}`);
      return r.throughput.mean * BATCH;
    };
    const k = rate('kernel (WebAssembly)');
    const ref = rate('reference (TypeScript)');
    console.log(`target: ${source.description}; ${BATCH} samples per batch, ${(frames / BATCH).toFixed(1)} frames per sample`);
    console.log(`node ${process.version}, ${os.cpus()[0]?.model ?? 'cpu'} × ${os.cpus().length}, ${new Date().toISOString().slice(0, 10)}`);
    console.table(bench.table());
    console.log(`samples/s: kernel ${Math.round(k)}, reference ${Math.round(ref)}; kernel/reference = ${(k / ref).toFixed(2)}`);
    console.log(`frames/s: kernel ${Math.round((k * frames) / BATCH)}`);
    source.close();
  } finally {
    target.kill();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
