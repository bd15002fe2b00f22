// What patches buy: samples shaped like real ones (a thread state and a ~5 KB stack whose top
// frame is replaced and a few instruction pointers move between samples) stored as patches
// against the thread's previous sample. Prints bytes per sample and decode throughput; asserts
// only the size (timings depend on the machine).
import { deflateSync } from 'fflate';
import { describe, expect, it } from 'vitest';
import { CaptureWriter, memorySink, readCaptureBytes, type CaptureHeader, type SampleRecord } from '../src/capture/index.js';
import { rng } from './helpers/rng.js';

const HEADER: CaptureHeader = {
  layoutSource: { kind: 'debug-offsets', bytes: new Uint8Array(888).fill(1) },
  pointerSize: 8,
  pythonVersion: '3.15.2',
  target: 'synthetic',
  runtimeAddress: 0x5555_5555_0000n,
  rateHz: 1000,
  startTime: 0,
  recorder: 'pyunwind test',
};

const FRAME_HEADER = 80; // _PyInterpreterFrame up to localsplus on 3.15, x86-64
const CHUNK_HEADER = 24; // previous, size, top
const TSTATE_SIZE = 912;

interface Frame {
  fn: number;
  ip: number;
  locals: bigint[];
}

/**
 * One thread's samples as a recorder copies them: the thread state (current_frame and
 * datastack_top change) and the used part of its data-stack chunk, where the frames are laid
 * out back to back. Between samples a call returns and another is made (new top frame from
 * one of a dozen functions, its locals mostly the same objects as last time it ran), the stack
 * sometimes grows or shrinks, and the top few frames' instruction pointers move.
 */
function threadSamples(seed: number, count: number, tsa: bigint): SampleRecord[] {
  const rand = rng(seed);
  const chunk = tsa + 0x10_0000n;
  const heap = () => 0x7f00_1000_0000n + BigInt(Math.floor(rand() * 2 ** 24)) * 16n;
  const smallInts = Array.from({ length: 256 }, (_, i) => 0x5555_5600_0000n + BigInt(i * 32));
  const functions = Array.from({ length: 12 }, (_, i) => ({
    code: 0x7f00_2000_0000n + BigInt(i * 0x400),
    funcobj: heap(),
    locals: Array.from({ length: 3 + ((rand() * 14) | 0) }, heap),
  }));
  const globals = heap();
  const builtins = heap();
  const newFrame = (): Frame => {
    const fn = (rand() * functions.length) | 0;
    const locals = functions[fn]!.locals.slice();
    for (let k = (rand() * 3) | 0; k > 0; k--) locals[(rand() * locals.length) | 0] = smallInts[(rand() * 256) | 0]!;
    return { fn, ip: 0x40 + ((rand() * 200) | 0) * 2, locals };
  };
  const frames: Frame[] = Array.from({ length: 32 }, newFrame);
  const tstate = new Uint8Array(TSTATE_SIZE);
  for (let i = 0; i < TSTATE_SIZE; i++) tstate[i] = rand() < 0.7 ? 0 : (rand() * 256) | 0;

  const out: SampleRecord[] = [];
  for (let s = 0; s < count; s++) {
    const r = rand();
    if (r < 0.6) frames[frames.length - 1] = newFrame();
    else if (r < 0.75 && frames.length < 40) frames.push(newFrame());
    else if (r < 0.9 && frames.length > 24) frames.pop();
    for (let k = 1; k <= 3 && k <= frames.length; k++) if (rand() < 0.7) frames[frames.length - k]!.ip += 2 + ((rand() * 30) | 0) * 2;

    const size = CHUNK_HEADER + frames.reduce((n, f) => n + FRAME_HEADER + f.locals.length * 8, 0);
    const stack = new Uint8Array(size);
    const view = new DataView(stack.buffer);
    view.setBigUint64(0, 0n, true);
    view.setBigUint64(8, 16384n, true);
    view.setBigUint64(16, chunk + BigInt(size), true);
    let at = CHUNK_HEADER;
    let previous = 0n;
    for (const f of frames) {
      const fn = functions[f.fn]!;
      const address = chunk + BigInt(at);
      view.setBigUint64(at, fn.code, true);
      view.setBigUint64(at + 8, previous, true);
      view.setBigUint64(at + 16, fn.funcobj, true);
      view.setBigUint64(at + 24, globals, true);
      view.setBigUint64(at + 32, builtins, true);
      view.setBigUint64(at + 56, fn.code + 0xd0n + BigInt(f.ip), true);
      view.setBigUint64(at + 64, address + BigInt(FRAME_HEADER + f.locals.length * 8), true);
      stack[at + 74] = 0; // owner: thread
      f.locals.forEach((l, i) => view.setBigUint64(at + FRAME_HEADER + i * 8, l, true));
      previous = address;
      at += FRAME_HEADER + f.locals.length * 8;
    }
    const ts = tstate.slice();
    const tsView = new DataView(ts.buffer);
    tsView.setBigUint64(72, previous, true); // current_frame
    tsView.setBigUint64(96, chunk + BigInt(size), true); // datastack_top
    out.push({
      time: s * 1000 + ((rand() * 50) | 0),
      interpreterId: 0n,
      threadStateAddress: tsa,
      threadId: 0x7f00_3000_0000n + tsa,
      nativeThreadId: 4242n,
      flags: 3,
      recorderStatus: 'ok',
      copyMicros: 10 + ((rand() * 20) | 0),
      regions: [
        { address: tsa, bytes: ts },
        { address: chunk, bytes: stack },
      ],
      errors: [],
    });
  }
  return out;
}

/** Threads' samples interleaved tick by tick, as the sampler adds them. */
function interleaved(threads: number, perThread: number): SampleRecord[] {
  const per = Array.from({ length: threads }, (_, t) => threadSamples(100 + t, perThread, 0x5555_6000_0000n + BigInt(t) * 0x2_0000n));
  const out: SampleRecord[] = [];
  for (let i = 0; i < perThread; i++) for (const p of per) out.push(p[i]!);
  return out;
}

function write(samples: SampleRecord[]): Uint8Array {
  const sink = memorySink();
  const writer = new CaptureWriter(sink, HEADER);
  for (const s of samples) writer.addSample(s);
  writer.close();
  return sink.bytes();
}

const rawSize = (samples: SampleRecord[]) => samples.reduce((n, s) => n + s.regions.reduce((m, r) => m + r.bytes.length, 0), 0);

describe('size and speed', () => {
  it('stores realistic samples in far fewer bytes than their regions (prints bytes/sample)', () => {
    const samples = threadSamples(1, 1000, 0x5555_6000_0000n);
    const raw = rawSize(samples);
    const bytes = write(samples);
    const header = readCaptureBytes(bytes).dataStart;
    // for comparison: plain deflate over the raw regions, 1 MiB at a time (no patches)
    let plain = 0;
    const all = new Uint8Array(raw);
    let off = 0;
    for (const s of samples) for (const r of s.regions) all.set(r.bytes, off), (off += r.bytes.length);
    for (let p = 0; p < all.length; p += 1 << 20) plain += deflateSync(all.subarray(p, p + (1 << 20)), { level: 6 }).length;
    const perSample = (bytes.length - header) / samples.length;
    console.log(
      `capture size: ${samples.length} samples, ${(raw / samples.length).toFixed(0)} B raw/sample; ` +
        `plain deflate ${(plain / samples.length).toFixed(1)} B/sample; ` +
        `.pyuw ${perSample.toFixed(1)} B/sample (${bytes.length} B file, header ${header} B)`,
    );
    expect(perSample).toBeLessThan(200);
    expect(perSample * 20).toBeLessThan(raw / samples.length);
    expect(readCaptureBytes(bytes).trailer?.samples).toBe(1000);
  });

  it('decodes quickly (prints samples/s)', () => {
    const samples = interleaved(4, 5000);
    const bytes = write(samples);
    const raw = rawSize(samples);
    const time = (f: () => number): [number, number] => {
      f(); // warm up
      const t0 = performance.now();
      const n = f();
      return [n, (performance.now() - t0) / 1000];
    };
    const [n, seconds] = time(() => {
      let count = 0;
      for (const b of readCaptureBytes(bytes).blocks()) count += b.samples.length;
      return count;
    });
    const [, rawSeconds] = time(() => {
      let count = 0;
      for (const b of readCaptureBytes(bytes).rawBlocks()) count += b.stored.length;
      return count;
    });
    const t0 = performance.now();
    write(samples);
    const writeSeconds = (performance.now() - t0) / 1000;
    console.log(
      `capture speed: ${n} samples (${(raw / 2 ** 20).toFixed(0)} MiB of regions, ${(bytes.length / 1024).toFixed(0)} KiB file, ` +
        `${readCaptureBytes(bytes).trailer?.blocks} blocks): decode ${Math.round(n / seconds).toLocaleString('en')} samples/s ` +
        `(${(raw / 2 ** 20 / seconds).toFixed(0)} MiB/s of regions; of ${(seconds * 1000).toFixed(0)} ms, framing and checksums ${(rawSeconds * 1000).toFixed(1)} ms); ` +
        `write ${Math.round(n / writeSeconds).toLocaleString('en')} samples/s`,
    );
    expect(n).toBe(samples.length);
  });
});
