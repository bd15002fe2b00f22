// Host side of the kernel's native (x86-64) unwinder (assembly/native-unwind.ts): lays the
// mapped objects and their unwind rows into the kernel's memory once (setObjects), then per
// unwind the registers, the stack copy and room for the pcs, calls `unwindNative` and reads the
// pcs back. Same contract, to the bit, as the reference src/native/unwind.ts unwindNative.
//
// Its own instance and memory: the Python walk's host (./walker.ts) lays every batch from the
// heap base across the whole memory, and the block engine (./block-engine.ts) owns the areas it
// hands the kernel across calls, so neither leaves a region another host could keep its tables
// in. The kernel's unwinder keeps nothing between calls, so the cost of a second instance is
// only its memory (the compiled module can be shared: pass it as `module`).
//
// What the reference takes as any BigInt and any object list, the kernel takes as u64 and a
// sorted table of disjoint entries: the layout below turns the one into the other without
// changing an answer — registers mod 2^64, biases mod 2^64 (the reference's object address is
// pc − bias mod 2^64), the stack copy cut to the address space (the reference reads nothing
// outside it), and the objects as the pieces of each that no earlier object covers (the
// reference takes the first object of its list that holds a pc).

import { frameLimit, MAX_NATIVE_FRAMES, tableRows, UNWIND_STATUS, type MappedObject, type NativeRegisters, type NativeUnwind, type StackCopy } from '../native/unwind.js';
import { U64_MASK } from '../walk/normalize.js';
import { instantiateKernel, readKernelBytes } from './load.js';
import {
  NATIVE_ROW_FIELDS,
  NO_BIAS,
  NO_LAST,
  NO_ROWS,
  NO_RULES,
  NO_SIZE,
  NO_START,
  NO_STARTS,
  NU_CAPACITY,
  NU_COUNT,
  NU_FOUND,
  NU_MAX_FRAMES,
  NU_OBJECTS,
  NU_OBJECT_COUNT,
  NU_PCS,
  NU_RBP,
  NU_RIP,
  NU_RSP,
  NU_SIZE,
  NU_SPS,
  NU_STACK_ADDRESS,
  NU_STACK_DATA,
  NU_STACK_LENGTH,
  NU_STATUS,
} from './abi.js';
import type { KernelOptions } from './walker.js';

const PAGE = 65536;
const TOP = 1n << 64n;
/** the most linear memory a layout may use (a 4 GiB memory, less a page of slack) */
const MEMORY_LIMIT = 0xffff_0000;

interface NativeExports {
  unwindNative(request: number): number;
  heapBase(): number;
}

/** A part of one object's mapping, [start, last] (inclusive: a mapping may end at 2^64). */
export interface ObjectPiece {
  start: bigint;
  last: bigint;
  /** the object's index in the list given */
  object: number;
}

/**
 * The objects as sorted, disjoint pieces that hold each address the way the reference's linear
 * scan does: an address belongs to the first object of the list whose [start, end) holds it
 * (bounds outside [0, 2^64] reach no further than it; an empty or reversed mapping holds nothing).
 */
export function objectPieces(objects: readonly MappedObject[]): ObjectPiece[] {
  // the pieces claimed so far, sorted and disjoint, as [start, end)
  let claimed: { start: bigint; end: bigint; object: number }[] = [];
  objects.forEach((o, object) => {
    const start = o.start < 0n ? 0n : o.start;
    const end = o.end > TOP ? TOP : o.end;
    if (start >= end) return;
    const gaps: typeof claimed = [];
    let at = start;
    for (const c of claimed) {
      if (c.end <= at) continue;
      if (c.start >= end) break;
      if (c.start > at) gaps.push({ start: at, end: c.start, object });
      at = c.end;
      if (at >= end) break;
    }
    if (at < end) gaps.push({ start: at, end, object });
    if (gaps.length) claimed = [...claimed, ...gaps].sort((a, b) => (a.start < b.start ? -1 : a.start > b.start ? 1 : 0));
  });
  return claimed.map((c) => ({ start: c.start, last: c.end - 1n, object: c.object }));
}

/** The part of a stack copy inside the address space, [0, 2^64) (the reference reads nothing outside it). */
export function clipStack(stack: StackCopy): StackCopy {
  const length = BigInt(stack.bytes.length);
  const lo = stack.address < 0n ? 0n : stack.address;
  const hi = stack.address + length > TOP ? TOP : stack.address + length;
  if (lo >= hi) return { address: 0n, bytes: new Uint8Array(0) };
  if (lo === stack.address && hi === stack.address + length) return stack;
  return { address: lo, bytes: stack.bytes.subarray(Number(lo - stack.address), Number(hi - stack.address)) };
}

const align = (n: number, a: number): number => Math.ceil(n / a) * a;

export class KernelNativeUnwinder {
  readonly kind = 'kernel';
  /** where the request block is; the object table follows it, then each unwind's output and stack bytes */
  private readonly request: number;
  /** the first byte after the object table and rows */
  private objectsEnd: number;
  private objectCount = 0;

  private constructor(
    private readonly exports: NativeExports,
    readonly memory: WebAssembly.Memory,
    readonly shared: boolean,
  ) {
    this.request = align(exports.heapBase(), 16);
    this.objectsEnd = align(this.request + NU_SIZE, 16);
  }

  /**
   * A kernel instance of its own. `module`: a compiled kernel of either build (the memory it
   * imports is made for it) or its bytes; none: the build `shared` names (default: the shared
   * one where SharedArrayBuffer exists), read next to the package.
   */
  static async load(options: KernelOptions = {}): Promise<KernelNativeUnwinder> {
    let module = options.module;
    if (!(module instanceof WebAssembly.Module)) {
      module ??= await readKernelBytes(options.shared ?? typeof SharedArrayBuffer !== 'undefined');
      module = await WebAssembly.compile(module as Uint8Array<ArrayBuffer>);
    }
    const { instance, memory, shared } = await instantiateKernel(module);
    return new KernelNativeUnwinder(instance.exports as unknown as NativeExports, memory, shared);
  }

  private ensure(end: number, what: string): void {
    if (end > MEMORY_LIMIT) throw new RangeError(`${what} of ${end} bytes does not fit a 4 GiB memory`);
    const have = this.memory.buffer.byteLength;
    if (end > have) this.memory.grow(Math.ceil((end - have) / PAGE));
  }

  /** Lay out the mapped objects and their rows (kept until the next call). */
  setObjects(objects: readonly MappedObject[]): void {
    const pieces = objectPieces(objects);
    const rows = objects.map((o) => (o.table ? tableRows(o.table) : 0));
    const table = align(this.request + NU_SIZE, 16);
    let end = table + pieces.length * NO_SIZE;
    // each object's rows once, whatever number of pieces share them
    const at = rows.map((n) => {
      if (n === 0) return 0;
      const starts = align(end, 8);
      end = starts + n * 8 + n * NATIVE_ROW_FIELDS * 4;
      return starts;
    });
    this.ensure(end, 'the unwind tables');
    const buf = this.memory.buffer;
    const dv = new DataView(buf);
    objects.forEach((o, i) => {
      const n = rows[i]!;
      if (n === 0) return;
      new BigUint64Array(buf, at[i]!, n).set(o.table!.starts.subarray(0, n));
      new Int32Array(buf, at[i]! + n * 8, n * NATIVE_ROW_FIELDS).set(o.table!.rules.subarray(0, n * NATIVE_ROW_FIELDS));
    });
    pieces.forEach((p, k) => {
      const e = table + k * NO_SIZE;
      const o = objects[p.object]!;
      const n = rows[p.object]!;
      dv.setBigUint64(e + NO_START, p.start, true);
      dv.setBigUint64(e + NO_LAST, p.last, true);
      dv.setBigUint64(e + NO_BIAS, o.bias & U64_MASK, true);
      dv.setUint32(e + NO_ROWS, n, true);
      dv.setUint32(e + NO_STARTS, at[p.object]!, true);
      dv.setUint32(e + NO_RULES, n === 0 ? 0 : at[p.object]! + n * 8, true);
      dv.setUint32(e + NO_RULES + 4, 0, true);
    });
    this.objectCount = pieces.length;
    this.objectsEnd = align(end, 16);
  }

  /** The chain of pcs from `regs` through `stack`, by the objects of the last setObjects (as src/native/unwind.ts unwindNative). */
  unwind(regs: NativeRegisters, stack: StackCopy, maxFrames = MAX_NATIVE_FRAMES): NativeUnwind {
    const limit = frameLimit(maxFrames);
    const copy = clipStack(stack);
    const pcsAt = this.objectsEnd;
    const spsAt = pcsAt + limit * 8;
    const foundAt = spsAt + limit * 8;
    const stackAt = align(foundAt + limit, 16);
    this.ensure(stackAt + copy.bytes.length, 'the unwind request');
    const buf = this.memory.buffer;
    const dv = new DataView(buf);
    const r = this.request;
    dv.setBigUint64(r + NU_RIP, regs.rip & U64_MASK, true);
    dv.setBigUint64(r + NU_RSP, regs.rsp & U64_MASK, true);
    dv.setBigUint64(r + NU_RBP, regs.rbp & U64_MASK, true);
    dv.setBigUint64(r + NU_STACK_ADDRESS, copy.address, true);
    dv.setUint32(r + NU_STACK_LENGTH, copy.bytes.length, true);
    dv.setUint32(r + NU_STACK_DATA, stackAt, true);
    dv.setUint32(r + NU_OBJECTS, align(this.request + NU_SIZE, 16), true);
    dv.setUint32(r + NU_OBJECT_COUNT, this.objectCount, true);
    dv.setUint32(r + NU_MAX_FRAMES, limit, true);
    dv.setUint32(r + NU_PCS, pcsAt, true);
    dv.setUint32(r + NU_FOUND, foundAt, true);
    dv.setUint32(r + NU_CAPACITY, limit, true);
    dv.setUint32(r + NU_SPS, spsAt, true);
    new Uint8Array(buf, stackAt, copy.bytes.length).set(copy.bytes);
    const count = this.exports.unwindNative(r);
    const status = UNWIND_STATUS[dv.getUint32(r + NU_STATUS, true)];
    if (count < 1 || count > limit || count !== dv.getUint32(r + NU_COUNT, true) || status === undefined) {
      throw new Error(`the native unwind kernel refused its request (${count}): a bug in the host`);
    }
    const pcs: bigint[] = new Array(count);
    const sps: bigint[] = new Array(count);
    for (let i = 0; i < count; i++) {
      pcs[i] = dv.getBigUint64(pcsAt + i * 8, true);
      sps[i] = dv.getBigUint64(spsAt + i * 8, true);
    }
    const found = Array.from(new Uint8Array(buf, foundAt, count - 1));
    return { pcs, found, sps, status };
  }
}
