// The asyncio module's debug offsets (_Py_AsyncioModuleDebugOffsets, CPython 3.14+): where a
// task object keeps its name, coroutine, awaiters and list node, and where a thread state and an
// interpreter state keep the running loop, the running task and the list of tasks. CPython puts
// the table in an `AsyncioDebug` ELF section of the _asyncio extension (or of the interpreter
// when _asyncio is built in). The bytes come from the target: every value is checked.

import { LayoutError } from './layout.js';

export interface AsyncioOffsets {
  task: { size: number; name: number; awaitedBy: number; isTask: number; awaitedByIsSet: number; coro: number; node: number };
  interp: { size: number; tasksHead: number };
  tstate: { size: number; runningLoop: number; runningTask: number; tasksHead: number };
}

/** thirteen 64-bit words: task_object{size, 6 fields}, interpreter_state{size, 1}, thread_state{size, 3} */
export const ASYNCIO_OFFSETS_SIZE = 13 * 8;

/** No task object or thread state is anywhere near this large: a bigger value is not a table. */
const MAX_STRUCT = 1 << 20;

/** The offsets from the table's bytes (as the section holds them, little-endian); LayoutError if they make no sense. */
export function parseAsyncioOffsets(bytes: Uint8Array): AsyncioOffsets {
  if (bytes.length < ASYNCIO_OFFSETS_SIZE) throw new LayoutError(`asyncio debug offsets: ${bytes.length} bytes, the table is ${ASYNCIO_OFFSETS_SIZE}`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, ASYNCIO_OFFSETS_SIZE);
  const w = (i: number): number => {
    const v = view.getBigUint64(i * 8, true);
    if (v >= BigInt(MAX_STRUCT)) throw new LayoutError(`asyncio debug offsets: word ${i} is ${v}, not an offset`);
    return Number(v);
  };
  const section = <K extends string>(what: string, size: number, fields: Record<K, [number, number]>): Record<K, number> & { size: number } => {
    if (size === 0) throw new LayoutError(`asyncio debug offsets: ${what}.size is 0`);
    const out = { size } as Record<K, number> & { size: number };
    for (const [name, [off, width]] of Object.entries(fields) as [K, [number, number]][]) {
      if (off + width > size) throw new LayoutError(`asyncio debug offsets: ${what}.${name} = ${off} is outside ${what}.size = ${size}`);
      (out as Record<K, number>)[name] = off;
    }
    return out;
  };
  return {
    task: section('task_object', w(0), { name: [w(1), 8], awaitedBy: [w(2), 8], isTask: [w(3), 1], awaitedByIsSet: [w(4), 1], coro: [w(5), 8], node: [w(6), 16] }),
    interp: section('interpreter_state', w(7), { tasksHead: [w(8), 16] }),
    tstate: section('thread_state', w(9), { runningLoop: [w(10), 8], runningTask: [w(11), 8], tasksHead: [w(12), 16] }),
  };
}
