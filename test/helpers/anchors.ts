// The profiler anchor (3.15+: last_profiled_frame) of every thread of a live process, read from
// its memory: a recorder writes it while it copies a thread and must leave it 0 when it ends.

import { openLinuxProcess } from '../../src/record/linux/process.js';
import { readPointer } from '../../src/walk/region-memory.js';

export function anchors(pid: number): bigint[] {
  const source = openLinuxProcess(pid);
  try {
    const L = source.layout;
    const P = L.pointerSize;
    const ptr = (a: bigint) => readPointer(source.read(a, P), 0, P);
    const out: bigint[] = [];
    let interp = ptr(source.runtimeAddress + BigInt(L.runtime.interpretersHead));
    while (interp !== 0n) {
      for (let t = ptr(interp + BigInt(L.interp.threadsHead)); t !== 0n; t = ptr(t + BigInt(L.tstate.next))) {
        out.push(ptr(t + BigInt(L.tstate.lastProfiledFrame!)));
      }
      interp = ptr(interp + BigInt(L.interp.next));
    }
    return out;
  } finally {
    source.close();
  }
}
