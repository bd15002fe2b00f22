// A damaged capture costs only what the damage touched: a cut file yields every block before
// the cut and one warning; a flipped byte costs its block and nothing else; garbage of any
// kind gives a CaptureError or warnings — never another exception, never a hang.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  BLOCK_HEADER_SIZE,
  BLOCK_TYPE,
  COMPRESSION,
  ByteWriter,
  RECORD_TYPE,
  crc32,
  encodeBlock,
  blockWithHeader,
} from '../src/capture/format.js';
import { SampleEncoder } from '../src/capture/patch.js';
import {
  CaptureError,
  CaptureWriter,
  decodeBlock,
  memorySink,
  readCaptureBytes,
  CaptureReader,
  type CaptureBlock,
  type CaptureHeader,
  type SampleRecord,
} from '../src/capture/index.js';

const HEADER: CaptureHeader = {
  layoutSource: { kind: 'builtin', id: 'builtin/3.12/x86_64', versionHex: 0x030c07f0 },
  pointerSize: 8,
  pythonVersion: '3.12.7',
  target: 'pid 7 (python3.12)',
  runtimeAddress: 0x5555_0000_1000n,
  rateHz: 1000,
  startTime: 1_760_000_000_000,
  recorder: 'pyunwind test',
};

/** Samples of 3 threads: a stack region that changes a little each time, a thread state. */
function samples(count: number, seed = 1): SampleRecord[] {
  let x = seed;
  const rand = () => ((x = (Math.imul(x, 1103515245) + 12345) >>> 0) / 2 ** 32);
  const stacks = [0, 1, 2].map(() => Uint8Array.from({ length: 400 }, () => (rand() * 256) | 0));
  return Array.from({ length: count }, (_, i) => {
    const t = i % 3;
    const stack = stacks[t]!.slice();
    for (let k = 0; k < 4; k++) stack[(rand() * stack.length) | 0] = (rand() * 256) | 0;
    stacks[t] = stack;
    return {
      time: i * 333,
      interpreterId: 0n,
      threadStateAddress: 0x7f00_0000_0000n + BigInt(t << 16),
      threadId: BigInt(t + 1),
      nativeThreadId: BigInt(100 + t),
      flags: t === 0 ? 3 : 0,
      recorderStatus: 'ok',
      copyMicros: 5,
      regions: [
        { address: 0x7f00_0000_0000n + BigInt(t << 16), bytes: new Uint8Array(64).fill(i & 0xff) },
        { address: 0x7e00_0000_0000n + BigInt(t << 20), bytes: stack.subarray(0, 300 + ((rand() * 100) | 0)) },
      ],
      errors: [],
    };
  });
}

interface Built {
  bytes: Uint8Array;
  /** the blocks as read from the intact file */
  blocks: CaptureBlock[];
  /** [start, end) of each record block, then of the end block */
  spans: Array<[number, number]>;
  dataStart: number;
}

function build(count: number, blockBytes: number, level = 6): Built {
  const sink = memorySink();
  const writer = new CaptureWriter(sink, HEADER, { blockBytes, compressionLevel: level });
  samples(count).forEach((s, i) => {
    if (i % 10 === 0) writer.addCode({ address: BigInt(0x1000 + i), regions: [{ address: BigInt(0x1000 + i), bytes: new Uint8Array(40).fill(i) }] });
    if (i % 25 === 0) writer.addMissed(1);
    writer.addSample(s);
  });
  writer.close();
  const bytes = sink.bytes();
  const reader = readCaptureBytes(bytes);
  const blocks = [...reader.blocks()];
  expect(reader.warnings).toEqual([]);
  const spans: Array<[number, number]> = [];
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let pos = reader.dataStart; pos < bytes.length; ) {
    const end = pos + BLOCK_HEADER_SIZE + view.getUint32(pos + 12, true);
    spans.push([pos, end]);
    pos = end;
  }
  expect(spans.map((s) => s[0]).slice(0, -1)).toEqual(blocks.map((b) => b.offset));
  return { bytes, blocks, spans, dataStart: reader.dataStart };
}

/**
 * Blocks as one string (bytes in hex): exact, and compared natively — vitest's deep equality
 * walks typed arrays byte by byte through generic code, far too slow for thousands of reads.
 */
const canonCache = new WeakMap<CaptureBlock, string>();
function canon(blocks: CaptureBlock[]): string {
  const one = (b: CaptureBlock): string => {
    let c = canonCache.get(b);
    if (c === undefined) {
      c = JSON.stringify(b, (_, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v instanceof Uint8Array ? Buffer.from(v).toString('hex') : v));
      canonCache.set(b, c);
    }
    return c;
  };
  return `[${blocks.map(one).join(',')}]`;
}

/** The same blocks apart from where they lie in the file. */
function canonNoOffsets(blocks: CaptureBlock[]): string {
  return canon(blocks.map((b) => ({ ...b, offset: 0 })));
}

/** Reads everything; any exception other than CaptureError fails the test. */
function readAllOf(bytes: Uint8Array) {
  try {
    const reader = readCaptureBytes(bytes, 'damaged.pyuw');
    const blocks = [...reader.blocks()];
    return { reader, blocks, error: null };
  } catch (e) {
    if (!(e instanceof CaptureError)) throw e;
    return { reader: null, blocks: [], error: e };
  }
}

const small = build(24, 600);
const big = build(600, 3000);

describe('a file cut short', () => {
  it('has several blocks to cut through', () => {
    expect(small.blocks.length).toBeGreaterThanOrEqual(6);
    expect(big.blocks.length).toBeGreaterThanOrEqual(10);
  });

  it('yields exactly the blocks complete before the cut, plus one warning, at every offset', () => {
    const { bytes, blocks, spans, dataStart } = small;
    for (let cut = 0; cut <= bytes.length; cut++) {
      const got = readAllOf(bytes.subarray(0, cut));
      if (cut < dataStart) {
        expect(got.error, `cut at ${cut}`).toBeInstanceOf(CaptureError);
        expect(got.error!.message).toMatch(cut === 0 ? /is empty/ : /ends at byte \d+ inside its header/);
        continue;
      }
      const complete = spans.slice(0, -1).filter(([, end]) => end <= cut).length;
      expect(canon(got.blocks), `cut at ${cut}`).toBe(canon(blocks.slice(0, complete)));
      const reader = got.reader!;
      if (cut === bytes.length) {
        expect(reader.warnings).toEqual([]);
        expect(reader.closedCleanly).toBe(true);
        continue;
      }
      expect(reader.closedCleanly, `cut at ${cut}`).toBe(false);
      expect(reader.warnings, `cut at ${cut}`).toHaveLength(1);
      const w = reader.warnings[0]!;
      expect(w.message).toContain(`file ends at byte ${cut}`);
      expect(w.message).toContain(`${complete} complete blocks read`);
      const inside = spans.find(([start, end]) => start < cut && cut < end);
      if (inside) {
        expect(w.message).toContain(`inside block ${spans.indexOf(inside)} (started at byte ${inside[0]}`);
        expect(w.offset).toBe(inside[0]);
      } else {
        expect(w.message).toContain(`after ${cut === dataStart ? 'its header' : `block ${complete - 1}`} without an end marker`);
      }
    }
  });

  it('yields the complete blocks at random cuts of a larger file (property)', () => {
    const { bytes, blocks, spans, dataStart } = big;
    fc.assert(
      fc.property(fc.integer({ min: dataStart, max: bytes.length - 1 }), (cut) => {
        const got = readAllOf(bytes.subarray(0, cut));
        const complete = spans.slice(0, -1).filter(([, end]) => end <= cut).length;
        expect(canon(got.blocks)).toBe(canon(blocks.slice(0, complete)));
        expect(got.reader!.warnings).toHaveLength(1);
      }),
      { numRuns: 300 },
    );
  });
});

describe('a flipped byte', () => {
  it("inside a block's payload costs that block only, with a checksum warning naming it", () => {
    const { bytes, blocks, spans } = big;
    fc.assert(
      fc.property(fc.nat({ max: spans.length - 1 }), fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), fc.integer({ min: 1, max: 255 }), (k, where, xor) => {
        const [start, end] = spans[k]!;
        const at = start + BLOCK_HEADER_SIZE + Math.floor(where * (end - start - BLOCK_HEADER_SIZE));
        const damaged = bytes.slice();
        damaged[at]! ^= xor;
        const { reader, blocks: got } = readAllOf(damaged);
        const isEnd = k === spans.length - 1;
        expect(canon(got)).toBe(canon(blocks.filter((_, i) => i !== k)));
        expect(reader!.warnings.map((w) => w.message)).toHaveLength(1);
        const w = reader!.warnings[0]!;
        expect(w.offset).toBe(start);
        expect(w.message).toMatch(new RegExp(`^block ${k} at byte ${start}${isEnd ? ' \\(the end marker\\)' : ''}: checksum mismatch \\(stored 0x[0-9a-f]{8}, computed 0x[0-9a-f]{8}\\); block skipped$`));
        expect(reader!.closedCleanly).toBe(!isEnd);
      }),
      { numRuns: 300 },
    );
  });

  it('anywhere after the header (block headers too) costs at most the block it hit (property)', () => {
    const { bytes, blocks, spans, dataStart } = big;
    fc.assert(
      fc.property(fc.integer({ min: dataStart, max: bytes.length - 1 }), fc.integer({ min: 1, max: 255 }), (at, xor) => {
        const damaged = bytes.slice();
        damaged[at]! ^= xor;
        const { blocks: got, reader } = readAllOf(damaged);
        const hit = spans.findIndex(([start, end]) => start <= at && at < end);
        expect(canon(got)).toBe(canon(blocks.filter((_, i) => i !== hit)));
        expect(reader!.warnings.map((w) => w.message)).toHaveLength(1);
        expect(reader!.warnings[0]!.offset).toBe(spans[hit]![0]);
      }),
      { numRuns: 400 },
    );
  });

  it('in a block header: the reader scans to the next intact block and says how far it skipped', () => {
    const { bytes, blocks, spans } = big;
    const damaged = bytes.slice();
    damaged[spans[3]![0] + 13]! ^= 0xff; // the stored length
    const { blocks: got, reader } = readAllOf(damaged);
    expect(got.map((b) => b.index)).toEqual(blocks.map((b) => b.index).filter((i) => i !== 3));
    expect(reader!.warnings.map((w) => w.message)).toEqual([
      expect.stringMatching(
        new RegExp(`^byte ${spans[3]![0]}: no intact block header where block 3 should start \\(block header checksum mismatch .*\\); skipped ${spans[4]![0] - spans[3]![0]} bytes to the next intact block at byte ${spans[4]![0]}$`),
      ),
    ]);
  });

  it('in the header: a clear CaptureError', () => {
    const damaged = big.bytes.slice();
    damaged[20]! ^= 1;
    expect(() => readCaptureBytes(damaged, 'h.pyuw')).toThrow(/^h\.pyuw: header checksum mismatch at byte \d+ \(stored 0x[0-9a-f]{8}, computed 0x[0-9a-f]{8}\): the header is damaged$/);
  });
});

describe('garbage', () => {
  it('random bytes: a CaptureError naming the file and its first bytes', () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 1, maxLength: 3000 }), (bytes) => {
        const got = readAllOf(bytes);
        // the first byte decides: nothing but our magic starts with 0x89 0x50
        if (bytes[0] !== 0x89) expect(got.error?.message).toMatch(/^damaged\.pyuw is not a pyunwind capture \(starts with [0-9a-f]{2}/);
      }),
      { numRuns: 500 },
    );
  });

  it('a valid header followed by garbage: warnings, never an exception', () => {
    const head = big.bytes.subarray(0, big.dataStart);
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 4000 }), (tail) => {
        const bytes = new Uint8Array(head.length + tail.length);
        bytes.set(head);
        bytes.set(tail, head.length);
        const { reader, blocks } = readAllOf(bytes);
        expect(blocks).toEqual([]);
        if (tail.length) expect(reader!.warnings.length).toBeGreaterThan(0);
      }),
      { numRuns: 300 },
    );
  });

  it('garbage with real blocks spliced in: every real block is found', () => {
    const { bytes, spans, blocks, dataStart } = big;
    fc.assert(
      fc.property(fc.array(fc.uint8Array({ maxLength: 300 }), { minLength: spans.length, maxLength: spans.length }), (junk) => {
        const parts: Uint8Array[] = [bytes.subarray(0, dataStart)];
        spans.forEach(([s, e], i) => parts.push(junk[i]!, bytes.subarray(s, e)));
        const total = parts.reduce((n, p) => n + p.length, 0);
        const out = new Uint8Array(total);
        let off = 0;
        for (const p of parts) out.set(p, off), (off += p.length);
        const { reader, blocks: got } = readAllOf(out);
        expect(canonNoOffsets(got)).toBe(canonNoOffsets(blocks));
        expect(reader!.warnings.length).toBe(junk.filter((j) => j.length > 0).length);
        expect(reader!.closedCleanly).toBe(true);
      }),
      { numRuns: 200 },
    );
  });

  it('blocks with intact headers and garbage payloads (checksums valid): warnings, never an exception', () => {
    const head = big.bytes.subarray(0, big.dataStart);
    const payload = fc.oneof(
      fc.uint8Array({ maxLength: 2000 }),
      // plausible starts: a missed count, then records of known types with random bodies
      fc.array(fc.record({ type: fc.constantFrom(RECORD_TYPE.CODE, RECORD_TYPE.SAMPLE, RECORD_TYPE.THREAD_NAME, 9), body: fc.uint8Array({ maxLength: 200 }) }), { maxLength: 20 }).map((recs) => {
        const w = new ByteWriter();
        w.uint(0);
        for (const r of recs) w.u8(r.type), w.uint(r.body.length), w.bytes(r.body);
        return w.view().slice();
      }),
    );
    fc.assert(
      fc.property(fc.array(fc.record({ raw: payload, level: fc.constantFrom(0, 1, 6), type: fc.constantFrom(BLOCK_TYPE.RECORDS, BLOCK_TYPE.END, 7) }), { maxLength: 6 }), (list) => {
        const parts = [head, ...list.map((b, i) => encodeBlock(b.type, i, b.raw, b.level))];
        const bytes = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
        let off = 0;
        for (const p of parts) bytes.set(p, off), (off += p.length);
        readAllOf(bytes);
      }),
      { numRuns: 500 },
    );
  });

  it('mutated real payloads (checksums valid): decodeBlock warns and keeps the rest, never throws', () => {
    // uncompressed blocks: their stored bytes are the raw payload, which the test mutates
    const plain = build(300, 3000, 0);
    const raws = plain.spans.slice(0, -1).map(([s, e], i) => ({ index: i, stored: plain.bytes.slice(s + BLOCK_HEADER_SIZE, e) }));
    fc.assert(
      fc.property(
        fc.nat({ max: raws.length - 1 }),
        fc.array(fc.record({ at: fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), op: fc.constantFrom('flip', 'cut', 'insert', 'delete'), v: fc.integer({ min: 0, max: 255 }) }), { minLength: 1, maxLength: 4 }),
        (k, edits) => {
          let p = raws[k]!.stored;
          for (const { at, op, v } of edits) {
            const i = Math.floor(at * p.length);
            if (op === 'flip') (p = p.slice())[i]! ^= v || 1;
            else if (op === 'cut') p = p.subarray(0, i);
            else if (op === 'insert') p = Uint8Array.from([...p.subarray(0, i), v, ...p.subarray(i)]);
            else p = Uint8Array.from([...p.subarray(0, i), ...p.subarray(i + 1)]);
          }
          const { block, warnings } = decodeBlock({ type: BLOCK_TYPE.RECORDS, index: k, offset: 1234, compression: COMPRESSION.NONE, flags: 0, rawLength: p.length, stored: p });
          for (const w of warnings) expect(w.message).toMatch(/^block \d+ at byte 1234: /);
          if (block) expect(block.samples.length).toBeLessThanOrEqual(plain.blocks[k]!.samples.length + 50);
        },
      ),
      { numRuns: 1000 },
    );
  });

  it('a deflate bomb stops at the announced length instead of inflating on', () => {
    const raw = new Uint8Array(32 << 20); // 32 MiB of zeros deflate to ~32 KiB
    const block = encodeBlock(BLOCK_TYPE.RECORDS, 0, raw, 9);
    // the block header claims 1 KiB: the inflater must stop soon after 1 KiB, not make 32 MiB
    const view = new DataView(block.buffer, block.byteOffset);
    view.setUint32(16, 1024, true);
    const stored = block.subarray(BLOCK_HEADER_SIZE);
    const t0 = performance.now();
    const { block: got, warnings } = decodeBlock({ type: BLOCK_TYPE.RECORDS, index: 0, offset: 99, compression: COMPRESSION.DEFLATE, flags: 0, rawLength: 1024, stored });
    const ms = performance.now() - t0;
    expect(got).toBeNull();
    expect(warnings[0]!.message).toMatch(/^block 0 at byte 99: cannot be decompressed \(inflates to more than the 1024 bytes the block header announces\); block skipped$/);
    expect(ms).toBeLessThan(2000);
  });

  it('a crafted block header announcing a huge block is skipped without reading it', () => {
    const head = big.bytes.subarray(0, big.dataStart);
    const lie = blockWithHeader({ type: BLOCK_TYPE.RECORDS, compression: 1, seq: 0, flags: 0, storedLength: 0xffff_fff0, rawLength: 0xffff_fff0, payloadCrc: crc32(new Uint8Array(0)) }, new Uint8Array(0));
    const bytes = new Uint8Array(head.length + lie.length);
    bytes.set(head);
    bytes.set(lie, head.length);
    const { reader, blocks } = readAllOf(bytes);
    expect(blocks).toEqual([]);
    expect(reader!.warnings.map((w) => w.message)).toEqual([expect.stringMatching(/^block 0 at byte \d+: stored length 4294967280 passes the end of the file/)]);
  });
});

describe('a malformed sample inside an intact block', () => {
  const [a1, b1, a2, b2, a3] = samples(5).map((s, i) => ({ ...s, threadStateAddress: i % 2 === 0 ? 0xaan : 0xbbn }));
  /** A block payload of the given sample records (a Uint8Array: a raw record body, as malformed as wanted). */
  function payload(records: Array<{ rec: SampleRecord; enc: SampleEncoder } | Uint8Array>): Uint8Array {
    const w = new ByteWriter();
    w.uint(0);
    for (const r of records) {
      const body = new ByteWriter();
      if (r instanceof Uint8Array) body.bytes(r);
      else r.enc.encode(body, r.rec), r.enc.commit(r.rec);
      w.u8(RECORD_TYPE.SAMPLE), w.uint(body.length), w.bytes(body.view());
    }
    return w.view().slice();
  }
  const decode = (p: Uint8Array) => decodeBlock({ type: BLOCK_TYPE.RECORDS, index: 0, offset: 500, compression: COMPRESSION.NONE, flags: 0, rawLength: p.length, stored: p });

  it("costs its thread's later patches, not other threads' samples; a whole sample starts the thread again", () => {
    const enc = new SampleEncoder();
    // thread 0xaa's second sample is unreadable (an unknown form), its third a patch against it
    const p = payload([{ rec: a1!, enc }, { rec: b1!, enc }, Uint8Array.of(0xaa, 0x01, 7), { rec: a2!, enc }, { rec: b2!, enc }, { rec: a3!, enc: new SampleEncoder() }]);
    const { block, warnings } = decode(p);
    expect(block!.samples.map((s) => s.time)).toEqual([a1!.time, b1!.time, b2!.time, a3!.time]);
    expect(warnings.map((w) => w.message)).toEqual([
      expect.stringMatching(/^block 0 at byte 500: sample record at payload byte \d+: unknown sample form 7 \(at payload byte \d+\); 2 records skipped in all$/),
    ]);
  });

  it('whose thread cannot be read costs every later patch of the block', () => {
    const enc = new SampleEncoder();
    const p = payload([{ rec: a1!, enc }, { rec: b1!, enc }, new Uint8Array(0), { rec: a2!, enc }, { rec: b2!, enc }]);
    const { block, warnings } = decode(p);
    expect(block!.samples.map((s) => s.time)).toEqual([a1!.time, b1!.time]);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]!.message).toMatch(/3 records skipped in all$/);
  });
});

describe('streaming', () => {
  it('reads a block at a time: no read is larger than the largest block', () => {
    const { bytes, spans } = big;
    const largest = Math.max(...spans.map(([s, e]) => e - s));
    let maxRead = 0;
    let total = 0;
    const reader = new CaptureReader(
      {
        size: bytes.length,
        read(offset, length) {
          maxRead = Math.max(maxRead, length);
          total += length;
          return bytes.slice(offset, offset + length);
        },
      },
      'counted.pyuw',
    );
    let n = 0;
    for (const b of reader.blocks()) n += b.samples.length;
    expect(n).toBe(600);
    expect(maxRead).toBeLessThanOrEqual(Math.max(largest, 4096));
    // the header, one tail read for the end marker, each block once (header + payload)
    expect(total).toBeLessThan(bytes.length * 1.2 + 4096);
  });
});
