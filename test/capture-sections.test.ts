// Section blocks (format 1.4): every sample reads back exactly as written — regions that
// change, grow, move and disappear; stacks that push, pop and run on, with hints that lie — and a
// damaged or hostile section block costs that block's later samples at most, with a warning,
// never a crash or a hang.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BLOCK_TYPE, ByteReader, COMPRESSION, DecodeError } from '../src/capture/format.js';
import { decodeBlock, readCaptureBytes } from '../src/capture/reader.js';
import { packSections, sectionViews, unpackSections } from '../src/capture/section-block.js';
import { SECTION_COUNT } from '../src/capture/codes.js';
import type { CodeRecord } from '../src/capture/index.js';
import { HEADER, codeRecord, evolvingSamples, expectSameSamples, readAll, stackSamples, writeAll } from './helpers/capture-samples.js';
import { rng } from './helpers/rng.js';

const SECTIONS = { blocks: 'sections' } as const;

describe('section blocks (format 1.4)', () => {
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
          const got = readAll(writeAll(HEADER, samples.map((sample) => ({ sample })), { ...SECTIONS, blockBytes, compressionLevel: level }).bytes);
          expect(got.reader.warnings).toEqual([]);
          expect(got.blocks.length).toBeGreaterThan(0);
          expectSameSamples(got.samples, samples);
        },
      ),
      { numRuns: 150 },
    );
  });

  it('round trip any sequence of records, blocks and compression (property)', () => {
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
          const got = readAll(writeAll(HEADER, ops, { ...SECTIONS, blockBytes, compressionLevel: level }).bytes);
          expect(got.reader.warnings).toEqual([]);
          expectSameSamples(got.samples, samples);
          expect(got.codes).toEqual(codes);
        },
      ),
      { numRuns: 200 },
    );
  });

  it('writes the same file whether it keeps immutable samples or copies them', () => {
    const ops = stackSamples(11, 3, 600, 8, 11).map((sample) => ({ sample }));
    const copied = writeAll(HEADER, ops, { ...SECTIONS, blockBytes: 16 << 10 }).bytes;
    const kept = writeAll(HEADER, ops, { ...SECTIONS, blockBytes: 16 << 10 }, true).bytes;
    expect(Buffer.from(kept).equals(Buffer.from(copied))).toBe(true);
  });

  it('stores churning stacks in fewer bytes than record blocks, and reads them back the same', () => {
    const samples = stackSamples(7, 2, 4000, 8, 11);
    const sections = writeAll(HEADER, samples.map((sample) => ({ sample })), SECTIONS).bytes;
    const records = writeAll(HEADER, samples.map((sample) => ({ sample })), { blocks: 'records' }).bytes;
    expectSameSamples(readAll(sections).samples, samples);
    expect(sections.length).toBeLessThan(records.length);
    // every block of the file is a section block
    expect(readAll(sections).blocks.length).toBeGreaterThan(0);
    for (const raw of readCaptureBytes(sections).rawBlocks()) expect(raw.type).toBe(BLOCK_TYPE.SECTIONS);
  });

  it('packs and unpacks sections, each stored as it is or deflated', () => {
    const rand = rng(5);
    const parts = Array.from({ length: SECTION_COUNT }, (_, k) => Uint8Array.from({ length: k * 37 }, (_, i) => (k % 3 === 0 ? (rand() * 256) | 0 : i % 5)));
    for (const level of [0, 1, 6, 9]) {
      const { stored, rawLength } = packSections(parts, level);
      const payload = unpackSections(stored, rawLength);
      expect(payload.length).toBe(rawLength);
      expect(sectionViews(payload).map((v) => Array.from(v))).toEqual(parts.map((p) => Array.from(p)));
    }
    // a header announcing another length, a section cut short: errors that say so
    const { stored, rawLength } = packSections(parts, 6);
    expect(() => unpackSections(stored, rawLength + 1)).toThrow(/announces/);
    expect(() => unpackSections(stored.subarray(0, stored.length - 3), rawLength)).toThrow(/passes the end of the payload/);
  });
});

describe('damaged section blocks', () => {
  /** the unpacked payloads of a file's section blocks */
  function payloads(bytes: Uint8Array): Uint8Array[] {
    const out: Uint8Array[] = [];
    for (const raw of readCaptureBytes(bytes).rawBlocks()) out.push(unpackSections(raw.stored, raw.rawLength).slice());
    return out;
  }
  const samples = stackSamples(3, 3, 1500, 8, 11).concat(evolvingSamples(4, 3, 300, 200));
  const file = writeAll(HEADER, samples.map((sample) => ({ sample })), { ...SECTIONS, blockBytes: 24 << 10, compressionLevel: 0 }).bytes;
  const blocks = payloads(file);

  it('any byte changed costs at most the later samples of its block, with a warning (property)', () => {
    fc.assert(
      fc.property(fc.nat({ max: blocks.length - 1 }), fc.array(fc.tuple(fc.nat(), fc.nat({ max: 255 })), { minLength: 1, maxLength: 8 }), (b, edits) => {
        const payload = blocks[b]!.slice();
        for (const [at, v] of edits) payload[at % payload.length] = v;
        const raw = { type: BLOCK_TYPE.SECTIONS, index: b, offset: 0, compression: COMPRESSION.NONE, flags: 0, rawLength: payload.length, stored: payload };
        // (decodes or says why not; never throws, never hangs)
        const { block, warnings } = decodeBlock(raw);
        if (block === null) expect(warnings.length).toBe(1);
        const clean = decodeBlock({ ...raw, stored: blocks[b]!, rawLength: blocks[b]!.length }).block!;
        // what it decoded before the first problem is what the block holds, or the damage is silent
        // in a byte that decodes to another value (a checksum catches that in a file)
        if (block && warnings.length === 0) expect(block.samples.length).toBe(clean.samples.length);
      }),
      { numRuns: 300 },
    );
  });

  it('a section cut short ends its block\'s samples there, and says so', () => {
    const payload = blocks[0]!;
    const views = sectionViews(payload);
    const cut = views.map((v, k) => (k === SECTION_COUNT - 2 ? v.subarray(0, Math.floor(v.length / 2)) : v));
    const { stored, rawLength } = packSections(cut, 0);
    const { block, warnings } = decodeBlock({ type: BLOCK_TYPE.SECTIONS, index: 0, offset: 77, compression: COMPRESSION.NONE, flags: 0, rawLength, stored });
    expect(warnings).toHaveLength(1);
    expect(warnings[0]!.message).toMatch(/^block 0 at byte 77: sample \d+ \(change section, byte \d+\): .*later samples cannot be read/);
    const clean = decodeBlock({ type: BLOCK_TYPE.SECTIONS, index: 0, offset: 77, compression: COMPRESSION.NONE, flags: 0, rawLength: payload.length, stored: payload }).block!;
    expect(block!.samples.length).toBeLessThan(clean.samples.length);
    expectSameSamples(block!.samples, clean.samples.slice(0, block!.samples.length));
  });

  it('a table that lies is refused with a message naming the problem', () => {
    const payload = blocks[0]!.slice();
    // the section count, then the first entry's codec
    expect(() => sectionViews(Uint8Array.of(200))).toThrow(DecodeError);
    const r = new ByteReader(payload);
    r.uint('count');
    payload[r.pos] = 9;
    const { block, warnings } = decodeBlock({ type: BLOCK_TYPE.SECTIONS, index: 2, offset: 5, compression: COMPRESSION.NONE, flags: 0, rawLength: payload.length, stored: payload });
    expect(block).toBeNull();
    expect(warnings[0]!.message).toMatch(/block 2 at byte 5: .*unknown codec 9/);
  });
});
