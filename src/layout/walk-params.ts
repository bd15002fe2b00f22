// The walk's view of a Layout: the handful of integers both walkers need, and the kernel's
// parameter block they make (src/kernel/abi.ts P_*). Built in one place so the WebAssembly
// kernel and the TypeScript reference walker can never disagree about an offset.

import type { Layout } from './layout.js';
import {
  BOTTOM_BASE_FRAME,
  BOTTOM_ENTRY_FRAME,
  BOTTOM_IS_ENTRY_FLAG,
  P_BOTTOM,
  P_CFRAME_CURRENT,
  P_CFRAME_PREVIOUS,
  P_COUNT,
  P_FR_EXECUTABLE,
  P_FR_INSTR_PTR,
  P_FR_IS_ENTRY,
  P_FR_OWNER,
  P_FR_PREVIOUS,
  P_FR_SIZE,
  P_IP_PREVIOUS,
  P_MAX_DEPTH,
  P_OWNER_PYTHON,
  P_OWNER_SKIP,
  P_OWNER_THREAD,
  P_PTR_SIZE,
  P_TAG_MASK,
  P_TS_BASE_FRAME,
  P_TS_CURRENT_FRAME,
  P_TS_NEED,
} from '../kernel/abi.js';

export const BOTTOM_CODE = { 'base-frame': BOTTOM_BASE_FRAME, 'entry-frame': BOTTOM_ENTRY_FRAME, 'is-entry-flag': BOTTOM_IS_ENTRY_FLAG } as const;

/** Default and minimum depth limit: frames visited per sample, Python or not. */
export const DEFAULT_MAX_DEPTH = 8192;
/** The largest depth limit a parameter block may ask for. */
export const MAX_MAX_DEPTH = 1 << 24;

export interface WalkParams {
  pointerSize: 4 | 8;
  /** bytes of the thread state the walk reads (the larger of its fields' ends) */
  tstateNeed: number;
  tstateCurrentFrame: number;
  /** offset of current_frame inside _PyCFrame, or -1 when the thread state points at the frame directly */
  cframeCurrentFrame: number;
  /** offset of the base_frame pointer, or -1 */
  tstateBaseFrame: number;
  frameSize: number;
  framePrevious: number;
  frameExecutable: number;
  frameInstrPtr: number;
  frameOwner: number;
  /** offset of is_entry, or -1 */
  frameIsEntry: number;
  tagMask: number;
  /** bit n set: owner value n is a Python frame (THREAD, GENERATOR) */
  ownerPythonMask: number;
  /** bit n set: owner value n is an entry/shim/base frame: skipped, but followed */
  ownerSkipMask: number;
  bottom: number;
  instrPtrIsPrevious: boolean;
  maxDepth: number;
  /** the owner value of frames on the data stack (FRAME_OWNED_BY_THREAD) */
  ownerThread: number;
  /**
   * 3.11, 3.12: offset of `previous` inside _PyCFrame, or -1. The calling eval loop's current
   * frame is what the running loop's entry frame leads to (3.11: also which frame it was
   * entered with, while its is_entry is not yet set; see reference-walker.ts).
   */
  cframePrevious: number;
}


export function walkParams(layout: Layout, maxDepth = DEFAULT_MAX_DEPTH): WalkParams {
  const p = layout.pointerSize;
  const t = layout.tstate;
  const bit = (n: number | null): number => (n === null ? 0 : (1 << n) >>> 0);
  const tstateNeed = Math.max(t.currentFrame + p, t.baseFrame === null ? 0 : t.baseFrame + p);
  return {
    pointerSize: p,
    tstateNeed,
    tstateCurrentFrame: t.currentFrame,
    cframeCurrentFrame: t.cframeCurrentFrame ?? -1,
    tstateBaseFrame: t.baseFrame ?? -1,
    frameSize: layout.frame.size,
    framePrevious: layout.frame.previous,
    frameExecutable: layout.frame.executable,
    frameInstrPtr: layout.frame.instrPtr,
    frameOwner: layout.frame.owner,
    frameIsEntry: layout.frame.isEntry ?? -1,
    tagMask: layout.executableTagMask,
    ownerPythonMask: (bit(layout.owners.thread) | bit(layout.owners.generator)) >>> 0,
    ownerSkipMask: (bit(layout.owners.interpreter) | bit(layout.owners.cstack)) >>> 0,
    bottom: BOTTOM_CODE[layout.bottom],
    instrPtrIsPrevious: layout.frame.instrPtrIsPrevious,
    maxDepth,
    ownerThread: layout.owners.thread,
    cframePrevious: t.cframeCurrentFrame !== null ? (t.cframePrevious ?? -1) : -1,
  };
}

/** The parameter block as the kernel reads it (i32 slots: src/kernel/abi.ts P_*). */
export function encodeParams(w: WalkParams): Int32Array {
  const p = new Int32Array(P_COUNT);
  p[P_PTR_SIZE] = w.pointerSize;
  p[P_TS_NEED] = w.tstateNeed;
  p[P_TS_CURRENT_FRAME] = w.tstateCurrentFrame;
  p[P_CFRAME_CURRENT] = w.cframeCurrentFrame;
  p[P_TS_BASE_FRAME] = w.tstateBaseFrame;
  p[P_FR_SIZE] = w.frameSize;
  p[P_FR_PREVIOUS] = w.framePrevious;
  p[P_FR_EXECUTABLE] = w.frameExecutable;
  p[P_FR_INSTR_PTR] = w.frameInstrPtr;
  p[P_FR_OWNER] = w.frameOwner;
  p[P_FR_IS_ENTRY] = w.frameIsEntry;
  p[P_TAG_MASK] = w.tagMask;
  p[P_OWNER_PYTHON] = w.ownerPythonMask | 0;
  p[P_OWNER_SKIP] = w.ownerSkipMask | 0;
  p[P_BOTTOM] = w.bottom;
  p[P_IP_PREVIOUS] = w.instrPtrIsPrevious ? 1 : 0;
  p[P_MAX_DEPTH] = w.maxDepth;
  p[P_OWNER_THREAD] = w.ownerThread;
  p[P_CFRAME_PREVIOUS] = w.cframePrevious;
  return p;
}

/**
 * The same sanity rules the kernel applies to its parameter block (loadParams): a block that
 * fails them is a programming error, not a property of a sample.
 */
export function checkParams(w: WalkParams): string | null {
  const p = w.pointerSize;
  if (p !== 4 && p !== 8) return `pointer size ${p}`;
  // every slot is an i32 in the kernel's block: a fraction or a value beyond would be read
  // differently by the two walkers (truncated there, used as is here)
  for (const [name, v] of Object.entries(w)) {
    if (typeof v === 'number' && (!Number.isInteger(v) || v < -(2 ** 31) || v > 2 ** 32 - 1)) return `${name} ${v}`;
  }
  if (w.bottom !== BOTTOM_CODE['base-frame'] && w.bottom !== BOTTOM_CODE['entry-frame'] && w.bottom !== BOTTOM_CODE['is-entry-flag']) return `bottom rule ${w.bottom}`;
  // tag bits live in a pointer's alignment bits
  if (w.tagMask < 0 || w.tagMask >= p) return `tag mask ${w.tagMask}`;
  if (w.maxDepth < 1 || w.maxDepth > MAX_MAX_DEPTH) return `depth limit ${w.maxDepth}`;
  if (w.ownerThread < 0 || w.ownerThread > 255) return `owner value ${w.ownerThread}`;
  if (w.tstateCurrentFrame < 0 || w.tstateBaseFrame < -1 || w.cframeCurrentFrame < -1 || w.frameIsEntry < -1) return 'negative offset';
  if (w.frameSize <= 0 || w.frameSize > 4096) return `frame size ${w.frameSize}`;
  for (const [name, off, width] of [
    ['previous', w.framePrevious, p],
    ['executable', w.frameExecutable, p],
    ['instr_ptr', w.frameInstrPtr, p],
    ['owner', w.frameOwner, 1],
  ] as const) {
    if (off < 0 || off + width > w.frameSize) return `frame.${name} at ${off} outside frame size ${w.frameSize}`;
  }
  if (w.frameIsEntry >= 0 && w.frameIsEntry + 1 > w.frameSize) return 'frame.is_entry outside the frame';
  if (w.tstateNeed > 1 << 20 || w.tstateCurrentFrame + p > w.tstateNeed) return 'thread state offsets';
  if (w.tstateBaseFrame >= 0 && w.tstateBaseFrame + p > w.tstateNeed) return 'thread state base_frame offset';
  if (w.cframeCurrentFrame > 4096) return 'cframe offset';
  if (w.cframePrevious < -1 || w.cframePrevious > 4096 || (w.cframePrevious >= 0 && w.cframeCurrentFrame < 0)) return 'cframe previous offset';
  return null;
}
