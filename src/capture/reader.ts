// Reads a .pyuw capture block by block. The file is read incrementally (one block's stored
// bytes at a time), every block is checked before it is used, and damage costs only what it
// touches: a bad block is reported and skipped, a damaged block header is skipped by scanning for the
// next intact one, a cut file yields every block before the cut. Only a file whose header
// cannot be used is refused (CaptureError): without the header no region means anything.
//
// Nothing here imports a Node module: a browser, a worker or an edge runtime reads a capture
// in memory (readCaptureBytes); Node opens a file with openCapture (./file.ts).

import {
  BLOCK_MAGIC,
  BLOCK_TYPE,
  ByteReader,
  BLOCK_FLAG,
  COMPRESSION,
  DecodeError,
  BLOCK_HEADER_SIZE,
  MAX_BLOCK_RAW,
  RECORD_TYPE,
  crc32,
  decodeHeader,
  decodeTrailer,
  describeBytes,
  findMagic,
  hex32,
  inflateExact,
  inflatePrefix,
  parseBlockHeader,
  readCodeRecord,
  readThreadNameRecord,
  type CaptureTrailer,
} from './format.js';
import { SampleDecoder } from './patch.js';
import { NativeBudget, readNativeObjectRecord } from './native-object-record.js';
import { SEC_RECORDS } from './codes.js';
import { decodeSectionBlock } from './section-decoder.js';
import { sectionViews, storedSection, unpackSections } from './section-block.js';
import { CaptureError, type CaptureBlock, type CaptureHeader, type CaptureWarning, type CodeRecord } from './types.js';

/** Random access to a capture's bytes. */
export interface CaptureSource {
  /** length of the capture in bytes */
  readonly size: number;
  /** up to `length` bytes at `offset`: fewer only at the end of the data */
  read(offset: number, length: number): Uint8Array;
  close?(): void;
}

/**
 * A block whose header and stored bytes passed their checksums, not yet decompressed or
 * decoded. Plain data (it can be posted to a worker); `decodeBlock` turns it into records.
 */
export interface RawBlock {
  /** BLOCK_TYPE.RECORDS, or BLOCK_TYPE.SECTIONS (format 1.4) */
  type: number;
  /** the writer's 0-based block number */
  index: number;
  /** byte offset of the block's header in the file */
  offset: number;
  compression: number;
  /** BLOCK_FLAG bits of its header */
  flags: number;
  rawLength: number;
  stored: Uint8Array;
}

/** Bytes read per step when scanning for the next block after damage. */
const SCAN_CHUNK = 1 << 16;
/** How far from the end the end block is looked for at open. */
const TAIL_SCAN = 4096;

function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** The raw payload of a block, or why it has none. */
export function unpack(raw: RawBlock): Uint8Array | string {
  try {
    if (raw.type === BLOCK_TYPE.SECTIONS) {
      if (raw.compression !== COMPRESSION.NONE) return `compression ${raw.compression} in the header of a section block (its sections say how each is stored)`;
      return unpackSections(raw.stored, raw.rawLength);
    }
    if (raw.compression === COMPRESSION.NONE) {
      if (raw.stored.length !== raw.rawLength) return `stored length ${raw.stored.length} differs from raw length ${raw.rawLength} in an uncompressed block`;
      return raw.stored;
    }
    if (raw.compression === COMPRESSION.DEFLATE) return inflateExact(raw.stored, raw.rawLength);
    return `unknown compression ${raw.compression} (written by a newer pyunwind?)`;
  } catch (e) {
    return `cannot be decompressed (${errorMessage(e)})`;
  }
}

/** A record type as messages name it. */
export function recordName(type: number): string {
  return type === RECORD_TYPE.CODE ? 'code' : type === RECORD_TYPE.SAMPLE ? 'sample' : type === RECORD_TYPE.THREAD_NAME ? 'thread name' : type === RECORD_TYPE.NATIVE_OBJECT ? 'native object' : `type ${type}`;
}

/** Stored bytes first inflated while looking for a block's leading code records (then 8×, 64×, …). */
const LEADING_STEP_FIRST = 256;

/**
 * The code records at the start of a block, before its first record of another type, found by
 * inflating only as much of the block as they take (a block without code records costs a few
 * hundred bytes of inflating). A writer puts every code record of a block first, so these are
 * normally all of them: `blockCodes` on the whole payload tells (a processing worker checks).
 * A record that does not decode is skipped, as `blockCodes` skips it; anything that stops the
 * reading (a bad stream, a lost record boundary) ends the list.
 */
/**
 * The code record at bytes[pos, pos + length), its regions copied out of `bytes` (which the
 * caller may drop or reuse); null if it does not decode (the block's full decode says why).
 */
function copiedCodeRecord(bytes: Uint8Array, pos: number, length: number): CodeRecord | null {
  try {
    const c = readCodeRecord(new ByteReader(bytes, pos, pos + length));
    return { address: c.address, regions: c.regions.map((g) => ({ address: g.address, bytes: g.bytes.slice() })) };
  } catch (e) {
    if (!(e instanceof DecodeError)) throw e;
    return null;
  }
}

/** The records section of a stored section block, unpacked on its own (null: it cannot be). */
function recordsSection(raw: RawBlock): Uint8Array | null {
  return storedSection(raw.stored, SEC_RECORDS);
}

export function leadingCodes(raw: RawBlock): CodeRecord[] {
  const codes: CodeRecord[] = [];
  let out: Uint8Array = new Uint8Array(0);
  /** parse what has been inflated so far: true when the leading code records are all known */
  const scan = (final: boolean): boolean => {
    codes.length = 0;
    const r = new ByteReader(out);
    try {
      r.uint('missed count');
      for (;;) {
        if (r.pos >= r.end) return final;
        const type = r.u8('record type');
        if (type !== RECORD_TYPE.CODE) return true;
        const length = r.uint('record length');
        if (length > r.remaining) {
          if (final || r.pos + length > raw.rawLength) return true;
          return false;
        }
        const c = copiedCodeRecord(out, r.pos, length);
        if (c) codes.push(c);
        r.pos += length;
      }
    } catch (e) {
      if (!(e instanceof DecodeError)) throw e;
      // a varint cut by the end of what is inflated so far: more is needed
      return final || out.length >= raw.rawLength;
    }
  };
  // the writer said there are none (a worker checks it: it finds every code record of its block)
  if (raw.flags & BLOCK_FLAG.NO_CODES) return codes;
  if (raw.type === BLOCK_TYPE.SECTIONS) {
    // (the records section alone is inflated)
    const records = recordsSection(raw);
    if (records) out = records;
    scan(true);
    return codes;
  }
  if (raw.compression === COMPRESSION.NONE) {
    out = raw.stored;
    scan(true);
    return codes;
  }
  if (raw.compression !== COMPRESSION.DEFLATE) return codes;
  // a few bytes first: a block without code records is done then; more (from the start again) while needed
  for (let n = LEADING_STEP_FIRST; ; n *= 8) {
    const part = inflatePrefix(raw.stored, n, raw.rawLength);
    const final = part === null || n >= raw.stored.length || part.length > raw.rawLength;
    out = part ?? new Uint8Array(0);
    if (scan(final) || final) return codes;
  }
}

/**
 * The code records of a block payload, exactly those `decodeBlock` would give (a record that
 * does not decode is skipped, a lost record boundary ends the scan), without decoding a sample.
 * Their regions are copies: they outlive the payload.
 */
export function blockCodes(payload: Uint8Array, type: number = BLOCK_TYPE.RECORDS): CodeRecord[] {
  if (type === BLOCK_TYPE.SECTIONS) {
    try {
      payload = sectionViews(payload)[SEC_RECORDS] ?? new Uint8Array(0);
    } catch {
      return [];
    }
  }
  const r = new ByteReader(payload);
  const codes: CodeRecord[] = [];
  try {
    r.uint('missed count');
  } catch {
    return codes;
  }
  while (r.pos < r.end) {
    let type: number;
    let length: number;
    try {
      type = r.u8('record type');
      length = r.uint('record length');
      if (length > r.remaining) return codes;
    } catch {
      return codes;
    }
    if (type === RECORD_TYPE.CODE) {
      const c = copiedCodeRecord(payload, r.pos, length);
      if (c) codes.push(c);
    }
    r.pos += length;
  }
  return codes;
}

/**
 * Decodes one block, needing nothing from any other block. Records that cannot be decoded are
 * skipped and reported (one warning per block); everything intact is kept. `block` is null
 * when nothing could be decoded at all.
 */
export function decodeBlock(raw: RawBlock): { block: CaptureBlock | null; warnings: CaptureWarning[] } {
  const where = `block ${raw.index} at byte ${raw.offset}`;
  const payload = unpack(raw);
  if (typeof payload === 'string') return { block: null, warnings: [{ offset: raw.offset, message: `${where}: ${payload}; block skipped` }] };
  if (raw.type === BLOCK_TYPE.SECTIONS) {
    const { block, problems } = decodeSectionBlock(payload, raw.index, raw.offset);
    const warnings = problems.length ? [{ offset: raw.offset, message: `${where}: ${problems.join('; ')}${block ? '' : '; block skipped'}` }] : [];
    return { block, warnings };
  }

  const r = new ByteReader(payload);
  const block: CaptureBlock = { index: raw.index, offset: raw.offset, codes: [], samples: [], names: [], objects: [], missed: 0 };
  const problems: string[] = [];
  let skipped = 0;
  const unknownTypes = new Map<number, number>();
  try {
    block.missed = r.uint('missed count');
  } catch (e) {
    return { block: null, warnings: [{ offset: raw.offset, message: `${where}: ${errorMessage(e)}; block skipped` }] };
  }
  const decoder = new SampleDecoder();
  const budget = new NativeBudget();
  // each pass consumes at least the type byte and the length varint: bounded by the payload
  while (r.pos < r.end) {
    const recordAt = r.pos;
    let type: number;
    let length: number;
    try {
      type = r.u8('record type');
      length = r.uint('record length');
      if (length > r.remaining) r.fail(`record length ${length} passes the end of the payload (${r.remaining} bytes left)`, recordAt);
    } catch (e) {
      // record boundaries are lost: nothing after this point can be found
      problems.push(`payload byte ${recordAt}: ${errorMessage(e)}; the rest of the block (${r.end - recordAt} bytes) was not read`);
      break;
    }
    const body = new ByteReader(payload, r.pos, r.pos + length);
    r.pos += length;
    try {
      if (type === RECORD_TYPE.CODE) block.codes.push(readCodeRecord(body));
      else if (type === RECORD_TYPE.SAMPLE) block.samples.push(decoder.decode(body));
      else if (type === RECORD_TYPE.THREAD_NAME) block.names.push(readThreadNameRecord(body));
      else if (type === RECORD_TYPE.NATIVE_OBJECT) block.objects.push(readNativeObjectRecord(body, budget));
      else unknownTypes.set(type, (unknownTypes.get(type) ?? 0) + 1);
    } catch (e) {
      if (!(e instanceof DecodeError)) throw e;
      if (skipped++ === 0) problems.push(`${recordName(type)} record at payload byte ${recordAt}: ${e.message} (at payload byte ${e.at})`);
    }
  }
  if (skipped > 1) problems.push(`${skipped} records skipped in all`);
  else if (skipped === 1) problems.push('record skipped');
  for (const [type, n] of unknownTypes) problems.push(`${n} record(s) of unknown type ${type} skipped (written by a newer pyunwind?)`);
  const warnings = problems.length ? [{ offset: raw.offset, message: `${where}: ${problems.join('; ')}` }] : [];
  return { block, warnings };
}

/**
 * A capture being read. Build one with `openCapture` (a file), `readCaptureBytes` (memory), or
 * directly over any CaptureSource. Throws CaptureError if the header cannot be used.
 */
export class CaptureReader {
  readonly header: CaptureHeader;
  readonly formatVersion: { major: number; minor: number };
  /** byte offset of the first block */
  readonly dataStart: number;
  /** the file ends with an intact end block: the writer closed it (known at open) */
  readonly closedCleanly: boolean;
  /** the totals of the end block, when `closedCleanly` (known at open, e.g. for progress) */
  readonly trailer: CaptureTrailer | null;
  /** problems found so far, in file order; iterating the blocks adds to it */
  readonly warnings: CaptureWarning[] = [];
  private readonly seen = new Set<string>();

  constructor(
    private readonly source: CaptureSource,
    /** the file name used in messages */
    readonly name: string,
  ) {
    const info = decodeHeader(name, source.size, (offset, length) => source.read(offset, length));
    this.header = info.header;
    this.formatVersion = { major: info.major, minor: info.minor };
    this.dataStart = info.end;
    this.trailer = this.findTrailer();
    this.closedCleanly = this.trailer !== null;
  }

  get size(): number {
    return this.source.size;
  }

  /**
   * Blocks in file order, decoded. Can be iterated again (each pass reads the file again);
   * a warning is recorded once however often its block is passed.
   */
  *blocks(): Generator<CaptureBlock> {
    for (const raw of this.rawBlocks()) {
      const { block, warnings } = decodeBlock(raw);
      for (const w of warnings) this.warn(w.offset, w.message);
      if (block) yield block;
    }
  }

  /**
   * Blocks in file order, checked but not decoded, for decoding elsewhere (`decodeBlock`,
   * e.g. in workers). Problems with the file's structure go to `warnings`.
   */
  *rawBlocks(): Generator<RawBlock> {
    const size = this.source.size;
    let pos = this.dataStart;
    let complete = 0;
    let expected = 0;
    // a warning already explains a break in the block numbers
    let explained = false;
    // every pass either returns or moves pos forward by at least one byte
    while (pos < size) {
      const left = size - pos;
      const head = this.source.read(pos, Math.min(BLOCK_HEADER_SIZE, left));
      if (head.length < BLOCK_HEADER_SIZE) {
        this.warn(pos, this.endsInside(head, pos, expected, complete));
        return;
      }
      const header = parseBlockHeader(head);
      if (typeof header === 'string') {
        const next = this.scan(pos + 1);
        this.warn(
          pos,
          `byte ${pos}: no intact block header where block ${expected} should start (${header}); ` +
            (next < 0 ? `no intact block follows up to the end of the file (byte ${size}); ${complete} complete blocks read` : `skipped ${next - pos} bytes to the next intact block at byte ${next}`),
        );
        if (next < 0) return;
        pos = next;
        explained = true;
        continue;
      }
      const where = `block ${header.seq} at byte ${pos}`;
      if (header.seq !== expected && !explained) {
        this.warn(pos, `${where}: expected block ${expected} here (blocks are missing or out of order)`);
      }
      explained = false;
      expected = header.seq + 1;
      const end = pos + BLOCK_HEADER_SIZE + header.storedLength;
      if (header.storedLength > MAX_BLOCK_RAW || header.rawLength > MAX_BLOCK_RAW) {
        if (end > size) {
          this.warn(pos, `${where}: stored length ${header.storedLength} passes the end of the file (byte ${size}) and any block's limit; ${complete} complete blocks read`);
          return;
        }
        this.warn(pos, `${where}: stored length ${header.storedLength} / raw length ${header.rawLength} exceed the limit of ${MAX_BLOCK_RAW}; block skipped`);
        pos = end;
        continue;
      }
      const stored = end <= size ? this.source.read(pos + BLOCK_HEADER_SIZE, header.storedLength) : null;
      if (!stored || stored.length < header.storedLength) {
        this.warn(pos, `file ends at byte ${size} inside block ${header.seq} (started at byte ${pos}, ${end - pos} bytes long): the recording was cut short; ${complete} complete blocks read`);
        return;
      }
      const computed = crc32(stored);
      if (computed !== header.payloadCrc) {
        const isEnd = header.type === BLOCK_TYPE.END; // the header's checksum vouches for its type
        this.warn(pos, `${where}${isEnd ? ' (the end marker)' : ''}: checksum mismatch (stored ${hex32(header.payloadCrc)}, computed ${hex32(computed)}); block skipped`);
        if (isEnd) return;
        pos = end;
        explained = true;
        continue;
      }
      if (header.type === BLOCK_TYPE.END) {
        if (end < size) this.warn(end, `${size - end} bytes after the end marker (${where}) were ignored`);
        return;
      }
      if (header.type !== BLOCK_TYPE.RECORDS && header.type !== BLOCK_TYPE.SECTIONS) {
        this.warn(pos, `${where}: unknown block type ${header.type} skipped (written by a newer pyunwind?)`);
        pos = end;
        continue;
      }
      complete++;
      yield { type: header.type, index: header.seq, offset: pos, compression: header.compression, flags: header.flags, rawLength: header.rawLength, stored };
      pos = end;
    }
    const after = expected === 0 ? 'its header' : `block ${expected - 1}`;
    this.warn(size, `file ends at byte ${size} after ${after} without an end marker: the recording was cut short (or is still being written); ${complete} complete blocks read`);
  }

  /** Closes the file (if the reader owns one). */
  /** Record a problem found while decoding a block elsewhere (decodeBlock's warnings), once. */
  report(warning: CaptureWarning): void {
    this.warn(warning.offset, warning.message);
  }

  close(): void {
    this.source.close?.();
  }

  private warn(offset: number, message: string): void {
    const key = `${offset}:${message}`;
    if (this.seen.has(key)) return;
    this.seen.add(key);
    this.warnings.push({ offset, message });
  }

  /** The warning for a file that ends less than a block header after `pos`. */
  private endsInside(head: Uint8Array, pos: number, expected: number, complete: number): string {
    const size = this.source.size;
    const magicPart = head.subarray(0, Math.min(head.length, BLOCK_MAGIC.length));
    if (magicPart.every((b, i) => b === BLOCK_MAGIC[i])) {
      return `file ends at byte ${size} inside block ${expected} (started at byte ${pos}): the recording was cut short; ${complete} complete blocks read`;
    }
    return `file ends at byte ${size} with ${head.length} bytes that are not a block (${describeBytes(head)}) at byte ${pos}; ${complete} complete blocks read`;
  }

  /** Offset of the next intact block header (magic and header checksum) at or after `from`, or -1. */
  private scan(from: number): number {
    const size = this.source.size;
    for (let base = from; base < size; base += SCAN_CHUNK) {
      // overlap by a magic's length so a magic across the chunk edge is seen
      const chunk = this.source.read(base, Math.min(SCAN_CHUNK + BLOCK_MAGIC.length - 1, size - base));
      for (let i = findMagic(chunk, 0); i !== -1 && i < SCAN_CHUNK; i = findMagic(chunk, i + 1)) {
        const at = base + i;
        if (typeof parseBlockHeader(this.source.read(at, BLOCK_HEADER_SIZE)) !== 'string') return at;
      }
    }
    return -1;
  }

  /** The end block's totals if the file ends with an intact end block. */
  private findTrailer(): CaptureTrailer | null {
    const size = this.source.size;
    const from = Math.max(this.dataStart, size - TAIL_SCAN);
    const tail = this.source.read(from, size - from);
    const m0 = BLOCK_MAGIC[0]!;
    for (let i = tail.lastIndexOf(m0); i >= 0; i = i > 0 ? tail.lastIndexOf(m0, i - 1) : -1) {
      const header = parseBlockHeader(tail, i);
      if (typeof header === 'string' || header.type !== BLOCK_TYPE.END) continue;
      if (i + BLOCK_HEADER_SIZE + header.storedLength !== tail.length) continue;
      const stored = tail.subarray(i + BLOCK_HEADER_SIZE);
      if (crc32(stored) !== header.payloadCrc) continue;
      const raw = unpack({ type: header.type, index: header.seq, offset: from + i, compression: header.compression, flags: header.flags, rawLength: header.rawLength, stored });
      if (typeof raw === 'string') continue;
      try {
        return decodeTrailer(raw);
      } catch {
        continue;
      }
    }
    return null;
  }
}

/** A capture held in memory (a test, a file dropped on a web page). */
export function readCaptureBytes(bytes: Uint8Array, name = 'capture'): CaptureReader {
  const source: CaptureSource = {
    size: bytes.length,
    read: (offset, length) => bytes.subarray(offset, Math.min(bytes.length, offset + length)),
  };
  return new CaptureReader(source, name);
}
