// dump --copy interrupt: every thread of a running process once, none of them stopped. The
// recorder's own sampling with copies at the interrupt (kernel-copier.ts, kernel-samples.ts)
// runs for a few ticks into memory: a thread on a CPU is copied by the kernel at the timer's
// interrupt, where it cannot move; one off its CPU by the recorder, proven by the kernel's
// count of its runs (or left `torn`). Each thread's latest sample whose walk is trusted is its
// stack (its latest sample, when none is).

import type { CodeRecord, SampleRecord } from '../../capture/types.js';
import type { NativeObject } from '../../native/objects.js';
import { unwindSnapshot, type SnapshotSamples, type ThreadStack } from '../../pipeline/snapshot-stacks.js';
import type { Walker } from '../../walk/index.js';
import { TRUSTED } from '../../walk/status.js';
import { kernelTstateSize } from '../copy/kernel-samples.js';
import { liveThreadStates } from '../copy/thread-list.js';
import { SamplerGroup, TargetSampler } from '../sampling/sampler.js';
import { CpuStates } from './cpu-states.js';
import { KernelCopier } from './kernel-copier.js';
import { NativeRecorder } from './native-recorder.js';
import { DEFAULT_STACK_BYTES } from './native-stack.js';
import { processIsRunning, TargetError, type LinuxProcessSource } from './process.js';

/** The rate of the ticks a dump takes, Hz. */
const DUMP_RATE_HZ = 1000;
/** Ticks taken: a thread that runs gets a copy at nearly every one, so this many leave each a choice. */
const DUMP_TICKS = 20;

export interface InterruptSnapshot {
  /** every thread's chosen sample, in the interpreter's list order (threads gone meanwhile last) */
  samples: SnapshotSamples;
  /** their stacks, as unwindSnapshot walked them */
  stacks: ThreadStack[];
  /** with `native`: the objects mapped in the process */
  objects: NativeObject[];
  /** samples copied in the kernel, and all samples taken, over the ticks */
  kernelSamples: number;
  taken: number;
}

/**
 * Copy every thread of `source` (a live process) at the interrupt for DUMP_TICKS ticks and
 * keep each one's latest trusted sample. Throws KernelCopyError with one line where the BPF
 * program cannot be loaded (rights, kernel, not built).
 */
export async function snapshotAtInterrupt(source: LinuxProcessSource, walker: Walker, options: { native: boolean; readOnly: boolean; opcodes: boolean }): Promise<InterruptSnapshot> {
  const pid = source.pid;
  if (!CpuStates.available(pid)) throw new TargetError('unsupported', `${source.description}: copies at the interrupt need the threads' states from /proc, which cannot be read here`);
  const kernel = KernelCopier.open(pid, {
    rateHz: DUMP_RATE_HZ,
    layout: source.layout,
    tstateSize: kernelTstateSize(source),
    runtimeAddress: source.runtimeAddress,
    ...(options.native ? { nativeStackBytes: DEFAULT_STACK_BYTES } : {}),
  });
  const cpuStates = new CpuStates(pid);
  const objects: NativeObject[] = [];
  const native = options.native ? new NativeRecorder(pid, null, (o) => objects.push(o), DEFAULT_STACK_BYTES) : null;
  const codes = new Map<bigint, CodeRecord>();
  const taken: SampleRecord[] = [];
  let ticks = 0;
  let kernelSamples = 0;
  try {
    native?.refreshObjects(true);
    const sampler = new TargetSampler(
      source,
      {
        // (a code record that replaces another at its address is of a later moment than the
        // samples before it: the last one is what the chosen samples, the latest, were read with)
        addCode: (r) => void codes.set(r.address, r),
        addSample: (r) => void taken.push(r),
        addMissed: () => {},
        flush: () => {},
      },
      {
        rateHz: DUMP_RATE_HZ,
        copy: 'interrupt',
        cpuStates,
        kernel,
        ...(options.readOnly ? { consistency: 'reread' as const } : {}),
        ...(native ? { native } : {}),
        threadNames: false,
        shouldStop: () => ticks >= DUMP_TICKS,
        isAlive: () => processIsRunning(pid),
        onTick: () => void ticks++,
      },
    );
    kernelSamples = (await new SamplerGroup().run(sampler)).kernel.samples;
  } finally {
    native?.close();
    cpuStates.close();
    kernel.close();
  }
  if (taken.length === 0) throw new TargetError('read', `${source.description}: no thread could be copied at the interrupt in ${DUMP_TICKS} ticks`);
  const all: SnapshotSamples = { layout: source.layout, codeObjects: [...codes.values()], samples: taken };
  const walked = unwindSnapshot(all, walker, undefined, options.opcodes);
  // each thread's latest trusted sample, else its latest
  const chosen = new Map<bigint, number>();
  for (let i = 0; i < taken.length; i++) {
    const t = taken[i]!.threadStateAddress;
    const had = chosen.get(t);
    if (had === undefined || TRUSTED.has(walked[i]!.status) || !TRUSTED.has(walked[had]!.status)) chosen.set(t, i);
  }
  const order = liveThreadStates(source, source.layout);
  const rank = (t: bigint): number => {
    const k = order.indexOf(t);
    return k < 0 ? order.length : k;
  };
  const picks = [...chosen.entries()].sort((a, b) => rank(a[0]) - rank(b[0])).map(([, i]) => i);
  return {
    samples: { ...all, samples: picks.map((i) => taken[i]!) },
    stacks: picks.map((i) => walked[i]!),
    objects,
    kernelSamples,
    taken: taken.length,
  };
}
