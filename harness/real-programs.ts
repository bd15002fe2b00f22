// The real-program suite: standard-library programs in workloads/, recorded by pyunwind (and by
// CPython's own profiler where it is there), turned into per-function self shares so that two
// recordings of the same program can be compared function by function. Shared by
// test/real-programs.test.ts and bench/real-programs.bench.ts.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

export const BIN = path.resolve('bin/pyunwind.js');

export interface RealProgram {
  name: string;
  script: string;
  /** what it exercises, for tables */
  about: string;
}

export const REAL_PROGRAMS: readonly RealProgram[] = [
  { name: 'configs', script: 'workloads/configs.py', about: 'json + tomllib, pure-Python and C paths' },
  { name: 'threadpool', script: 'workloads/threadpool.py', about: 'ThreadPoolExecutor, 5 threads: difflib, re, fractions, decimal, statistics' },
  { name: 'asynciotasks', script: 'workloads/asynciotasks.py', about: 'asyncio tasks, queues and gather over pure-Python work' },
  { name: 'astwalk', script: 'workloads/astwalk.py', about: 'ast.parse (long C calls), NodeVisitor, ast.unparse, pure-Python pickle' },
  { name: 'recursion', script: 'workloads/recursion.py', about: 'deep pure-Python recursion (hundreds of frames)' },
  { name: 'ccalls', script: 'workloads/ccalls.py', about: 'long C calls: sort, zlib, hashlib, re.sub, join' },
];

/** Self shares in percent of all trusted samples with a stack, by function (`qualname (file)`). */
export type Shares = Map<string, number>;

/** A program recorded: what the recording says, and the work the program got done meanwhile. */
export interface Recording extends Work {
  tool: 'pyunwind' | 'Tachyon';
  mode: string;
  /** samples attempted (pyunwind) or taken + failed (Tachyon) */
  attempted: number;
  /** samples rejected, by status (pyunwind) or the error count (Tachyon) */
  rejected: number;
  statuses: Record<string, number>;
  /** samples copied with the target stopped */
  stopped: number;
  /** share of the recording's time the target was kept stopped, % (pyunwind; Tachyon: null) */
  stoppedTime: number | null;
  shares: Shares;
}

/** What a program's output line says it got done: its rounds, and its rate of them a second in the second half of its run. */
export interface Work {
  rounds: number;
  late: number;
}

const fnKey = (qualname: string, filename: string): string => `${qualname} (${path.basename(filename)})`;

function workOf(stdout: string): Work {
  const m = /"rounds": (\d+).*"late": ([\d.]+)/.exec(stdout);
  if (!m) throw new Error(`no rounds line in the program's output: ${stdout.slice(-300)}`);
  return { rounds: Number(m[1]), late: Number(m[2]) };
}

interface ReportJson {
  summary: { attempted: number; rejected: number; statuses: Record<string, number> };
  metadata: { recording: { stopped: number } };
  threads: { functions: { qualname: string; filename: string; self: number }[]; summary: { stackedWeight: number } }[];
}

/** Self shares of a pyunwind json report, over every thread. */
export function sharesOfReport(rep: ReportJson): Shares {
  const shares: Shares = new Map();
  let total = 0;
  for (const t of rep.threads) {
    total += t.summary.stackedWeight;
    for (const f of t.functions) {
      if (f.self > 0) shares.set(fnKey(f.qualname, f.filename), (shares.get(fnKey(f.qualname, f.filename)) ?? 0) + f.self);
    }
  }
  for (const [k, v] of shares) shares.set(k, (100 * v) / Math.max(1, total));
  return shares;
}

/** Run the program unprofiled: the work it got done in `seconds`. */
export function baseline(py: string, program: RealProgram, seconds: number): Work {
  const r = spawnSync(py, [program.script, String(seconds)], { encoding: 'utf8', timeout: 120_000 });
  if (r.status !== 0) throw new Error(`${program.name} failed: ${r.stderr}`);
  return workOf(r.stdout);
}

/**
 * Record the program with `pyunwind record -- PY SCRIPT SECONDS` (from its first instruction
 * to its end) and report it as json.
 */
export async function recordWithPyunwind(
  py: string,
  program: RealProgram,
  options: { mode: string; seconds: number; rateHz: number; dir: string; extra?: string[] },
): Promise<Recording> {
  const file = path.join(options.dir, `${program.name}-${options.mode}.pyuw`);
  const args = [BIN, 'record', '-o', file, '-r', String(options.rateHz), '--copy', options.mode, '-q', ...(options.extra ?? []), '--', py, program.script, String(options.seconds)];
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const code = await new Promise<number | null>((r) => child.once('close', r));
  if (code !== 0) throw new Error(`pyunwind record ${program.name}: exit ${code}: ${err}`);
  const rep = spawnSync(process.execPath, [BIN, 'report', file, '-f', 'json', '-q'], { encoding: 'utf8', maxBuffer: 1 << 28 });
  if (rep.status !== 0) throw new Error(`pyunwind report ${program.name}: ${rep.stderr}`);
  const json = JSON.parse(rep.stdout) as ReportJson;
  fs.rmSync(file, { force: true });
  return {
    tool: 'pyunwind',
    mode: options.mode,
    attempted: json.summary.attempted,
    rejected: json.summary.rejected,
    statuses: json.summary.statuses,
    stopped: json.metadata.recording.stopped,
    stoppedTime: Number(/stopped ([\d.]+)% of the time/.exec(err)?.[1] ?? NaN),
    shares: sharesOfReport(json),
    ...workOf(out),
  };
}

/**
 * Record the program with CPython's own profiler (3.15+: `python -m profiling.sampling run`),
 * every thread, collapsed output; self shares from the innermost frame of each stack.
 */
export function recordWithTachyon(py: string, program: RealProgram, options: { blocking: boolean; seconds: number; rateHz: number; dir: string }): Recording {
  const out = path.join(options.dir, `${program.name}-tachyon.txt`);
  const args = ['-m', 'profiling.sampling', 'run', '-a', '-r', String(options.rateHz), '--collapsed', '-o', out, ...(options.blocking ? ['--blocking'] : []), program.script, String(options.seconds)];
  const r = spawnSync(py, args, { encoding: 'utf8', timeout: 300_000 });
  if (r.status !== 0) throw new Error(`tachyon ${program.name}: ${r.stderr}`);
  const captured = Number(/Captured ([\d,]+) samples/.exec(r.stdout)?.[1]?.replace(/,/g, '') ?? NaN);
  const errorRate = Number(/Error rate: ([\d.]+)/.exec(r.stdout)?.[1] ?? 0);
  const shares: Shares = new Map();
  let total = 0;
  for (const line of fs.readFileSync(out, 'utf8').trim().split('\n')) {
    const m = /^(.*) (\d+)$/.exec(line);
    if (!m) continue;
    // tid:N;<frozen runpy>:_run_module_as_main:L;...;file:function:line COUNT
    const leaf = m[1]!.split(';').pop()!;
    const parts = leaf.split(':');
    if (parts.length < 3) continue; // a thread with no Python frame
    const n = Number(m[2]);
    const key = fnKey(parts.slice(1, -1).join(':'), parts[0]!);
    shares.set(key, (shares.get(key) ?? 0) + n);
    total += n;
  }
  for (const [k, v] of shares) shares.set(k, (100 * v) / Math.max(1, total));
  fs.rmSync(out, { force: true });
  const attempted = Number.isFinite(captured) ? Math.round(captured / (1 - errorRate / 100)) : total;
  return {
    tool: 'Tachyon',
    mode: options.blocking ? '--blocking' : 'default',
    attempted,
    rejected: attempted - (Number.isFinite(captured) ? captured : total),
    statuses: {},
    stopped: options.blocking ? attempted : 0,
    stoppedTime: null,
    shares,
    ...workOf(r.stdout),
  };
}

/** The largest per-function difference of self share (points), and where. */
export function largestGap(a: Shares, b: Shares): { fn: string; gap: number; a: number; b: number } {
  let worst = { fn: '', gap: 0, a: 0, b: 0 };
  for (const fn of new Set([...a.keys(), ...b.keys()])) {
    const x = a.get(fn) ?? 0;
    const y = b.get(fn) ?? 0;
    if (Math.abs(x - y) > worst.gap) worst = { fn, gap: Math.abs(x - y), a: x, b: y };
  }
  return worst;
}

/** The top functions of a recording, for a log line. */
export function topShares(s: Shares, n = 6): string {
  return [...s]
    .sort((x, y) => y[1] - x[1])
    .slice(0, n)
    .map(([k, v]) => `${k} ${v.toFixed(1)}`)
    .join(', ');
}
