// pyunwind beside CPython 3.15's own profiler (Tachyon, `python3.15 -m profiling.sampling`), on
// the same programs, one tool after the other, alternating, in one run:
//
//   recording   workloads/deep.py (32-deep recursion over a ~30 µs busy loop: a steady stack)
//               and workloads/hotcold.py (a shallow one), at the highest rate each tool can
//               keep (asked for 100 kHz) and at 10 kHz: samples taken per second, samples
//               rejected, samples missed, and for pyunwind the share copied with the target
//               stopped; `pyunwind record` in its default mode and, where it can run (root,
//               the BPF program built), with --copy interrupt (at 10 kHz: it goes no higher);
//               Tachyon's `run` by default
//   processing  Tachyon's binary format replayed to collapsed stacks (`replay --collapsed`,
//               pure Python) against `pyunwind report -f collapsed` on a capture of the same
//               program holding at least as many samples (its own recording, repeated with
//               shifted times by bench/big-capture.ts when it is shorter), and `pyunwind
//               report` with 1..N workers: samples per second of each, RSS
//
//   node --import tsx bench/tachyon.bench.ts [SECONDS [PROCESSING_SECONDS [ROUNDS]]]
//
// SECONDS per recording (default 4); PROCESSING_SECONDS of Tachyon's recording for the
// processing part (default 20: about a million samples, so that start-up does not dominate;
// 0 leaves the processing part out); ROUNDS of each recording per tool (default 3), the tools
// one after the other in each round, which goes first alternating: the ratio is given as the
// median of the rounds' ratios (each taken minutes apart at most) and their range, besides the
// best of each tool — on a shared machine whose speed changes from minute to minute.
//
// Needs the Debian 3.15 with its standard library and a patched binary for Tachyon
// (`npm run provision`: .cache/cpython/bin/python3.15 and python3.15p).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const SECONDS = Number(process.argv[2] ?? 4);
const PROCESSING_SECONDS = Number(process.argv[3] ?? 20);
const ROUNDS = Math.max(1, Number(process.argv[4] ?? 3));
const PY = path.resolve('.cache/cpython/bin/python3.15');
const PYP = path.resolve('.cache/cpython/bin/python3.15p');
const BIN = path.resolve('bin/pyunwind.js');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pyunwind-tachyon-'));

const PROGRAMS = [
  { name: 'deep (32 frames, steady)', args: ['workloads/deep.py', String(SECONDS + 2), '32'] },
  { name: 'hotcold (shallow)', args: ['workloads/hotcold.py', String(SECONDS + 2)] },
];

interface Recording {
  tool: string;
  rate: string;
  samplesPerSec: number;
  rejectedPct: number;
  missedPct: number;
  stoppedPct: number | null;
  stoppedTimePct: number | null;
}

function run(cmd: string, args: string[], timeoutMs = 300_000): { stdout: string; stderr: string; ms: number; maxRssMb: number } {
  const t0 = performance.now();
  const r = spawnSync('/usr/bin/time', ['-f', 'MAXRSS %M', cmd, ...args], { encoding: 'utf8', timeout: timeoutMs, maxBuffer: 1 << 28 });
  const ms = performance.now() - t0;
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')}: exit ${r.status}: ${r.stderr.slice(-2000)}`);
  const rss = Number(/MAXRSS (\d+)/.exec(r.stderr)?.[1] ?? NaN) / 1024;
  return { stdout: r.stdout, stderr: r.stderr, ms, maxRssMb: rss };
}

function recordPyunwind(args: string[], rate: string, file: string, copy?: string): Recording {
  run(process.execPath, [BIN, 'record', '-o', file, '-r', rate, '-d', String(SECONDS), '-q', ...(copy ? ['--copy', copy] : []), '--', PY, ...args]);
  const rep = JSON.parse(run(process.execPath, [BIN, 'report', file, '-f', 'json', '-q']).stdout);
  const s = rep.summary;
  const span = (s.lastTime - s.firstTime) / 1e6;
  return {
    tool: copy ? `pyunwind --copy ${copy}` : 'pyunwind',
    rate,
    samplesPerSec: s.attempted / Math.max(span, 1e-9),
    rejectedPct: (100 * s.rejected) / Math.max(1, s.attempted),
    missedPct: (100 * s.missed) / Math.max(1, s.scheduled),
    stoppedPct: (100 * rep.metadata.recording.stopped) / Math.max(1, s.attempted),
    stoppedTimePct: null,
  };
}

function recordTachyon(args: string[], rate: string, out: string, binary = false, seconds = SECONDS): Recording & { samples: number } {
  const r = run(PYP, ['-m', 'profiling.sampling', 'run', '-r', rate.replace(/k$/, 'khz'), '-d', String(seconds), binary ? '--binary' : '--collapsed', '-o', out, ...args]);
  const text = r.stdout + r.stderr;
  const captured = /Captured (\d+) samples in ([\d.]+) seconds/.exec(text);
  const errors = /Error rate: ([\d.]+)/.exec(text);
  const missed = /missed \d+ samples from the expected total of \d+ \(([\d.]+)%\)/.exec(text);
  if (!captured) throw new Error(`Tachyon said: ${text.slice(-1000)}`);
  return {
    tool: 'Tachyon',
    rate,
    samples: Number(captured[1]),
    samplesPerSec: Number(captured[1]) / Number(captured[2]),
    rejectedPct: Number(errors?.[1] ?? NaN),
    missedPct: Number(missed?.[1] ?? 0),
    stoppedPct: null,
    stoppedTimePct: null,
  };
}

const f0 = (n: number | null): string => (n === null || Number.isNaN(n) ? '–' : n >= 100 ? Math.round(n).toLocaleString('en-US') : n.toFixed(1));

function main(): void {
  for (const p of [PY, PYP]) if (!fs.existsSync(p)) throw new Error(`${p} is missing: run npm run provision`);
  const version = spawnSync(PY, ['-c', 'import sys; print(sys.version.split()[0])'], { encoding: 'utf8' }).stdout.trim();
  console.log(`pyunwind beside Tachyon, native CPython ${version}; node ${process.version}, ${os.cpus()[0]?.model?.trim()} × ${os.cpus().length}, ${new Date().toISOString().slice(0, 10)}; ${SECONDS} s per recording\n`);

  // ---- recording ----
  const rows: Record<string, string>[] = [];
  // (copies at the interrupt: where this machine lets the recorder load its BPF program)
  const interrupt = process.getuid?.() === 0 && fs.existsSync('dist/bpf/copier.bpf.o');
  const allTools = ['pyunwind', ...(interrupt ? ['pyunwind --copy interrupt'] : []), 'Tachyon'];
  if (!interrupt) console.log('(--copy interrupt left out: it needs root and dist/bpf/copier.bpf.o)\n');
  for (const program of PROGRAMS) {
    for (const rate of ['100k', '10k']) {
      // (--copy interrupt goes up to 10 kHz: refused above, it is left out there)
      const tools = rate === '10k' ? allTools : allTools.filter((t) => t !== 'pyunwind --copy interrupt');
      // alternate which tool goes first, so that a change of load hits both alike
      const results: Recording[] = [];
      const ratios = new Map<string, number[]>(tools.slice(0, -1).map((t) => [t, []]));
      for (let round = 0; round < ROUNDS; round++) {
        const order = round % 2 === 0 ? tools : [...tools].reverse();
        const got: Record<string, number> = {};
        for (const tool of order) {
          const r = tool === 'Tachyon' ? recordTachyon(program.args, rate, path.join(dir, 't.txt')) : recordPyunwind(program.args, rate, path.join(dir, 'r.pyuw'), tool === 'pyunwind' ? undefined : 'interrupt');
          results.push(r);
          got[tool] = r.samplesPerSec;
        }
        for (const [tool, list] of ratios) list.push(got[tool]! / got.Tachyon!);
      }
      for (const tool of tools) {
        const mine = results.filter((r) => r.tool === tool);
        const best = mine.reduce((a, b) => (b.samplesPerSec > a.samplesPerSec ? b : a));
        rows.push({
          program: program.name,
          asked: `${rate}Hz`,
          tool,
          [`samples/s (best of ${ROUNDS})`]: f0(best.samplesPerSec),
          'rejected %': f0(best.rejectedPct),
          // every run's, in the order run: a missed share is a property of each run, not of the fastest
          'missed % (each run)': mine.map((r) => f0(r.missedPct)).join(', '),
          'copied stopped %': f0(best.stoppedPct),
        });
      }
      const t = results.filter((r) => r.tool === 'Tachyon').reduce((a, b) => Math.max(a, b.samplesPerSec), 0);
      for (const [tool, list] of ratios) {
        const p = results.filter((r) => r.tool === tool).reduce((a, b) => Math.max(a, b.samplesPerSec), 0);
        list.sort((a, b) => a - b);
        const median = list[Math.floor(list.length / 2)]!;
        rows.push({ program: '', asked: '', tool: `${tool} / Tachyon, best`, [`samples/s (best of ${ROUNDS})`]: `${(p / t).toFixed(2)}×`, 'rejected %': '', 'missed % (each run)': '', 'copied stopped %': '' });
        rows.push({ program: '', asked: '', tool: 'per round: median (range)', [`samples/s (best of ${ROUNDS})`]: `${median.toFixed(2)}× (${list[0]!.toFixed(2)}–${list[list.length - 1]!.toFixed(2)})`, 'rejected %': '', 'missed % (each run)': '', 'copied stopped %': '' });
      }
    }
  }
  console.log('Recording');
  console.table(rows);
  if (PROCESSING_SECONDS <= 0) {
    fs.rmSync(dir, { recursive: true, force: true });
    return;
  }

  // ---- processing ----
  const tbin = path.join(dir, 't.bin');
  const longDeep = ['workloads/deep.py', String(PROCESSING_SECONDS + 2), '32'];
  const trec = recordTachyon(longDeep, '100k', tbin, true, PROCESSING_SECONDS);
  const replay = run(PYP, ['-m', 'profiling.sampling', 'replay', '--collapsed', '-o', path.join(dir, 't-replay.txt'), tbin]);
  const tachyonRate = trec.samples / (replay.ms / 1000);
  const mine = path.join(dir, 'p.pyuw');
  recordPyunwind(PROGRAMS[0]!.args, '100k', mine);
  // at least as many samples as Tachyon's: repeat the recording with shifted times when shorter
  const count = (file: string): number => JSON.parse(run(process.execPath, [BIN, 'report', file, '-f', 'json', '-q']).stdout).summary.attempted;
  let capture = mine;
  let n = count(mine);
  const sizeMb = Math.ceil((fs.statSync(mine).size / (1 << 20)) * Math.ceil(trec.samples / Math.max(1, n)) * 1.05 + 1);
  if (n < trec.samples) {
    capture = path.join(dir, 'p-big.pyuw');
    run(process.execPath, ['--import', 'tsx', 'bench/big-capture.ts', mine, capture, String(sizeMb)]);
    n = count(capture);
  }
  const prows: Record<string, string>[] = [
    { tool: 'Tachyon replay --collapsed (pure Python)', samples: f0(trec.samples), seconds: (replay.ms / 1000).toFixed(2), 'samples/s': f0(tachyonRate), '× Tachyon': '1.0', 'max RSS MB': f0(replay.maxRssMb) },
  ];
  for (const workers of [0, ...Array.from({ length: os.availableParallelism() }, (_, i) => i + 1)]) {
    const r = run(process.execPath, [BIN, 'report', capture, '-f', 'collapsed', '-q', '-j', String(workers), '-o', path.join(dir, 'p.txt')]);
    const rate = n / (r.ms / 1000);
    prows.push({ tool: `pyunwind report -f collapsed -j ${workers}`, samples: f0(n), seconds: (r.ms / 1000).toFixed(2), 'samples/s': f0(rate), '× Tachyon': (rate / tachyonRate).toFixed(1), 'max RSS MB': f0(r.maxRssMb) });
  }
  console.log('\nProcessing: file → collapsed stacks, whole command (start-up included)');
  console.table(prows);
  fs.rmSync(dir, { recursive: true, force: true });
}

main();
