// What copies at the interrupt cost (record --copy interrupt), beside the default mode, on the
// same programs, one after the other, in one run:
//
//   kernel     the BPF programs' own time, from the kernel's statistics (kernel.bpf_stats_enabled,
//              turned on for the run and restored): per copy made in the kernel (the timer's
//              program, all its runs — those that find another process on the CPU included —
//              divided by the records it wrote) and per context switch of the target
//   recorder   samples per second sustained, missed ticks, rejected samples, bytes per sample of
//              the capture, and the recorder's own CPU while it samples (from 2 s in: start-up
//              and the BPF program's load left out), as a share of one CPU and per sample
//
//   node --import tsx bench/interrupt.bench.ts [SECONDS [RATES [MODES [PROGRAMS]]]]
//     (root; RATES: 1000,10000; MODES: adaptive,interrupt — a mode `X+native` records
//     --copy X --native: each thread's registers and native stack too; `X+tasks` and
//     `X+alltasks`: --async-aware, its running and all modes; PROGRAMS: the first words of
//     the programs' names, default all but asynciotasks)
//
// Needs root, the BPF program built (npm run build) and bpftool; Debian's 3.15
// (npm run provision). Figures go to docs/benchmarks.md with the date and the machine.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const SECONDS = Number(process.argv[2] ?? 6);
const RATES = (process.argv[3] ?? '1000,10000').split(',').map(Number);
const MODES = (process.argv[4] ?? 'adaptive,interrupt').split(',');
const ONLY = process.argv[5]?.split(',');
const PY = path.resolve('.cache/cpython/bin/python3.15');
const BIN = path.resolve('bin/pyunwind.js');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pyunwind-interrupt-'));

const PROGRAMS = [
  { name: 'deep (32 frames, steady)', args: ['workloads/deep.py', String(SECONDS + 2), '32'] },
  { name: 'configs (call-heavy)', args: ['workloads/configs.py', String(SECONDS + 2)] },
  { name: 'threadpool (5 threads)', args: ['workloads/threadpool.py', String(SECONDS + 2)] },
  { name: 'recursion (200-1,000 frames)', args: ['workloads/recursion.py', String(SECONDS + 2)] },
  // (a new round of six tasks hundreds of times a second: with --async-aware, what following
  // the tasks at the tick costs)
  { name: 'asynciotasks (asyncio, churn)', args: ['workloads/asynciotasks.py', String(SECONDS + 2)], byName: true },
];

interface ProgStats {
  name: string;
  run_time_ns?: number;
  run_cnt?: number;
}

/** The kernel's statistics of the BPF programs process `pid` holds (by the prog_id of its descriptors). */
function programStats(pid: number): ProgStats[] {
  const ids = new Set<number>();
  try {
    for (const fd of fs.readdirSync(`/proc/${pid}/fdinfo`)) {
      const m = /^prog_id:\s*(\d+)$/m.exec(fs.readFileSync(`/proc/${pid}/fdinfo/${fd}`, 'utf8'));
      if (m) ids.add(Number(m[1]));
    }
  } catch {
    return [];
  }
  const out: ProgStats[] = [];
  for (const id of ids) {
    const r = spawnSync('bpftool', ['prog', 'show', 'id', String(id), '--json'], { encoding: 'utf8' });
    if (r.status === 0) out.push(JSON.parse(r.stdout) as ProgStats);
  }
  return out;
}

interface Row {
  program: string;
  rate: string;
  mode: string;
  'samples/s': string;
  'missed %': string;
  'rejected %': string;
  'B/sample': string;
  'recorder CPU %': string;
  'recorder µs/sample': string;
  'kernel µs/copy': string;
  'kernel µs/switch': string;
}

async function record(program: (typeof PROGRAMS)[number], rate: number, copy: string): Promise<Row> {
  const file = path.join(dir, 'r.pyuw');
  const [how, ...also] = copy.split('+');
  const flags = also.flatMap((a) => (a === 'native' ? ['--native'] : a === 'tasks' ? ['--async-aware'] : a === 'alltasks' ? ['--async-aware', '--async-mode', 'all'] : []));
  const args = ['record', '-o', file, '-r', String(rate), '-d', String(SECONDS), '--copy', how!, ...flags, '--', PY, ...program.args];
  const child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const recorder = (): number => child.pid!;
  // (each program's last reading: the recorder closes them one after the other, and a reading
  // made between the two closes finds only one)
  const last = new Map<string, ProgStats>();
  // the recorder's own CPU time (not its target's: /proc/PID/stat utime + stime) over time:
  // [performance.now() ms, clock ticks]
  const cpu: [number, number][] = [];
  // (the statistics are read while the recorder holds its programs: the last reading counts)
  const poll = setInterval(() => {
    let s: ProgStats[] = [];
    try {
      s = programStats(recorder());
    } catch {
      // not started yet, or ended
    }
    for (const p of s) last.set(p.name, p);
    try {
      const f = fs.readFileSync(`/proc/${recorder()}/stat`, 'latin1');
      const rest = f.slice(f.lastIndexOf(')') + 2).split(' ');
      cpu.push([performance.now(), Number(rest[11]) + Number(rest[12])]);
    } catch {
      // ended
    }
  }, 100);
  const started = performance.now();
  await new Promise<void>((resolve, reject) => {
    child.once('close', (code) => {
      clearInterval(poll);
      if (code !== 0) reject(new Error(`record ${program.name} --copy ${copy}: exit ${code}: ${err.slice(-500)}`));
      resolve();
    });
  });
  // (USER_HZ: 100 on Linux) the recorder's CPU while it samples: from 2 s in (start-up, the BPF
  // program's load and the warm-up done) to its last reading, as a share of one CPU
  const steady = cpu.filter(([t]) => t >= started + 2000);
  const cpuShare = steady.length >= 2 ? (steady.at(-1)![1] - steady[0]![1]) / 100 / ((steady.at(-1)![0] - steady[0]![0]) / 1000) : NaN;
  // (the records the kernel wrote: samples, and those dropped with the ticks the recorder missed)
  const k = /copied in the kernel ([\d.]+)% \((\d+) lost, (\d+) dropped/.exec(err);
  const rep = JSON.parse(spawnSync(process.execPath, [BIN, 'report', file, '-f', 'json', '-q'], { encoding: 'utf8', maxBuffer: 1 << 28 }).stdout);
  const s = rep.summary;
  const span = Math.max(1e-9, (s.lastTime - s.firstTime) / 1e6);
  const size = fs.statSync(file).size;
  const tick = last.get('copy_at_tick');
  const sw = last.get('on_switch');
  const us = (p: ProgStats | undefined, n: number | undefined): string => (p?.run_time_ns !== undefined && n ? (p.run_time_ns / 1000 / n).toFixed(2) : '–');
  return {
    program: program.name,
    rate: `${rate} Hz`,
    mode: copy,
    'samples/s': Math.round(s.attempted / span).toLocaleString('en-US'),
    'missed %': ((100 * s.missed) / Math.max(1, s.scheduled)).toFixed(1),
    'rejected %': ((100 * s.rejected) / Math.max(1, s.attempted)).toFixed(2),
    'B/sample': (size / Math.max(1, s.attempted)).toFixed(1),
    // (the recorder process alone, while it samples)
    'recorder CPU %': (100 * cpuShare).toFixed(0),
    'recorder µs/sample': ((1e6 * cpuShare) / Math.max(1, s.attempted / span)).toFixed(0),
    // (every run of the timer's program — those that find another process on the CPU too — over
    // the samples it gave: what a copy costs in the kernel, at most)
    'kernel µs/copy': us(tick, k ? Math.round((Number(k[1]) / 100) * s.attempted) + Number(k[2]) + Number(k[3]) : undefined),
    'kernel µs/switch': us(sw, sw?.run_cnt),
  };
}

async function main(): Promise<void> {
  if (process.getuid?.() !== 0) throw new Error('this bench needs root (BPF statistics, copies at the interrupt)');
  if (!fs.existsSync(PY)) throw new Error(`${PY} is missing: npm run provision`);
  const stats = '/proc/sys/kernel/bpf_stats_enabled';
  const before = fs.readFileSync(stats, 'utf8').trim();
  fs.writeFileSync(stats, '1');
  try {
    console.log(`# ${new Date().toISOString().slice(0, 10)}, node ${process.version}, ${os.cpus()[0]?.model?.trim()} × ${os.cpus().length}, kernel ${os.release()}, CPython 3.15 (Debian), ${SECONDS} s per recording`);
    const rows: Row[] = [];
    for (const program of PROGRAMS.filter((p) => (ONLY ? ONLY.some((w) => p.name.startsWith(w)) : !p.byName))) {
      for (const rate of RATES) {
        for (const copy of MODES) rows.push(await record(program, rate, copy));
      }
    }
    console.table(rows);
  } finally {
    fs.writeFileSync(stats, before);
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((e) => {
  console.error(e instanceof Error ? e.message : e);
  process.exit(1);
});
