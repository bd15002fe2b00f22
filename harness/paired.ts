// Two copy modes compared on one run of a program: the default mode and --blocking (exact: every
// thread that may run Python stopped for its copy) take turns tick by tick, so that what differs
// is how each mode samples — not two runs of a program whose own timing varies, on a machine
// whose load varies (both seen to move a function's share by 5 points between runs). Then the
// per-function self shares of the two are compared within what sampling noise allows.
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { CaptureWriter, memorySink, readCaptureBytes } from '../src/capture/index.js';
import { formatVersion, layoutFromSource } from '../src/layout/index.js';
import { SampleProcessor } from '../src/pipeline/sample-processor.js';
import { openLinuxProcess } from '../src/record/linux/process.js';
import type { CopyMode } from '../src/record/copy/modes.js';
import { runSampler } from '../src/record/sampling/sampler.js';
import { openStopper } from '../src/record/linux/stopper.js';
import { KernelWalker } from '../src/kernel/walker.js';
import { TRUSTED } from '../src/walk/status.js';
import type { Shares } from './real-programs.js';

export interface PairedOptions {
  /** samples per mode to take */
  samples: number;
  /** the program's argument: how long it runs at most, s */
  maxSeconds: number;
  rateHz: number;
}

/** The programs started, for the caller to kill when it is done (afterAll). */
export const children: ChildProcess[] = [];

export interface Paired {
  shares: Record<'adaptive' | 'blocking', Shares>;
  samples: Record<'adaptive' | 'blocking', number>;
  /** trusted samples with a stack, per mode: what the shares are of */
  stacked: Record<'adaptive' | 'blocking', number>;
  statuses: Map<string, number>;
  /** the trusted samples with a stack, in time order: each one's mode and leaf function (the key of `shares`) */
  sequence: { mode: 'adaptive' | 'blocking'; key: string }[];
}

/**
 * Run `script` and sample it, the default mode and --blocking taking turns tick by tick, until
 * each has `samples` or the program ends (it is given `maxSeconds` as its argument).
 */
export async function samplePaired(py: string, script: string, { samples: wanted, maxSeconds, rateHz }: PairedOptions): Promise<Paired> {
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
  const modeAt = new Map<number, CopyMode>();
  const taken = { adaptive: 0, blocking: 0 };
  const stopper = openStopper(child.pid!);
  try {
    await runSampler(source, writer, {
      rateHz,
      copy: 'adaptive',
      alternate: 'blocking',
      stopper,
      shouldStop: () => (taken.adaptive >= wanted && taken.blocking >= wanted) || child.exitCode !== null || child.signalCode !== null,
      isAlive: () => child.exitCode === null && child.signalCode === null,
      onTick: (samples, _threads, mode) => {
        modeAt.set(samples[0]!.time, mode);
        taken[mode === 'blocking' ? 'blocking' : 'adaptive'] += samples.length;
      },
    });
  } finally {
    stopper.close();
    writer.close();
    source.close();
    child.kill('SIGKILL');
  }
  await exited;

  const reader = readCaptureBytes(sink.bytes());
  const processor = new SampleProcessor(layoutFromSource(reader.header.layoutSource), await KernelWalker.load());
  const shares = { adaptive: new Map(), blocking: new Map() } as Paired['shares'];
  const samples = { adaptive: 0, blocking: 0 };
  const stacked = { adaptive: 0, blocking: 0 };
  const statuses = new Map<string, number>();
  const sequence: Paired['sequence'] = [];
  for (const block of reader.blocks()) {
    processor.addCodes(block.codes);
    for (const p of processor.process(block.samples)) {
      const mode = modeAt.get(p.sample.time) === 'blocking' ? 'blocking' : 'adaptive';
      samples[mode]++;
      statuses.set(p.status, (statuses.get(p.status) ?? 0) + 1);
      const leaf = p.frames[0];
      if (!TRUSTED.has(p.status) || !leaf) continue;
      stacked[mode]++;
      const key = `${leaf.qualname} (${path.basename(leaf.filename)})`;
      shares[mode].set(key, (shares[mode].get(key) ?? 0) + 1);
      sequence.push({ mode, key });
    }
  }
  for (const mode of ['adaptive', 'blocking'] as const) {
    for (const [k, v] of shares[mode]) shares[mode].set(k, (100 * v) / Math.max(1, stacked[mode]));
  }
  return { shares, samples, stacked, statuses, sequence };
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
