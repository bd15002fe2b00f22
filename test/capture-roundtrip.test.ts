// The .pyuw container reads back exactly what was written: the header (both layout kinds,
// bigints up to 2^64 − 1), code records, and samples of many threads whose regions change,
// appear, disappear and change length between samples — through patches, in many blocks.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import {
  CaptureError,
  CaptureWriter,
  fileSink,
  memorySink,
  openCapture,
  readCaptureBytes,
  type CaptureBlock,
  type CaptureHeader,
  type CodeRecord,
  type SampleRecord,
} from '../src/capture/index.js';
import type { ThreadNameRecord } from '../src/capture/types.js';
import { BLOCK_TYPE, ByteWriter, FILE_MAGIC, RECORD_TYPE, crc32, encodeBlock, encodeTrailer, writeCodeRecord } from '../src/capture/format.js';
import { SampleEncoder } from '../src/capture/patch.js';
import { decodeBlock } from '../src/capture/reader.js';
import type { Region } from '../src/walk/types.js';
import { rng } from './helpers/rng.js';
import { HEADER, bigOf, codeRecord, evolvingSamples, expectSameSamples, randomBytes, readAll, sameBytes, stackSamples, unaligned, writeAll } from './helpers/capture-samples.js';

const U64_MAX = (1n << 64n) - 1n;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pyuw-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

describe('header', () => {
  it('reads the copy mode of a file written before 0.2 (its `mode` field) as `copy`, and no sampling mode or facts', () => {
    // the fixtures were recorded by pyunwind 0.1.0: `"mode":"adaptive"` (Pyodide: "signal")
    const dir = path.resolve('test/fixtures/captures');
    for (const [file, copy] of [['threadpool-3.12.pyuw', 'adaptive'], ['hotcold-pyodide-3.15.pyuw', 'signal']] as const) {
      const bytes = fs.readFileSync(path.join(dir, file));
      expect(new TextDecoder().decode(bytes.subarray(0, 4096))).toContain(`"mode":"${copy}"`);
      const h = readCaptureBytes(bytes).header;
      expect({ copy: h.copy, sampling: h.sampling, facts: h.facts }).toEqual({ copy, sampling: undefined, facts: undefined });
    }
  });

  const headers: Array<[string, CaptureHeader]> = [
    ['debug offsets, every optional field', HEADER],
    [
      'builtin layout, no optional field, bigint at 2^64 - 1',
      {
        layoutSource: { kind: 'builtin', id: 'builtin/3.12/wasm32', versionHex: 0x030c07f0 },
        pointerSize: 4,
        pythonVersion: '3.12.7',
        target: 'pyodide',
        runtimeAddress: U64_MAX,
        rateHz: 99.5,
        startTime: 0,
        recorder: 'pyunwind 0.1.0',
      },
    ],
    ['empty debug-offsets bytes, runtime address 0', { ...HEADER, layoutSource: { kind: 'debug-offsets', bytes: new Uint8Array(0) }, runtimeAddress: 0n, command: [] }],
  ];
  it.each(headers)('%s: round trips exactly', (_, header) => {
    const { bytes } = writeAll(header, []);
    const { reader, blocks } = readAll(bytes);
    expect(reader.header).toEqual(header);
    expect(reader.formatVersion).toEqual({ major: 1, minor: 4 });
    expect(blocks).toEqual([]);
    expect(reader.warnings).toEqual([]);
    expect(reader.closedCleanly).toBe(true);
    expect(reader.trailer).toEqual({ blocks: 0, samples: 0, codes: 0, missed: 0 });
  });

  it('round trips any header (property)', () => {
    const header = fc.record(
      {
        layoutSource: fc.oneof(
          fc.record({ kind: fc.constant('debug-offsets' as const), bytes: fc.uint8Array({ maxLength: 1200 }) }),
          fc.record({ kind: fc.constant('builtin' as const), id: fc.string(), versionHex: fc.nat() }),
        ),
        pointerSize: fc.constantFrom(4 as const, 8 as const),
        pythonVersion: fc.string(),
        target: fc.string({ unit: 'binary' }),
        command: fc.array(fc.string({ unit: 'binary' })),
        pid: fc.nat(),
        runtimeAddress: fc.bigInt({ min: 0n, max: U64_MAX }),
        rateHz: fc.double({ noNaN: true, noDefaultInfinity: true }).filter((x) => !Object.is(x, -0)),
        startTime: fc.integer(),
        recorder: fc.string(),
        copy: fc.string(),
        sampling: fc.constantFrom('wall' as const, 'cpu' as const, 'gil' as const, 'exception' as const),
        facts: fc.subarray(['cpu' as const, 'gil' as const, 'exception' as const]),
      },
      { requiredKeys: ['layoutSource', 'pointerSize', 'pythonVersion', 'target', 'runtimeAddress', 'rateHz', 'startTime', 'recorder'] },
    );
    fc.assert(
      fc.property(header, (h) => {
        const { reader } = readAll(writeAll(h, []).bytes);
        expect(reader.header).toEqual(h);
      }),
      { numRuns: 300 },
    );
  });

  it('refuses a header it cannot store faithfully, naming the field', () => {
    expect(() => new CaptureWriter(memorySink(), { ...HEADER, runtimeAddress: -1n })).toThrow(/runtimeAddress/);
    expect(() => new CaptureWriter(memorySink(), { ...HEADER, runtimeAddress: 1n << 64n })).toThrow(/runtimeAddress/);
    expect(() => new CaptureWriter(memorySink(), { ...HEADER, rateHz: NaN })).toThrow(/rateHz/);
    expect(() => new CaptureWriter(memorySink(), { ...HEADER, pointerSize: 2 as 4 })).toThrow(/pointerSize/);
  });
});

describe('blocks', () => {
  it('writes the same file whether it keeps immutable samples or copies them', () => {
    const ops = evolvingSamples(7, 5, 800).map((sample) => ({ sample }));
    const copied = writeAll(HEADER, ops, { blockBytes: 32 << 10 }).bytes;
    const kept = writeAll(HEADER, ops, { blockBytes: 32 << 10 }, true).bytes;
    expect(Buffer.from(kept).equals(Buffer.from(copied))).toBe(true);
    // and a caller that changes its bytes after adding them gets what it added only with copies
    const originals = evolvingSamples(7, 5, 50);
    const sink = memorySink();
    const writer = new CaptureWriter(sink, HEADER);
    for (const s of originals) {
      const mine = { ...s, regions: s.regions.map((r) => ({ address: r.address, bytes: r.bytes.slice() })) };
      writer.addSample(mine);
      for (const r of mine.regions) r.bytes.fill(0xee);
    }
    writer.close();
    expectSameSamples(readAll(sink.bytes()).samples, originals);
  });

  it('round trips samples of many threads, codes and missed counts over many blocks', () => {
    const samples = evolvingSamples(1, 12, 3000);
    const ops: Parameters<typeof writeAll>[1] = [];
    const codes: CodeRecord[] = [];
    let missed = 0;
    samples.forEach((s, i) => {
      if (i % 97 === 0) {
        const c = codeRecord(i);
        codes.push(c);
        ops.push({ code: c });
      }
      if (i % 333 === 0) {
        ops.push({ missed: i % 7 });
        missed += i % 7;
      }
      ops.push({ sample: s });
    });
    const { bytes, writer } = writeAll(HEADER, ops, { blockBytes: 64 << 10 });
    const got = readAll(bytes);
    expect(got.reader.warnings).toEqual([]);
    expect(got.reader.closedCleanly).toBe(true);
    expect(got.blocks.length).toBeGreaterThan(5);
    expect(got.blocks.map((b) => b.index)).toEqual(got.blocks.map((_, i) => i));
    expectSameSamples(got.samples, samples);
    expect(got.codes).toEqual(codes);
    expect(got.missed).toBe(missed);
    expect(writer.samplesWritten).toBe(samples.length);
    expect(writer.codesWritten).toBe(codes.length);
    expect(writer.blocksWritten).toBe(got.blocks.length);
    expect(writer.bytesWritten).toBe(bytes.length);
    expect(got.reader.trailer).toEqual({ blocks: got.blocks.length, samples: samples.length, codes: codes.length, missed });
  });

  it('round trips any sequence of records, blocks and compression (property)', () => {
    fc.assert(
      fc.property(
        fc.record({
          seed: fc.nat(),
          threads: fc.integer({ min: 1, max: 6 }),
          count: fc.integer({ min: 0, max: 150 }),
          blockBytes: fc.integer({ min: 1, max: 20_000 }),
          level: fc.integer({ min: 0, max: 9 }),
          flushes: fc.array(fc.nat({ max: 150 }), { maxLength: 5 }),
          codesAt: fc.array(fc.nat({ max: 150 }), { maxLength: 8 }),
        }),
        ({ seed, threads, count, blockBytes, level, flushes, codesAt }) => {
          const samples = evolvingSamples(seed, threads, count, 300);
          const codes: CodeRecord[] = [];
          const ops: Parameters<typeof writeAll>[1] = [];
          for (let i = 0; i <= count; i++) {
            if (flushes.includes(i)) ops.push('flush');
            for (const at of codesAt) {
              if (at !== i) continue;
              codes.push(codeRecord(seed + i));
              ops.push({ code: codes[codes.length - 1]! });
            }
            if (i < count) ops.push({ sample: samples[i]! });
          }
          const got = readAll(writeAll(HEADER, ops, { blockBytes, compressionLevel: level }).bytes);
          expect(got.reader.warnings).toEqual([]);
          expectSameSamples(got.samples, samples);
          expect(got.codes).toEqual(codes);
        },
      ),
      { numRuns: 200 },
    );
  });

  it('decodes each sample to its own bytes: later patches never change earlier samples', () => {
    const base = new Uint8Array(5000).fill(7);
    const mk = (time: number, bytes: Uint8Array): SampleRecord => ({
      time,
      interpreterId: 0n,
      threadStateAddress: 0x1000n,
      threadId: 1n,
      nativeThreadId: 2n,
      flags: 0,
      recorderStatus: 'ok',
      copyMicros: 0,
      regions: [{ address: 0x2000n, bytes }],
      errors: [],
    });
    const samples = [mk(0, base)];
    for (let i = 1; i < 50; i++) {
      const b = samples[i - 1]!.regions[0]!.bytes.slice();
      b[i * 10] = i;
      samples.push(mk(i, b));
    }
    samples.push(mk(50, samples[49]!.regions[0]!.bytes)); // identical: shares the bytes
    const { samples: got } = readAll(writeAll(HEADER, samples.map((sample) => ({ sample }))).bytes);
    expectSameSamples(got, samples);
    expect(got[50]!.regions[0]!.bytes).toBe(got[49]!.regions[0]!.bytes);
    expect(got[49]!.regions[0]!.bytes).not.toBe(got[48]!.regions[0]!.bytes);
  });

  it('keeps its own copy of each base: a recorder reusing its buffer does not corrupt patches', () => {
    const buf = new Uint8Array(1000);
    const sink = memorySink();
    const writer = new CaptureWriter(sink, HEADER);
    const want: Uint8Array[] = [];
    for (let i = 0; i < 20; i++) {
      buf[i] = i + 1; // the same array, changed in place between samples
      want.push(buf.slice());
      writer.addSample({
        time: i,
        interpreterId: 0n,
        threadStateAddress: 0x10n,
        threadId: 1n,
        nativeThreadId: 1n,
        flags: 0,
        recorderStatus: 'ok',
        copyMicros: 0,
        regions: [{ address: 0x20n, bytes: buf }],
        errors: [],
      });
    }
    writer.close();
    expect(readAll(sink.bytes()).samples.map((s) => s.regions[0]!.bytes)).toEqual(want);
  });

  it('puts a block\'s codes before its samples, whatever the order of adds', () => {
    const [s1, s2] = evolvingSamples(5, 1, 2);
    const code = codeRecord(9);
    const later = codeRecord(10);
    const { blocks } = readAll(writeAll(HEADER, [{ sample: s1! }, { code }, { sample: s2! }, 'flush', { code: later }, { missed: 3 }]).bytes);
    expect(blocks).toHaveLength(2);
    expect(blocks[0]!.codes).toEqual([code]);
    expect(blocks[0]!.samples).toHaveLength(2);
    expect(blocks[1]).toMatchObject({ index: 1, codes: [later], samples: [], missed: 3 });
  });

  it('ends a block at blockBytes, writes nothing for an empty flush, and counts what it wrote', () => {
    const sink = memorySink();
    const writer = new CaptureWriter(sink, HEADER, { blockBytes: 1000 });
    const headerBytes = writer.bytesWritten;
    expect(headerBytes).toBe(sink.length);
    writer.flush();
    expect(writer.blocksWritten).toBe(0);
    const samples = evolvingSamples(3, 2, 100);
    for (const s of samples) writer.addSample(s);
    expect(writer.blocksWritten).toBeGreaterThan(1);
    expect(writer.samplesWritten + writer.pendingSamples).toBe(100);
    expect(writer.bytesWritten).toBe(sink.length);
    writer.close();
    writer.close(); // idempotent
    expect(writer.samplesWritten).toBe(100);
    expect(() => writer.addSample(samples[0]!)).toThrow(/closed/);
    expect(readAll(sink.bytes()).blocks.every((b) => b.index < writer.blocksWritten)).toBe(true);
  });

  it('rejects records it cannot store faithfully, naming the field, and stays usable', () => {
    const writer = new CaptureWriter(memorySink(), HEADER);
    const [s] = evolvingSamples(1, 1, 1);
    expect(() => writer.addSample({ ...s!, time: 1.5 })).toThrow(/sample\.time/);
    expect(() => writer.addSample({ ...s!, copyMicros: -1 })).toThrow(/copyMicros/);
    expect(() => writer.addSample({ ...s!, threadId: -1n })).toThrow(/threadId/);
    expect(() => writer.addSample({ ...s!, recorderStatus: 'weird' as 'ok' })).toThrow(/recorderStatus/);
    expect(() => writer.addSample({ ...s!, regions: [{ address: 1n, bytes: [1, 2] as unknown as Uint8Array }] })).toThrow(/bytes/);
    expect(() => writer.addMissed(-1)).toThrow(/missed/);
    writer.addSample(s!);
    writer.flush();
    expect(writer.samplesWritten).toBe(1);
  });
});

describe('files', () => {
  it('writes with fileSink and reads back incrementally with openCapture', async () => {
    const file = path.join(tmp, 'a.pyuw');
    const samples = evolvingSamples(11, 4, 800);
    const writer = new CaptureWriter(fileSink(file), HEADER, { blockBytes: 16 << 10 });
    for (const s of samples) writer.addSample(s);
    writer.flush();
    // after a flush the blocks are in the file, before close: readable, not closed cleanly
    const mid = await openCapture(file);
    const midBlocks = [...mid.blocks()];
    mid.close();
    expect(midBlocks.flatMap((b) => b.samples)).toHaveLength(800);
    expect(mid.closedCleanly).toBe(false);
    expect(mid.warnings).toHaveLength(1);
    expect(mid.warnings[0]!.message).toMatch(/without an end marker/);
    writer.close();

    const reader = await openCapture(file);
    try {
      expect(reader.header).toEqual(HEADER);
      expect(reader.closedCleanly).toBe(true);
      expectSameSamples([...reader.blocks()].flatMap((b) => b.samples), samples);
      expect(reader.warnings).toEqual([]);
    } finally {
      reader.close();
    }
  });

  it('says clearly when a file is missing, empty, a directory or not a capture', async () => {
    await expect(openCapture(path.join(tmp, 'nope.pyuw'))).rejects.toThrow(new CaptureError(`${path.join(tmp, 'nope.pyuw')}: no such file`));
    const empty = path.join(tmp, 'empty.pyuw');
    fs.writeFileSync(empty, '');
    await expect(openCapture(empty)).rejects.toThrow(/is empty: not a pyunwind capture/);
    await expect(openCapture(tmp)).rejects.toThrow(/is a directory/);
    const text = path.join(tmp, 'notes.txt');
    fs.writeFileSync(text, '{"hello": "world"}\n');
    await expect(openCapture(text)).rejects.toThrow(`${text} is not a pyunwind capture (starts with 7b 22 68 65 6c 6c 6f 22 3a 20 22 77 6f 72 6c 64 … "{"hello": "world")`);
    await expect(openCapture(text)).rejects.toBeInstanceOf(CaptureError);
  });

  it('refuses another major format version and names both', () => {
    const bytes = writeAll(HEADER, []).bytes.slice();
    bytes[8] = 2;
    bytes[10] = 0;
    expect(() => readCaptureBytes(bytes, 'x.pyuw')).toThrow('x.pyuw is a pyunwind capture of format version 2.0; this pyunwind reads format 1.x (it was written by a newer pyunwind)');
  });

  it('leaves every flushed block readable when the recorder is killed with SIGKILL', async () => {
    const file = path.join(tmp, 'killed.pyuw');
    const script = `
      import { CaptureWriter, fileSink } from ${JSON.stringify(path.resolve('src/capture/index.ts'))};
      const w = new CaptureWriter(fileSink(${JSON.stringify(file)}), {
        layoutSource: { kind: 'builtin', id: 'builtin/3.12/x86_64', versionHex: 0x030c00f0 }, pointerSize: 8,
        pythonVersion: '3.12.0', target: 't', runtimeAddress: 1n, rateHz: 1, startTime: 0, recorder: 'test' });
      for (let i = 0; i < 5; i++) {
        w.addSample({ time: i, interpreterId: 0n, threadStateAddress: 16n, threadId: 1n, nativeThreadId: 1n, flags: 0,
          recorderStatus: 'ok', copyMicros: 0, regions: [{ address: 32n, bytes: new Uint8Array(100).fill(i) }], errors: [] });
        w.flush();
      }
      w.addSample({ time: 9, interpreterId: 0n, threadStateAddress: 16n, threadId: 1n, nativeThreadId: 1n, flags: 0,
        recorderStatus: 'ok', copyMicros: 0, regions: [], errors: [] }); // buffered, never flushed
      process.stdout.write('ready\\n');
      setInterval(() => {}, 1000);
    `;
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (d: Buffer) => d.toString().includes('ready') && resolve());
      child.on('exit', (code) => reject(new Error(`child exited early (${code})`)));
    });
    const exited = new Promise((resolve) => child.on('exit', resolve));
    child.kill('SIGKILL');
    await exited;
    const reader = await openCapture(file);
    const blocks = [...reader.blocks()];
    reader.close();
    expect(blocks.map((b) => b.samples[0]!.regions[0]!.bytes[0])).toEqual([0, 1, 2, 3, 4]);
    expect(reader.closedCleanly).toBe(false);
    expect(reader.warnings.map((w) => w.message)).toEqual([expect.stringMatching(/after block 4 without an end marker: the recording was cut short .*; 5 complete blocks read/)]);
  });
});

describe('forward compatibility', () => {
  it('reads a later minor version: unknown header fields, trailing bytes, block and record types are skipped', () => {
    const w = new ByteWriter();
    w.bytes(FILE_MAGIC);
    w.u8(1), w.u8(0), w.u8(7), w.u8(0); // format 1.7
    const body = new ByteWriter();
    const { layoutSource: _, runtimeAddress, ...rest } = HEADER;
    const json = { ...rest, layoutSource: { kind: 'builtin', id: 'b', versionHex: 1 }, runtimeAddress: `0x${runtimeAddress.toString(16)}`, futureField: { x: [1] } };
    body.string(JSON.stringify(json));
    body.uint(0); // no layout bytes
    body.bytes(Uint8Array.of(1, 2, 3)); // a later version's extra header data
    w.u32(body.length);
    w.bytes(body.view());
    w.u32(crc32(w.view().subarray(8)));

    const code = codeRecord(1);
    const [sample] = evolvingSamples(2, 1, 1);
    const raw = new ByteWriter();
    raw.uint(2); // missed
    const record = (type: number, fill: (b: ByteWriter) => void) => {
      const b = new ByteWriter();
      fill(b);
      b.bytes(Uint8Array.of(9, 9, 9)); // fields a later version appends to the record
      raw.u8(type), raw.uint(b.length), raw.bytes(b.view());
    };
    record(RECORD_TYPE.CODE, (b) => writeCodeRecord(b, code));
    record(42, (b) => b.uint(1));
    record(RECORD_TYPE.SAMPLE, (b) => new SampleEncoder().encode(b, sample!));
    w.bytes(encodeBlock(BLOCK_TYPE.RECORDS, 0, raw.view()));
    w.bytes(encodeBlock(9, 1, Uint8Array.of(1, 2, 3)));
    const trailer = new ByteWriter();
    trailer.bytes(encodeTrailer({ blocks: 1, samples: 1, codes: 1, missed: 2 }));
    trailer.uint(77); // a later version's extra total
    w.bytes(encodeBlock(BLOCK_TYPE.END, 2, trailer.view(), 0));

    const reader = readCaptureBytes(w.view(), 'future.pyuw');
    expect(reader.formatVersion).toEqual({ major: 1, minor: 7 });
    expect(reader.header.layoutSource).toEqual({ kind: 'builtin', id: 'b', versionHex: 1 });
    expect(reader.header.runtimeAddress).toBe(HEADER.runtimeAddress);
    expect(reader.closedCleanly).toBe(true);
    expect(reader.trailer).toEqual({ blocks: 1, samples: 1, codes: 1, missed: 2 });
    const blocks = [...reader.blocks()];
    expect(blocks).toHaveLength(1);
    expect(blocks[0]!.codes).toEqual([code]);
    expectSameSamples(blocks[0]!.samples, [sample!]);
    expect(blocks[0]!.missed).toBe(2);
    expect(reader.warnings.map((x) => x.message)).toEqual([
      expect.stringMatching(/^block 0 at byte \d+: 1 record\(s\) of unknown type 42 skipped/),
      expect.stringMatching(/^block 1 at byte \d+: unknown block type 9 skipped/),
    ]);
  });
});

describe('thread-name records (format 1.1)', () => {
  it('round trip among samples, in any block, with any name; a block of names alone is written', () => {
    const [a, b] = evolvingSamples(2, 2, 2);
    const names = [
      { time: 0, interpreterId: 0n, threadId: U64_MAX, nativeThreadId: 1234n, name: 'MainThread' },
      { time: 5, interpreterId: 3n, threadId: 0x7f00_0000_1000n, nativeThreadId: 1235n, name: 'trabajador-ñ 线程 🧵' },
      { time: 9, interpreterId: 3n, threadId: 0x7f00_0000_1000n, nativeThreadId: 1235n, name: '' },
    ];
    const { bytes, writer } = writeAll(HEADER, [{ sample: a! }, { name: names[0]! }, { name: names[1]! }, { sample: b! }, 'flush', { name: names[2]! }]);
    expect(writer.namesWritten).toBe(3);
    const { reader, blocks, samples } = readAll(bytes);
    expect(reader.warnings).toEqual([]);
    expect(blocks).toHaveLength(2);
    expect(blocks[0]!.names).toEqual(names.slice(0, 2));
    expect(blocks[1]!.names).toEqual(names.slice(2));
    expectSameSamples(samples, [a!, b!]);
  });

  it('refuses a record the format cannot hold, and skips (saying so) one that does not decode', () => {
    const writer = new CaptureWriter(memorySink(), HEADER);
    expect(() => writer.addThreadName({ time: -1, interpreterId: 0n, threadId: 1n, nativeThreadId: 1n, name: 'x' })).toThrow();
    expect(() => writer.addThreadName({ time: 0, interpreterId: -1n, threadId: 1n, nativeThreadId: 1n, name: 'x' })).toThrow();
    expect(() => writer.addThreadName({ time: 0, interpreterId: 0n, threadId: 1n, nativeThreadId: 1n, name: 7 as never })).toThrow();
    const raw = new ByteWriter();
    raw.uint(0);
    raw.u8(RECORD_TYPE.THREAD_NAME), raw.uint(2), raw.u8(1), raw.u8(0x80); // cut inside a varint
    const w = new ByteWriter();
    w.bytes(bytesOfHeaderOnly());
    w.bytes(encodeBlock(BLOCK_TYPE.RECORDS, 0, raw.view()));
    w.bytes(encodeBlock(BLOCK_TYPE.END, 1, encodeTrailer({ blocks: 1, samples: 0, codes: 0, missed: 0 }), 0));
    const reader = readCaptureBytes(w.view(), 'cut.pyuw');
    const blocks = [...reader.blocks()];
    expect(blocks[0]!.names).toEqual([]);
    expect(reader.warnings.map((x) => x.message)).toEqual([expect.stringMatching(/thread name record at payload byte \d+: .*; record skipped/)]);
  });
});

/** A capture's header and no block. */
function bytesOfHeaderOnly(): Uint8Array {
  const { bytes } = writeAll(HEADER, []);
  const reader = readCaptureBytes(bytes);
  return bytes.subarray(0, reader.dataStart);
}

describe('frames regions (format 1.3)', () => {
  it('round trip any stacks, hints, block sizes and compression (property)', () => {
    fc.assert(
      fc.property(
        fc.record({
          seed: fc.nat(),
          threads: fc.integer({ min: 1, max: 4 }),
          count: fc.integer({ min: 1, max: 200 }),
          wb: fc.constantFrom<4 | 8>(4, 8),
          words: fc.integer({ min: 1, max: 32 }),
          blockBytes: fc.integer({ min: 1, max: 30_000 }),
          level: fc.constantFrom(0, 6),
        }),
        ({ seed, threads, count, wb, words, blockBytes, level }) => {
          const samples = stackSamples(seed, threads, count, wb, words);
          const got = readAll(writeAll(HEADER, samples.map((sample) => ({ sample })), { blockBytes, compressionLevel: level }).bytes);
          expect(got.reader.warnings).toEqual([]);
          expectSameSamples(got.samples, samples);
        },
      ),
      { numRuns: 150 },
    );
  });

  it('stores churning stacks as frame images: smaller than patches, and read back the same', () => {
    const samples = stackSamples(7, 2, 4000, 8, 11);
    const hinted = writeAll(HEADER, samples.map((sample) => ({ sample }))).bytes;
    const plain = writeAll(HEADER, samples.map((sample) => ({ sample: { ...sample, frames: undefined } }))).bytes;
    expectSameSamples(readAll(hinted).samples, samples);
    expectSameSamples(readAll(plain).samples, samples);
    expect(hinted.length).toBeLessThan(plain.length);
  });

  it('forgets the images of a sample it encoded but did not write (rollback)', () => {
    const samples = stackSamples(3, 1, 40, 8, 11);
    const enc = new SampleEncoder();
    const w = new ByteWriter();
    w.uint(0);
    const put = (rec: SampleRecord): void => {
      const body = new ByteWriter();
      enc.encode(body, rec);
      enc.commit(rec);
      w.u8(RECORD_TYPE.SAMPLE);
      w.uint(body.length);
      w.bytes(body.view());
    };
    const kept: SampleRecord[] = [];
    samples.forEach((rec, i) => {
      if (i % 3 === 1) {
        // encoded, then dropped: its new images must not be referred to by later samples
        const mark = enc.mark();
        enc.encode(new ByteWriter(), rec);
        enc.rollback(mark);
        return;
      }
      put(rec);
      kept.push(rec);
    });
    const payload = w.view().slice();
    const block = decodeBlock({ type: BLOCK_TYPE.RECORDS, index: 0, offset: 0, compression: 0, flags: 0, rawLength: payload.length, stored: payload });
    expect(block.warnings).toEqual([]);
    expectSameSamples(block.block!.samples, kept);
  });
});
