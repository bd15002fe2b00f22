// Two copy modes compared on one run of a program: a mode under test — the default mode, or
// copies at the interrupt — and --blocking (exact: every thread that may run Python stopped for
// its copy) take turns tick by tick, so that what differs is how each mode samples — not two runs
// of a program whose own timing varies, on a machine whose load varies (both seen to move a
// function's share by 5 points between runs). Then the per-function self shares of the two are
// compared within what sampling noise allows.
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { CaptureWriter, memorySink, readCaptureBytes, SAMPLE_FLAG } from '../src/capture/index.js';
import { formatVersion, layoutFromSource } from '../src/layout/index.js';
import { SampleProcessor } from '../src/pipeline/sample-processor.js';
import { openLinuxProcess } from '../src/record/linux/process.js';
import type { CopyMode } from '../src/record/copy/modes.js';
import { runSampler, type SamplerStats } from '../src/record/sampling/sampler.js';
import { openStopper } from '../src/record/linux/stopper.js';
import { KernelCopier } from '../src/record/linux/kernel-copier.js';
import { CpuStates } from '../src/record/linux/cpu-states.js';
import { kernelTstateSize } from '../src/record/copy/kernel-samples.js';
import { KernelWalker } from '../src/kernel/walker.js';
import { TRUSTED } from '../src/walk/status.js';
import type { Shares } from './real-programs.js';

export interface PairedOptions {
  /** samples per mode to take */
  samples: number;
  /** the program's argument: how long it runs at most, s */
  maxSeconds: number;
  rateHz: number;
  /** the mode beside --blocking (default: the default mode, adaptive) */
  copy?: 'adaptive' | 'interrupt';
}

/** The programs started, for the caller to kill when it is done (afterAll). */
export const children: ChildProcess[] = [];

/** The two sides of a comparison: the mode under test (PairedOptions.copy) and --blocking. */
export type Side = 'tested' | 'blocking';

export interface Paired {
  shares: Record<Side, Shares>;
  samples: Record<Side, number>;
  /** trusted samples with a stack, per side: what the shares are of */
  stacked: Record<Side, number>;
  /** samples copied with the target stopped, per side */
  stopped: Record<Side, number>;
  statuses: Map<string, number>;
  /** the trusted samples with a stack, in time order: each one's side and leaf function (the key of `shares`) */
  sequence: { mode: Side; key: string }[];
  /** the sampler's figures (with copies at the interrupt: stats.kernel) */
  stats: SamplerStats;
}

/**
 * Run `script` and sample it, the mode under test and --blocking taking turns tick by tick,
 * until each has `samples` or the program ends (it is given `maxSeconds` as its argument).
 */
export async function samplePaired(py: string, script: string, { samples: wanted, maxSeconds, rateHz, copy = 'adaptive' }: PairedOptions): Promise<Paired> {
  const child = spawn(py, [path.resolve(script), String(maxSeconds)], { stdio: ['ignore', 'ignore', 'inherit'] });
  children.push(child);
  const exited = new Promise((r) => child.once('exit', r));
  let source: ReturnType<typeof openLinuxProcess> | null = null;
  for (let i = 0; !source && i < 400; i++) {
    try {
      source = openLinuxProcess(child.pid!);
    } catch {
      await new Promise((r) => setTimeout(r, 5)); // not an interpreter we can read yet
    }
  }
  if (!source) throw new Error(`${script}: could not attach`);
  // (copies at the interrupt: as record --copy interrupt sets them up)
  let kernel: KernelCopier | null = null;
  try {
    if (copy === 'interrupt') kernel = KernelCopier.open(child.pid!, { rateHz, layout: source.layout, tstateSize: kernelTstateSize(source), runtimeAddress: source.runtimeAddress });
  } catch (e) {
    source.close();
    throw e;
  }
  const cpuStates = kernel ? new CpuStates(child.pid!) : null;
  const sink = memorySink();
  const writer = new CaptureWriter(sink, {
    layoutSource: source.layout.source,
    pointerSize: source.layout.pointerSize,
    pythonVersion: formatVersion(source.layout.version),
    target: source.description,
    runtimeAddress: source.runtimeAddress,
    rateHz,
    startTime: Date.now(),
    recorder: 'pyunwind test',
  });
  // each sample's side, in the order written (a tick's samples are written before onTick)
  const sides: Side[] = [];
  const times: number[] = [];
  const taken = { tested: 0, blocking: 0 };
  const stopper = openStopper(child.pid!);
  let stats: SamplerStats;
  try {
    stats = await runSampler(source, writer, {
      rateHz,
      copy,
      alternate: 'blocking',
      stopper,
      ...(kernel && cpuStates ? { kernel, cpuStates } : {}),
      shouldStop: () => (taken.tested >= wanted && taken.blocking >= wanted) || child.exitCode !== null || child.signalCode !== null,
      isAlive: () => child.exitCode === null && child.signalCode === null,
      onTick: (samples, _threads, mode: CopyMode) => {
        const side: Side = mode === 'blocking' ? 'blocking' : 'tested';
        for (const x of samples) {
          sides.push(side);
          times.push(x.time);
        }
        taken[side] += samples.length;
      },
    });
  } finally {
    stopper.close();
    writer.close();
    kernel?.close();
    cpuStates?.close();
    source.close();
    child.kill('SIGKILL');
  }
  await exited;

  const reader = readCaptureBytes(sink.bytes());
  const processor = new SampleProcessor(layoutFromSource(reader.header.layoutSource), await KernelWalker.load());
  const shares = { tested: new Map(), blocking: new Map() } as Paired['shares'];
  const samples = { tested: 0, blocking: 0 };
  const stacked = { tested: 0, blocking: 0 };
  const stopped = { tested: 0, blocking: 0 };
  const statuses = new Map<string, number>();
  const sequence: Paired['sequence'] = [];
  let n = 0;
  for (const block of reader.blocks()) {
    processor.addCodes(block.codes);
    for (const p of processor.process(block.samples)) {
      const mode = sides[n];
      if (mode === undefined || times[n] !== p.sample.time) throw new Error(`${script}: sample ${n} of the capture is not the ${n}th the sampler reported`);
      n++;
      samples[mode]++;
      if (p.sample.flags & SAMPLE_FLAG.STOPPED) stopped[mode]++;
      statuses.set(p.status, (statuses.get(p.status) ?? 0) + 1);
      const leaf = p.frames[0];
      if (!TRUSTED.has(p.status) || !leaf) continue;
      stacked[mode]++;
      const key = `${leaf.qualname} (${path.basename(leaf.filename)})`;
      shares[mode].set(key, (shares[mode].get(key) ?? 0) + 1);
      sequence.push({ mode, key });
    }
  }
  if (n !== sides.length) throw new Error(`${script}: the capture holds ${n} samples, the sampler reported ${sides.length}`);
  for (const mode of ['tested', 'blocking'] as const) {
    for (const [k, v] of shares[mode]) shares[mode].set(k, (100 * v) / Math.max(1, stacked[mode]));
  }
  return { shares, samples, stacked, stopped, statuses, sequence, stats };
}


/** How far apart two shares may be by sampling noise alone: `z` standard errors of their difference, in points. */
export function noiseBound(a: number, b: number, na: number, nb: number, z: number): number {
  // the pooled share, as a fraction, and the standard error of a difference of two proportions
  const p = (a * na + b * nb) / 100 / Math.max(1, na + nb);
  return 100 * z * Math.sqrt(p * (1 - p) * (1 / Math.max(1, na) + 1 / Math.max(1, nb)));
}

export interface Gap {
  fn: string;
  a: number;
  b: number;
  gap: number;
  /** the gap allowed: the larger of the floor and the noise bound */
  allowed: number;
}

/**
 * The function whose shares differ most beyond what is allowed: each function may differ by
 * `floor` points, or by `z` standard errors where the samples are too few for that (a share
 * of 2,500 samples is good to about ±1 point; a difference of two such, to ±1.3).
 */
export function worstGap(a: Shares, b: Shares, na: number, nb: number, floor: number, z: number): Gap {
  let worst: Gap = { fn: '', a: 0, b: 0, gap: 0, allowed: floor };
  for (const fn of new Set([...a.keys(), ...b.keys()])) {
    const x = a.get(fn) ?? 0;
    const y = b.get(fn) ?? 0;
    const allowed = Math.max(floor, noiseBound(x, y, na, nb, z));
    const gap = Math.abs(x - y);
    if (gap / allowed > worst.gap / worst.allowed) worst = { fn, a: x, b: y, gap, allowed };
  }
  return worst;
}
