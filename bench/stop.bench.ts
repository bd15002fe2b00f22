// How long stopping one running thread of a Python process takes here (ptrace: PTRACE_SEIZE +
// PTRACE_INTERRUPT until it is seen stopped), and letting it go again — what a copy made with
// the target stopped costs besides the copy itself.
//
//   node --import tsx bench/stop.bench.ts [PYTHON] [STOPS]
//
// PYTHON: the interpreter to run `while True: pass` with (default .cache/cpython/bin/python3.15,
// from `npm run provision`); STOPS: how many (default 2000), each 0.3 ms after the last.
import { spawn } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { loadNative } from '../src/record/linux/native.js';
import { ThreadStopper } from '../src/record/linux/stopper.js';

const PY = path.resolve(process.argv[2] ?? '.cache/cpython/bin/python3.15');
const STOPS = Number(process.argv[3] ?? 2000);

const native = loadNative();
if (typeof native === 'string') {
  console.error(`cannot stop threads here: ${native}`);
  process.exit(1);
}
const child = spawn(PY, ['-c', 'print("up", flush=True)\nwhile True: pass'], { stdio: ['ignore', 'pipe', 'inherit'] });
try {
  // its loop is running once it said so
  await new Promise<void>((resolve, reject) => {
    child.stdout!.once('data', () => resolve());
    child.once('exit', (code) => reject(new Error(`${PY} exited (${code})`)));
  });
  const stopper = new ThreadStopper(child.pid!, native);
  const stop: number[] = [];
  const resume: number[] = [];
  for (let i = 0; i < STOPS; i++) {
    const t0 = performance.now();
    if (!stopper.stopThread(child.pid!)) throw new Error('the thread did not stop');
    const t1 = performance.now();
    stopper.resume();
    stop.push((t1 - t0) * 1000);
    resume.push((performance.now() - t1) * 1000);
    const until = performance.now() + 0.3;
    while (performance.now() < until) {
      // let it run a little between stops
    }
  }
  const q = (x: number[], p: number): string => [...x].sort((a, b) => a - b)[Math.min(x.length - 1, Math.floor(x.length * p))]!.toFixed(0);
  console.log(`${STOPS} stops of a running thread; node ${process.version}, ${os.cpus()[0]?.model?.trim()} × ${os.cpus().length}, ${new Date().toISOString().slice(0, 10)}`);
  console.log(`stop (until seen stopped), µs: p10 ${q(stop, 0.1)}  p50 ${q(stop, 0.5)}  p90 ${q(stop, 0.9)}  p99 ${q(stop, 0.99)}`);
  console.log(`resume, µs:                    p10 ${q(resume, 0.1)}  p50 ${q(resume, 0.5)}  p90 ${q(resume, 0.9)}  p99 ${q(resume, 0.99)}`);
} finally {
  child.kill('SIGKILL');
}
