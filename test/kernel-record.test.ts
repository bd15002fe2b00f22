// The records the BPF copier writes (bpf/copier.bpf.c), as the recorder decodes them
// (decodeRecord): a header (tid, region count, time, thread state), then regions (address,
// length, flags, bytes padded to 8) — data-stack chunks, the registers and native stack
// (--native), the GIL's fields (3.13/3.14), the ranges named for the thread (--async-aware). Built here byte by byte as the program lays them out:
// the edge cases a live kernel does not make on demand — a record cut short, a count or length
// past its end, registers of the wrong size — give null (a damaged record, counted), never a
// throw or a region past the bytes.
import { describe, expect, it } from 'vitest';
import { decodeRecord } from '../src/record/linux/kernel-copier.js';

const CHUNK = 1;
const REGISTERS = 2;
const NATIVE_STACK = 4;
const GIL = 8;
const EXTRA = 16;

interface Part {
  address: bigint;
  bytes: Uint8Array;
  flags?: number;
  /** the length written in the region's header, if not the bytes' */
  length?: number;
}

/** A record as the program writes it. */
function record(tid: number, timeNs: bigint, tstate: bigint, parts: Part[], count = parts.length): Uint8Array {
  const size = 24 + parts.reduce((n, p) => n + 16 + ((p.bytes.length + 7) & ~7), 0);
  const out = new Uint8Array(size);
  const dv = new DataView(out.buffer);
  dv.setUint32(0, tid, true);
  dv.setUint32(4, count, true);
  dv.setBigUint64(8, timeNs, true);
  dv.setBigUint64(16, tstate, true);
  let at = 24;
  for (const p of parts) {
    dv.setBigUint64(at, p.address, true);
    dv.setUint32(at + 8, p.length ?? p.bytes.length, true);
    dv.setUint32(at + 12, p.flags ?? 0, true);
    out.set(p.bytes, at + 16);
    at += 16 + ((p.bytes.length + 7) & ~7);
  }
  return out;
}

const filled = (n: number, v: number): Uint8Array => new Uint8Array(n).fill(v);
const words = (...w: bigint[]): Uint8Array => new Uint8Array(new BigUint64Array(w).buffer);

describe('decodeRecord', () => {
  it('reads the header and the regions, a chunk told by its flag, each region its own bytes', () => {
    const bytes = record(4242, 123456789n, 0x1000n, [
      { address: 0x1000n, bytes: filled(100, 1) },
      { address: 0x7000n, bytes: filled(13, 2), flags: CHUNK },
      { address: 0x9000n, bytes: filled(8, 3) },
    ]);
    const r = decodeRecord(bytes)!;
    expect(r.tid).toBe(4242);
    expect(r.timeNs).toBe(123456789n);
    expect(r.threadStateAddress).toBe(0x1000n);
    expect(r.regions.map((x) => [x.address, x.bytes.length, x.chunk])).toEqual([
      [0x1000n, 100, false],
      [0x7000n, 13, true],
      [0x9000n, 8, false],
    ]);
    expect([...r.regions[1]!.bytes].every((b) => b === 2)).toBe(true);
    expect(r.native).toBeUndefined();
    expect(r.gil).toBeUndefined();
    // a copy: the ring buffer's bytes are written again once consumed
    bytes.fill(0xee);
    expect(r.regions[0]!.bytes[0]).toBe(1);
  });

  it("keeps the ranges named for the thread (--async-aware's tasks) apart from the stack's regions, in order", () => {
    const r = decodeRecord(
      record(9, 2n, 0x1000n, [
        { address: 0x1000n, bytes: filled(64, 1) },
        { address: 0x8000n, bytes: filled(168, 4), flags: EXTRA },
        { address: 0x7000n, bytes: filled(40, 2), flags: CHUNK },
        { address: 0x3000n, bytes: filled(5, 5), flags: EXTRA },
      ]),
    )!;
    expect(r.regions.map((x) => x.address)).toEqual([0x1000n, 0x7000n]);
    expect(r.reads!.map((x) => [x.address, x.bytes.length, x.bytes[0]])).toEqual([
      [0x8000n, 168, 4],
      [0x3000n, 5, 5],
    ]);
    // none named: none kept
    expect(decodeRecord(record(9, 2n, 0x1000n, [{ address: 0x1000n, bytes: filled(64, 1) }]))!.reads).toBeUndefined();
    // one whose length runs past the record: not whole
    expect(decodeRecord(record(9, 2n, 0x1000n, [{ address: 0x8000n, bytes: filled(16, 4), flags: EXTRA, length: 4096 }]))).toBeNull();
  });

  it('takes the registers and the native stack out of the regions, as the native copy', () => {
    const r = decodeRecord(
      record(7, 1n, 0x1000n, [
        { address: 0x1000n, bytes: filled(64, 1) },
        { address: 0n, bytes: words(0x401000n, 0x7ffe0000n, 0x7ffe0100n), flags: REGISTERS },
        { address: 0x7ffdf000n, bytes: filled(8192, 9), flags: NATIVE_STACK },
        { address: 0x5000n, bytes: words(0x1000n, 1n, 7n), flags: GIL },
      ]),
    )!;
    expect(r.regions.map((x) => x.address)).toEqual([0x1000n]);
    expect(r.native!.registers).toEqual({ rip: 0x401000n, rsp: 0x7ffe0000n, rbp: 0x7ffe0100n });
    expect(r.native!.stack.address).toBe(0x7ffdf000n);
    expect(r.native!.stack.bytes.length).toBe(8192);
    expect(r.gil!.address).toBe(0x5000n);
    expect(r.gil!.bytes.length).toBe(24);
  });

  it('registers without a stack (its pages could not be read): no native copy', () => {
    const r = decodeRecord(record(7, 1n, 0x1000n, [{ address: 0x1000n, bytes: filled(64, 1) }, { address: 0n, bytes: words(1n, 2n, 3n), flags: REGISTERS }]))!;
    expect(r.native).toBeUndefined();
    expect(r.regions).toHaveLength(1);
  });

  it('a damaged record is null: cut short, a count or a length past its end, registers of another size', () => {
    expect(decodeRecord(new Uint8Array(10))).toBeNull();
    const whole = record(1, 1n, 0x1000n, [{ address: 0x1000n, bytes: filled(40, 1) }]);
    expect(decodeRecord(whole.subarray(0, whole.length - 8))).toBeNull();
    expect(decodeRecord(record(1, 1n, 0x1000n, [{ address: 0x1000n, bytes: filled(40, 1) }], 2))).toBeNull();
    expect(decodeRecord(record(1, 1n, 0x1000n, [{ address: 0x1000n, bytes: filled(40, 1), length: 0xffffffff }]))).toBeNull();
    expect(decodeRecord(record(1, 1n, 0x1000n, [{ address: 0n, bytes: words(1n, 2n), flags: REGISTERS }]))).toBeNull();
    // no region at all: a record of the header alone (the thread state could not be read)
    const bare = decodeRecord(record(1, 1n, 0x1000n, []))!;
    expect(bare.regions).toEqual([]);
  });
});
