// Names every export shares, so a thread or a frame reads the same in each format.

import type { ProcessTag, ThreadProfile } from '../profile/thread.js';
import type { SourceFrame } from '../profile/types.js';

/** The pseudo-frame that idle samples (trusted, no Python frame) get when an export shows them. */
export const IDLE_FRAME = '<idle>';

/**
 * How a thread is named in every export: `MainThread (tid 1234)` when the recorder gave a
 * name, `thread 1234` otherwise (tid: the native thread id, as `top`/`ps` show it), with the
 * interpreter added for a subinterpreter: `worker (tid 1234, interp 2)`. In a profile of
 * several processes its process comes first (unless `withProcess` is false):
 * `pid 1234 (app.py): MainThread (tid 1234)`.
 */
export function threadLabel(t: Pick<ThreadProfile, 'name' | 'nativeThreadId' | 'interpreterId'> & { process?: ProcessTag | undefined }, withProcess = true): string {
  const interp = t.interpreterId === 0n ? '' : `interp ${t.interpreterId}`;
  const own = t.name !== undefined ? `${t.name} (tid ${t.nativeThreadId}${interp ? `, ${interp}` : ''})` : `thread ${t.nativeThreadId}${interp ? ` (${interp})` : ''}`;
  return withProcess && t.process ? `${t.process.label}: ${own}` : own;
}

/**
 * How a process is named in every export of several processes (record --subprocesses):
 * `pid 1234 (app.py --worker 3)` — its command line without the interpreter, paths shortened
 * to their last part, cut at 60 characters; `pid 1234` without a command line; the capture's
 * target when it has no pid.
 */
export function processLabel(h: { pid?: number; command?: string[]; target: string }): string {
  if (h.pid === undefined) return h.target;
  const argv = h.command ?? [];
  const args = argv.length > 1 && /python|^ld-linux/.test(argv[0]!.slice(argv[0]!.lastIndexOf('/') + 1)) ? argv.slice(1) : argv;
  let command = args.map((a) => (a.startsWith('/') && a.length > 1 ? a.slice(a.lastIndexOf('/', a.length - 2) + 1) : a)).join(' ');
  command = command.replace(/[\u0000-\u001f\u007f-\u009f]/g, ' ');
  if (command.length > 60) command = `${command.slice(0, 59)}…`;
  return command ? `pid ${h.pid} (${command})` : `pid ${h.pid}`;
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
