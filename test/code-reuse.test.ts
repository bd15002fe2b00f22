// Code objects have an identity in time. workloads/reuse.py compiles, runs and drops a new
// function f_<n> every few milliseconds; CPython puts each new code object (and, on some
// versions, its name and line table too) at the address of the one that just died, and only
// the name tells them apart. The program logs when each generation ran, on CLOCK_MONOTONIC;
// the recorder is wrapped to note, on the same clock, when each tick's copies were made. Every
// sample whose innermost frame is f_<n> must have been taken while generation n ran, no sample
// may be rejected for a code object, and the recording must really have reused addresses.
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, describe, expect, it } from 'vitest';
import { CaptureWriter, memorySink, readCaptureBytes } from '../src/capture/index.js';
import { formatVersion, layoutFromSource } from '../src/layout/index.js';
import { SampleProcessor } from '../src/sample-processor.js';
import { openLinuxProcess } from '../src/record/linux-process.js';
import { runSampler } from '../src/record/sampler.js';
import { openStopper } from '../src/record/stopper.js';
import type { MemorySource } from '../src/record/source.js';
import { TRUSTED } from '../src/walk/status.js';
import { recordCoverage } from './helpers/coverage.js';
import { nativeInterpreters } from '../harness/interpreters.js';
import { checkedWalker } from './helpers/walkers.js';

const WORKLOAD = path.resolve('workloads/reuse.py');
const SECONDS = 2.5;
/** slack around a tick's copy window, ns: the program's clock reads sit just outside its call */
const SLACK_NS = 20_000n;

const children: ChildProcess[] = [];
afterAll(() => children.forEach((c) => c.kill('SIGKILL')));

/** A memory source that notes, on CLOCK_MONOTONIC, the first and last read since `mark()`. */
function timedSource(inner: MemorySource): MemorySource & { mark(): void; window(): [bigint, bigint] } {
  let first = 0n;
  let last = 0n;
  const note = (): void => {
    const now = process.hrtime.bigint();
    if (first === 0n) first = now;
    last = now;
  };
  return {
    description: inner.description,
    runtimeAddress: inner.runtimeAddress,
    layout: inner.layout,
    ...(inner.nativeThreadIds !== undefined ? { nativeThreadIds: inner.nativeThreadIds } : {}),
    read: (a, n) => (note(), inner.read(a, n)),
    tryRead: (a, n) => (note(), inner.tryRead(a, n)),
    ...(inner.write ? { write: (a: bigint, b: Uint8Array) => (note(), inner.write!(a, b)) } : {}),
    close: () => inner.close(),
    mark: () => {
      first = 0n;
      last = 0n;
    },
    window: () => [first, last],
  };
}

describe.each(nativeInterpreters())('code objects reused at one address, $label', (py) => {
  if (py.missing) {
    it(`is skipped: ${py.missing}`, () => recordCoverage('code-reuse', py.label, false, py.missing!));
    return;
  }
  it('names every sample with the function it was really in', async () => {
    const child = spawn(py.command, [WORKLOAD, String(SECONDS), '2'], { stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(child);
    const generations = new Map<number, [bigint, bigint]>();
    let firstLine!: () => void;
    const started = new Promise<void>((r) => (firstLine = r));
    const done = new Promise<void>((resolve) => {
      createInterface({ input: child.stdout! })
        .on('line', (line) => {
          const g = JSON.parse(line) as { n?: number; start?: number };
          if (g.n !== undefined) {
            // the numbers are exact in the text; JSON.parse would round them to doubles
            const m = /"start": (\d+), "end": (\d+)/.exec(line)!;
            generations.set(g.n, [BigInt(m[1]!), BigInt(m[2]!)]);
            firstLine();
          }
        })
        .on('close', resolve);
    });
    await started;

    const inner = openLinuxProcess(child.pid!);
    const source = timedSource(inner);
    const sink = memorySink();
    const writer = new CaptureWriter(sink, {
      layoutSource: inner.layout.source,
      pointerSize: inner.layout.pointerSize,
      pythonVersion: formatVersion(inner.layout.version),
      target: inner.description,
      runtimeAddress: inner.runtimeAddress,
      rateHz: 2000,
      startTime: Date.now(),
      recorder: 'pyunwind test',
    });
    const windows = new Map<number, [bigint, bigint]>();
    const stopper = openStopper(child.pid!);
    try {
      await runSampler(source, writer, {
        rateHz: 2000,
        copy: 'adaptive',
        stopper,
        shouldStop: () => child.exitCode !== null || child.signalCode !== null,
        isAlive: () => child.exitCode === null && child.signalCode === null,
        onTick: (samples) => {
          windows.set(samples[0]!.time, source.window());
          source.mark();
        },
      });
    } finally {
      stopper.close();
      writer.close();
      source.close();
    }
    await done;

    const reader = readCaptureBytes(sink.bytes());
    const processor = new SampleProcessor(layoutFromSource(reader.header.layoutSource), await checkedWalker());
    const seenAt = new Set<bigint>();
    let reused = 0;
    let named = 0;
    let rejected = 0;
    const wrong: string[] = [];
    const statuses = new Map<string, number>();
    for (const block of reader.blocks()) {
      for (const c of block.codes) {
        if (seenAt.has(c.address)) reused++;
        seenAt.add(c.address);
      }
      processor.addCodes(block.codes);
      for (const p of processor.process(block.samples)) {
        statuses.set(p.status, (statuses.get(p.status) ?? 0) + 1);
        if (!TRUSTED.has(p.status)) {
          rejected++;
          continue;
        }
        const leaf = p.frames[0];
        const m = leaf && /^f_(\d+)$/.exec(leaf.qualname);
        if (!m) continue;
        named++;
        const ran = generations.get(Number(m[1]));
        const [from, to] = windows.get(p.sample.time)!;
        if (!ran || ran[1] + SLACK_NS < from || ran[0] - SLACK_NS > to) {
          wrong.push(`${leaf.qualname} at ${from}..${to} ns, but it ran ${ran ? `${ran[0]}..${ran[1]}` : 'never'}`);
        }
      }
    }
    console.log(
      `${py.label}: ${generations.size} generations, ${seenAt.size} code addresses, ${reused} records replaced one at the same address; ` +
        `${named} samples in an f_<n>, ${wrong.length} named wrong; statuses ${JSON.stringify(Object.fromEntries(statuses))}`,
    );
    recordCoverage('code-reuse', py.label, true);
    // the program did make CPython reuse addresses, and the recording saw it
    expect(reused).toBeGreaterThan(20);
    // enough samples in an f_<n> to judge (100-3,600 on a quiet machine; 91 in a loaded run,
    // where the program spent most of the recording compiling and the recorder got few ticks)
    expect(named).toBeGreaterThan(50);
    expect(wrong.slice(0, 5)).toEqual([]);
    // adaptive: nothing is rejected (a code object that did not decode would show as corrupt)
    expect(rejected).toBe(0);
  });
});
