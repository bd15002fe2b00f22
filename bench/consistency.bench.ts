// Consistency of copies, side by side with CPython 3.15's own profiler (Tachyon), in one run
// on one machine: the churn oracle (workloads/churn.py) under each of pyunwind's modes and
// under Tachyon's non-blocking and blocking modes, at the same rate. For each: samples
// attempted, the share rejected, the share of accepted stacks that the program can never have,
// the share copied with the target stopped, and the target's slowdown (work it got done
// against unprofiled runs). Then the bias check: per-function totals of the default mode
// against --blocking, on the churn program and on a steady one.
//
//   npm run provision   (Debian 3.15 with its standard library: Tachyon and a self-running binary)
//   npm run bench:consistency
//
// Figures go to docs/validation.md by hand, with the date and the machine.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { possible } from '../harness/churn.js';

const BIN = path.resolve('bin/pyunwind.js');
const CHURN = path.resolve('workloads/churn.py');
const STEADY = path.resolve('workloads/steady.py');
const PY = path.resolve('.cache/cpython/bin/python3.15p');
const SECONDS = Number(process.env.SECONDS_PER_RUN ?? 4);
const RATE = Number(process.env.RATE ?? 5000);
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pyunwind-consistency-'));



interface Row {
  tool: string;
  mode: string;
  rate: number;
  attempted: number;
  rejected: number;
  accepted: number;
  impossible: number;
  stopped: number;
  rounds: number;
  copy?: string;
  functions?: Map<string, number>;
}

function roundsOf(stdout: string): number {
  const m = /"(?:rounds|steps)": ?(\d+)/.exec(stdout);
  return m ? Number(m[1]) : 0;
}

async function baseline(script: string): Promise<number> {
  const r = spawnSync(PY, [script, String(SECONDS)], { encoding: 'utf8' });
  return roundsOf(r.stdout);
}

/** the stacks churn.py says it can have (its first line: see harness/churn.ts) */
let oracle: ReadonlySet<string> = new Set();

/** judge collapsed-style stacks (outermost first, from <module>) */
function judge(stacks: [string[], number][]): { accepted: number; impossible: number; functions: Map<string, number> } {
  let accepted = 0;
  let impossible = 0;
  const functions = new Map<string, number>();
  for (const [names, n] of stacks) {
    accepted += n;
    if (!possible(names, oracle)) impossible += n;
    for (const f of new Set(names)) functions.set(f, (functions.get(f) ?? 0) + n);
  }
  for (const [f, n] of functions) functions.set(f, (100 * n) / Math.max(1, accepted));
  return { accepted, impossible, functions };
}

async function pyunwind(script: string, mode: string, rate: number, extra: string[] = []): Promise<Row> {
  const child = spawn(PY, [script, String(SECONDS)], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  const closed = new Promise((r) => child.once('close', r));
  await new Promise((r) => setTimeout(r, 100));
  const file = path.join(tmp, `${mode}.pyuw`);
  const rec = spawnSync(process.execPath, [BIN, 'record', '--pid', String(child.pid), '-o', file, '-r', String(rate), '--copy', mode, '-q', ...extra], { encoding: 'utf8' });
  if (rec.status !== 0) throw new Error(rec.stderr);
  await closed;
  const rep = JSON.parse(spawnSync(process.execPath, [BIN, 'report', file, '-f', 'json', '-q'], { encoding: 'utf8', maxBuffer: 1 << 28 }).stdout) as {
    summary: { attempted: number; rejected: number };
    metadata: { recording: { stopped: number; copyMicros: { mean: number; p50: number; p99: number } } };
    threads: { frames: { qualname: string }[]; stacks: [number, number, number][] }[];
  };
  const stacks: [string[], number][] = [];
  for (const t of rep.threads) {
    t.stacks.forEach((st, i) => {
      if (st[2] <= 0) return;
      const names: string[] = [];
      for (let k = i; k >= 0; k = t.stacks[k]![0]) names.unshift(t.frames[t.stacks[k]![1]]!.qualname);
      stacks.push([names, st[2]]);
    });
  }
  const j = judge(stacks);
  const c = rep.metadata.recording.copyMicros;
  return {
    tool: 'pyunwind',
    mode: mode + (extra.length ? ` ${extra.join(' ')}` : ''),
    rate,
    attempted: rep.summary.attempted,
    rejected: rep.summary.rejected,
    accepted: j.accepted,
    impossible: j.impossible,
    stopped: rep.metadata.recording.stopped,
    rounds: roundsOf(out),
    copy: `${c.mean} / ${c.p50} / ${c.p99}`,
    functions: j.functions,
  };
}

async function tachyon(script: string, blocking: boolean, rate: number): Promise<Row> {
  const out = path.join(tmp, `tachyon-${blocking}.txt`);
  const args = ['-m', 'profiling.sampling', 'run', '-r', String(rate), '--collapsed', '-o', out, ...(blocking ? ['--blocking'] : []), script, String(SECONDS)];
  const r = spawnSync(PY, args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`tachyon: ${r.stderr}`);
  const captured = Number(/Captured (\d+) samples/.exec(r.stdout)?.[1] ?? NaN);
  const errorRate = Number(/Error rate: ([\d.]+)/.exec(r.stdout)?.[1] ?? NaN);
  const stacks: [string[], number][] = [];
  for (const line of fs.readFileSync(out, 'utf8').trim().split('\n')) {
    const m = /^(.*) (\d+)$/.exec(line);
    if (!m) continue;
    // tid:N;<frozen runpy>:_run_module_as_main:L;<frozen runpy>:_run_code:L;churn.py:<module>:L;...
    const frames = m[1]!.split(';').slice(1).filter((f) => !f.startsWith('<frozen runpy>'));
    stacks.push([frames.map((f) => f.split(':').slice(1, -1).join(':')), Number(m[2])]);
  }
  const j = judge(stacks);
  // Tachyon's "Captured N samples" counts the samples it kept; its error rate is the share of attempts that failed
  const attempted = Math.round(captured / (1 - errorRate / 100));
  return {
    tool: 'Tachyon',
    mode: blocking ? '--blocking' : 'default (non-blocking)',
    rate,
    attempted,
    rejected: attempted - captured,
    accepted: j.accepted,
    impossible: j.impossible,
    stopped: blocking ? attempted : 0,
    rounds: roundsOf(r.stdout),
    functions: j.functions,
  };
}

function table(rows: Row[], base: number): string {
  const pct = (n: number, d: number) => (d ? `${((100 * n) / d).toFixed(1)} %` : '–');
  const lines = [
    '| tool | mode | rate | attempted | rejected | accepted | impossible (of accepted) | copied with the target stopped | target slowdown | copy window µs (mean / p50 / p99) |',
    '|---|---|---|---|---|---|---|---|---|---|',
  ];
  for (const r of rows) {
    lines.push(
      `| ${r.tool} | ${r.mode} | ${r.rate} Hz | ${r.attempted} | ${pct(r.rejected, r.attempted)} | ${r.accepted} | ${r.impossible} (${pct(r.impossible, r.accepted)}) | ${pct(r.stopped, r.attempted)} | ${(100 * (1 - r.rounds / base)).toFixed(1)} % | ${r.copy ?? '–'} |`,
    );
  }
  return lines.join('\n');
}

async function main(): Promise<void> {
  if (!fs.existsSync(PY)) {
    throw new Error(`${PY} is missing: run npm run provision`);
  }
  const version = spawnSync(PY, ['-c', 'import sys; print(sys.version.split()[0])'], { encoding: 'utf8' }).stdout.trim();
  console.log(`# ${new Date().toISOString().slice(0, 10)}, node ${process.version}, ${os.cpus()[0]?.model} × ${os.cpus().length}, CPython ${version}, ${SECONDS} s per run`);

  oracle = new Set((JSON.parse(spawnSync(PY, [CHURN, '0'], { encoding: 'utf8' }).stdout.split('\n')[0]!) as { stacks: string[] }).stacks);
  const before = await baseline(CHURN);
  const rows: Row[] = [];
  for (const mode of ['adaptive', 'optimistic']) rows.push(await pyunwind(CHURN, mode, RATE));
  rows.push(await pyunwind(CHURN, 'optimistic', RATE, ['--read-only']));
  rows.push(await tachyon(CHURN, false, RATE));
  rows.push(await pyunwind(CHURN, 'blocking', 1000));
  rows.push(await tachyon(CHURN, true, 1000));
  const after = await baseline(CHURN);
  const base = (before + after) / 2;
  console.log(`\n## churn (unprofiled: ${before} and ${after} rounds in ${SECONDS} s)\n`);
  console.log(table(rows, base));

  const fns = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'Churner.method', 'gen', 'leaf'];
  const show = (r: Row) => fns.map((f) => `${f} ${(r.functions!.get(f) ?? 0).toFixed(1)}`).join(', ');
  console.log(`\nchurn per-function totals (% of accepted):`);
  for (const r of rows) console.log(`- ${r.tool} ${r.mode}: ${show(r)}`);

  const steadyBase = await baseline(STEADY);
  const sa = await pyunwind(STEADY, 'adaptive', 2000);
  const sb = await pyunwind(STEADY, 'blocking', 2000);
  const sfns = ['step', 'parse', 'render', 'layout'];
  console.log(`\n## steady (unprofiled ${steadyBase} steps)\n`);
  for (const r of [sa, sb]) {
    console.log(`- ${r.mode}: ${r.attempted} samples, rejected ${((100 * r.rejected) / r.attempted).toFixed(1)} %, slowdown ${(100 * (1 - r.rounds / steadyBase)).toFixed(1)} %: ${sfns.map((f) => `${f} ${(r.functions!.get(f) ?? 0).toFixed(1)}`).join(', ')}`);
  }
  fs.rmSync(tmp, { recursive: true, force: true });
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
