// Make a large capture out of a real one, for processing benchmarks: the recording's blocks,
// repeated pass after pass, each pass shifted in time to start where the previous ended — a
// recording as long as asked for, of the same program. Only whole-form samples carry an
// absolute time (patches carry deltas against their thread's previous sample in the block), so
// a record block is shifted by rewriting those times, a section block by its first sample's time
// (the others follow it); everything else is copied as it is.
//
//   node --import tsx bench/big-capture.ts SOURCE.pyuw OUT.pyuw SIZE_MB [LEVEL]
//
// Code records are kept in the first pass only (later passes would repeat them): samples of
// later passes find them already recorded, as they would in a longer recording.
import fs from 'node:fs';
import { ByteReader, ByteWriter, BLOCK_FLAG, BLOCK_TYPE, COMPRESSION, RECORD_TYPE, blockWithHeader, crc32, encodeBlock, encodeHeader, encodeTrailer } from '../src/capture/format.js';
import { SEC_RECORDS, SEC_THREAD, SEC_TIME } from '../src/capture/codes.js';
import { packSections, sectionViews } from '../src/capture/section-block.js';
import { unpack } from '../src/capture/reader.js';
import { openCapture } from '../src/capture/file.js';

const [source, out, sizeMb, levelArg] = process.argv.slice(2);
if (!source || !out || !sizeMb) {
  console.error('usage: node --import tsx bench/big-capture.ts SOURCE.pyuw OUT.pyuw SIZE_MB [DEFLATE_LEVEL]');
  process.exit(2);
}
const target = Number(sizeMb) * (1 << 20);
const level = Number(levelArg ?? 6);

/** The block payload with every whole sample's time moved by `shift` µs; code records dropped when `codes` is false. */
function shifted(payload: Uint8Array, shift: number, codes: boolean): { bytes: Uint8Array; samples: number; codes: number; missed: number; last: number } {
  const r = new ByteReader(payload);
  const w = new ByteWriter(payload.length + 1024);
  const missed = r.uint('missed');
  w.uint(missed);
  let samples = 0;
  let codeCount = 0;
  let last = 0;
  const times = new Map<bigint, number>();
  while (r.pos < r.end) {
    const type = r.u8('type');
    const length = r.uint('length');
    const body = payload.subarray(r.pos, r.pos + length);
    r.pos += length;
    if (type === RECORD_TYPE.CODE) {
      if (!codes) continue;
      codeCount++;
      w.u8(type);
      w.uint(length);
      w.bytes(body);
      continue;
    }
    if (type !== RECORD_TYPE.SAMPLE) continue;
    samples++;
    const b = new ByteReader(body);
    const tsa = b.big('tsa');
    const formAt = b.pos;
    const form = b.u8('form');
    let time: number;
    let rest: Uint8Array;
    const nw = new ByteWriter(length + 16);
    nw.big(tsa);
    if (form === 0) {
      time = b.uint('time') + shift;
      nw.u8(0);
      nw.uint(time);
      rest = body.subarray(b.pos);
    } else {
      time = (times.get(tsa) ?? 0) + b.sint('delta');
      rest = body.subarray(formAt);
    }
    times.set(tsa, time);
    last = Math.max(last, time);
    nw.bytes(rest);
    const nb = nw.view();
    w.u8(type);
    w.uint(nb.length);
    w.bytes(nb);
  }
  return { bytes: w.view().slice(), samples, codes: codeCount, missed, last };
}

/** A section block's payload shifted likewise: its first sample's time (the others are relative to it). */
function shiftedSections(payload: Uint8Array, shift: number, codes: boolean): { bytes: Uint8Array; rawLength: number; samples: number; codes: number; missed: number; last: number } {
  const views = sectionViews(payload);
  const records = new ByteReader(views[SEC_RECORDS]!);
  const rw = new ByteWriter(views[SEC_RECORDS]!.length);
  const missed = records.uint('missed');
  rw.uint(missed);
  let codeCount = 0;
  while (records.pos < records.end) {
    const start = records.pos;
    const type = records.u8('type');
    const length = records.uint('length');
    records.pos += length;
    if (type === RECORD_TYPE.CODE && !codes) continue;
    if (type === RECORD_TYPE.CODE) codeCount++;
    rw.bytes(views[SEC_RECORDS]!.subarray(start, records.pos));
  }
  views[SEC_RECORDS] = rw.view().slice();
  const times = new ByteReader(views[SEC_TIME]!);
  const tw = new ByteWriter(views[SEC_TIME]!.length + 8);
  let time = 0;
  for (let i = 0; times.pos < times.end; i++) {
    const d = times.sint('time');
    time += d;
    tw.sint(i === 0 ? d + shift : d);
  }
  views[SEC_TIME] = tw.view().slice();
  let samples = 0;
  for (const b of views[SEC_THREAD]!) if (b < 0x80) samples++;
  const packed = packSections(views, level);
  return { bytes: packed.stored, rawLength: packed.rawLength, samples, codes: codeCount, missed, last: time + shift };
}

/** A section block of a stored payload (as packSections makes it, with its unpacked length). */
function sectionBlock(seq: number, stored: Uint8Array, rawLength: number, flags: number): Uint8Array {
  return blockWithHeader({ type: BLOCK_TYPE.SECTIONS, compression: COMPRESSION.NONE, seq, flags, storedLength: stored.length, rawLength, payloadCrc: crc32(stored) }, stored);
}

const reader = await openCapture(source);
const payloads: { type: number; payload: Uint8Array }[] = [];
for (const raw of reader.rawBlocks()) {
  const p = unpack(raw);
  if (typeof p !== 'string') payloads.push({ type: raw.type, payload: p });
}
const fd = fs.openSync(out, 'w');
let written = 0;
const put = (bytes: Uint8Array): void => {
  fs.writeSync(fd, bytes);
  written += bytes.length;
};
put(encodeHeader({ ...reader.header, recorder: `${reader.header.recorder} (repeated by bench/big-capture.ts from ${source})` }));
let seq = 0;
let shift = 0;
let passes = 0;
let samples = 0;
let codes = 0;
let missed = 0;
const started = performance.now();
while (written < target) {
  let last = 0;
  for (const { type, payload } of payloads) {
    const flags = (n: number): number => (n === 0 ? BLOCK_FLAG.NO_CODES : 0);
    let s: ReturnType<typeof shifted>;
    if (type === BLOCK_TYPE.SECTIONS) {
      const t = shiftedSections(payload, shift, passes === 0);
      put(sectionBlock(seq++, t.bytes, t.rawLength, flags(t.codes)));
      s = t;
    } else {
      s = shifted(payload, shift, passes === 0);
      put(encodeBlock(BLOCK_TYPE.RECORDS, seq++, s.bytes, level, flags(s.codes)));
    }
    samples += s.samples;
    codes += s.codes;
    missed += s.missed;
    last = Math.max(last, s.last);
    if (written >= target) break;
  }
  // the next pass starts one mean interval after this one's last sample
  shift = last + Math.round(1e6 / reader.header.rateHz);
  passes++;
  process.stderr.write(`\r${(written / (1 << 20)).toFixed(0)} MB, ${samples} samples, pass ${passes}`);
}
put(encodeBlock(BLOCK_TYPE.END, seq, encodeTrailer({ blocks: seq, samples, codes, missed }), 0));
fs.closeSync(fd);
reader.close();
process.stderr.write(`\n${out}: ${(written / (1 << 20)).toFixed(1)} MB, ${seq} blocks, ${samples} samples, ${passes} passes of ${source}, in ${((performance.now() - started) / 1000).toFixed(1)} s\n`);
