// The fuzzing thread of `npm run fuzz` (fuzz/run.ts watches it): runs fuzz() and says which
// turn it is in and how many cases it has done.
import { parentPort, workerData } from 'node:worker_threads';
import { fuzz, type FuzzOptions } from './fuzz.js';

const { options, beat } = workerData as { options: FuzzOptions; beat: Int32Array };
const result = await fuzz({
  ...options,
  onTurn: (turn) => parentPort!.postMessage({ turn }),
  onCase: () => void Atomics.add(beat, 0, 1),
});
parentPort!.postMessage({ result });
