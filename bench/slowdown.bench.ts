// What recording costs the program, measured by the program: each real program (harness/
// real-programs.ts) counts the rounds of its own work it gets done in SECONDS, run unprofiled and
// recorded by each mode, in ROUNDS rounds, the runs of a round one right after the other (their
// order turned at each round, so that no mode always follows the same one). A round's slowdown
// of a mode is 1 − (its work / the unprofiled run's work of that round), in two measures:
// - the whole run: its rounds from its first instruction, the recorder's start included (the
//   recorder starts with the program: it finds the interpreter, loads what it needs, compiles
//   its own code, and reads every code object the first time it meets it);
// - once recording: its rate of rounds in the second half of its run, seconds after the
//   recorder's start — what sampling costs a program for as long as it is recorded.
// A mode `timer` runs the program unprofiled under the kernel's own sampling of every CPU at the
// rate (`perf record -a -e cpu-clock`, where perf is installed): the timer's interrupts alone,
// nothing of the program copied — what any sampling at the interrupt costs on this machine,
// beside `interrupt` (it starts with the program: its whole-run measure lacks perf's start).
// The table gives the median over the rounds and their range. How noisy the machine is, in the
// same units: the unprofiled runs against each other — the median of |1 − a/b| over
// consecutive unprofiled runs, and their whole range (max/min − 1). A slowdown within that noise
// is not told apart from none.
//
//   npm run bench:slowdown      (ROUNDS=8 SECONDS=4 RATE=1000 VERSION=3.15
//                                PROGRAMS=configs,astwalk,recursion,asynciotasks MODES=interrupt,adaptive;
//                                a mode may be `timer`, above)
//
// copy `interrupt` needs root and the BPF program built (npm run build). Figures go to
// docs/validation.md with the date and the machine.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { REAL_PROGRAMS, baseline, recordWithPyunwind, type Work } from '../harness/real-programs.js';
import { median, pct, perfAvailable, startTimer, interruptAndWait } from './timer.js';

const ROUNDS = Number(process.env.ROUNDS ?? 8);
const SECONDS = Number(process.env.SECONDS ?? 4);
const RATE = Number(process.env.RATE ?? 1000);
const VERSION = process.env.VERSION ?? '3.15';
const PROGRAMS = (process.env.PROGRAMS ?? 'configs,astwalk,recursion,asynciotasks').split(',');
const MODES = (process.env.MODES ?? 'interrupt,adaptive').split(',');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pyunwind-slowdown-'));

const measures = [
  ['whole run', (w: Work) => w.rounds],
  ['once recording', (w: Work) => w.late],
] as const;

/** The program unprofiled, under the kernel's own cpu-clock sampling of every CPU at RATE (perf): the timer's interrupts alone. */
async function underTimer(py: string, program: (typeof REAL_PROGRAMS)[number]): Promise<Work> {
  const perf = startTimer(['-a'], RATE, path.join(dir, 'perf.data'), SECONDS + 60);
  try {
    return baseline(py, program, SECONDS);
  } finally {
    await interruptAndWait(perf);
  }
}

async function main(): Promise<void> {
  const py = path.resolve(`.cache/cpython/bin/python${VERSION}`);
  if (!fs.existsSync(py)) throw new Error(`${py} is missing: STDLIB=1 npm run provision`);
  if (MODES.includes('interrupt') && process.getuid?.() !== 0) throw new Error('copy interrupt needs root');
  if (MODES.includes('timer') && (process.getuid?.() !== 0 || !perfAvailable())) throw new Error('mode timer needs root and perf (Debian: linux-perf)');
  console.log(`# ${new Date().toISOString().slice(0, 10)}, node ${process.version}, ${os.cpus()[0]?.model?.trim()} × ${os.cpus().length}, kernel ${os.release()}, CPython ${VERSION} (Debian); ${ROUNDS} rounds of ${SECONDS} s runs at ${RATE} Hz`);
  console.log('\n| program | mode | measure | slowdown, median | range over the rounds | noise: unprofiled vs unprofiled, median (range) |');
  console.log('|---|---|---|---|---|---|');
  for (const name of PROGRAMS) {
    const program = REAL_PROGRAMS.find((p) => p.name === name);
    if (!program) throw new Error(`no program ${name} (${REAL_PROGRAMS.map((p) => p.name).join(', ')})`);
    const runs = ['unprofiled', ...MODES];
    const got = new Map<string, Work[]>(runs.map((r) => [r, []]));
    for (let round = 0; round < ROUNDS; round++) {
      const order = runs.map((_, k) => runs[(k + round) % runs.length]!);
      for (const what of order) {
        const work =
          what === 'unprofiled' ? baseline(py, program, SECONDS) : what === 'timer' ? await underTimer(py, program) : await recordWithPyunwind(py, program, { mode: what, seconds: SECONDS, rateHz: RATE, dir });
        got.get(what)!.push({ rounds: work.rounds, late: work.late });
      }
      process.stderr.write(`\r${name}: round ${round + 1} of ${ROUNDS}`);
    }
    process.stderr.write('\n');
    for (const mode of MODES) {
      for (const [measure, of] of measures) {
        const base = got.get('unprofiled')!.map(of);
        const pairs = base.slice(1).map((b, k) => Math.abs(1 - b / base[k]!));
        const noise = `${pct(median(pairs))} (${pct(Math.max(...base) / Math.min(...base) - 1)})`;
        const slow = got.get(mode)!.map((w, k) => 1 - of(w) / base[k]!);
        console.log(`| ${name} | ${mode} | ${measure} | ${pct(median(slow))} | ${pct(Math.min(...slow))} … ${pct(Math.max(...slow))} | ${noise} |`);
      }
    }
  }
  fs.rmSync(dir, { recursive: true, force: true });
}

main().catch((e) => {
  console.error(e instanceof Error ? e.message : e);
  process.exit(1);
});
