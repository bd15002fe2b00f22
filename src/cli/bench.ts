// pyunwind bench FILE: how fast this machine processes the user's own capture. Two parts, each
// measured side by side in one run (tinybench):
//   walk        the WebAssembly kernel and the TypeScript reference walker over the same real
//               samples from the capture (laid out once, walked again and again);
//   end to end  file → aggregated profile (read, inflate, decode, walk, symbolize, aggregate):
//               the reference path (decode each sample, walk, add), then the block engine in
//               this thread and with 1..N worker threads.
// Every end-to-end run must give the same profile as the first engine run: a faster wrong
// answer is reported as an error, not a figure.

import os from 'node:os';
import { parseArgs } from 'node:util';
import { Bench } from 'tinybench';
import { openCapture } from '../capture/file.js';
import type { SampleRecord } from '../capture/types.js';
import { layoutFromSource } from '../layout/index.js';
import type { ProfileJSON } from '../profile/profile.js';
import { reportCapture, type CaptureReport, type ReportOptions } from '../pipeline/report-file.js';
import { CodeTable } from '../symbols/code-table.js';
import { KernelWalker, ReferenceWalker, walkParams, type WalkSample } from '../walk/index.js';
import { defaultWorkers } from '../pipeline/workers/pool.js';
import { UsageError } from './errors.js';

export const BENCH_HELP = `Usage: pyunwind bench FILE [--workers LIST] [--rounds N] [--walk-samples N]

Measure how fast pyunwind processes a capture (pyunwind record) on this machine, side by
side in one run, and print the tables:

  walk        the WebAssembly kernel against the TypeScript reference walker, over the
              same samples of the capture: samples/s, frames/s (frames visited)
  end to end  file → aggregated profile: the reference path (each sample decoded, walked
              and added), then the block engine in this thread and with worker threads

Every end-to-end run is checked to give the same profile as the others.

Options:
  -j, --workers LIST      worker counts to run (default 0,1..cores; 0 = this thread)
  -r, --rounds N          runs of each end-to-end case, the median is shown (default 3)
      --walk-samples N    samples of the capture the walk part uses (default 5000)
      --reference-samples N
                          samples the reference path processes (it is slow; default 20000,
                          0 = skip it)
  -h, --help              this help
`;

interface Row {
  [column: string]: string | number;
}

const fmt = (n: number): string => (n >= 100 ? Math.round(n).toLocaleString('en-US') : n.toFixed(n >= 10 ? 1 : 2));
const mb = (bytes: number): string => `${(bytes / (1 << 20)).toFixed(0)} MB`;

function positiveInt(v: string | undefined, what: string, fallback: number, min = 1): number {
  if (v === undefined) return fallback;
  if (!/^\d+$/.test(v) || Number(v) < min) throw new UsageError(`${what}: "${v}" is not a whole number >= ${min}`);
  return Number(v);
}

/** Frames of every trusted sample with a stack: Σ weight × depth. */
function framesOf(profile: ProfileJSON): number {
  let frames = 0;
  for (const t of profile.threads) {
    const depth: number[] = new Array(t.stacks.length);
    t.stacks.forEach(([parent, , weight], i) => {
      depth[i] = parent < 0 ? 1 : depth[parent]! + 1;
      frames += weight * depth[i]!;
    });
  }
  return frames;
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

/** Real samples for the walk part: the first `n` the recorder did not mark torn, and the code table as of the last. */
async function walkSamples(file: string, n: number): Promise<{ samples: WalkSample[]; codes: CodeTable; layout: ReturnType<typeof layoutFromSource> }> {
  const reader = await openCapture(file);
  try {
    const layout = layoutFromSource(reader.header.layoutSource);
    const codes = new CodeTable(layout);
    const samples: WalkSample[] = [];
    for (const block of reader.blocks()) {
      for (const c of block.codes) codes.add(c);
      for (const s of block.samples as SampleRecord[]) {
        if (s.recorderStatus === 'torn') continue;
        samples.push({ threadStateAddress: s.threadStateAddress, regions: s.regions });
        if (samples.length >= n) return { samples, codes, layout };
      }
    }
    return { samples, codes, layout };
  } finally {
    reader.close();
  }
}

export async function bench(argv: string[], out: (s: string) => void, err: (s: string) => void): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    options: {
      workers: { type: 'string', short: 'j' },
      rounds: { type: 'string', short: 'r' },
      'walk-samples': { type: 'string' },
      'reference-samples': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
    allowPositionals: true,
  });
  if (values.help) {
    out(BENCH_HELP);
    return 0;
  }
  if (positionals.length !== 1) throw new UsageError(positionals.length ? 'bench takes one capture file' : 'bench needs a capture FILE');
  const file = positionals[0]!;
  const cores = defaultWorkers();
  let workerCounts = [0, ...Array.from({ length: cores }, (_, i) => i + 1)];
  if (values.workers !== undefined) {
    if (!/^\d{1,3}(,\d{1,3})*$/.test(values.workers)) throw new UsageError(`--workers: "${values.workers}" is not a list of worker counts (e.g. 0,1,2)`);
    workerCounts = values.workers.split(',').map(Number);
  }
  const rounds = positiveInt(values.rounds, '--rounds', 3);
  const walkN = positiveInt(values['walk-samples'], '--walk-samples', 5000);
  const referenceN = positiveInt(values['reference-samples'], '--reference-samples', 20000, 0);
  const tty = process.stderr.isTTY === true;
  const progress = (s: string): void => {
    if (tty) err(`\rbench: ${s}\x1b[K`);
  };

  const reader = await openCapture(file);
  const header = reader.header;
  const size = reader.size;
  reader.close();
  out(`capture: ${file} (${mb(size)}), ${header.target}, recorded at ${header.rateHz} Hz\n`);
  out(`machine: node ${process.version}, ${os.cpus()[0]?.model?.trim() ?? 'cpu'} × ${cores}, ${os.platform()} ${os.arch()}, ${new Date().toISOString().slice(0, 10)}\n\n`);

  // ---- walk ----
  progress('reading samples for the walk');
  const { samples, codes, layout } = await walkSamples(file, walkN);
  if (samples.length === 0) {
    out('walk: the capture has no sample to walk\n');
  } else {
    const params = walkParams(layout);
    const kernel = await KernelWalker.load();
    const reference = new ReferenceWalker();
    const ranges = codes.ranges;
    const k = kernel.walk(params, ranges, samples);
    const r = reference.walk(params, ranges, samples);
    const same = JSON.stringify(k, (_, v) => (typeof v === 'bigint' ? v.toString() : v)) === JSON.stringify(r, (_, v) => (typeof v === 'bigint' ? v.toString() : v));
    if (!same) throw new Error('the kernel and the reference walker disagree on this capture (a bug: please report it with the capture)');
    const visited = k.reduce((n, x) => n + x.visited, 0);
    progress('timing the walk');
    // the kernel alone (the batch laid out once, as the block engine keeps images in place),
    // the kernel with the host's layout and result objects, and the reference walker
    const prepared = kernel.prepare(params, ranges, samples);
    if (kernel.walkPrepared(prepared) !== visited) throw new Error('the kernel walked a prepared batch differently (a bug)');
    const b = new Bench({ time: 1500, warmup: true, warmupTime: 300 });
    b.add('kernel (WebAssembly)', () => void kernel.walkPrepared(prepared));
    b.add('kernel + host layout and results', () => void kernel.walk(params, ranges, samples));
    b.add('reference (TypeScript)', () => void reference.walk(params, ranges, samples));
    await b.run();

    const rate = (name: string): number => {
      const t = b.tasks.find((t) => t.name === name)!;
      const res = t.result as { state: string; latency?: { p50: number } };
      if (res.state !== 'completed' || !res.latency) throw new Error(`walk benchmark ${name}: ${res.state}`);
      return (samples.length * 1000) / res.latency.p50;
    };
    const kr = rate('kernel (WebAssembly)');
    const kh = rate('kernel + host layout and results');
    const rr = rate('reference (TypeScript)');
    if (tty) err('\r\x1b[K');
    out(`Walk: ${samples.length} samples of the capture, ${(visited / samples.length).toFixed(1)} frames visited per sample (median of timed walks)\n`);
    const rows: Row[] = [
      { walker: 'kernel (WebAssembly), batch laid out once', 'samples/s': fmt(kr), 'frames/s': fmt((kr * visited) / samples.length), '× reference': (kr / rr).toFixed(2) },
      { walker: 'kernel + host layout and result objects', 'samples/s': fmt(kh), 'frames/s': fmt((kh * visited) / samples.length), '× reference': (kh / rr).toFixed(2) },
      { walker: 'reference (TypeScript)', 'samples/s': fmt(rr), 'frames/s': fmt((rr * visited) / samples.length), '× reference': '1.00' },
    ];
    out(table(rows) + '\n');
  }

  // ---- end to end ----
  interface Case {
    name: string;
    options: ReportOptions;
  }
  const cases: Case[] = [];
  if (referenceN > 0) cases.push({ name: 'reference path', options: { reference: true, maxSamples: referenceN } });
  for (const w of workerCounts) cases.push({ name: w === 0 ? 'engine, this thread' : `engine, ${w} worker${w > 1 ? 's' : ''}`, options: { workers: w } });
  const rows: Row[] = [];
  let engineProfile: string | null = null;
  let perSampleFrames = 0;
  let single = 0;
  let referenceRate = 0;
  for (const c of cases) {
    const times: number[] = [];
    let last: CaptureReport | null = null;
    for (let i = 0; i < rounds; i++) {
      progress(`${c.name}, run ${i + 1} of ${rounds}`);
      const t0 = performance.now();
      last = await reportCapture(file, c.options);
      times.push(performance.now() - t0);
    }
    const ms = median(times);
    const json = last!.profile.toJSON();
    const n = last!.profile.stats().attempted;
    const frames = framesOf(json);
    if (!c.options.reference) {
      const text = JSON.stringify(json);
      engineProfile ??= text;
      if (text !== engineProfile) throw new Error(`${c.name} gave a different profile from the first engine run (a bug: please report it with the capture)`);
      perSampleFrames = frames / Math.max(1, n);
    }
    const rate = (n * 1000) / ms;
    if (c.options.reference) referenceRate = rate;
    const w = c.options.workers ?? 0;
    if (!c.options.reference && w === 0) single = rate;
    rows.push({
      case: c.name,
      samples: fmt(n),
      seconds: (ms / 1000).toFixed(2),
      'samples/s': fmt(rate),
      'frames/s': fmt((frames * 1000) / ms),
      '× reference': referenceRate ? (rate / referenceRate).toFixed(1) : '–',
      efficiency: w > 0 && single ? ((rate / single) / w).toFixed(2) : '–',
      'peak RSS': mb(process.resourceUsage().maxRSS * 1024),
    });
  }
  if (tty) err('\r\x1b[K');
  out(`End to end: file → aggregated profile, median of ${rounds} run${rounds > 1 ? 's' : ''}; ${perSampleFrames.toFixed(1)} frames per trusted sample\n`);
  out(table(rows) + '\n');
  out('efficiency: samples/s per worker against the engine in this thread; peak RSS: the process\'s peak so far (rows run in order)\n');
  return 0;
}

/** A plain text table, columns padded. */
function table(rows: Row[]): string {
  if (rows.length === 0) return '';
  const cols = Object.keys(rows[0]!);
  const width = cols.map((c) => Math.max(c.length, ...rows.map((r) => String(r[c]).length)));
  const line = (cells: string[]): string => cells.map((s, i) => (i === 0 ? s.padEnd(width[i]!) : s.padStart(width[i]!))).join('  ');
  return [line(cols), line(width.map((w) => '-'.repeat(w))), ...rows.map((r) => line(cols.map((c) => String(r[c]))))].join('\n') + '\n';
}
