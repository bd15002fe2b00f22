// A sample's one stack of C and Python frames: its native chain unwound from the registers and
// the stack bytes copied with it, named by the capture's objects, and its Python frames put in
// the place of the eval-loop frames that run them.
//
// Which native frame runs which Python frames:
// - 3.12+: every run of the eval loop keeps its entry frame (a _PyInterpreterFrame owned by the C
//   stack) among its own locals, and the outermost Python frame of the run points to it
//   (`previous`). So the native frame whose stack holds that address is the run's: exact, with
//   or without symbols (a stripped interpreter, the tail-calling interpreter whose handlers
//   have no names).
// - 3.11: entry frames live with the Python frames; each run is one call of
//   _PyEval_EvalFrameDefault, found by name (./interleave.ts).
// A chain that does not unwind to its outermost frame, or whose runs cannot all be placed, in
// order, is not shown: it gets a status saying which.

import type { Layout } from '../layout/layout.js';
import type { Region } from '../capture/types.js';
import { RegionMemory } from '../walk/region-memory.js';
import type { WalkFrame } from '../walk/types.js';
import { evalGroups, interleave, type NamedNative } from './interleave.js';
import { nameNativePc, type NativeFrameName } from './symbolize.js';
import type { NativeObject } from './objects.js';
import { FOUND, type NativeRegisters, type NativeUnwind, type StackCopy, type UnwindStatus } from './unwind.js';

/** Why a sample's C and Python frames are not shown together. */
export type MixStatus = 'mixed' | 'native-no-stack' | `native-${Exclude<UnwindStatus, 'complete'>}` | 'native-unmatched';

/** A frame of a mixed stack: a native one (its pc, named), or a Python one (index into the walk's frames). */
export type MixedFrame = { kind: 'native'; pc: bigint; name: NativeFrameName } | { kind: 'python'; index: number };

export interface MixedStack {
  status: MixStatus;
  /** innermost first; empty unless `mixed` */
  frames: MixedFrame[];
  /** the native chain as unwound (null: no stack copy) */
  unwind: NativeUnwind | null;
  /** its frames named, one per pc */
  names: NativeFrameName[];
}

/** The region that holds the stack pointer: the thread's native stack as copied. */
export function stackCopyOf(regions: readonly Region[], rsp: bigint): StackCopy | null {
  for (const r of regions) if (r.address <= rsp && rsp < r.address + BigInt(r.bytes.length)) return { address: r.address, bytes: r.bytes };
  return null;
}

/** The unwinder to use: the kernel's, or the reference. */
export type Unwind = (regs: NativeRegisters, stack: StackCopy) => NativeUnwind;

export function mixStack(
  layout: Layout,
  objects: readonly NativeObject[],
  unwind: Unwind,
  sample: { registers: NativeRegisters; regions: readonly Region[]; threadStateAddress: bigint },
  python: readonly WalkFrame[],
): MixedStack {
  const stack = stackCopyOf(sample.regions, sample.registers.rsp);
  if (!stack) return { status: 'native-no-stack', frames: [], unwind: null, names: [] };
  const u = unwind(sample.registers, stack);
  const natives: NamedNative<MixedFrame>[] = u.pcs.map((pc, i) => {
    const name = nameNativePc(objects, pc, i > 0 && u.found[i - 1] !== FOUND.SIGNAL);
    return { frame: { kind: 'native', pc, name }, name: name.name };
  });
  const names = natives.map((n) => (n.frame as { name: NativeFrameName }).name);
  if (u.status !== 'complete') return { status: `native-${u.status}`, frames: [], unwind: u, names };
  const py: MixedFrame[] = python.map((_, index) => ({ kind: 'python', index }));
  const through = (k: number): boolean => python[k]!.callsThroughC;
  let frames: MixedFrame[] | null;
  if (layout.frame.isEntry !== null) frames = interleave(natives, py, through);
  else frames = byEntryFrames(layout, sample, python, u, stack, natives, py, through);
  return frames ? { status: 'mixed', frames, unwind: u, names } : { status: 'native-unmatched', frames: [], unwind: u, names };
}

/** 3.12+: each run of the eval loop placed at the native frame whose stack holds its entry frame. */
function byEntryFrames(
  layout: Layout,
  sample: { regions: readonly Region[]; threadStateAddress: bigint },
  python: readonly WalkFrame[],
  u: NativeUnwind,
  stack: StackCopy,
  natives: NamedNative<MixedFrame>[],
  py: MixedFrame[],
  through: (k: number) => boolean,
): MixedFrame[] | null {
  const mem = new RegionMemory(sample.regions, layout.pointerSize);
  const top = stack.address + BigInt(stack.bytes.length);
  const owner = new Map<number, [number, number]>();
  let last = -1;
  for (const [start, end] of evalGroups(python.length, through)) {
    // the run's entry frame: where its outermost frame came from (with no frame yet: the
    // thread's current frame is the entry frame itself)
    const entry = end > start ? mem.ptr(python[end - 1]!.frame + BigInt(layout.frame.previous)) : currentFrame(layout, mem, sample.threadStateAddress);
    if (entry === null) return null;
    let i = -1;
    for (let n = 0; n < u.sps.length; n++) {
      const hi = n + 1 < u.sps.length ? u.sps[n + 1]! : top;
      if (u.sps[n]! <= entry && entry < hi) {
        i = n;
        break;
      }
    }
    // outer runs lie further out, each in a frame of its own
    if (i <= last) return null;
    owner.set(i, [start, end]);
    last = i;
  }
  const out: MixedFrame[] = [];
  natives.forEach((n, i) => {
    const group = owner.get(i);
    if (!group) out.push(n.frame);
    else for (let k = group[0]; k < group[1]; k++) out.push(py[k]!);
  });
  return out;
}

/** The thread's current frame pointer (3.13+ in the thread state; 3.12 through its _PyCFrame). */
function currentFrame(layout: Layout, mem: RegionMemory, tstate: bigint): bigint | null {
  const at = mem.ptr(tstate + BigInt(layout.tstate.currentFrame));
  if (at === null || layout.tstate.cframeCurrentFrame === null) return at;
  return mem.ptr(at + BigInt(layout.tstate.cframeCurrentFrame));
}
