// pyunwind walk kernel: follows CPython frame chains through copied memory.
//
// Two entry points over the same walk (walk.ts):
// - `walk`: a batch the host lays into this module's (imported) memory — a parameter block
//   (offsets of the target's structures), a sorted code table, sample descriptors each pointing
//   at its own sorted region table, and the region bytes; it emits, per sample, the Python
//   frames it found and one status.
// - the block engine (engine.ts): decodes a capture block's sample records itself, keeps each
//   thread's memory image and patches it in place, walks each sample and counts its stack.
// Beside them, `unwindNative` (native-unwind.ts): the C stack of one sample, from its registers
// and stack copy, by the unwind rows of the mapped objects.
// Only integers cross the boundary; there is no allocation and no host call in the loops; every
// load is bounds-checked against the memory size, so no input can make the kernel trap.

import {
  CODE_SIZE,
  FRAME_SIZE,
  REGION_SIZE,
  RESULT_FAIL,
  RESULT_FRAME_COUNT,
  RESULT_FRAME_START,
  RESULT_LAST,
  RESULT_SIZE,
  RESULT_STATUS,
  RESULT_VISITED,
  SAMPLE_REGIONS,
  SAMPLE_REGION_COUNT,
  SAMPLE_SIZE,
  SAMPLE_TSTATE,
} from '../src/kernel/abi';
import {
  inMemory,
  loadParams,
  maxDepth,
  outFail,
  outFrames,
  outLast,
  outStatus,
  outVisited,
  setCodes,
  setRegions,
  walkOne,
} from './walk';

import { ABI_DIGEST } from './abi-digest';

export * from './engine';
export { engineRunSections, engineResumeSections } from './sections';
// the native (x86-64) unwinder: a request the host lays out, no state kept between calls
export { unwindNative } from './native-unwind';

/** The digest of the ABI this kernel was built from (scripts/abi-digest.ts; src/kernel/digest.ts checks it). */
export function abiDigest(): u32 {
  return ABI_DIGEST;
}

/**
 * Walk `count` samples. Returns how many were walked (fewer than `count` only when the frame
 * output has no room for another maxDepth frames: call again for the rest), or -1 when the
 * batch itself is malformed (parameters or tables outside memory).
 */
export function walk(
  params: u32,
  samples: u32,
  count: u32,
  codes: u32,
  codesCount: u32,
  results: u32,
  frames: u32,
  framesCapacity: u32,
): i32 {
  if (!loadParams(params)) return -1;
  if (!inMemory(<u64>samples, <u64>count * SAMPLE_SIZE)) return -1;
  if (!inMemory(<u64>codes, <u64>codesCount * CODE_SIZE)) return -1;
  if (!inMemory(<u64>results, <u64>count * RESULT_SIZE)) return -1;
  if (!inMemory(<u64>frames, <u64>framesCapacity * FRAME_SIZE)) return -1;
  setCodes(codes, codesCount);
  let used: u32 = 0;
  for (let i: u32 = 0; i < count; i++) {
    if (framesCapacity - used < maxDepth) return <i32>i;
    const s = samples + i * SAMPLE_SIZE;
    const table = load<u32>(s, SAMPLE_REGIONS);
    const regions = load<u32>(s, SAMPLE_REGION_COUNT);
    const r = results + i * RESULT_SIZE;
    // the host never builds a table outside memory; report it rather than read there
    setRegions(table, inMemory(<u64>table, <u64>regions * REGION_SIZE) ? regions : 0);
    walkOne(load<u64>(s, SAMPLE_TSTATE), frames + used * FRAME_SIZE);
    store<u32>(r, outStatus, RESULT_STATUS);
    store<u32>(r, used, RESULT_FRAME_START);
    store<u32>(r, outFrames, RESULT_FRAME_COUNT);
    store<u32>(r, outVisited, RESULT_VISITED);
    store<u64>(r, outLast, RESULT_LAST);
    store<u64>(r, outFail, RESULT_FAIL);
    used += outFrames;
  }
  return <i32>count;
}

/** First byte of linear memory the host may use (after this module's static data). */
export function heapBase(): u32 {
  return <u32>__heap_base;
}
