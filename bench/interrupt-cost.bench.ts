// What the timer's interrupt costs a program, beside what copying at it costs (record --copy
// interrupt), measured by the program: each of PROGRAMS (workloads/deep.py by default; the
// call-heavy real programs configs, astwalk, recursion, asynciotasks may be named), pinned to one
// CPU, counts its rounds of work, and its rate in the second half of its run (once a recorder that
// started with it is under way) is compared, round by round, between:
//
//   unprofiled     the program alone
//   timer only     `perf record -e cpu-clock -C CPU -c PERIOD`: the kernel's own sampling of that
//                  CPU at the rate — an interrupt at every tick, nothing of the program copied
//                  (a row left out where perf is not installed)
//   interrupt      pyunwind record --copy interrupt at the rate, by pid
//
// in ROUNDS rounds, the order turned at each round. A variant's slowdown in a round is
// 1 − its rate / the unprofiled run's rate; the table gives the median and range over the rounds,
// and the median as microseconds of the program's CPU per tick (slowdown / rate). How noisy the
// machine is: the unprofiled runs against each other.
//
//   node --import tsx bench/interrupt-cost.bench.ts [SECONDS [RATES [ROUNDS [PROGRAMS]]]]
//     (defaults 6, 1000,10000, 5, deep; root, the BPF program built: npm run build; Debian's 3.15:
//     npm run provision)
//
// Figures go to docs/validation.md and docs/benchmarks.md with the date and the machine.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { median, pct, perfAvailable, startTimer, interruptAndWait } from './timer.js';

const SECONDS = Number(process.argv[2] ?? 6);
const RATES = (process.argv[3] ?? '1000,10000').split(',').map(Number);
const ROUNDS = Number(process.argv[4] ?? 5);
/** workloads/NAME.py; each prints one JSON line with its second-half rate `late` */
const PROGRAMS = (process.argv[5] ?? 'deep').split(',');
const PY = path.resolve('.cache/cpython/bin/python3.15');
const BIN = path.resolve('bin/pyunwind.js');
/** the CPU the program runs on (the last one: away from where interrupts of devices tend to go) */
const CPU = os.cpus().length - 1;
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pyunwind-interrupt-cost-'));

type Variant = 'unprofiled' | 'timer only' | 'interrupt';

function exited(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => (child.exitCode !== null ? resolve(child.exitCode) : child.once('exit', (code) => resolve(code))));
}

/** The program's arguments: deep.py's stack 32 frames deep, as in bench/interrupt.bench.ts */
const programArgs = (name: string): string[] => [`workloads/${name}.py`, String(SECONDS), ...(name === 'deep' ? ['32'] : [])];

/** The program's second-half rate of rounds, with `beside` started on it (given its pid) and ended after it. */
async function programRate(name: string, beside: ((pid: number) => ChildProcess) | null): Promise<number> {
  const program = spawn('taskset', ['-c', String(CPU), PY, ...programArgs(name)], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  program.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  const other = beside ? beside(program.pid!) : null;
  await exited(program);
  // (the recorder ends with its target; perf is interrupted)
  if (other) await interruptAndWait(other);
  const line = out.trim().split('\n').pop() ?? '';
  const late = (JSON.parse(line) as { late?: number }).late;
  if (!(typeof late === 'number' && late > 0)) throw new Error(`${name}.py said ${JSON.stringify(line)}`);
  return late;
}

function run(name: string, variant: Variant, rate: number): Promise<number> {
  if (variant === 'unprofiled') return programRate(name, null);
  if (variant === 'timer only') return programRate(name, () => startTimer(['-C', String(CPU)], rate, path.join(dir, 'perf.data'), SECONDS + 5));
  return programRate(name, (pid) => spawn(process.execPath, [BIN, 'record', '--pid', String(pid), '-o', path.join(dir, 'r.pyuw'), '-r', String(rate), '--copy', 'interrupt', '-q'], { stdio: 'ignore' }));
}

async function main(): Promise<void> {
  if (!fs.existsSync(PY)) throw new Error(`${PY} is missing: npm run provision`);
  if (process.getuid?.() !== 0) throw new Error('copy interrupt (and perf on every CPU) needs root');
  const variants: Variant[] = ['unprofiled', ...(perfAvailable() ? (['timer only'] as const) : []), 'interrupt'];
  console.log(`# ${new Date().toISOString().slice(0, 10)}, node ${process.version}, ${os.cpus()[0]?.model?.trim()} × ${os.cpus().length}, kernel ${os.release()}; the program on CPU ${CPU}, ${SECONDS} s runs, ${ROUNDS} rounds, second-half rate`);
  console.log('\n| program | rate | variant | slowdown, median | range over the rounds | µs of the program a tick (median) |');
  console.log('|---|---|---|---|---|---|');
  for (const name of PROGRAMS)
    for (const rate of RATES) {
      const got = new Map<Variant, number[]>(variants.map((v) => [v, []]));
      for (let round = 0; round < ROUNDS; round++) {
        const order = variants.map((_, k) => variants[(k + round) % variants.length]!);
        for (const v of order) got.get(v)!.push(await run(name, v, rate));
        process.stderr.write(`${name} ${rate} Hz round ${round + 1}: ${variants.map((v) => `${v} ${Math.round(got.get(v)!.at(-1)!)}`).join(', ')}\n`);
      }
      const base = got.get('unprofiled')!;
      const noise = base.slice(1).map((b, i) => Math.abs(1 - b / base[i]!));
      for (const v of variants) {
        if (v === 'unprofiled') {
          // (one round: no noise to tell)
          console.log(`| ${name} | ${rate} Hz | unprofiled (noise: one run against the next) | ${noise.length ? pct(median(noise)) : '–'} | ${pct(Math.min(...base) / Math.max(...base) - 1)} … 0 | – |`);
          continue;
        }
        const slow = got.get(v)!.map((r, i) => 1 - r / base[i]!);
        console.log(`| ${name} | ${rate} Hz | ${v} | ${pct(median(slow))} | ${pct(Math.min(...slow))} … ${pct(Math.max(...slow))} | ${((median(slow) * 1e6) / rate).toFixed(1)} |`);
      }
    }
  fs.rmSync(dir, { recursive: true, force: true });
}

main().catch((e: unknown) => {
  console.error(`interrupt-cost: ${e instanceof Error ? e.message : String(e)}`);
  process.exit(1);
});
