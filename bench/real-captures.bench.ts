// Processing real captures, beside CPython's own profiler: each real program of workloads/
// (harness/real-programs.ts) recorded on CPython 3.15 by `pyunwind record` (default mode) and by
// CPython's profiler (`python3.15 -m profiling.sampling run --binary`) for the same time at the
// same rate; then each capture turned into every format both tools write, by `pyunwind report`
// (one thread, and workers) and by the profiler's `replay` (pure Python), alternating, ROUNDS
// rounds. Per program: samples, bytes per sample of each capture, samples per second of each
// conversion with each tool's start-up subtracted (the same command on a capture of a program that
// ends at once, run right before it in each round), the median over the rounds, and the ratio.
//
//   node --import tsx bench/real-captures.bench.ts [--dir DIR] [--record] [--seconds 10]
//        [--rates 10000] [--programs configs,threadpool,...] [--rounds 3] [--formats collapsed,...]
//        [--workers 0,1,2] [--against OTHER_CHECKOUT]
//
// The captures are kept in DIR (default .cache/real-captures) and re-used unless --record (or
// one is missing): a change to processing is compared on the same captures. Figures go to
// docs/benchmarks.md with the date, the machine and the captures they come from. Needs the
// Debian 3.15 with its standard library and the profiler's patched binary (`npm run provision`).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { REAL_PROGRAMS } from '../harness/real-programs.js';

const { values } = parseArgs({
  options: {
    dir: { type: 'string', default: '.cache/real-captures' },
    record: { type: 'boolean', default: false },
    seconds: { type: 'string', default: '10' },
    rates: { type: 'string', default: '10000' },
    programs: { type: 'string', default: REAL_PROGRAMS.map((p) => p.name).join(',') },
    rounds: { type: 'string', default: '3' },
    formats: { type: 'string', default: 'collapsed,json,pprof,pstats,gecko,speedscope,cpuprofile,flamegraph' },
    workers: { type: 'string', default: '0' },
    // another checkout's bin/pyunwind.js (built): its processing measured the same way, for A/B
    against: { type: 'string' },
  },
});

const PY = path.resolve('.cache/cpython/bin/python3.15');
const PYP = path.resolve('.cache/cpython/bin/python3.15p');
const BIN = path.resolve('bin/pyunwind.js');
const OTHER = values.against ? path.resolve(values.against, 'bin/pyunwind.js') : null;
const DIR = path.resolve(values.dir!);
const SECONDS = Number(values.seconds);
const ROUNDS = Math.max(1, Number(values.rounds));
const RATES = values.rates!.split(',').map(Number);
const FORMATS = values.formats!.split(',');
const WORKERS = values.workers!.split(',').map(Number);
const out = fs.mkdtempSync(path.join(os.tmpdir(), 'pyunwind-real-captures-'));

/** the profiler's replay flag for a pyunwind format, where it writes the same kind of output */
const REPLAY: Record<string, string> = { collapsed: '--collapsed', pstats: '--pstats', gecko: '--gecko', flamegraph: '--flamegraph', heatmap: '--heatmap' };

function run(cmd: string, args: string[], timeoutMs = 600_000): { text: string; ms: number } {
  const t0 = performance.now();
  const r = spawnSync(cmd, args, { encoding: 'utf8', timeout: timeoutMs, maxBuffer: 1 << 28 });
  const ms = performance.now() - t0;
  if (r.status !== 0) throw new Error(`${path.basename(cmd)} ${args.join(' ')}: exit ${r.status ?? r.signal}: ${(r.stderr ?? '').slice(-1500)}`);
  return { text: (r.stdout ?? '') + (r.stderr ?? ''), ms };
}

interface Pair {
  name: string;
  rate: number;
  capture: string;
  binary: string;
}

/** the profiler's recordings that failed (and were made again) */
const profilerFailures: string[] = [];

/** Record the program with both tools (one after the other), unless its captures are there. */
function record(name: string, script: string[], rate: number, seconds: number): Pair {
  const capture = path.join(DIR, `${name}-${rate}.pyuw`);
  const binary = path.join(DIR, `${name}-${rate}.bin`);
  if (values.record || !fs.existsSync(capture)) {
    // (under a name of its own until it is whole: one cut short is never taken for a capture)
    run(process.execPath, [BIN, 'record', '-q', '-r', String(rate), '-d', String(seconds), '-o', `${capture}.part`, '--', PY, ...script]);
    fs.renameSync(`${capture}.part`, capture);
  }
  if (values.record || !fs.existsSync(binary)) {
    // (the profiler's binary writer can fail on a string it read torn — "surrogates not allowed",
    // seen on astwalk: such a recording is said, and made again, up to three times)
    for (let attempt = 1; ; attempt++) {
      try {
        run(PYP, ['-m', 'profiling.sampling', 'run', '-r', `${rate}hz`, '-d', String(seconds), '--binary', '-o', `${binary}.part`, ...script]);
        fs.renameSync(`${binary}.part`, binary);
        break;
      } catch (e) {
        const why = /\n(\w+Error: [^\n]*)/.exec((e as Error).message)?.[1] ?? (e as Error).message.slice(-200);
        profilerFailures.push(`${name} at ${rate} Hz, attempt ${attempt}: ${why}`);
        if (attempt === 3) throw e;
      }
    }
  }
  return { name, rate, capture, binary };
}

/** Samples in a pyunwind capture (attempted), and in the profiler's binary (as its replay counts them). */
function pyunwindSamples(file: string): number {
  return JSON.parse(run(process.execPath, [BIN, 'report', '-q', '-f', 'json', file]).text).summary.attempted;
}
function profilerSamples(file: string): number {
  // the collapsed output's counts add up to the samples it replayed
  const target = path.join(out, 'count.txt');
  run(PYP, ['-m', 'profiling.sampling', 'replay', '--collapsed', '-o', target, file]);
  let n = 0;
  for (const line of fs.readFileSync(target, 'utf8').split('\n')) {
    const m = / (\d+)$/.exec(line);
    if (m) n += Number(m[1]);
  }
  return n;
}

const f0 = (n: number): string => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : '–');
const f1 = (n: number): string => (Number.isFinite(n) ? n.toFixed(1) : '–');

function main(): void {
  fs.mkdirSync(DIR, { recursive: true });
  if (!fs.existsSync(PY) || !fs.existsSync(PYP)) {
    console.error(`needs ${PY} and ${PYP}: npm run provision`);
    process.exit(2);
  }
  console.log(`# ${new Date().toISOString().slice(0, 10)}, node ${process.version}, ${os.cpus()[0]?.model} × ${os.cpus().length}; captures in ${DIR}; median of ${ROUNDS} rounds`);
  // start-up: each tool on a capture of a program that ends at once (a few samples)
  const nap = path.join(DIR, 'startup.py');
  fs.writeFileSync(nap, 'import time\ntime.sleep(0.3)\n');
  const tiny = record('startup', [nap], 1000, 1);
  const wanted = values.programs!.split(',');
  const pairs: Pair[] = [];
  for (const rate of RATES) {
    for (const p of REAL_PROGRAMS.filter((p) => wanted.includes(p.name))) {
      process.stderr.write(`recording ${p.name} at ${rate} Hz…\n`);
      pairs.push(record(p.name, [path.resolve(p.script), String(SECONDS + 3)], rate, SECONDS));
    }
  }

  const sizes: Record<string, string>[] = [];
  const rows: Record<string, string>[] = [];
  const pyunwindArgs = (file: string, format: string, workers: number, bin = BIN): string[] => [bin, 'report', '-q', '-f', format, '-j', String(workers), '-o', path.join(out, `p.${format}`), file];
  const replayArgs = (file: string, format: string): string[] => ['-m', 'profiling.sampling', 'replay', REPLAY[format]!, '-o', path.join(out, `t.${format}`), file];
  /**
   * One round of a command: its time on the capture less its time on the start-up capture, run
   * right before it (so that both see the machine of that moment); `startups` gets the latter.
   */
  const net = (cmd: string, args: (file: string) => string[], file: string, tinyFile: string, startups: number[]): number => {
    const t = run(cmd, args(tinyFile)).ms;
    startups.push(t);
    return run(cmd, args(file)).ms - t;
  };
  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const startupMs = new Map<string, number[]>();
  const startupOf = (k: string): number[] => startupMs.get(k) ?? (startupMs.set(k, []), startupMs.get(k)!);
  for (const pair of pairs) {
    const pn = pyunwindSamples(pair.capture);
    const tn = profilerSamples(pair.binary);
    const pb = fs.statSync(pair.capture).size;
    const tb = fs.statSync(pair.binary).size;
    sizes.push({
      program: pair.name,
      rate: `${pair.rate} Hz`,
      'pyunwind samples': f0(pn),
      'pyunwind B/sample': f1(pb / pn),
      'profiler samples': f0(tn),
      'profiler B/sample': f1(tb / tn),
      'size ratio': `${(pb / pn / (tb / tn)).toFixed(1)}×`,
    });
    for (const format of FORMATS) {
      // alternating: pyunwind, (the other checkout,) the profiler, pyunwind, …
      const pMs = new Map<number, number[]>(WORKERS.map((w) => [w, []]));
      const tMs: number[] = [];
      const oMs: number[] = [];
      for (let r = 0; r < ROUNDS; r++) {
        for (const w of WORKERS) pMs.get(w)!.push(net(process.execPath, (f) => pyunwindArgs(f, format, w), pair.capture, tiny.capture, startupOf(`pyunwind ${format} -j ${w}`)));
        if (OTHER) oMs.push(net(process.execPath, (f) => pyunwindArgs(f, format, 0, OTHER), pair.capture, tiny.capture, startupOf(`other checkout ${format}`)));
        if (REPLAY[format]) tMs.push(net(PYP, (f) => replayArgs(f, format), pair.binary, tiny.binary, startupOf(`replay ${format}`)));
      }
      const rate = (n: number, ms: number): number => n / (Math.max(1, ms) / 1000);
      const tRate = REPLAY[format] ? rate(tn, median(tMs)) : NaN;
      for (const w of WORKERS) {
        const pRate = rate(pn, median(pMs.get(w)!));
        rows.push({
          program: pair.name,
          rate: `${pair.rate} Hz`,
          format,
          workers: String(w),
          'pyunwind ms (net)': f0(median(pMs.get(w)!)),
          'pyunwind samples/s': f0(pRate),
          'profiler ms (net)': REPLAY[format] ? f0(median(tMs)) : '–',
          'profiler samples/s': f0(tRate),
          ratio: Number.isFinite(tRate) ? `${(pRate / tRate).toFixed(1)}×` : '–',
          ...(OTHER && w === 0 ? { 'other checkout samples/s': f0(rate(pn, median(oMs))), 'this / other': `${(pRate / rate(pn, median(oMs))).toFixed(2)}×` } : {}),
        });
      }
    }
  }
  console.log('\nStart-up (subtracted in each round), median ms: ' + [...startupMs].map(([k, v]) => `${k}: ${f0(median(v))}`).join('; '));
  if (profilerFailures.length) console.log(`\nThe profiler's recordings that failed (made again): ${profilerFailures.join('; ')}`);
  console.log('\nCapture size');
  console.table(sizes);
  console.log('\nProcessing: capture → format, start-up subtracted, median of ' + ROUNDS + ' rounds');
  console.table(rows);
  fs.rmSync(out, { recursive: true, force: true });
}

main();
