// npm run churn: the consistency soak. Records workloads/churn.py — shapes and thread counts
// taking turns — on each Debian CPython 3.13+ (or the interpreters named) in each copy mode until a million samples (or
// --samples) were accepted, and judges every accepted stack against the stacks the program
// says it can have. Prints each recording as it ends, then a table: samples, rejected, the
// impossible stacks and their rate, the share of copies made with the target stopped and of its
// time it spent stopped. Exits 1 when a mode the docs call exact (adaptive, blocking, and
// optimistic with the anchor) accepted an impossible stack; the others' rate is what
// docs/validation.md reports.
//
//   npm run churn -- [--samples N] [--versions 3.13,3.15] [--modes adaptive,optimistic] [--seconds S]
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { recordChurn, type ChurnOutcome, type ChurnShape } from '../harness/churn.js';
import { nativeInterpreters } from '../harness/interpreters.js';

const MODES = {
  adaptive: { copy: 'adaptive', readOnly: false, rateHz: 5000 },
  blocking: { copy: 'blocking', readOnly: false, rateHz: 5000 },
  optimistic: { copy: 'optimistic', readOnly: false, rateHz: 10000 },
  'optimistic-read-only': { copy: 'optimistic', readOnly: true, rateHz: 10000 },
  interrupt: { copy: 'interrupt', readOnly: false, rateHz: 10000 },
} as const;
type ModeName = keyof typeof MODES;

const HELP = `Usage: npm run churn -- [options]

Records workloads/churn.py on each Debian CPython 3.13+ in each copy mode until enough samples
were accepted, and checks every accepted stack against the stacks the program can have. A
recording that gave an impossible stack keeps its capture (in the temporary directory; the
line says where), for pyunwind dump to show how its samples were copied.

  --samples N      accepted samples per version and mode (default 1000000)
  --versions LIST  e.g. 3.13,3.15 (Debian's), or labels: pyenv-3.11.7,debian-3.11
                   (default: every Debian 3.13+ provisioned)
  --modes LIST     of ${Object.keys(MODES).join(', ')} (default: all; optimistic-read-only
                   only where the anchor exists, 3.15+: elsewhere it is optimistic)
  --seconds S      length of each recording (default 20)
  -h, --help
`;

interface Total {
  version: string;
  mode: string;
  exact: boolean;
  recordings: number;
  attempted: number;
  accepted: number;
  impossible: number;
  stoppedCopies: number;
  stoppedTime: number;
  seconds: number;
  examples: Map<string, number>;
}

function main(): Promise<number> | number {
  const { values } = parseArgs({
    options: {
      samples: { type: 'string', default: '1000000' },
      versions: { type: 'string' },
      modes: { type: 'string' },
      seconds: { type: 'string', default: '20' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    process.stdout.write(HELP);
    return 0;
  }
  const enough = Number(values.samples);
  const seconds = Number(values.seconds);
  if (!(enough > 0) || !(seconds > 0)) throw new Error('--samples and --seconds take positive numbers');
  const modes = (values.modes?.split(',') ?? Object.keys(MODES)) as ModeName[];
  for (const m of modes) if (!(m in MODES)) throw new Error(`unknown mode ${m} (${Object.keys(MODES).join(', ')})`);
  const wanted = values.versions?.split(',');
  // (a version names the Debian interpreter; a label — pyenv-3.11.7, debian-3.11 — any native one)
  const pythons = nativeInterpreters().filter((p) => (wanted ? wanted.some((v) => p.label === v || p.label === `debian-${v}`) : /^debian-3\.1[3-9]/.test(p.label)));
  if (pythons.length === 0) throw new Error(wanted ? `no interpreter named ${wanted.join(', ')}` : 'no Debian CPython 3.13+ to record: run npm run provision');
  for (const p of pythons) if (p.missing) throw new Error(`${p.label}: ${p.missing}`);
  return run(pythons, modes, enough, seconds);
}

/** The program's shapes, in turn (with one thread, then two): calls at a very high rate, a rich mix of them, and short rounds between naps (workloads/churn.py). */
const SHAPES: readonly ChurnShape[] = ['short', 'rich', 'naps'];

async function run(pythons: ReturnType<typeof nativeInterpreters>, modes: ModeName[], enough: number, seconds: number): Promise<number> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pyunwind-churn-'));
  const totals: Total[] = [];
  const started = Date.now();
  console.log(`# churn: ${new Date().toISOString().slice(0, 10)}, node ${process.version}, ${os.cpus()[0]?.model ?? '?'} × ${os.cpus().length}, ${enough} accepted samples per version and mode, ${seconds} s recordings`);
  try {
    for (const py of pythons) {
      // (the profiler anchor: CPython 3.15+)
      const anchor = Number(/3\.(\d+)/.exec(py.label)?.[1] ?? 0) >= 15;
      for (const name of modes) {
        const mode = MODES[name];
        if (mode.readOnly && !anchor) continue; // the same as optimistic there
        const exact = mode.copy !== 'optimistic' || (anchor && !mode.readOnly);
        const t: Total = { version: py.label, mode: name, exact, recordings: 0, attempted: 0, accepted: 0, impossible: 0, stoppedCopies: 0, stoppedTime: 0, seconds: 0, examples: new Map() };
        totals.push(t);
        while (t.accepted < enough) {
          const k = t.recordings++;
          const file = path.join(dir, 'churn.pyuw');
          const o: ChurnOutcome = await recordChurn({ command: py.command, copy: mode.copy, readOnly: mode.readOnly, rateHz: mode.rateHz, seconds, file, shape: SHAPES[k % SHAPES.length]!, threads: 1 + (Math.floor(k / SHAPES.length) % 2) });
          // (a capture that gave an impossible stack is kept, for `pyunwind dump` to show how it was copied)
          let kept = '';
          if (o.impossibleSamples > 0) {
            kept = path.join(os.tmpdir(), `churn-impossible-${py.label}-${name}-${k + 1}-${process.pid}.pyuw`);
            fs.renameSync(file, kept);
          } else fs.rmSync(file, { force: true });
          t.attempted += o.attempted;
          t.accepted += o.accepted;
          t.impossible += o.impossibleSamples;
          t.stoppedCopies += o.copiedStopped * o.attempted;
          t.stoppedTime += o.targetStopped * seconds;
          t.seconds += seconds;
          for (const i of o.impossible) t.examples.set(i.stack, (t.examples.get(i.stack) ?? 0) + i.count);
          const mins = ((Date.now() - started) / 60000).toFixed(1);
          console.log(
            `${py.label} ${name} #${k + 1}: ${o.accepted} accepted of ${o.attempted} (${t.accepted} in all), impossible ${o.impossibleSamples}, ` +
              `${SHAPES[k % SHAPES.length]}, copied stopped ${(100 * o.copiedStopped).toFixed(1)} %, proven asleep ${(100 * o.provenAsleep).toFixed(1)} %, target stopped ${(100 * o.targetStopped).toFixed(1)} % of its time, ${o.ticksPerSecond.toFixed(0)} ticks/s [${mins} min]` +
              (kept ? ` (capture kept: ${kept})` : ''),
          );
          if (o.attempted === 0) throw new Error(`${py.label} ${name}: a recording took no sample`);
        }
      }
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  console.log('\n| version | mode | exact | recordings | attempted | accepted | rejected | impossible | per million accepted | copied stopped | target stopped |');
  console.log('|---|---|---|---|---|---|---|---|---|---|---|');
  for (const t of totals) {
    console.log(
      `| ${t.version} | ${t.mode} | ${t.exact ? 'yes' : 'no'} | ${t.recordings} | ${t.attempted.toLocaleString('en')} | ${t.accepted.toLocaleString('en')} | ${((100 * (t.attempted - t.accepted)) / Math.max(1, t.attempted)).toFixed(2)} % | ${t.impossible} | ${((1e6 * t.impossible) / Math.max(1, t.accepted)).toFixed(1)} | ` +
        `${((100 * t.stoppedCopies) / Math.max(1, t.attempted)).toFixed(1)} % | ${((100 * t.stoppedTime) / Math.max(1, t.seconds)).toFixed(1)} % |`,
    );
  }
  const failed = totals.filter((t) => t.exact && t.impossible > 0);
  for (const t of totals) for (const [stack, n] of t.examples) console.log(`${t.exact ? 'FAIL' : 'note'}: ${t.version} ${t.mode}: ${stack} ×${n}`);
  console.log(failed.length ? `\nchurn: ${failed.length} exact mode(s) accepted impossible stacks` : '\nchurn: no impossible stack in any exact mode');
  return failed.length ? 1 : 0;
}

Promise.resolve()
  .then(main)
  .then(
    (code) => process.exit(code),
    (e: unknown) => {
      console.error(`churn: ${e instanceof Error ? e.message : String(e)}`);
      process.exit(2);
    },
  );
