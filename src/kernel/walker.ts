// Host side of the WebAssembly walk kernel (assembly/kernel.ts): lays a batch of samples into
// the kernel's memory — parameter block, code table, sample descriptors, region tables, region
// bytes — calls `walk`, and reads the results back. Bytes go into the memory once; only
// integers cross the call.

import { checkParams, encodeParams, type WalkParams } from '../layout/walk-params.js';
import { normalizeCodeRanges, sortRegions, U64_MASK } from '../walk/normalize.js';
import { statusName } from '../walk/status.js';
import { instantiateKernel, kernelImports, readKernelBytes } from './load.js';
import { checkAbi } from './digest.js';
import {
  CODE_ADDRESS,
  CODE_END,
  CODE_FRAME_SIZE,
  CODE_SIZE,
  CODE_START,
  FRAME_ADDRESS,
  FRAME_CALLS_THROUGH_C,
  FRAME_CODE,
  FRAME_FLAGS,
  FRAME_IP,
  FRAME_SIZE,
  P_COUNT,
  REGION_ADDRESS,
  REGION_DATA,
  REGION_LENGTH,
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
} from './abi.js';
import type { CodeRange, WalkFrame, WalkResult, WalkSample } from '../walk/types.js';

export { readKernelBytes };

const PAGE = 65536;
/** frames of output room per call: the kernel stops early and is called again when full */
const MIN_FRAME_CAPACITY = 1 << 16;

interface KernelExports {
  walk(
    params: number,
    samples: number,
    count: number,
    codes: number,
    codeCount: number,
    results: number,
    frames: number,
    framesCapacity: number,
  ): number;
  heapBase(): number;
}

export interface KernelOptions {
  /**
   * Use the build that imports a shared memory (default where SharedArrayBuffer exists, or,
   * given a compiled module, the memory that module imports); false uses the build for
   * runtimes without threads.
   */
  shared?: boolean;
  /** Compiled module or wasm bytes; default: read build/kernel(-unshared).wasm next to the package. */
  module?: WebAssembly.Module | BufferSource;
}

const align = (n: number, a: number): number => Math.ceil(n / a) * a;

export class KernelWalker {
  readonly kind = 'kernel';
  private constructor(
    private readonly exports: KernelExports,
    readonly memory: WebAssembly.Memory,
    readonly shared: boolean,
  ) {}

  static async load(options: KernelOptions = {}): Promise<KernelWalker> {
    if (options.module instanceof WebAssembly.Module && options.shared === undefined) {
      // a compiled module of either build: the memory it imports
      const { instance, memory, shared } = await instantiateKernel(options.module);
      return new KernelWalker(instance.exports as unknown as KernelExports, memory, shared);
    }
    const shared = options.shared ?? typeof SharedArrayBuffer !== 'undefined';
    const memory = new WebAssembly.Memory(
      shared ? { initial: 16, maximum: 65536, shared: true } : { initial: 16, maximum: 65536 },
    );
    let module = options.module;
    if (module === undefined) module = await readKernelBytes(shared);
    const instance =
      module instanceof WebAssembly.Module
        ? await WebAssembly.instantiate(module, kernelImports(memory))
        : (await WebAssembly.instantiate(module, kernelImports(memory))).instance;
    checkAbi(instance.exports);
    return new KernelWalker(instance.exports as unknown as KernelExports, memory, shared);
  }

  private ensure(bytes: number): void {
    const have = this.memory.buffer.byteLength;
    if (bytes <= have) return;
    this.memory.grow(Math.ceil((bytes - have) / PAGE));
  }

  /** Walk every sample; results in input order (same contract as ReferenceWalker.walk). */
  walk(params: WalkParams, codeRanges: Iterable<CodeRange>, samples: readonly WalkSample[]): WalkResult[] {
    const batch = this.prepare(params, codeRanges, samples);
    const results: WalkResult[] = [];
    this.run(batch, (first, n) => {
      const view = new DataView(this.memory.buffer);
      for (let i = first; i < first + n; i++) {
        const r = batch.pResults + i * RESULT_SIZE;
        const start = view.getUint32(r + RESULT_FRAME_START, true);
        const count = view.getUint32(r + RESULT_FRAME_COUNT, true);
        const frames: WalkFrame[] = new Array(count);
        for (let k = 0; k < count; k++) {
          const f = batch.pFrames + (start + k) * FRAME_SIZE;
          frames[k] = {
            frame: view.getBigUint64(f + FRAME_ADDRESS, true),
            code: view.getBigUint64(f + FRAME_CODE, true),
            instrPtr: view.getBigUint64(f + FRAME_IP, true),
            callsThroughC: (view.getUint32(f + FRAME_FLAGS, true) & FRAME_CALLS_THROUGH_C) !== 0,
          };
        }
        results.push({
          status: statusName(view.getUint32(r + RESULT_STATUS, true)),
          frames,
          visited: view.getUint32(r + RESULT_VISITED, true),
          lastFrame: view.getBigUint64(r + RESULT_LAST, true),
          failAddress: view.getBigUint64(r + RESULT_FAIL, true),
        });
      }
    });
    return results;
  }

  /**
   * Lay a batch out in the kernel's memory, ready to be walked by `walkPrepared` (benchmarks:
   * the walk alone, without the host's layout and result objects). Valid until the next
   * `walk` or `prepare`.
   */
  prepare(params: WalkParams, codeRanges: Iterable<CodeRange>, samples: readonly WalkSample[]): PreparedBatch {
    const bad = checkParams(params);
    if (bad) throw new RangeError(`walk parameters: ${bad}`);
    return layBatch(this.memory, this.exports.heapBase(), params, codeRanges, samples);
  }

  /** Walk a prepared batch again; the frames visited in all (the kernel's results stay in its memory). */
  walkPrepared(batch: PreparedBatch): number {
    let visited = 0;
    this.run(batch, (first, n) => {
      const u32 = new Uint32Array(this.memory.buffer);
      for (let i = first; i < first + n; i++) visited += u32[(batch.pResults + i * RESULT_SIZE + RESULT_VISITED) >>> 2]!;
    });
    return visited;
  }

  /** Call the kernel over the batch, as many times as its frame output needs; `take` reads each stretch of results. */
  private run(batch: PreparedBatch, take: (first: number, n: number) => void): void {
    let first = 0;
    while (first < batch.samples) {
      const n = this.exports.walk(
        batch.pParams,
        batch.pSamples + first * SAMPLE_SIZE,
        batch.samples - first,
        batch.pCodes,
        batch.codeCount,
        batch.pResults + first * RESULT_SIZE,
        batch.pFrames,
        batch.frameCapacity,
      );
      if (n < 0) throw new Error('walk kernel rejected the batch layout (a bug in the host)');
      if (n === 0) throw new Error('walk kernel made no progress (frame output too small)');
      take(first, n);
      first += n;
    }
  }
}

/** Write code ranges (sorted) where the kernel reads its code table: CODE_SIZE entries from `at`. */
export function writeCodeTable(dv: DataView, at: number, codes: readonly CodeRange[]): void {
  codes.forEach((c, i) => {
    const o = at + i * CODE_SIZE;
    dv.setBigUint64(o + CODE_ADDRESS, c.address & U64_MASK, true);
    dv.setBigUint64(o + CODE_START, c.bytecodeStart & U64_MASK, true);
    dv.setBigUint64(o + CODE_END, c.bytecodeEnd & U64_MASK, true);
    dv.setUint32(o + CODE_FRAME_SIZE, c.frameSize, true);
    dv.setUint32(o + CODE_FRAME_SIZE + 4, 0, true);
  });
}

/**
 * Lay a batch out in a kernel's memory (from `heapBase` on, growing it as needed) for its
 * `walk` export; the frame output holds `frameCapacity` frames (default: a whole walk, at
 * least MIN_FRAME_CAPACITY; the walk then stops and is called again for the rest).
 */
export function layBatch(
  memory: WebAssembly.Memory,
  heapBase: number,
  params: WalkParams,
  codeRanges: Iterable<CodeRange>,
  samples: readonly WalkSample[],
  frameCapacity = Math.max(params.maxDepth, MIN_FRAME_CAPACITY),
): PreparedBatch & { end: number } {
  const codes = normalizeCodeRanges(codeRanges);
  const sorted = samples.map((s) => sortRegions(s.regions));
  const regionCount = sorted.reduce((n, r) => n + r.length, 0);
  const regionBytes = sorted.reduce((n, rs) => rs.reduce((m, r) => m + align(r.bytes.length, 8), n), 0);

  const pParams = align(heapBase, 16);
  const pCodes = align(pParams + P_COUNT * 4, 16);
  const pSamples = align(pCodes + codes.length * CODE_SIZE, 16);
  const pTables = align(pSamples + samples.length * SAMPLE_SIZE, 16);
  const pResults = align(pTables + regionCount * REGION_SIZE, 16);
  const pFrames = align(pResults + samples.length * RESULT_SIZE, 16);
  const pData = align(pFrames + frameCapacity * FRAME_SIZE, 16);
  const end = pData + regionBytes;
  if (end > 0xffff_0000) throw new RangeError(`batch of ${end} bytes does not fit a 4 GiB memory: walk fewer samples at once`);
  const have = memory.buffer.byteLength;
  if (end > have) memory.grow(Math.ceil((end - have) / PAGE));

  const buf = memory.buffer;
  const u8 = new Uint8Array(buf);
  const dv = new DataView(buf);
  new Int32Array(buf, pParams, P_COUNT).set(encodeParams(params));
  writeCodeTable(dv, pCodes, codes);
  let table = pTables;
  let data = pData;
  sorted.forEach((regions, i) => {
    const o = pSamples + i * SAMPLE_SIZE;
    dv.setBigUint64(o + SAMPLE_TSTATE, samples[i]!.threadStateAddress & U64_MASK, true);
    dv.setUint32(o + SAMPLE_REGIONS, table, true);
    dv.setUint32(o + SAMPLE_REGION_COUNT, regions.length, true);
    for (const r of regions) {
      dv.setBigUint64(table + REGION_ADDRESS, r.address & U64_MASK, true);
      dv.setUint32(table + REGION_LENGTH, r.bytes.length, true);
      dv.setUint32(table + REGION_DATA, data, true);
      u8.set(r.bytes, data);
      table += REGION_SIZE;
      data += align(r.bytes.length, 8);
    }
  });
  return { samples: samples.length, codeCount: codes.length, frameCapacity, pParams, pCodes, pSamples, pResults, pFrames, end };
}

/** A batch laid out in a KernelWalker's memory (linear-memory offsets). */
export interface PreparedBatch {
  samples: number;
  codeCount: number;
  frameCapacity: number;
  pParams: number;
  pCodes: number;
  pSamples: number;
  pResults: number;
  pFrames: number;
}
