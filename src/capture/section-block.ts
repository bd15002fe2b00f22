// The container of a section block (block type 3, format 1.4; docs/capture-format.md, "Section
// block"): a table of sections, each stored as it is or deflated on its own. A section holds one
// kind of field of every sample of the block (times, copy times, frame operations, word
// changes, …), so that each compresses among its own kind: the same samples written as records
// took 1.6–2.7× the bytes.
//
// A block's stored payload is
//   varint K; K × (u8 codec, varint stored length, varint raw length); the K sections as stored.
// Unpacked, it takes the same form with every section stored as it is (codec 0): the payload the
// readers and the block engine decode, whose length the block header announces.

import { CODEC_DEFLATE, CODEC_STORED, MAX_BLOCK_RAW } from './codes.js';
import { ByteReader, ByteWriter, DecodeError, deflateRaw, inflateExact, uintSize } from './format.js';

/** sections a table may list: the ones this version defines, and room for later minor versions' */
export const MAX_SECTIONS = 64;

/** The stored payload of a block of these sections, each deflated at `level` where that is smaller (0: none). */
export function packSections(sections: readonly Uint8Array[], level: number): { stored: Uint8Array; rawLength: number } {
  const stored: Uint8Array[] = [];
  const codecs: number[] = [];
  for (const s of sections) {
    const d = level > 0 && s.length > 0 ? deflateRaw(s, level) : null;
    if (d && d.length < s.length) {
      stored.push(d);
      codecs.push(CODEC_DEFLATE);
    } else {
      stored.push(s);
      codecs.push(CODEC_STORED);
    }
  }
  const w = new ByteWriter(64 + stored.reduce((n, s) => n + s.length, 0));
  w.uint(sections.length);
  for (let k = 0; k < sections.length; k++) {
    w.u8(codecs[k]!);
    w.uint(stored[k]!.length);
    w.uint(sections[k]!.length);
  }
  for (const s of stored) w.bytes(s);
  return { stored: w.view().slice(), rawLength: unpackedLength(sections.map((s) => s.length)) };
}

/** The length of the unpacked payload of sections of these raw lengths. */
function unpackedLength(lengths: readonly number[]): number {
  let n = uintSize(lengths.length);
  for (const l of lengths) n += 1 + 2 * uintSize(l) + l;
  return n;
}

/** One entry of a section table: where the section's bytes are in the payload, how stored. */
interface TableEntry {
  codec: number;
  at: number;
  stored: number;
  raw: number;
}

function readTable(payload: Uint8Array): TableEntry[] {
  const r = new ByteReader(payload);
  const countAt = r.pos;
  const count = r.uint('section count');
  if (count > MAX_SECTIONS) r.fail(`${count} sections (at most ${MAX_SECTIONS})`, countAt);
  const entries: TableEntry[] = [];
  let rawTotal = 0;
  for (let k = 0; k < count; k++) {
    const at = r.pos;
    const codec = r.u8(`section ${k} codec`);
    const stored = r.uint(`section ${k} stored length`);
    const raw = r.uint(`section ${k} raw length`);
    if (codec !== CODEC_STORED && codec !== CODEC_DEFLATE) r.fail(`section ${k}: unknown codec ${codec}`, at);
    if (codec === CODEC_STORED && stored !== raw) r.fail(`section ${k}: stored as it is, but ${stored} stored bytes for ${raw}`, at);
    rawTotal += raw;
    if (stored > MAX_BLOCK_RAW || rawTotal > MAX_BLOCK_RAW) r.fail(`section ${k}: the sections pass the block limit of ${MAX_BLOCK_RAW} bytes`, at);
    entries.push({ codec, at: 0, stored, raw });
  }
  let at = r.pos;
  for (let k = 0; k < count; k++) {
    const e = entries[k]!;
    e.at = at;
    at += e.stored;
    if (at > payload.length) throw new DecodeError(`section ${k} passes the end of the payload (${at} > ${payload.length})`, e.at);
  }
  if (at !== payload.length) throw new DecodeError(`${payload.length - at} bytes after the last section`, at);
  return entries;
}

/**
 * The unpacked payload of a stored section block, which must be `rawLength` bytes (the block
 * header's); an Error saying why not.
 */
export function unpackSections(stored: Uint8Array, rawLength: number): Uint8Array {
  const table = readTable(stored);
  if (table.every((e) => e.codec === CODEC_STORED)) {
    if (stored.length !== rawLength) throw new Error(`unpacks to ${stored.length} bytes, the block header announces ${rawLength}`);
    return stored;
  }
  const need = unpackedLength(table.map((e) => e.raw));
  if (need !== rawLength) throw new Error(`unpacks to ${need} bytes, the block header announces ${rawLength}`);
  const w = new ByteWriter(need);
  w.uint(table.length);
  for (const e of table) {
    w.u8(CODEC_STORED);
    w.uint(e.raw);
    w.uint(e.raw);
  }
  table.forEach((e, k) => {
    const bytes = stored.subarray(e.at, e.at + e.stored);
    if (e.codec === CODEC_STORED) w.bytes(bytes);
    else if (e.raw === 0) throw new Error(`section ${k}: deflated to nothing`);
    else {
      try {
        w.bytes(inflateExact(bytes, e.raw));
      } catch (err) {
        throw new Error(`section ${k} ${err instanceof Error ? err.message : String(err)}`);
      }
    }
  });
  return w.view();
}

/**
 * The sections of an unpacked payload, as views (every section stored as it is); a DecodeError
 * for a table that is not. Sections past the ones asked for are a later minor version's.
 */
export function sectionViews(payload: Uint8Array): Uint8Array[] {
  return readTable(payload).map((e, k) => {
    if (e.codec !== CODEC_STORED) throw new DecodeError(`section ${k} is not unpacked`, e.at);
    return payload.subarray(e.at, e.at + e.raw);
  });
}

/** Where each section starts in an unpacked payload, and its length (the block engine's view of it). */
export function sectionBounds(payload: Uint8Array): { at: number; length: number }[] {
  return readTable(payload).map((e) => ({ at: e.at, length: e.raw }));
}

/** Section k of a stored section block, unpacked on its own (the records section, for its code records); null where it cannot be. */
export function storedSection(stored: Uint8Array, k: number): Uint8Array | null {
  try {
    const e = readTable(stored)[k];
    if (!e) return null;
    const bytes = stored.subarray(e.at, e.at + e.stored);
    return e.codec === CODEC_STORED ? bytes : e.raw === 0 ? null : inflateExact(bytes, e.raw);
  } catch {
    return null;
  }
}
