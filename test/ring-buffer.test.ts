// The consumer's side of the BPF ring buffer (src/record/linux/ring-buffer.ts), over memory laid
// out as the kernel lays it out (a consumer page, a producer page, the data mapped twice): the
// edges a live recording rarely shows — a record wrapping around the end, one still being
// written, one the producer discarded, a length no kernel writes. (Live records through it:
// kernel-copy.test.ts and record-interrupt.test.ts.)
import { describe, expect, it } from 'vitest';
import { RingReader } from '../src/record/linux/ring-buffer.js';

const PAGE = 4096;
const SIZE = 64;

/** A ring of SIZE data bytes; write() puts a record at the producer's position, in both copies of the data. */
function ring() {
  const consumer = new ArrayBuffer(PAGE);
  const rest = new ArrayBuffer(PAGE + 2 * SIZE);
  const data = new Uint8Array(rest, PAGE, 2 * SIZE);
  const prod = new BigUint64Array(rest, 0, 1);
  const cons = new BigUint64Array(consumer, 0, 1);
  const put = (pos: number, bytes: Uint8Array): void => {
    for (let i = 0; i < bytes.length; i++) {
      const at = (pos + i) % SIZE;
      data[at] = bytes[i]!;
      data[at + SIZE] = bytes[i]!;
    }
  };
  const write = (payload: number[], flags = 0): void => {
    const pos = Number(prod[0]);
    const header = new Uint8Array(8);
    new DataView(header.buffer).setUint32(0, (payload.length | flags) >>> 0, true);
    put(pos, header);
    put(pos + 8, Uint8Array.from(payload));
    prod[0] = BigInt(pos + ((payload.length + 8 + 7) & ~7));
  };
  const reader = new RingReader(consumer, rest, PAGE, SIZE);
  const read = (): number[][] => {
    const out: number[][] = [];
    reader.consume((r) => out.push([...r]));
    return out;
  };
  const header = (pos: number, value: number): void => put(pos, new Uint8Array(new Uint32Array([value]).buffer));
  return { write, read, header, cons, prod };
}

describe('the BPF ring buffer, read from its mapping', () => {
  it('hands each record once, in order, and gives the space back', () => {
    const r = ring();
    r.write([1, 2, 3]);
    r.write([4, 5, 6, 7, 8, 9, 10, 11, 12]);
    expect(r.read()).toEqual([[1, 2, 3], [4, 5, 6, 7, 8, 9, 10, 11, 12]]);
    expect(r.cons[0]).toBe(r.prod[0]);
    expect(r.read()).toEqual([]);
  });

  it('a record across the end of the data reads whole (the data is mapped twice)', () => {
    const r = ring();
    r.write(Array.from({ length: 40 }, (_, i) => i)); // 48 bytes: the next starts at 48
    expect(r.read()).toHaveLength(1);
    const across = Array.from({ length: 20 }, (_, i) => 100 + i); // 48 + 28 > 64
    r.write(across);
    expect(r.read()).toEqual([across]);
  });

  it('stops at a record still being written, and skips a discarded one', () => {
    const r = ring();
    r.write([7], 0x40000000);
    r.write([8]);
    r.write([9], 0x80000000);
    r.write([10]);
    expect(r.read()).toEqual([[8]]);
    // (what waits behind the busy one is read once it is committed)
    expect(Number(r.cons[0])).toBe(32);
  });

  it('a length past the ring ends the read, and reads nothing outside the mapping', () => {
    const r = ring();
    r.write([1]);
    r.write(Array.from({ length: 8 }, () => 0));
    // the second record's header (at 16) claiming more than the ring holds
    r.header(16, 1000);
    expect(r.read()).toEqual([[1]]);
    expect(Number(r.cons[0])).toBe(16);
  });

  it('refuses a mapping that does not fit the ring', () => {
    expect(() => new RingReader(new ArrayBuffer(PAGE), new ArrayBuffer(PAGE + SIZE), PAGE, SIZE)).toThrow(/needed/);
    expect(() => new RingReader(new ArrayBuffer(PAGE), new ArrayBuffer(PAGE + 200), PAGE, 100)).toThrow(/power of two/);
  });
});
