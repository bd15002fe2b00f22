// The real-program suite: programs built on the standard library (workloads/: json + tomllib,
// a thread pool, asyncio tasks, ast + pure-Python pickle, deep recursion, long C calls) on
// CPython 3.13, 3.14 and 3.15, sampled in the default mode and with --blocking (exact: every
// thread that may run Python stopped for its copy). The two modes take turns tick by tick on
// one run of the program, so that what is compared is how each mode samples — not two runs of
// a program whose own timing varies, on a machine whose load varies (both seen to move a
// function's share by 5 points between runs). No sample may be rejected as corrupt or
// dangling, and every function's self share in the default mode must be within 3 points of
// --blocking's. The comparison with separate runs, beside CPython's own profiler, is
// bench/real-programs.bench.ts (figures in docs/validation.md).
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CaptureWriter, memorySink, readCaptureBytes } from '../src/capture/index.js';
import { formatVersion, layoutFromSource } from '../src/layout/index.js';
import { SampleProcessor } from '../src/pipeline/sample-processor.js';
import { openLinuxProcess } from '../src/record/linux/process.js';
import type { CopyMode } from '../src/record/copy/modes.js';
import { runSampler } from '../src/record/sampling/sampler.js';
import { openStopper } from '../src/record/linux/stopper.js';
import { KernelWalker } from '../src/kernel/walker.js';
import { TRUSTED } from '../src/walk/status.js';
import { recordCoverage, cannotRun } from './helpers/coverage.js';
import { nativeInterpreters } from '../harness/interpreters.js';
import { REAL_PROGRAMS, largestGap, topShares, type RealProgram, type Shares } from '../harness/real-programs.js';

const RATE_HZ = 2000;
const GAP_POINTS = 3;
/**
 * Samples per mode a comparison is made of. The program runs until the recorder has taken them
 * (a few seconds on a quiet machine; longer on a loaded one, where fewer ticks are taken) or
 * MAX_SECONDS pass.
 */
const SAMPLES = 2500;
const MAX_SECONDS = 40;

const children: ChildProcess[] = [];
afterAll(() => children.forEach((c) => c.kill('SIGKILL')));

interface Paired {
  shares: Record<'adaptive' | 'blocking', Shares>;
  samples: Record<'adaptive' | 'blocking', number>;
  statuses: Map<string, number>;
}

/** Run the program and sample it, the default mode and --blocking taking turns tick by tick. */
async function samplePaired(py: string, program: RealProgram): Promise<Paired> {
  const child = spawn(py, [path.resolve(program.script), String(MAX_SECONDS)], { stdio: ['ignore', 'ignore', 'inherit'] });
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
  if (!source) throw new Error(`${program.name}: could not attach`);
  const sink = memorySink();
  const writer = new CaptureWriter(sink, {
    layoutSource: source.layout.source,
    pointerSize: source.layout.pointerSize,
    pythonVersion: formatVersion(source.layout.version),
    target: source.description,
    runtimeAddress: source.runtimeAddress,
    rateHz: RATE_HZ,
    startTime: Date.now(),
    recorder: 'pyunwind test',
  });
  const modeAt = new Map<number, CopyMode>();
  const taken = { adaptive: 0, blocking: 0 };
  const stopper = openStopper(child.pid!);
  try {
    await runSampler(source, writer, {
      rateHz: RATE_HZ,
      copy: 'adaptive',
      alternate: 'blocking',
      stopper,
      shouldStop: () => (taken.adaptive >= SAMPLES && taken.blocking >= SAMPLES) || child.exitCode !== null || child.signalCode !== null,
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
    }
  }
  for (const mode of ['adaptive', 'blocking'] as const) {
    for (const [k, v] of shares[mode]) shares[mode].set(k, (100 * v) / Math.max(1, stacked[mode]));
  }
  return { shares, samples, statuses };
}

const targets = nativeInterpreters().filter((p) => /^debian-3\.1[345]$/.test(p.label));

describe.each(targets)('real programs on $label', (py) => {
  if (py.missing) {
    cannotRun('real-programs', py.label, py.missing!);
    return;
  }
  describe.each(REAL_PROGRAMS)('$name', (program) => {
    it(`default mode: nothing corrupt or dangling, every function within ${GAP_POINTS} points of --blocking`, { retry: 1 }, async () => {
      const r = await samplePaired(py.command, program);
      const gap = largestGap(r.shares.adaptive, r.shares.blocking);
      console.log(
        `${py.label} ${program.name}: default ${r.samples.adaptive} samples, blocking ${r.samples.blocking}; ` +
          `statuses ${JSON.stringify(Object.fromEntries(r.statuses))}; largest gap ${gap.gap.toFixed(1)} ` +
          `(${gap.fn}: ${gap.a.toFixed(1)} vs ${gap.b.toFixed(1)}); default: ${topShares(r.shares.adaptive, 5)}`,
      );
      expect(r.statuses.get('corrupt') ?? 0).toBe(0);
      expect(r.statuses.get('dangling') ?? 0).toBe(0);
      // shares of a few hundred samples would differ by sampling noise alone
      expect(r.samples.adaptive).toBeGreaterThanOrEqual(SAMPLES);
      expect(r.samples.blocking).toBeGreaterThanOrEqual(SAMPLES);
      expect(gap.gap, `${gap.fn}: default ${gap.a.toFixed(1)}%, blocking ${gap.b.toFixed(1)}%`).toBeLessThanOrEqual(GAP_POINTS);
      recordCoverage('real-programs', `${py.label} ${program.name}`, true);
    });
  });
});
