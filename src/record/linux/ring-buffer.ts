// The consumer's side of a BPF ring buffer (BPF_MAP_TYPE_RINGBUF), read straight from its
// memory mapped into the recorder: no system call and no call back into JavaScript per record
// (libbpf's ring_buffer__consume calls a callback for each, and through the FFI that cost more
// than the record's decoding at 10 kHz).
//
// The kernel's layout (kernel/bpf/ringbuf.c): a page holding the consumer's position, which the
// consumer writes; a page holding the producer's position; then the data, `size` bytes (a power
// of two), mapped twice in a row so that a record that wraps around the end reads as one. A
// record is an 8-byte header — its length, with a busy bit while the producer writes it and a
// discard bit for one it dropped — then its bytes, the whole rounded up to 8. Positions only
// grow; a record is at `position & (size - 1)` in the data. Reads of the positions and headers
// are atomic loads (acquire), the consumer's position an atomic store (release): the protocol
// libbpf follows.

const BUSY = 0x80000000;
const DISCARD = 0x40000000;
const HEADER = 8;

export class RingReader {
  private readonly consumer: BigUint64Array;
  private readonly producer: BigUint64Array;
  private readonly words: Uint32Array;
  private readonly data: ArrayBuffer;
  private readonly mask: number;

  /**
   * `consumerPage`: the first page, mapped read-write; `rest`: the producer's page and the data
   * mapped twice (pageSize + 2 * size bytes), read-only.
   */
  constructor(consumerPage: ArrayBuffer, rest: ArrayBuffer, pageSize: number, size: number) {
    if (size <= 0 || (size & (size - 1)) !== 0) throw new RangeError(`ring buffer of ${size} bytes: not a power of two`);
    if (rest.byteLength < pageSize + 2 * size) throw new RangeError(`ring buffer mapping of ${rest.byteLength} bytes, ${pageSize + 2 * size} needed`);
    this.consumer = new BigUint64Array(consumerPage, 0, 1);
    this.producer = new BigUint64Array(rest, 0, 1);
    this.data = rest;
    this.words = new Uint32Array(rest, pageSize, (2 * size) / 4);
    this.mask = size - 1;
    this.base = pageSize;
  }

  private readonly base: number;

  /**
   * Hand every whole record written since the last call to `each` (a view of the ring's bytes,
   * valid only during the call), oldest first, then give their space back to the kernel. At
   * most `max` records (more wait for the next call). The number handed.
   */
  consume(each: (record: Uint8Array) => void, max = Infinity): number {
    let cons = Number(Atomics.load(this.consumer, 0));
    const prod = Number(Atomics.load(this.producer, 0));
    let n = 0;
    while (cons < prod && n < max) {
      const at = cons & this.mask;
      const header = Atomics.load(this.words, at >>> 2) >>> 0;
      // (a record the producer has reserved but not yet committed: it and what follows wait)
      if (header & BUSY) break;
      const length = header & ~(BUSY | DISCARD) & 0x3fffffff;
      // (never from the kernel: a length past the ring would read past the mapping)
      if (length + HEADER > this.mask + 1) break;
      cons += (length + HEADER + 7) & ~7;
      if (header & DISCARD) continue;
      each(new Uint8Array(this.data, this.base + at + HEADER, length));
      n++;
    }
    Atomics.store(this.consumer, 0, BigInt(cons));
    return n;
  }
}
