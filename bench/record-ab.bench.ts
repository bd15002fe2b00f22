// Recording, this checkout against another, side by side: the same programs recorded by
// `pyunwind record` from each (default mode), rounds alternating which goes first, and per case
// the medians of samples taken, copies made with the target stopped, and the target's time
// stopped. For "within noise of before, or the cost said": build the other checkout (a git
// worktree of the commit before) and name it.
//
//   node --import tsx bench/record-ab.bench.ts OTHER_DIR [--rounds N] [--seconds S] [--rates 1000,10000]
//        [--versions 3.13,3.14,3.15] [--programs steady,threadpool,sleepy]
//
// Programs: workloads/steady.py (one thread running Python all the time), workloads/threadpool.py
// (five threads, most waiting), and a script asleep in time.sleep (`sleepy`).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { nativeInterpreters } from '../harness/interpreters.js';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    rounds: { type: 'string', default: '3' },
    seconds: { type: 'string', default: '4' },
    rates: { type: 'string', default: '1000,10000' },
    versions: { type: 'string', default: '3.13,3.14,3.15' },
    programs: { type: 'string', default: 'steady,threadpool,sleepy' },
  },
});
const other = positionals[0];
if (!other || !fs.existsSync(path.join(other, 'bin/pyunwind.js'))) {
  console.error('usage: node --import tsx bench/record-ab.bench.ts OTHER_DIR (a built checkout) [--rounds N] [--seconds S] [--rates LIST] [--versions LIST] [--programs LIST]');
  process.exit(2);
}
const trees = [
  { name: 'this', dir: path.resolve('.') },
  { name: path.basename(path.resolve(other)), dir: path.resolve(other) },
];
const rounds = Number(values.rounds);
const seconds = Number(values.seconds);
const PROGRAMS: Record<string, (s: number) => string[]> = {
  steady: (s) => [path.resolve('workloads/steady.py'), String(s + 2)],
  threadpool: (s) => [path.resolve('workloads/threadpool.py'), String(s + 2)],
  sleepy: (s) => ['-c', `import time; time.sleep(${s + 2})`],
};

interface Run {
  samplesPerSecond: number;
  copiedStopped: number;
  timeStopped: number;
  copyMicros: number;
}

/** One recording; its summary line parsed. */
function record(dir: string, python: string, args: string[], rate: number): Run {
  const file = path.join(os.tmpdir(), `pyunwind-ab-${process.pid}.pyuw`);
  const r = spawnSync(process.execPath, [path.join(dir, 'bin/pyunwind.js'), 'record', '-o', file, '-r', String(rate), '-d', String(seconds), '--', python, ...args], {
    encoding: 'utf8',
    cwd: dir,
    timeout: (seconds + 60) * 1000,
  });
  fs.rmSync(file, { force: true });
  const line = r.stderr.split('\n').find((l) => l.startsWith('pyunwind: recorded')) ?? '';
  const m = /recorded (\d+) samples .* in ([\d.]+) s .*copied with the target stopped ([\d.]+)% \(stopped ([\d.]+)% of the time\).*copy (\d+) µs mean/.exec(line);
  if (!m) throw new Error(`${dir}: no summary line: ${r.stderr.slice(-500)}`);
  return { samplesPerSecond: Number(m[1]) / Number(m[2]), copiedStopped: Number(m[3]), timeStopped: Number(m[4]), copyMicros: Number(m[5]) };
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;

const pythons = nativeInterpreters().filter((p) => !p.missing && values.versions!.split(',').some((v) => p.label === `debian-${v}`));
console.log(`# record A/B: ${new Date().toISOString().slice(0, 10)}, node ${process.version}, ${os.cpus()[0]?.model.trim()} × ${os.cpus().length}; ${rounds} rounds of ${seconds} s; this = ${trees[0]!.dir}, other = ${trees[1]!.dir}\n`);
console.log('| version | program | rate | checkout | samples/s | copied stopped % | target stopped % | copy µs |');
console.log('|---|---|---|---|---|---|---|---|');
for (const py of pythons) {
  for (const program of values.programs!.split(',')) {
    for (const rate of values.rates!.split(',').map(Number)) {
      const runs = new Map(trees.map((t) => [t.name, [] as Run[]]));
      for (let k = 0; k < rounds; k++) {
        const order = k % 2 === 0 ? trees : [...trees].reverse();
        for (const t of order) runs.get(t.name)!.push(record(t.dir, py.command, PROGRAMS[program]!(seconds), rate));
      }
      for (const t of trees) {
        const r = runs.get(t.name)!;
        console.log(
          `| ${py.label} | ${program} | ${rate} | ${t.name} | ${median(r.map((x) => x.samplesPerSecond)).toFixed(0)} | ${median(r.map((x) => x.copiedStopped)).toFixed(1)} | ${median(r.map((x) => x.timeStopped)).toFixed(1)} | ${median(r.map((x) => x.copyMicros))} |`,
        );
      }
    }
  }
}
