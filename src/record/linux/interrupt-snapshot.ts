// dump --copy interrupt: every thread of a running process once, none of them stopped. The
// recorder's own sampling with copies at the interrupt (kernel-copier.ts, kernel-samples.ts)
// runs for a few ticks into memory: a thread on a CPU is copied by the kernel at the timer's
// interrupt, where it cannot move; one off its CPU by the recorder, proven by the kernel's
// count of its runs (or left `torn`). Each thread's latest sample whose walk is trusted is its
// stack (its latest sample, when none is). With --async-aware, its asyncio tasks come with it:
// copied in the kernel at the tick with a running thread (the objects its previous sample's
// view read: a thread's first ticks teach the kernel what to copy), with a thread off its CPU
// while it stays off.

import type { CodeRecord, SampleRecord } from '../../capture/types.js';
import type { NativeObject } from '../../native/objects.js';
import { unwindSnapshot, unwindSnapshotTasks, type SnapshotSamples, type ThreadStack } from '../../pipeline/snapshot-stacks.js';
import type { Walker } from '../../walk/index.js';
import { TRUSTED } from '../../walk/status.js';
import { kernelTstateSize } from '../copy/kernel-samples.js';
import type { AsyncioOffsets } from '../../layout/asyncio-offsets.js';
import type { AsyncMode } from '../../walk/task-graph.js';
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
}

/** Samples taken with one set of code records: a record that replaces another starts the next (as a capture's block does). */
interface Segment {
  codes: CodeRecord[];
  samples: SampleRecord[];
}

/**
 * Copy every thread of `source` (a live process) at the interrupt for DUMP_TICKS ticks and
 * keep each one's latest trusted sample. Throws KernelCopyError with one line where the BPF
 * program cannot be loaded (rights, kernel, not built).
 */
export async function snapshotAtInterrupt(
  source: LinuxProcessSource,
  walker: Walker,
  options: { native: boolean; readOnly: boolean; opcodes: boolean; asyncio?: { offsets: AsyncioOffsets; mode: AsyncMode } },
): Promise<InterruptSnapshot> {
  const pid = source.pid;
  if (!CpuStates.available(pid)) throw new TargetError('unsupported', `${source.description}: copies at the interrupt need the threads' states from /proc, which cannot be read here`);
  const kernel = KernelCopier.open(pid, {
    rateHz: DUMP_RATE_HZ,
    layout: source.layout,
    tstateSize: kernelTstateSize(source),
    runtimeAddress: source.runtimeAddress,
    ...(options.native ? { nativeStackBytes: DEFAULT_STACK_BYTES } : {}),
  });
  // (--async-aware: each thread's running task copied with its stack, and its tasks with it: task-copy.ts)
  if (options.asyncio && !kernel.copyTasks(options.asyncio.offsets, source.layout, options.asyncio.mode)) {
    kernel.close();
    throw new TargetError('unsupported', `${source.description}: --async-aware with copy interrupt: its thread state's asyncio fields or task objects are larger than the kernel's copy takes`);
  }
  const cpuStates = new CpuStates(pid);
  const objects: NativeObject[] = [];
  const native = options.native ? new NativeRecorder(pid, null, (o) => objects.push(o), DEFAULT_STACK_BYTES) : null;
  const codes = new Map<bigint, CodeRecord>();
  const segments: Segment[] = [];
  let current: SampleRecord[] = [];
  // (a sample is named with the code records of its segment: those made before it, none after)
  const close = (): void => {
    if (current.length > 0) segments.push({ codes: [...codes.values()], samples: current });
    current = [];
  };
  let ticks = 0;
  let ended: string | null = null;
  try {
    native?.refreshObjects(true);
    const sampler = new TargetSampler(
      source,
      {
        addCode: (r) => void codes.set(r.address, r),
        addSample: (r) => void current.push(r),
        addMissed: () => {},
        // (before a code record that replaces one already made, and at the end)
        flush: close,
      },
      {
        rateHz: DUMP_RATE_HZ,
        copy: 'interrupt',
        cpuStates,
        kernel,
        ...(options.readOnly ? { consistency: 'reread' as const } : {}),
        ...(native ? { native } : {}),
        ...(options.asyncio ? { asyncio: options.asyncio } : {}),
        threadNames: false,
        shouldStop: () => ticks >= DUMP_TICKS,
        isAlive: () => processIsRunning(pid),
        onTick: () => void ticks++,
      },
    );
    ended = (await new SamplerGroup().run(sampler)).ended;
    close();
  } finally {
    native?.close();
    cpuStates.close();
    kernel.close();
  }
  if (ended === 'target-exited') throw new TargetError('read', `${source.description}: the process exited during the dump`);
  const taken: SampleRecord[] = [];
  const walked: ThreadStack[] = [];
  /** with tasks: whether each sample's task view could be read (not one rejected view: the tasks were not copied whole) */
  const tasksRead: boolean[] = [];
  for (const g of segments) {
    const samples = { layout: source.layout, codeObjects: g.codes, samples: g.samples };
    const stacks = unwindSnapshot(samples, walker, undefined, options.opcodes);
    taken.push(...g.samples);
    walked.push(...stacks);
    if (!options.asyncio) continue;
    const views = unwindSnapshotTasks(samples, stacks, walker, options.asyncio.offsets, options.asyncio.mode, options.opcodes);
    for (const st of stacks) {
      const v = views.get(st);
      tasksRead.push(!(v && v.length === 1 && v[0]!.task === null && !TRUSTED.has(v[0]!.status)));
    }
  }
  if (taken.length === 0) throw new TargetError('read', `${source.description}: no thread could be copied at the interrupt in ${DUMP_TICKS} ticks`);
  // each thread's latest trusted sample (with tasks: whose tasks could be read, where one's could), else its latest
  const rank = (i: number): number => (TRUSTED.has(walked[i]!.status) ? 2 : 0) + (tasksRead[i] === false ? 0 : 1);
  const chosen = new Map<bigint, number>();
  for (let i = 0; i < taken.length; i++) {
    const t = taken[i]!.threadStateAddress;
    const had = chosen.get(t);
    if (had === undefined || rank(i) >= rank(had)) chosen.set(t, i);
  }
  const order = liveThreadStates(source, source.layout);
  const place = (t: bigint): number => {
    const k = order.indexOf(t);
    return k < 0 ? order.length : k;
  };
  const picks = [...chosen.entries()].sort((a, b) => place(a[0]) - place(b[0])).map(([, i]) => i);
  return {
    samples: { layout: source.layout, codeObjects: [...codes.values()], samples: picks.map((i) => taken[i]!) },
    stacks: picks.map((i) => walked[i]!),
    objects,
  };
}
