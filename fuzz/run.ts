// npm run fuzz -- [--cases N] [--seconds S] [--seed X] [--only TEXT] [--replay 'TARGET|SEED|PATH']
//
// Feeds hostile input to the capture reader and patches, the layout parser, the walk
// parameter block, the kernel against the reference walker, the symbolizer, the CFI reader, and
// the native unwinder's kernel against its reference (fuzz/targets.ts), starting from real
// captures, real debug offsets and real CFI. The cases run in a worker thread; this
// thread is the watchdog: a worker whose case count stands still for HANG_SECONDS has hung,
// and is reported with the turn that hung. Prints the cases run and the failures, each with
// the command that replays it; exits 1 on any failure or hang, 2 on bad arguments.

import { parseArgs } from 'node:util';
import { Worker } from 'node:worker_threads';
import type { FuzzFailureReport, FuzzOptions, FuzzResult } from './fuzz.js';

const HANG_SECONDS = 30;

function usage(message: string): never {
  process.stderr.write(`fuzz: ${message}\nusage: npm run fuzz -- [--cases N] [--seconds S] [--seed X] [--only TEXT] [--replay 'TARGET|SEED|PATH']\n`);
  process.exit(2);
}

let values;
try {
  ({ values } = parseArgs({
    options: {
      cases: { type: 'string', default: '100000' },
      seconds: { type: 'string', default: '900' },
      seed: { type: 'string' },
      only: { type: 'string' },
      replay: { type: 'string' },
    },
    strict: true,
  }));
} catch (e) {
  usage((e as Error).message);
}
const num = (name: string, v: string | undefined): number | undefined => {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) usage(`--${name} must be a whole number (got ${v})`);
  return n;
};
const options: FuzzOptions = {
  cases: num('cases', values.cases),
  seconds: num('seconds', values.seconds),
  ...(values.seed !== undefined ? { seed: num('seed', values.seed) } : {}),
  ...(values.only !== undefined ? { only: values.only } : {}),
  ...(values.replay !== undefined ? { replay: values.replay } : {}),
};

const beat = new Int32Array(new SharedArrayBuffer(4));
// (the worker runs TypeScript as this thread does: it registers tsx's loader first — a worker
// does not take it from this thread's --import)
const tsxApi = import.meta.resolve('tsx/esm/api');
const boot = `const { register } = await import(${JSON.stringify(tsxApi)}); register(); await import(${JSON.stringify(new URL('./worker.ts', import.meta.url).href)});`;
const worker = new Worker(new URL(`data:text/javascript,${encodeURIComponent(boot)}`), { workerData: { options, beat } });
let turn: { target: string; seed: number; cases: number } | null = null;
let last = -1;
let still = 0;
const started = Date.now();

const finish = (result: FuzzResult | null, hang: string | null): void => {
  clearInterval(watch);
  const failures: FuzzFailureReport[] = result?.failures ?? [];
  for (const f of failures) {
    process.stderr.write(`\nFAILURE in ${f.target} (seed ${f.seed}, path ${f.path})\n  ${f.error}\n  input: ${f.counterexample}\n  replay: npm run fuzz -- --replay '${f.replay}'\n`);
  }
  if (hang) process.stderr.write(`\nHANG: ${hang}\n`);
  const cases = result?.cases ?? Atomics.load(beat, 0);
  const seconds = result?.seconds ?? (Date.now() - started) / 1000;
  if (result) for (const [t, n] of Object.entries(result.byTarget)) process.stdout.write(`  ${String(n).padStart(7)}  ${t}\n`);
  process.stdout.write(`fuzz: ${cases} cases in ${seconds.toFixed(0)} s, ${failures.length} failures, ${hang ? 1 : 0} hangs\n`);
  process.exitCode = failures.length > 0 || hang ? 1 : 0;
};

const watch = setInterval(() => {
  const now = Atomics.load(beat, 0);
  still = now === last ? still + 1 : 0;
  last = now;
  if (process.stderr.isTTY) process.stderr.write(`\rfuzz: ${now} cases, ${((Date.now() - started) / 1000).toFixed(0)} s${turn ? `, ${turn.target}` : ''}\x1b[K`);
  if (still >= HANG_SECONDS) {
    void worker.terminate();
    finish(null, turn ? `no case finished for ${HANG_SECONDS} s in ${turn.target}: replay its turn with --only '${turn.target}' --seed ${turn.seed} --cases ${turn.cases}` : `no case finished for ${HANG_SECONDS} s`);
  }
}, 1000);

worker.on('message', (m: { turn?: typeof turn; result?: FuzzResult }) => {
  if (m.turn) turn = m.turn;
  if (m.result) {
    if (process.stderr.isTTY) process.stderr.write('\n');
    finish(m.result, null);
    void worker.terminate();
  }
});
worker.on('error', (e) => {
  process.stderr.write(`fuzz: the fuzzer itself failed${turn ? ` in ${turn.target}` : ''}: ${e.stack ?? e.message}\n`);
  clearInterval(watch);
  process.exitCode = 1;
});
