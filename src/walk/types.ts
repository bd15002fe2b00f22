// What a walk takes and gives: a sample is a thread state address plus the regions of memory
// copied for it; the walk emits its Python frames and one status.

import type { Region } from '../capture/types.js';
import type { Status } from './status.js';

/** A copy of target memory (defined with the capture, which stores it and cannot import the walk). */
export type { Region };

/** One captured code object, as the walk needs it: where its bytecode lies. */
export interface CodeRange {
  /** address of the code object */
  address: bigint;
  /** first byte of co_code_adaptive */
  bytecodeStart: bigint;
  /** one past the last byte of co_code_adaptive */
  bytecodeEnd: bigint;
  /**
   * Bytes a frame of this code takes on the data stack (co_framesize words); 0 when unknown.
   * A Python frame called directly by another in the same chunk sits exactly that far above
   * its caller — which the walk checks.
   */
  frameSize: number;
}

export interface WalkSample {
  threadStateAddress: bigint;
  /** the sample's own memory: thread state (+ base frame), chunks, frames outside chunks */
  regions: Region[];
}

export interface WalkFrame {
  /** address of the _PyInterpreterFrame */
  frame: bigint;
  /** address of the code object (tag bits cleared) */
  code: bigint;
  /** instr_ptr (3.13+) or prev_instr (3.11/3.12) as stored in the frame */
  instrPtr: bigint;
  /**
   * the frame's callee (the frame before it in the list) was reached through C code: an entry
   * frame lies between them (3.12+) or the callee is_entry (3.11; or, before its eval loop set
   * it, the callee is the current frame and this frame the calling eval loop's). On the innermost frame: the
   * thread's current frame is such an entry frame, so C code called from it is entering Python.
   */
  callsThroughC: boolean;
}

export interface WalkResult {
  status: Status;
  /** Python frames, innermost first (empty unless the status is trusted or the walk got that far) */
  frames: WalkFrame[];
  /** frames visited, Python or not */
  visited: number;
  /** last frame address visited (0 if none) */
  lastFrame: bigint;
  /** the address that made the walk fail (0 if it did not fail) */
  failAddress: bigint;
}
