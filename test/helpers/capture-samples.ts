// Samples and captures for the capture tests: evolving regions, churning stacks, a header, and
// writing and reading them back.
import { expect } from 'vitest';
import { CaptureWriter, memorySink, readCaptureBytes, type CaptureBlock, type CaptureHeader, type CodeRecord, type SampleRecord } from '../../src/capture/index.js';
import type { CaptureWriterOptions } from '../../src/capture/writer.js';
import type { ThreadNameRecord } from '../../src/capture/types.js';
import type { Region } from '../../src/walk/types.js';
import { rng } from './rng.js';

const U64_MAX = (1n << 64n) - 1n;

export const HEADER: CaptureHeader = {
  layoutSource: { kind: 'debug-offsets', bytes: Uint8Array.from({ length: 888 }, (_, i) => (i * 37) & 0xff) },
  pointerSize: 8,
  pythonVersion: '3.15.2',
  target: 'pid 1234 (python3.15, 3.15.2)',
  command: ['python3', '-c', 'print("é ✓")'],
  pid: 1234,
  runtimeAddress: 0x7f12_3456_7000n,
  rateHz: 1000,
  startTime: 1_760_000_000_000,
  recorder: 'pyunwind 0.1.0',
  copy: 'optimistic',
  sampling: 'wall',
  facts: ['cpu', 'gil'],
};

/** The same bytes, as a view starting `shift` bytes into a larger buffer. */
export function unaligned(bytes: Uint8Array, shift: number): Uint8Array {
  const buf = new Uint8Array(bytes.length + shift + 3).fill(0xee);
  buf.set(bytes, shift);
  return buf.subarray(shift, shift + bytes.length);
}

export function randomBytes(rand: () => number, n: number): Uint8Array {
  return Uint8Array.from({ length: n }, () => (rand() * 256) | 0);
}

export const bigOf = (rand: () => number): bigint => {
  const pick = rand();
  if (pick < 0.2) return U64_MAX - BigInt((rand() * 4) | 0);
  if (pick < 0.3) return BigInt((rand() * 3) | 0);
  return (BigInt((rand() * 2 ** 32) >>> 0) << 32n) | BigInt((rand() * 2 ** 32) >>> 0);
};

/**
 * Samples of `threads` threads whose regions evolve like a recorder's copies, plus every
 * awkward case: bytes changed here and there, regions growing, shrinking, emptied, added,
 * removed, reordered, repeated addresses, identical consecutive samples, ids that change.
 */
export function evolvingSamples(seed: number, threads: number, count: number, maxRegion = 600): SampleRecord[] {
  const rand = rng(seed);
  const state = Array.from({ length: threads }, (_, t) => ({
    tsa: t === 0 ? U64_MAX - 0xfffn : 0x7f00_0000_0000n + BigInt(t) * 0x10000n,
    tid: bigOf(rand),
    regions: Array.from({ length: 1 + ((rand() * 3) | 0) }, (_, k) => ({
      address: k === 0 ? U64_MAX - BigInt(k * 0x1000) : 0x5500_0000n + BigInt(t * 0x100000 + k * 0x1000),
      bytes: randomBytes(rand, (rand() * maxRegion) | 0),
    })) as Region[],
  }));
  const out: SampleRecord[] = [];
  let time = 0;
  for (let i = 0; i < count; i++) {
    const s = state[(rand() * threads) | 0]!;
    const op = rand();
    if (op < 0.15) {
      // identical to the thread's previous sample
    } else if (op < 0.55) {
      // a few scattered bytes change
      const r = s.regions[(rand() * s.regions.length) | 0];
      if (r && r.bytes.length) {
        const b = r.bytes.slice();
        for (let k = (rand() * 6) | 0; k >= 0; k--) b[(rand() * b.length) | 0] = (rand() * 256) | 0;
        r.bytes = b;
      }
    } else if (op < 0.7) {
      // a region grows or shrinks (the stack's used part), possibly to nothing
      const r = s.regions[(rand() * s.regions.length) | 0];
      if (r) {
        const n = rand() < 0.1 ? 0 : (rand() * maxRegion) | 0;
        const b = new Uint8Array(n);
        b.set(r.bytes.subarray(0, n));
        if (n > r.bytes.length) b.set(randomBytes(rand, n - r.bytes.length), r.bytes.length);
        r.bytes = b;
      }
    } else if (op < 0.8) {
      // a frame outside the chunks appears (sometimes at an address already present)
      const address = rand() < 0.3 && s.regions.length ? s.regions[0]!.address : bigOf(rand);
      s.regions.splice((rand() * (s.regions.length + 1)) | 0, 0, { address, bytes: randomBytes(rand, (rand() * 120) | 0) });
    } else if (op < 0.88) {
      s.regions.splice((rand() * s.regions.length) | 0, 1);
    } else if (op < 0.93) {
      s.regions.reverse();
    } else if (op < 0.96) {
      s.tid = bigOf(rand);
    } else {
      // all new content at the same addresses and lengths
      s.regions = s.regions.map((r) => ({ address: r.address, bytes: randomBytes(rand, r.bytes.length) }));
    }
    time += rand() < 0.1 ? 0 : (rand() * 2000) | 0;
    out.push({
      time: rand() < 0.02 ? Number.MAX_SAFE_INTEGER - ((rand() * 10) | 0) : time,
      interpreterId: rand() < 0.9 ? 0n : bigOf(rand),
      threadStateAddress: s.tsa,
      threadId: s.tid,
      nativeThreadId: rand() < 0.95 ? BigInt(4000 + threads) : bigOf(rand),
      flags: (rand() * 4) | 0,
      recorderStatus: rand() < 0.1 ? 'torn' : 'ok',
      copyMicros: (rand() * 100) | 0,
      // sometimes a view at an odd offset into a larger buffer (the writer compares words when it can)
      regions: s.regions.map((r) => ({ address: r.address, bytes: rand() < 0.2 ? unaligned(r.bytes, 1 + ((rand() * 3) | 0)) : r.bytes })),
      errors: rand() < 0.05 ? ['chunk 0x7f00: read failed (EIO)', 'ünïcödé'] : [],
    });
  }
  return out;
}

export function codeRecord(seed: number): CodeRecord {
  const rand = rng(seed);
  return {
    address: bigOf(rand),
    regions: Array.from({ length: (rand() * 5) | 0 }, () => ({ address: bigOf(rand), bytes: randomBytes(rand, (rand() * 300) | 0) })),
  };
}

export function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** Deep equality, fast for thousands of samples; on a mismatch, vitest's diff of the first one. */
export function expectSameSamples(got: SampleRecord[], want: SampleRecord[]): void {
  expect(got.length).toBe(want.length);
  for (let i = 0; i < want.length; i++) {
    const g = got[i]!;
    const w = want[i]!;
    const same =
      g.time === w.time &&
      g.interpreterId === w.interpreterId &&
      g.threadStateAddress === w.threadStateAddress &&
      g.threadId === w.threadId &&
      g.nativeThreadId === w.nativeThreadId &&
      g.flags === w.flags &&
      g.recorderStatus === w.recorderStatus &&
      g.copyMicros === w.copyMicros &&
      g.errors.length === w.errors.length &&
      g.errors.every((e, k) => e === w.errors[k]) &&
      g.regions.length === w.regions.length &&
      g.regions.every((r, k) => r.address === w.regions[k]!.address && sameBytes(r.bytes, w.regions[k]!.bytes));
    if (!same) expect({ sample: i, ...g }).toEqual({ sample: i, ...w });
  }
}

export function writeAll(
  header: CaptureHeader,
  ops: Array<{ code: CodeRecord } | { sample: SampleRecord } | { missed: number } | { name: ThreadNameRecord } | 'flush'>,
  options?: CaptureWriterOptions,
  immutable = false,
): { bytes: Uint8Array; writer: CaptureWriter } {
  const sink = memorySink();
  const writer = new CaptureWriter(sink, header, options);
  for (const op of ops) {
    if (op === 'flush') writer.flush();
    else if ('code' in op) writer.addCode(op.code);
    else if ('sample' in op) writer.addSample(op.sample, immutable);
    else if ('name' in op) writer.addThreadName(op.name);
    else writer.addMissed(op.missed);
  }
  writer.close();
  return { bytes: sink.bytes(), writer };
}

export function readAll(bytes: Uint8Array) {
  const reader = readCaptureBytes(bytes, 'test.pyuw');
  const blocks: CaptureBlock[] = [...reader.blocks()];
  return {
    reader,
    blocks,
    codes: blocks.flatMap((b) => b.codes),
    samples: blocks.flatMap((b) => b.samples),
    missed: blocks.reduce((n, b) => n + b.missed, 0),
  };
}

/**
 * Samples of threads whose regions hold stacks of frames, as a recorder copies them: a data-stack
 * chunk (a header, then frames that push and pop, the top one changing as it runs, words that
 * point into the chunk — `previous`, a stack pointer — and words from a few executables), frames
 * outside it, and the hint a recorder gives — sometimes with addresses that lie (outside every
 * region, overlapping, of another shape).
 */
export function stackSamples(seed: number, threads: number, count: number, wb: 4 | 8, words: number): SampleRecord[] {
  const rand = rng(seed);
  const S = wb * words;
  const exec = Array.from({ length: 6 }, () => BigInt(0x4000_0000 + ((rand() * 0x1000_0000) | 0) * 8));
  const word = (b: DataView, at: number, v: bigint): void => (wb === 8 ? b.setBigUint64(at, BigInt.asUintN(64, v), true) : b.setUint32(at, Number(BigInt.asUintN(32, v)), true));
  const state = Array.from({ length: threads }, (_, t) => ({
    tsa: BigInt(0x1000_0000 + t * 0x10_0000),
    chunk: BigInt(0x2000_0000 + t * 0x100_0000 + ((rand() * 64) | 0) * 8),
    header: randomBytes(rand, 24),
    frames: [] as { exec: bigint; ip: number; local: bigint; pad: number }[],
    outside: null as Uint8Array | null,
  }));
  const out: SampleRecord[] = [];
  let time = 0;
  for (let i = 0; i < count; i++) {
    const th = state[(rand() * threads) | 0]!;
    const op = rand();
    if (op < 0.3) for (let k = 1 + ((rand() * 3) | 0); k > 0; k--) th.frames.push({ exec: exec[(rand() * exec.length) | 0]!, ip: (rand() * 40) | 0, local: BigInt((rand() * 2 ** 31) | 0), pad: (rand() * 3) | 0 });
    else if (op < 0.55) th.frames.splice(Math.max(0, th.frames.length - 1 - ((rand() * 3) | 0)));
    else if (op < 0.85 && th.frames.length) th.frames[th.frames.length - 1]!.ip += 1 + ((rand() * 4) | 0);
    else if (op < 0.9) th.outside = th.outside ? null : randomBytes(rand, S);
    // the chunk: header, then each frame S bytes plus a few words of locals (left zero)
    const gaps = th.frames.map((f) => f.pad * wb);
    let length = 24;
    const offsets = th.frames.map((_, k) => {
      const at = length + gaps[k]!;
      length = at + S;
      return at;
    });
    length += (rand() * 64) | 0;
    const bytes = new Uint8Array(length);
    bytes.set(th.header);
    const dv = new DataView(bytes.buffer);
    th.frames.forEach((f, k) => {
      const at = offsets[k]!;
      word(dv, at, f.exec);
      if (words > 1) word(dv, at + wb, k > 0 ? th.chunk + BigInt(offsets[k - 1]!) : 0n);
      if (words > 2) word(dv, at + 2 * wb, f.exec + BigInt(f.ip * 2));
      if (words > 3) word(dv, at + 3 * wb, th.chunk + BigInt(at + S + f.pad * wb));
      if (words > 4) word(dv, at + 4 * wb, f.local);
    });
    // (the chunk header's `top`)
    new DataView(bytes.buffer).setUint32(16, length, true);
    const regions: Region[] = [{ address: th.tsa, bytes: Uint8Array.of(1, 2, 3, (i & 0xff) % 7) }, { address: th.chunk, bytes }];
    const addresses = offsets.map((o) => Number(th.chunk) + o);
    if (th.outside) {
      regions.push({ address: th.chunk + 0x80_0000n, bytes: th.outside });
      addresses.push(Number(th.chunk) + 0x80_0000);
    }
    const lie = rand();
    if (lie < 0.1) addresses.push(Number(th.chunk) + length - 2); // past the region's end
    else if (lie < 0.2 && addresses.length) addresses.push(addresses[0]! + wb); // overlapping
    else if (lie < 0.25) addresses.push(0x7777_0000);
    time += (rand() * 500) | 0;
    out.push({
      time,
      interpreterId: 0n,
      threadStateAddress: th.tsa,
      threadId: BigInt(th.tsa) * 3n,
      nativeThreadId: 7n,
      flags: 0,
      recorderStatus: 'ok',
      copyMicros: (rand() * 9) | 0,
      regions,
      errors: [],
      frames: { addresses, size: rand() < 0.02 ? S + wb : S, wordBytes: wb },
    });
  }
  return out;
}

