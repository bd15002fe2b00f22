// Live memory as a test reads it and shows it to the copier: the frame chain of a thread standing
// still, and a source that shows chosen bytes in place of what is there (a torn reading, made on
// purpose, the rest of the memory real).
import type { MemorySource } from '../../src/record/copy/source.js';
import type { Layout } from '../../src/layout/layout.js';
import { readPointer } from '../../src/walk/region-memory.js';

export interface Frame {
  address: bigint;
  owner: number;
}

/** The chain from the thread's current frame, read from live (stopped-still) memory. */
export function chainOf(source: MemorySource, L: Layout, tstate: bigint): Frame[] {
  const P = L.pointerSize;
  const out: Frame[] = [];
  let f = readPointer(source.read(tstate, L.tstate.currentFrame + P), L.tstate.currentFrame, P);
  for (let i = 0; f !== 0n && i < 64; i++) {
    const b = source.read(f, L.frame.size);
    out.push({ address: f, owner: b[L.frame.owner]! });
    f = readPointer(b, L.frame.previous, P);
  }
  return out;
}

/** `source`, with the bytes of `patches` (address → bytes) shown in place of what is there. */
export function patchedSource(source: MemorySource, patches: Map<bigint, Uint8Array>): MemorySource {
  const apply = (address: bigint, bytes: Uint8Array | null): Uint8Array | null => {
    if (!bytes) return bytes;
    for (const [at, p] of patches) {
      for (let i = 0; i < p.length; i++) {
        const o = at + BigInt(i) - address;
        if (o >= 0n && o < BigInt(bytes.length)) bytes[Number(o)] = p[i]!;
      }
    }
    return bytes;
  };
  return {
    description: source.description,
    runtimeAddress: source.runtimeAddress,
    layout: source.layout,
    nativeThreadIds: source.nativeThreadIds,
    read: (a, n) => apply(a, source.read(a, n))!,
    tryRead: (a, n) => apply(a, source.tryRead(a, n)),
    readv: (ranges) => ranges.map((r) => apply(r.address, source.tryRead(r.address, r.length))),
    write: (a, b) => source.write!(a, b),
    close: () => {},
  };
}

export const word = (v: bigint, P: number): Uint8Array => {
  const b = new Uint8Array(P);
  for (let i = 0; i < P; i++) b[i] = Number((v >> BigInt(8 * i)) & 0xffn);
  return b;
};
