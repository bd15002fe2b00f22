// Writes a .pyuw capture: the header at construction, then blocks of code, native object and
// sample records, each handed to the sink in one write as soon as it is complete, then an end block.

import {
  BLOCK_TYPE,
  ByteWriter,
  DEFAULT_BLOCK_BYTES,
  DEFAULT_COMPRESSION_LEVEL,
  MAX_BLOCK_RAW,
  RECORD_TYPE,
  checkCodeRecord,
  checkThreadNameRecord,
  checkUint,
  BLOCK_FLAG,
  COMPRESSION,
  blockWithHeader,
  crc32,
  encodeBlock,
  encodeHeader,
  encodeTrailer,
  writeCodeRecord,
  writeThreadNameRecord,
} from './format.js';
import { MAX_BLOCK_SAMPLE_BYTES, SampleEncoder, checkSampleRecord, sampleBytes } from './patch.js';
import type { CaptureHeader, CodeRecord, SampleRecord, ThreadNameRecord } from './types.js';
import type { NativeObject } from '../native/objects.js';
import { NativeBudget, checkNativeObject, objectsOverlap, writeNativeObjectRecord } from './native-object-record.js';
import { concatBytes } from './concat.js';
import { SEC_RECORDS } from './codes.js';
import { packSections } from './section-block.js';
import { SectionEncoder } from './section-encoder.js';

/** Raw bytes after which a section block is ended: about a second at 10 kHz on a busy program (docs/capture-format.md). */
const DEFAULT_SECTION_BLOCK_BYTES = 1 << 20;

/** Where the bytes go. `write` is synchronous: when it returns, the bytes are the sink's. */
export interface CaptureSink {
  write(bytes: Uint8Array): void;
  close?(): void;
}

export interface CaptureWriterOptions {
  /**
   * how samples are written: `sections` (format 1.4 section blocks: each kind of field in a
   * section of its own, samples against their thread's previous one and the block's frame
   * images) or `records` (record blocks, a record per sample: format 1.3 and before).
   * Default: sections.
   */
  blocks?: 'sections' | 'records';
  /** raw (uncompressed) bytes after which a block is ended; default 1 MiB for sections, 128 KiB for records */
  blockBytes?: number;
  /** deflate level 1–9 (0: never compress); default 6 */
  compressionLevel?: number;
}

/** Collects everything written, for tests and in-memory use (e.g. a browser recorder). */
export function memorySink(): CaptureSink & { bytes(): Uint8Array; readonly length: number } {
  const parts: Uint8Array[] = [];
  let length = 0;
  let joined: Uint8Array | null = null;
  return {
    write(bytes: Uint8Array): void {
      parts.push(bytes.slice());
      length += bytes.length;
      joined = null;
    },
    get length(): number {
      return length;
    },
    /** everything written so far, as one array */
    bytes(): Uint8Array {
      joined ??= concatBytes(parts, length);
      return joined;
    },
  };
}

export class CaptureWriter {
  /** samples in blocks handed to the sink (added samples still in the open block are not counted) */
  samplesWritten = 0;
  /** code records in blocks handed to the sink */
  codesWritten = 0;
  /** bytes handed to the sink, header included */
  bytesWritten = 0;
  /** record blocks handed to the sink (the end block is not counted) */
  blocksWritten = 0;
  /** missed samples in blocks handed to the sink */
  missedWritten = 0;
  /** thread-name records in blocks handed to the sink */
  namesWritten = 0;
  /** native object records in blocks handed to the sink (format 1.5) */
  objectsWritten = 0;

  private readonly blockBytes: number;
  private readonly level: number;
  private readonly codes = new ByteWriter(4096);
  /** the open block's native object records (after its code records, before its samples) */
  private readonly objects = new ByteWriter(4096);
  /** the ranges of the objects added so far: one that overlaps an earlier one replaces it */
  private readonly objectRanges: { start: bigint; end: bigint }[] = [];
  /** the header says the recorder copied native stacks (format 1.5): registers and objects may be written */
  private readonly native: boolean;
  /** record blocks: the sample and thread-name records; section blocks: the thread-name records */
  private readonly samples = new ByteWriter(1 << 16);
  private readonly scratch = new ByteWriter(1 << 14);
  private readonly encoder = new SampleEncoder();
  /** the section blocks' encoder (null: record blocks) */
  private readonly sections: SectionEncoder | null;
  private blockCodes = 0;
  private blockSamples = 0;
  private blockMissed = 0;
  private blockNames = 0;
  private blockObjects = 0;
  /** rows, symbols and name bytes of the open block's object records, against the reader's limits */
  private objectBudget = new NativeBudget();
  /** region bytes of the open block's samples, against MAX_BLOCK_SAMPLE_BYTES */
  private blockSampleBytes = 0;
  private closed = false;

  constructor(
    private readonly sink: CaptureSink,
    header: CaptureHeader,
    options: CaptureWriterOptions = {},
  ) {
    this.sections = options.blocks === 'records' ? null : new SectionEncoder();
    const blockBytes = options.blockBytes ?? (this.sections ? DEFAULT_SECTION_BLOCK_BYTES : DEFAULT_BLOCK_BYTES);
    if (!Number.isFinite(blockBytes) || blockBytes < 1) throw new RangeError(`blockBytes must be a positive number (got ${blockBytes})`);
    // past MAX_BLOCK_RAW, `overflows` ends blocks anyway
    this.blockBytes = blockBytes;
    const level = options.compressionLevel ?? DEFAULT_COMPRESSION_LEVEL;
    if (!Number.isInteger(level) || level < 0 || level > 9) throw new RangeError(`compressionLevel must be an integer 0-9 (got ${level})`);
    this.level = level;
    this.native = header.native !== undefined;
    this.emit(encodeHeader(header));
  }

  /** Raw bytes of the open block so far. */
  get pendingBytes(): number {
    return this.codes.length + this.objects.length + this.samples.length + (this.sections ? this.sections.rawBytes : 0);
  }

  /** Samples added to the open block, not yet handed to the sink. */
  get pendingSamples(): number {
    return this.blockSamples;
  }

  addCode(rec: CodeRecord): void {
    this.checkOpen();
    checkCodeRecord(rec);
    const body = this.scratch;
    body.reset();
    writeCodeRecord(body, rec);
    checkFits(body.length, 'code record');
    if (this.overflows(body.length)) this.flush();
    appendRecord(this.codes, RECORD_TYPE.CODE, body);
    this.blockCodes++;
    this.flushIfFull();
  }

  /**
   * A mapped object's unwind table and symbols (format 1.5: a capture whose header has `native`),
   * written in the open block, where it applies to the block's samples and every later block's.
   * An object whose range overlaps one added before replaces it: the open block is ended first
   * if it holds samples, so that they keep the object they were taken with.
   */
  addObject(o: NativeObject): void {
    this.checkOpen();
    if (!this.native) throw new Error('CaptureWriter: a native object record in a capture whose header has no `native` (format 1.5)');
    checkNativeObject(o);
    const body = this.scratch;
    body.reset();
    writeNativeObjectRecord(body, o);
    checkFits(body.length, 'native object record');
    const replaces = this.objectRanges.some((r) => objectsOverlap(r, o));
    if ((replaces && this.blockSamples > 0) || this.overflows(body.length) || !this.objectBudget.fits(o)) this.flush();
    appendRecord(this.objects, RECORD_TYPE.NATIVE_OBJECT, body);
    this.objectBudget.add(o);
    this.blockObjects++;
    // (the ranges in force: those it replaces are gone)
    for (let i = this.objectRanges.length - 1; i >= 0; i--) if (objectsOverlap(this.objectRanges[i]!, o)) this.objectRanges.splice(i, 1);
    this.objectRanges.push({ start: o.start, end: o.end });
    this.flushIfFull();
  }

  /**
   * `immutable`: the caller never changes the record's bytes afterwards, so the writer may keep
   * them as the thread's base for the next sample instead of a copy (the recorder's copies
   * are fresh arrays each time).
   */
  addSample(rec: SampleRecord, immutable = false): void {
    this.checkOpen();
    checkSampleRecord(rec);
    if (rec.registers !== undefined && !this.native) throw new Error('CaptureWriter: a sample with registers in a capture whose header has no `native` (format 1.5)');
    const weight = sampleBytes(rec);
    if (weight > MAX_BLOCK_SAMPLE_BYTES) throw new RangeError(`sample of thread 0x${rec.threadStateAddress.toString(16)} holds ${weight} region bytes, more than a block may (${MAX_BLOCK_SAMPLE_BYTES})`);
    if (this.sections) {
      // (what it can take at most: every region literal, with its varints and an address)
      let most = 128 + weight + 24 * rec.regions.length;
      for (const e of rec.errors) most += 10 + 3 * e.length;
      checkFits(most, 'sample record');
      if (this.blockSampleBytes + weight > MAX_BLOCK_SAMPLE_BYTES || this.overflows(most)) this.flush();
      // (what the decoder charges: a region the thread's previous sample had, unchanged, costs
      // nothing — a waiting thread's native stack is hundreds of KB each time)
      this.blockSampleBytes += this.sections.encode(rec, immutable);
      this.blockSamples++;
      this.flushIfFull();
      return;
    }
    const body = this.scratch;
    body.reset();
    let mark = this.encoder.mark();
    this.encoder.encode(body, rec);
    if (this.blockSampleBytes + weight > MAX_BLOCK_SAMPLE_BYTES || this.overflows(body.length)) {
      // a new block: the sample cannot be a patch against the old one's samples
      this.encoder.rollback(mark);
      this.flush();
      body.reset();
      mark = this.encoder.mark();
      this.encoder.encode(body, rec);
    }
    try {
      checkFits(body.length, 'sample record');
    } catch (e) {
      // not written: the frame images it added must not be referred to
      this.encoder.rollback(mark);
      throw e;
    }
    appendRecord(this.samples, RECORD_TYPE.SAMPLE, body);
    this.encoder.commit(rec, immutable);
    this.blockSamples++;
    this.blockSampleBytes += weight;
    this.flushIfFull();
  }

  /**
   * A thread's name as `threading` gave it (format 1.1): written among the samples, in the order
   * added (a reader takes a block's names whatever their place in it).
   */
  addThreadName(rec: ThreadNameRecord): void {
    this.checkOpen();
    checkThreadNameRecord(rec);
    const body = this.scratch;
    body.reset();
    writeThreadNameRecord(body, rec);
    checkFits(body.length, 'thread name record');
    if (this.overflows(body.length)) this.flush();
    appendRecord(this.samples, RECORD_TYPE.THREAD_NAME, body);
    this.blockNames++;
    this.flushIfFull();
  }

  /** Samples the schedule wanted but never attempted; recorded in the open block. */
  addMissed(n: number): void {
    this.checkOpen();
    this.blockMissed += checkUint(n, 'missed count');
  }

  /** Ends the open block, if it holds anything, and hands it to the sink. */
  flush(): void {
    this.checkOpen();
    if (this.blockCodes === 0 && this.blockSamples === 0 && this.blockMissed === 0 && this.blockNames === 0 && this.blockObjects === 0) return;
    const raw = new ByteWriter(16 + this.codes.length + this.objects.length + this.samples.length);
    raw.uint(this.blockMissed);
    // codes first: a code added before a sample is then visible to it whatever the order of adds;
    // then objects (after the codes: a reader that looks for a block's codes stops at another record)
    raw.bytes(this.codes.view());
    raw.bytes(this.objects.view());
    raw.bytes(this.samples.view());
    // (objects, like codes, are what every worker needs: a block with either is not passed over)
    const flags = this.blockCodes === 0 && this.blockObjects === 0 ? BLOCK_FLAG.NO_CODES : 0;
    if (this.sections) {
      // the records section (missed, codes, objects, names), then the samples' sections
      const parts = this.sections.parts();
      parts[SEC_RECORDS] = raw.view();
      const { stored, rawLength } = packSections(parts, this.level);
      this.emit(blockWithHeader({ type: BLOCK_TYPE.SECTIONS, compression: COMPRESSION.NONE, seq: this.blocksWritten, flags, storedLength: stored.length, rawLength, payloadCrc: crc32(stored) }, stored));
      this.sections.reset();
    } else {
      this.emit(encodeBlock(BLOCK_TYPE.RECORDS, this.blocksWritten, raw.view(), this.level, flags));
    }
    this.blocksWritten++;
    this.samplesWritten += this.blockSamples;
    this.codesWritten += this.blockCodes;
    this.missedWritten += this.blockMissed;
    this.namesWritten += this.blockNames;
    this.objectsWritten += this.blockObjects;
    this.codes.reset();
    this.objects.reset();
    this.objectBudget = new NativeBudget();
    this.samples.reset();
    this.encoder.reset();
    this.blockCodes = this.blockSamples = this.blockMissed = this.blockSampleBytes = this.blockNames = this.blockObjects = 0;
  }

  /** Flushes, writes the end block with the totals, and closes the sink. */
  close(): void {
    if (this.closed) return;
    this.flush();
    const trailer = encodeTrailer({ blocks: this.blocksWritten, samples: this.samplesWritten, codes: this.codesWritten, missed: this.missedWritten });
    this.emit(encodeBlock(BLOCK_TYPE.END, this.blocksWritten, trailer, 0));
    this.closed = true;
    this.sink.close?.();
  }

  private emit(bytes: Uint8Array): void {
    this.sink.write(bytes);
    this.bytesWritten += bytes.length;
  }

  private checkOpen(): void {
    if (this.closed) throw new Error('CaptureWriter: the capture is closed');
  }

  /** Would a record of `n` body bytes push the open block past the format's limit? */
  private overflows(n: number): boolean {
    return this.pendingBytes > 0 && this.pendingBytes + n + 1024 > MAX_BLOCK_RAW;
  }

  private flushIfFull(): void {
    if (this.pendingBytes >= this.blockBytes) this.flush();
  }
}

/**
 * A record must fit a block on its own, with room for the block's and its own varints — and, in a
 * section block, for the section table (26 entries of up to 11 bytes).
 */
function checkFits(n: number, what: string): void {
  if (n + 512 > MAX_BLOCK_RAW) throw new RangeError(`a ${what} of ${n} bytes does not fit in a block (limit ${MAX_BLOCK_RAW})`);
}

/** type byte, varint body length, body */
function appendRecord(to: ByteWriter, type: number, body: ByteWriter): void {
  to.u8(type);
  to.uint(body.length);
  to.bytes(body.view());
}
