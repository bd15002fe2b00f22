// Native stacks in a capture (format 1.5): the header's `native`, each sample's registers (in
// record blocks and section blocks, present or not), native object records (a libpython-sized
// unwind table and symbols) and the rule that a later object replaces an overlapping one — all
// read back exactly; a hostile record or registers section gives a warning naming it, never a
// crash or a hang, and keeps the samples; a capture without native data is written as 1.4 was.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BLOCK_FLAG, BLOCK_TYPE, ByteReader, ByteWriter, COMPRESSION, DecodeError, FILE_MAGIC, RECORD_TYPE, crc32, encodeBlock, encodeHeader, encodeTrailer } from '../src/capture/format.js';
import { SECTION_COUNT, SEC_RECORDS, SEC_REGISTERS, SECTIONS_KNOWN } from '../src/capture/codes.js';
import { decodeBlock, readCaptureBytes } from '../src/capture/reader.js';
import { packSections, sectionViews, unpackSections } from '../src/capture/section-block.js';
import { MAX_NATIVE_ROWS, MAX_NATIVE_SYMBOLS, MAX_SYMBOL_BYTES, NativeBudget, readNativeObjectRecord, replaceObjects, writeNativeObjectRecord } from '../src/capture/native-object-record.js';
import { SampleEncoder } from '../src/capture/patch.js';
import { CaptureError, CaptureWriter, memorySink, type CaptureHeader, type SampleRecord } from '../src/capture/index.js';
import type { NativeObject } from '../src/native/objects.js';
import type { NativeRegisters } from '../src/native/unwind.js';
import { RA_UNDEFINED, ROW_FIELDS } from '../src/native/unwind-table.js';
import { HEADER, evolvingSamples, expectSameSamples, readAll, stackSamples, writeAll } from './helpers/capture-samples.js';
import { rng } from './helpers/rng.js';

const U64_MAX = (1n << 64n) - 1n;
const NATIVE: CaptureHeader = { ...HEADER, native: { stackBytes: 256 << 10 } };
const KINDS = ['sections', 'records'] as const;

/** A table of `rows` rows and `count` symbols, random but shaped like an object's (names long, prefixes shared). */
function nativeObject(seed: number, rows: number, count: number, start = 0x7f00_1234_0000n, extent = 0x40_0000n): NativeObject {
  const rand = rng(seed);
  const starts = new BigUint64Array(rows);
  const rules = new Int32Array(rows * ROW_FIELDS);
  let at = BigInt((rand() * 0x1000) | 0);
  for (let i = 0; i < rows; i++) {
    // (gaps of 0 too: rows may share a start)
    at += BigInt(rand() < 0.05 ? 0 : 1 + ((rand() * 200) | 0));
    starts[i] = at;
    const o = i * ROW_FIELDS;
    rules[o] = (rand() * 5) | 0;
    rules[o + 1] = rand() < 0.02 ? (rand() < 0.5 ? -0x8000_0000 : 0x7fff_ffff) : 8 * ((rand() * 20) | 0);
    rules[o + 2] = (rand() * 3) | 0;
    rules[o + 3] = -8 * ((rand() * 8) | 0);
    rules[o + 4] = rand() < 0.01 ? RA_UNDEFINED : -8;
  }
  const prefixes = ['_ZN7cpython4eval', '_PyEval_', 'PyObject_', '_ZNSt6vectorIiSaIiEE', 'PyUnicode_', '_ZN5boost6detail'];
  const symStarts = new BigUint64Array(count);
  const sizes = new Uint32Array(count);
  const names: string[] = [];
  at = 0n;
  for (let i = 0; i < count; i++) {
    at += BigInt(rand() < 0.03 ? 0 : (rand() * 600) | 0);
    symStarts[i] = at;
    sizes[i] = rand() < 0.05 ? (rand() < 0.5 ? 0 : 0xffff_ffff) : (rand() * 2000) | 0;
    const p = prefixes[(rand() * prefixes.length) | 0]!;
    names.push(rand() < 0.01 ? '' : rand() < 0.01 ? `fonction_ñ_线程_${i}` : `${p}${Array.from({ length: 1 + ((rand() * 40) | 0) }, () => String.fromCharCode(97 + ((rand() * 26) | 0))).join('')}E${i}`);
  }
  return { start, end: start + extent, bias: start - 0x1000n, path: `/usr/lib/x86_64-linux-gnu/libpython3.15.so.1.0#${seed}`, buildId: seed % 3 === 0 ? null : 'a1b2c3d4e5f60718293a4b5c6d7e8f9001122334', table: { starts, rules }, symbols: { starts: symStarts, sizes, names } };
}

function expectSameObject(got: NativeObject, want: NativeObject): void {
  expect({ start: got.start, end: got.end, bias: got.bias, path: got.path, buildId: got.buildId }).toEqual({ start: want.start, end: want.end, bias: want.bias, path: want.path, buildId: want.buildId });
  // (typed arrays compared as buffers: vitest walks them element by element, slowly)
  expect(Buffer.from(got.table.starts.buffer).equals(Buffer.from(want.table.starts.buffer))).toBe(true);
  expect(Buffer.from(got.table.rules.buffer).equals(Buffer.from(want.table.rules.buffer))).toBe(true);
  expect(Buffer.from(got.symbols.starts.buffer).equals(Buffer.from(want.symbols.starts.buffer))).toBe(true);
  expect(Buffer.from(got.symbols.sizes.buffer).equals(Buffer.from(want.symbols.sizes.buffer))).toBe(true);
  expect(got.symbols.names).toEqual(want.symbols.names);
}

/** The samples with registers added to some (rsp in a native stack region added to them; rip and rbp moving). */
function withRegisters(samples: SampleRecord[], seed: number, share = 0.7): SampleRecord[] {
  const rand = rng(seed);
  const stacks = new Map<bigint, { rsp: bigint; bytes: Uint8Array }>();
  return samples.map((s) => {
    if (rand() >= share) return s;
    let st = stacks.get(s.threadStateAddress);
    if (!st) {
      st = { rsp: 0x7ffd_0000_0000n + BigInt(stacks.size) * 0x100_0000n, bytes: Uint8Array.from({ length: 6000 }, () => (rand() * 256) | 0) };
      stacks.set(s.threadStateAddress, st);
    }
    // the stack: a few words change; sometimes rsp moves (the region with it)
    const bytes = st.bytes.slice();
    for (let k = (rand() * 8) | 0; k > 0; k--) bytes[(rand() * bytes.length) | 0] = (rand() * 256) | 0;
    st.bytes = bytes;
    if (rand() < 0.2) st.rsp -= BigInt(16 * ((rand() * 20) | 0) - 160);
    const pick = rand();
    const registers: NativeRegisters =
      pick < 0.05 ? { rip: U64_MAX, rsp: st.rsp, rbp: 0n } : pick < 0.1 ? { rip: 0n, rsp: st.rsp, rbp: U64_MAX } : { rip: 0x5555_5555_0000n + BigInt((rand() * 0x10_0000) | 0), rsp: st.rsp, rbp: st.rsp + BigInt((rand() * 4000) | 0) };
    return { ...s, registers, regions: [...s.regions, { address: st.rsp, bytes }] };
  });
}

function expectSameRegisters(got: SampleRecord[], want: SampleRecord[]): void {
  expect(got.map((s) => s.registers ?? null)).toEqual(want.map((s) => s.registers ?? null));
}

describe('the header: native', () => {
  it('round trips, and makes the file 1.5; a capture without it is written as 1.4', () => {
    const { bytes } = writeAll(NATIVE, []);
    const { reader } = readAll(bytes);
    expect(reader.header.native).toEqual({ stackBytes: 256 << 10 });
    expect(reader.header).toEqual(NATIVE);
    expect(reader.formatVersion).toEqual({ major: 1, minor: 5 });
    const plain = readAll(writeAll(HEADER, []).bytes).reader;
    expect(plain.formatVersion).toEqual({ major: 1, minor: 4 });
    expect(plain.header.native).toBeUndefined();
  });

  it('is refused when it is not {stackBytes: n}, by the writer and by the reader', () => {
    expect(() => new CaptureWriter(memorySink(), { ...HEADER, native: { stackBytes: -1 } })).toThrow(/native.stackBytes/);
    expect(() => new CaptureWriter(memorySink(), { ...HEADER, native: null as never })).toThrow(/native/);
    // a header whose JSON says so, checksummed
    const { layoutSource: _, runtimeAddress, ...rest } = NATIVE;
    const json = { ...rest, layoutSource: { kind: 'builtin', id: 'b', versionHex: 1 }, runtimeAddress: `0x${runtimeAddress.toString(16)}`, native: { stackBytes: 'big' } };
    const body = new ByteWriter();
    body.string(JSON.stringify(json));
    body.uint(0);
    const w = new ByteWriter();
    w.bytes(FILE_MAGIC);
    w.u8(1), w.u8(0), w.u8(5), w.u8(0);
    w.u32(body.length);
    w.bytes(body.view());
    w.u32(crc32(w.view().subarray(8)));
    expect(() => readCaptureBytes(w.view(), 'bad.pyuw')).toThrow(CaptureError);
    expect(() => readCaptureBytes(w.view(), 'bad.pyuw')).toThrow(/header field "native"/);
  });

  it('is needed for registers and object records (the file would not say 1.5 otherwise)', () => {
    const writer = new CaptureWriter(memorySink(), HEADER);
    const [s] = withRegisters(evolvingSamples(1, 1, 1), 1, 1);
    expect(() => writer.addSample(s!)).toThrow(/native/);
    expect(() => writer.addObject(nativeObject(1, 10, 10))).toThrow(/native/);
  });
});

describe('registers', () => {
  it('round trip, present or not, in both block kinds, any block size (property)', () => {
    fc.assert(
      fc.property(
        fc.record({ seed: fc.nat(), threads: fc.integer({ min: 1, max: 4 }), count: fc.integer({ min: 1, max: 120 }), share: fc.constantFrom(0, 0.5, 1), blockBytes: fc.integer({ min: 1, max: 40_000 }), blocks: fc.constantFrom(...KINDS), stacks: fc.boolean() }),
        ({ seed, threads, count, share, blockBytes, blocks, stacks }) => {
          const base = stacks ? stackSamples(seed, threads, count, 8, 9) : evolvingSamples(seed, threads, count, 300);
          const samples = withRegisters(base, seed + 1, share);
          const got = readAll(writeAll(NATIVE, samples.map((sample) => ({ sample })), { blocks, blockBytes }).bytes);
          expect(got.reader.warnings).toEqual([]);
          expectSameSamples(got.samples, samples);
          expectSameRegisters(got.samples, samples);
        },
      ),
      { numRuns: 120 },
    );
  });

  it('a section block lists section 25 only when a sample of it has registers', () => {
    const samples = withRegisters(evolvingSamples(3, 2, 40), 4, 1);
    const plain = samples.map(({ registers: _, ...s }) => s);
    const ops = [...plain.slice(0, 20).map((sample) => ({ sample })), 'flush' as const, ...samples.slice(20).map((sample) => ({ sample }))];
    const { bytes } = writeAll(NATIVE, ops);
    const counts = [...readCaptureBytes(bytes).rawBlocks()].map((raw) => sectionViews(unpackSections(raw.stored, raw.rawLength)).length);
    expect(counts).toEqual([SECTION_COUNT, SECTIONS_KNOWN]);
    const got = readAll(bytes);
    expectSameRegisters(got.samples, [...plain.slice(0, 20), ...samples.slice(20)]);
  });

  it('cost a few bytes a sample: a thread that waits, ~0; one that runs, its rip', () => {
    const rand = rng(9);
    const make = (moving: boolean) =>
      Array.from({ length: 2000 }, (_, i): SampleRecord => ({
        time: i * 100,
        interpreterId: 0n,
        threadStateAddress: 0x1000n,
        threadId: 1n,
        nativeThreadId: 2n,
        flags: 0,
        recorderStatus: 'ok',
        copyMicros: 1,
        regions: [],
        errors: [],
        registers: moving ? { rip: 0x7f12_0000_0000n + BigInt((rand() * 0x20_0000) | 0), rsp: 0x7ffd_1000_0000n - BigInt(16 * ((rand() * 64) | 0)), rbp: 0x7ffd_1000_0100n } : { rip: 0x7f12_0000_1234n, rsp: 0x7ffd_1000_0000n, rbp: 0x7ffd_1000_0100n },
      }));
    const size = (samples: SampleRecord[]) => writeAll(NATIVE, samples.map((sample) => ({ sample }))).bytes.length;
    const none = size(make(false).map(({ registers: _, ...s }) => s));
    const waiting = (size(make(false)) - none) / 2000;
    const running = (size(make(true)) - none) / 2000;
    console.log(`registers: ${waiting.toFixed(2)} B a sample of a waiting thread, ${running.toFixed(2)} B of a running one (section blocks, deflated)`);
    expect(waiting).toBeLessThan(0.2);
    expect(running).toBeLessThan(6);
  });
});

describe('native object records', () => {
  const big = nativeObject(7, 50_000, 15_000);

  it.each(KINDS)('round trip a libpython-sized object in %s blocks, in the block it was given to, before its samples', (blocks) => {
    const samples = withRegisters(evolvingSamples(5, 2, 30), 6);
    const small = nativeObject(8, 3, 2, 0x5555_0000_0000n, 0x1000n);
    const empty: NativeObject = { ...nativeObject(9, 0, 0, 0x6000n, 1n), bias: -(1n << 63n) };
    const sink = memorySink();
    const writer = new CaptureWriter(sink, NATIVE, { blocks });
    writer.addSample(samples[0]!);
    writer.addObject(small);
    writer.addObject(empty);
    for (const s of samples.slice(1, 10)) writer.addSample(s);
    writer.flush();
    writer.addObject(big);
    for (const s of samples.slice(10)) writer.addSample(s);
    writer.close();
    expect(writer.objectsWritten).toBe(3);
    const { reader, blocks: read, samples: got } = readAll(sink.bytes());
    expect(reader.warnings).toEqual([]);
    expect(read[0]!.objects).toHaveLength(2);
    expectSameObject(read[0]!.objects[0]!, small);
    expectSameObject(read[0]!.objects[1]!, empty);
    const withBig = read.find((b) => b.objects.length > 0 && b !== read[0])!;
    expect(withBig.objects).toHaveLength(1);
    expectSameObject(withBig.objects[0]!, big);
    expect(read.flatMap((b) => b.objects)).toHaveLength(3);
    expectSameSamples(got, samples);
    expectSameRegisters(got, samples);
    // a block with an object is not one a reader may pass over for its codes
    for (const raw of readCaptureBytes(sink.bytes()).rawBlocks()) {
      const { block } = decodeBlock(raw);
      expect((raw.flags & BLOCK_FLAG.NO_CODES) !== 0).toBe(block!.objects.length === 0 && block!.codes.length === 0);
    }
  });

  it('a libpython-sized object: its size, and a block that holds it ends soon after', () => {
    const w = new ByteWriter();
    writeNativeObjectRecord(w, big);
    const raw = w.length;
    const { bytes, writer } = (() => {
      const sink = memorySink();
      const writer = new CaptureWriter(sink, NATIVE);
      writer.addObject(big);
      writer.close();
      return { bytes: sink.bytes(), writer };
    })();
    expect(writer.blocksWritten).toBe(1);
    console.log(`native object of 50,000 random rows and 15,000 symbols: ${raw} B raw, ${bytes.length} B in a file`);
    expect(raw).toBeLessThan(1 << 20);
    expect(bytes.length).toBeLessThan(raw);
    expectSameObject(readNativeObjectRecord(new ByteReader(w.view())), big);
  });

  it('a later object replaces every earlier one it overlaps; the writer ends a block with samples before it', () => {
    const a = nativeObject(1, 5, 5, 0x1000n, 0x1000n);
    const b = nativeObject(2, 5, 5, 0x3000n, 0x1000n);
    const c = nativeObject(3, 5, 5, 0x1800n, 0x2000n); // overlaps both
    const d = nativeObject(4, 5, 5, 0x4000n, 0x1000n); // touches b's end, overlaps nothing
    expect(replaceObjects(replaceObjects([a, b], c), d).map((o) => o.start)).toEqual([0x1800n, 0x4000n]);
    expect(replaceObjects([d, a], b).map((o) => o.start)).toEqual([0x1000n, 0x3000n, 0x4000n]);
    const samples = evolvingSamples(2, 1, 4);
    const sink = memorySink();
    const writer = new CaptureWriter(sink, NATIVE);
    writer.addObject(a);
    writer.addObject(b);
    writer.addSample(samples[0]!);
    writer.addObject(d); // no overlap: the same block
    writer.addSample(samples[1]!);
    writer.addObject(c); // replaces a and b: a new block
    writer.addSample(samples[2]!);
    writer.close();
    const { blocks } = readAll(sink.bytes());
    expect(blocks.map((bl) => [bl.objects.map((o) => o.start), bl.samples.length])).toEqual([
      [[0x1000n, 0x3000n, 0x4000n], 2],
      [[0x1800n], 1],
    ]);
    let inForce: NativeObject[] = [];
    for (const bl of blocks) for (const o of bl.objects) inForce = replaceObjects(inForce, o);
    expect(inForce.map((o) => o.start)).toEqual([0x1800n, 0x4000n]);
  });

  it('refuses an object the format cannot hold', () => {
    const writer = new CaptureWriter(memorySink(), NATIVE);
    const o = nativeObject(1, 4, 3);
    expect(() => writer.addObject({ ...o, end: o.start })).toThrow(/not past start/);
    expect(() => writer.addObject({ ...o, bias: 1n << 63n })).toThrow(/bias/);
    expect(() => writer.addObject({ ...o, table: { starts: o.table.starts, rules: new Int32Array(3) } })).toThrow(/rule fields/);
    expect(() => writer.addObject({ ...o, table: { starts: BigUint64Array.of(5n, 4n), rules: new Int32Array(10) } })).toThrow(/sorted/);
    expect(() => writer.addObject({ ...o, symbols: { ...o.symbols, names: ['a'] } })).toThrow(/names/);
    expect(() => writer.addObject({ ...o, symbols: { starts: BigUint64Array.of(1n), sizes: Uint32Array.of(1), names: ['x'.repeat(70_000)] } })).toThrow(/bytes/);
    expect(() => writer.addObject({ ...o, buildId: 7 as never })).toThrow(/buildId/);
  });
});

describe('hostile native data', () => {
  const object = nativeObject(11, 300, 200);
  const body = (() => {
    const w = new ByteWriter();
    writeNativeObjectRecord(w, object);
    return w.view().slice();
  })();
  const samples = withRegisters(evolvingSamples(12, 2, 20), 13, 1);

  /** A 1.5 file of one record block: the samples' records around an object record of these body bytes. */
  function recordFile(objectBody: Uint8Array, sampleTail?: (i: number) => Uint8Array | null): Uint8Array {
    const raw = new ByteWriter();
    raw.uint(0);
    raw.u8(RECORD_TYPE.NATIVE_OBJECT), raw.uint(objectBody.length), raw.bytes(objectBody);
    const enc = new SampleEncoder();
    samples.forEach((s, i) => {
      const b = new ByteWriter();
      enc.encode(b, s);
      enc.commit(s);
      let v = b.view();
      const tail = sampleTail?.(i);
      if (tail) v = Uint8Array.from([...v, ...tail]);
      raw.u8(RECORD_TYPE.SAMPLE), raw.uint(v.length), raw.bytes(v);
    });
    const w = new ByteWriter();
    w.bytes(encodeHeader(NATIVE));
    w.bytes(encodeBlock(BLOCK_TYPE.RECORDS, 0, raw.view()));
    w.bytes(encodeBlock(BLOCK_TYPE.END, 1, encodeTrailer({ blocks: 1, samples: samples.length, codes: 0, missed: 0 }), 0));
    return w.view().slice();
  }

  it('an object record cut short, or with absurd counts, is skipped with a warning naming it; the samples are kept', () => {
    const rowsAt = (() => {
      const r = new ByteReader(body);
      r.big('s'), r.big('e'), r.big('b'), r.string('p');
      if (r.u8('id')) r.string('id');
      return r.pos;
    })();
    const absurd = (count: number) => {
      const w = new ByteWriter();
      w.bytes(body.subarray(0, rowsAt));
      w.uint(count);
      w.bytes(body.subarray(rowsAt + 2));
      return w.view().slice();
    };
    for (const [what, bad] of [
      ['cut', body.subarray(0, body.length >> 1)],
      ['cut inside a varint', body.subarray(0, 3)],
      ['absurd rows', absurd(2 ** 40)],
      ['more rows than the limit', absurd(MAX_NATIVE_ROWS + 1)],
      ['end before start', Uint8Array.of(5, 4, 0)],
    ] as const) {
      const reader = readCaptureBytes(recordFile(bad), `${what}.pyuw`);
      const blocks = [...reader.blocks()];
      expect(blocks[0]!.objects, what).toEqual([]);
      expectSameSamples(blocks[0]!.samples, samples);
      expectSameRegisters(blocks[0]!.samples, samples);
      expect(reader.warnings.map((x) => x.message), what).toEqual([expect.stringMatching(/^block 0 at byte \d+: native object record at payload byte 1: .* \(at payload byte \d+\); record skipped$/)]);
    }
  });

  it('the same in a section block\'s records section', () => {
    const { bytes } = writeAll(NATIVE, samples.map((sample) => ({ sample })));
    const raw = [...readCaptureBytes(bytes).rawBlocks()][0]!;
    const views = sectionViews(unpackSections(raw.stored, raw.rawLength));
    const records = new ByteWriter();
    records.bytes(views[SEC_RECORDS]!);
    records.u8(RECORD_TYPE.NATIVE_OBJECT), records.uint(body.length - 7), records.bytes(body.subarray(0, body.length - 7));
    const { stored, rawLength } = packSections(views.map((v, k) => (k === SEC_RECORDS ? records.view() : v)), 6);
    const { block, warnings } = decodeBlock({ ...raw, stored, rawLength });
    expect(block!.objects).toEqual([]);
    expectSameSamples(block!.samples, samples);
    expect(warnings.map((x) => x.message)).toEqual([expect.stringMatching(/native object record at records section byte \d+: .*symbol name/)]);
  });

  it('a block\'s object records share one budget of rows, symbols and name bytes', () => {
    for (const [what, fill] of [
      ['unwind rows', (b: NativeBudget) => (b.rows = MAX_NATIVE_ROWS - 10)],
      ['symbols', (b: NativeBudget) => (b.symbols = MAX_NATIVE_SYMBOLS - 10)],
      ['bytes of symbol names', (b: NativeBudget) => (b.nameBytes = MAX_SYMBOL_BYTES - 10)],
    ] as const) {
      const budget = new NativeBudget();
      fill(budget);
      expect(budget.fits(object), what).toBe(false);
      expect(() => readNativeObjectRecord(new ByteReader(body), budget)).toThrow(new RegExp(`more than \\d+ ${what}`));
    }
    const budget = new NativeBudget();
    expect(budget.fits(object)).toBe(true);
    expectSameObject(readNativeObjectRecord(new ByteReader(body), budget), object);
    expect(budget.rows).toBe(300);
  });

  it('any bytes as an object record: a DecodeError or an object, quickly (property)', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.nat(), fc.nat({ max: 255 })), { minLength: 1, maxLength: 12 }), fc.nat(), (edits, cut) => {
        const b = body.slice(0, body.length - (cut % 40));
        for (const [at, v] of edits) b[at % b.length] = v;
        const t = performance.now();
        try {
          readNativeObjectRecord(new ByteReader(b));
        } catch (e) {
          if (!(e instanceof DecodeError)) throw e;
        }
        expect(performance.now() - t).toBeLessThan(500);
      }),
      { numRuns: 300 },
    );
  });

  it('registers in a record body: cut short, the sample is skipped and said so; an unknown marker is a later version\'s (ignored)', () => {
    // (a tail after a sample's registers is a later version's: ignored)
    const tailed = readCaptureBytes(recordFile(body, () => Uint8Array.of(0x80, 7)), 'tailed.pyuw');
    expectSameRegisters([...tailed.blocks()][0]!.samples, samples);
    expect(tailed.warnings).toEqual([]);
    const plain = samples.map(({ registers: _, ...s }) => s);
    /** the samples, each body followed by `tail(i)` */
    const block = (tail: (i: number) => number[]) => {
      const enc = new SampleEncoder();
      const raw = new ByteWriter();
      raw.uint(0);
      plain.forEach((s, i) => {
        const b = new ByteWriter();
        enc.encode(b, s);
        enc.commit(s);
        b.bytes(Uint8Array.from(tail(i)));
        raw.u8(RECORD_TYPE.SAMPLE), raw.uint(b.length), raw.bytes(b.view());
      });
      return decodeBlock({ type: BLOCK_TYPE.RECORDS, index: 0, offset: 9, compression: COMPRESSION.NONE, flags: 0, rawLength: raw.length, stored: raw.view() });
    };
    // marker 9: a later version's fields, not registers
    const later = block(() => [9, 1, 2, 3]);
    expect(later.warnings).toEqual([]);
    expectSameSamples(later.block!.samples, plain);
    expect(later.block!.samples.every((s) => s.registers === undefined)).toBe(true);
    // the last sample's registers cut inside rip: it is skipped, and said so
    const last = plain.length - 1;
    const cut = block((i) => (i === last ? [1, 0x80] : []));
    expect(cut.warnings.map((x) => x.message)).toEqual([expect.stringMatching(/^block 0 at byte 9: sample record at payload byte \d+: rip: the data ends inside a varint .*; record skipped$/)]);
    expectSameSamples(cut.block!.samples, plain.slice(0, last));
  });

  it('a damaged registers section costs the registers from there on, not the samples, with a warning', () => {
    const { bytes } = writeAll(NATIVE, samples.map((sample) => ({ sample })));
    const raw = [...readCaptureBytes(bytes).rawBlocks()][0]!;
    const views = sectionViews(unpackSections(raw.stored, raw.rawLength));
    expect(views).toHaveLength(SECTIONS_KNOWN);
    const clean = decodeBlock(raw).block!;
    const variants: [string, Uint8Array, RegExp][] = [
      ['cut short', views[SEC_REGISTERS]!.subarray(0, 40), /sample \d+ \(registers section, byte \d+\): .*; the block's samples from there on have no registers/],
      ['an unknown tag', Uint8Array.from(views[SEC_REGISTERS]!, (v, i) => (i === 0 ? 7 : v)), /sample 0 \(registers section, byte 0\): unknown registers tag 7/],
      ['bytes left over', Uint8Array.from([...views[SEC_REGISTERS]!, 0, 0]), /2 bytes left in the registers section after the block's samples/],
    ];
    for (const [what, section, message] of variants) {
      const { stored, rawLength } = packSections(views.map((v, k) => (k === SEC_REGISTERS ? section : v)), 0);
      const { block, warnings } = decodeBlock({ ...raw, stored, rawLength });
      expect(warnings.map((x) => x.message), what).toEqual([expect.stringMatching(message)]);
      expectSameSamples(block!.samples, clean.samples);
      // the registers read before the damage are the right ones; none after
      const got = block!.samples.map((s) => s.registers ?? null);
      const first = got.indexOf(null);
      const upTo = first < 0 ? got.length : first;
      expect(got.slice(0, upTo)).toEqual(clean.samples.slice(0, upTo).map((s) => s.registers));
      expect(got.slice(upTo).every((r) => r === null)).toBe(true);
    }
  });
});

describe('the native stack region', () => {
  /** A thread's samples with a native stack of `n` bytes that changes a few words a sample; `moves`: rsp (its start) moves by up to ±256 B. */
  function stackRun(n: number, moves: boolean, count = 400): SampleRecord[] {
    const rand = rng(21);
    let top = 0x7ffd_4000_0000n;
    let rsp = top - BigInt(n);
    // the whole stack, from the lowest address rsp can reach to the top
    const all = Uint8Array.from({ length: n + 4096 }, (_, i) => (i % 8 < 6 ? (rand() * 256) | 0 : 0));
    const base = top - BigInt(all.length);
    return Array.from({ length: count }, (_, i) => {
      for (let k = 0; k < 6; k++) all[all.length - n + ((rand() * 2048) | 0)] = (rand() * 256) | 0;
      if (moves) rsp = top - BigInt(n) - BigInt(16 * ((rand() * 32) | 0) - 256);
      const off = Number(rsp - base);
      return {
        time: i * 100,
        interpreterId: 0n,
        threadStateAddress: 0x1000n,
        threadId: 1n,
        nativeThreadId: 2n,
        flags: 0,
        recorderStatus: 'ok',
        copyMicros: 1,
        regions: [{ address: 0x1000n, bytes: new Uint8Array(64) }, { address: rsp, bytes: all.slice(off) }],
        errors: [],
        registers: { rip: 0x5555_0000_1000n + BigInt(i % 7), rsp, rbp: rsp + 64n },
      };
    });
  }

  it('at the same address it is stored as its changed words; moved, whole (measured)', () => {
    const n = 64 << 10;
    for (const blocks of KINDS) {
      const still = stackRun(n, false);
      const moved = stackRun(n, true);
      const a = writeAll(NATIVE, still.map((sample) => ({ sample })), { blocks }).bytes;
      const b = writeAll(NATIVE, moved.map((sample) => ({ sample })), { blocks }).bytes;
      expectSameSamples(readAll(a).samples, still);
      expectSameSamples(readAll(b).samples, moved);
      console.log(`a ${n >> 10} KiB native stack, ${blocks} blocks: ${(a.length / still.length).toFixed(0)} B a sample at one address, ${(b.length / moved.length).toFixed(0)} B when rsp moves`);
      expect(a.length / still.length).toBeLessThan(2000);
    }
  });

  it('holding an interpreter frame the hint names (an entry frame on the C stack), it is still stored as words, not frames', () => {
    const samples = stackRun(32 << 10, false, 200).map((s, i) => ({ ...s, frames: { addresses: [Number(s.registers!.rsp) + 4096 + (i % 2) * 80], size: 72, wordBytes: 8 as const } }));
    const hinted = writeAll(NATIVE, samples.map((sample) => ({ sample }))).bytes;
    const plain = writeAll(NATIVE, samples.map(({ frames: _, ...sample }) => ({ sample }))).bytes;
    expectSameSamples(readAll(hinted).samples, samples);
    expect(hinted.length).toBe(plain.length);
  });

  it('a waiting thread\'s unchanged stack does not end blocks early (the decoder shares it)', () => {
    const s = stackRun(256 << 10, false, 1)[0]!;
    // (each a fresh copy, as a recorder's)
    const samples = Array.from({ length: 300 }, (_, i) => ({ ...s, time: i * 100, regions: s.regions.map((r) => ({ address: r.address, bytes: r.bytes.slice() })) }));
    const { writer, bytes } = writeAll(NATIVE, samples.map((sample) => ({ sample })), {}, true);
    // 300 × 256 KiB is more than a block's 64 MiB, but the decoder shares the unchanged copies
    expect(writer.blocksWritten).toBe(1);
    const { reader, samples: got } = readAll(bytes);
    expect(reader.warnings).toEqual([]);
    expectSameSamples(got, samples);
  });
});
