// Names every export shares, so a thread or a frame reads the same in each format.

import type { ThreadProfile } from '../profile/thread.js';
import type { SourceFrame } from '../profile/types.js';

/** The pseudo-frame that idle samples (trusted, no Python frame) get when an export shows them. */
export const IDLE_FRAME = '<idle>';

/**
 * How a thread is named in every export: `MainThread (tid 1234)` when the recorder gave a
 * name, `thread 1234` otherwise (tid: the native thread id, as `top`/`ps` show it), with the
 * interpreter added for a subinterpreter: `worker (tid 1234, interp 2)`.
 */
export function threadLabel(t: Pick<ThreadProfile, 'name' | 'nativeThreadId' | 'interpreterId'>): string {
  const interp = t.interpreterId === 0n ? '' : `interp ${t.interpreterId}`;
  if (t.name !== undefined) return `${t.name} (tid ${t.nativeThreadId}${interp ? `, ${interp}` : ''})`;
  return `thread ${t.nativeThreadId}${interp ? ` (${interp})` : ''}`;
}

/**
 * `qualname (file:line)`, `qualname (file)` without a line (or with `lines` false); a pseudo-frame
 * (no file: `<GC>`, `<native>`) is its name; a frame with its instruction (report --opcodes)
 * ends with it: `qualname (file:line) BINARY_OP_ADD_INT`.
 */
export function frameLabel(f: SourceFrame, lines = true): string {
  if (f.filename === '' && f.line === null) return f.qualname;
  const at = lines && f.line !== null ? `${f.qualname} (${f.filename}:${f.line})` : `${f.qualname} (${f.filename})`;
  return f.opcode === undefined ? at : `${at} ${f.opcode}`;
}

/**
 * A frame's name where the format keeps file and line apart: the qualname, and the instruction
 * after it when the frame has one (`hot BINARY_OP_ADD_INT`).
 */
export function frameName(f: SourceFrame): string {
  return f.opcode === undefined ? f.qualname : `${f.qualname} ${f.opcode}`;
}
