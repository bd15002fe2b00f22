// A sample's regions with its thread's native stack copy among them. The Python copy may
// already hold pieces of the same stack (3.12+ entry frames live there): those pieces are taken
// into the stack's region — copied in the same stop, they are the same bytes — so that the
// regions stay disjoint, as the walk requires.

import type { Region } from '../capture/types.js';

export function withStackRegion(regions: readonly Region[], stack: Region): Region[] {
  let start = stack.address;
  let end = stack.address + BigInt(stack.bytes.length);
  const overlapping: Region[] = [];
  const rest: Region[] = [];
  for (const r of regions) {
    const rEnd = r.address + BigInt(r.bytes.length);
    if (r.address < end && rEnd > start) overlapping.push(r);
    else rest.push(r);
  }
  if (overlapping.length === 0) return [...regions, stack];
  for (const r of overlapping) {
    if (r.address < start) start = r.address;
    const rEnd = r.address + BigInt(r.bytes.length);
    if (rEnd > end) end = rEnd;
  }
  const bytes = new Uint8Array(Number(end - start));
  // the pieces first, the stack over them: where both hold a byte it is the stack's
  for (const r of overlapping) bytes.set(r.bytes, Number(r.address - start));
  bytes.set(stack.bytes, Number(stack.address - start));
  return [...rest, { address: start, bytes }];
}
