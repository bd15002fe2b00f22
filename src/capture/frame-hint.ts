// Where a sample's regions hold the frames of its thread's chain, found again from the regions
// alone: for writing a capture anew (smaller blocks, the current format) when the recorder's own
// hint is gone — a reader never keeps it. It follows the chain as the walk does — the thread
// state's current frame (through the _PyCFrame on 3.11/3.12), then each frame's `previous` —
// as far as the regions hold it, and never further than `limit` frames. A hint is only a hint:
// one that is wrong costs bytes, never a sample (docs/capture-format.md).

import type { Layout } from '../layout/layout.js';
import type { FrameHint, Region, SampleRecord } from './types.js';

export function frameHintOf(layout: Layout, sample: Pick<SampleRecord, 'threadStateAddress' | 'regions'>, limit = 10_000): FrameHint {
  const P = layout.pointerSize;
  const regions = sample.regions;
  const addresses: number[] = [];
  const at = (address: bigint, length: number): { r: Region; offset: number } | null => {
    for (const r of regions) {
      if (address >= r.address && address + BigInt(length) <= r.address + BigInt(r.bytes.length)) return { r, offset: Number(address - r.address) };
    }
    return null;
  };
  const pointer = (address: bigint): bigint | null => {
    const where = at(address, P);
    if (!where) return null;
    const dv = new DataView(where.r.bytes.buffer, where.r.bytes.byteOffset + where.offset, P);
    return P === 8 ? dv.getBigUint64(0, true) : BigInt(dv.getUint32(0, true));
  };
  let frame = pointer(sample.threadStateAddress + BigInt(layout.tstate.currentFrame));
  // 3.11/3.12: the thread state points at a _PyCFrame, which points at the frame
  if (frame !== null && frame !== 0n && layout.tstate.cframeCurrentFrame !== null) frame = pointer(frame + BigInt(layout.tstate.cframeCurrentFrame));
  const seen = new Set<bigint>();
  while (frame !== null && frame !== 0n && addresses.length < limit && !seen.has(frame) && frame <= BigInt(Number.MAX_SAFE_INTEGER)) {
    if (!at(frame, layout.frame.localsplus)) break;
    seen.add(frame);
    addresses.push(Number(frame));
    frame = pointer(frame + BigInt(layout.frame.previous));
  }
  return { addresses, size: layout.frame.size, wordBytes: P };
}
