// Reads a section block (format 1.4; docs/capture-format.md, "Section block"): the reference
// decoder, which the block engine (assembly/engine.ts) must agree with sample for sample. The
// sections are read side by side, a sample at a time; what a sample needs of its thread's
// previous one, and the block's frame images with their children and strides, are kept as the
// encoder (section-encoder.ts) kept them.
//
// A section block has no record boundaries to resume at: the first sample that does not decode
// ends the block's samples (those before it are kept, and the block's code and name records).
// Decoded samples share bytes with the samples before them where a region did not change:
// region bytes are read-only, as for record blocks.

import {
  ID_INTERPRETER,
  ID_NATIVE,
  ID_THREAD,
  LIST_EXPLICIT,
  LIST_SAME,
  LIST_UNCHANGED,
  MAX_FRAME_WORDS,
  OP_CHILD,
  OP_CHILD_CHANGED,
  OP_IMAGE,
  OP_IMAGE_CHANGED,
  OP_LITERAL,
  OP_RAN,
  RECORD_CODE,
  RECORD_NATIVE_OBJECT,
  RECORD_THREAD_NAME,
  REGION_LITERAL,
  REGION_STACK,
  REGION_WORDS,
  SECTION_COUNT,
  SEC_ADDRESSES,
  SEC_BYTES,
  SEC_COPY,
  SEC_DELTA,
  SEC_ERRORS,
  SEC_FLAGS,
  SEC_IDS,
  SEC_IMAGE,
  SEC_KINDS,
  SEC_LENGTHS,
  SEC_MASK,
  SEC_OP,
  SEC_POP,
  SEC_PUSH,
  SEC_RECORDS,
  SEC_REGIONS,
  SEC_REGISTERS,
  SEC_SHAPE,
  SEC_STATUS,
  SEC_STRIDE,
  SEC_THREAD,
  SEC_TIME,
  SEC_WORD_COUNT,
  SEC_WORD_DELTA,
  SEC_WORD_GAP,
  SEC_WORD_REF,
} from './codes.js';
import { ByteReader, DecodeError, MAX_BLOCK_RAW, readCodeRecord, readThreadNameRecord } from './format.js';
import { framePlace, placeAt } from './frame-images.js';
import { MAX_BLOCK_SAMPLE_BYTES } from './patch.js';
import { sectionViews } from './section-block.js';
import { NativeBudget, readNativeObjectRecord } from './native-object-record.js';
import { readSectionRegisters } from './registers.js';
import type { NativeRegisters } from '../native/unwind.js';
import type { FrameList } from './section-encoder.js';
import { Refs, StackModel, halves, putU32, u32, unzig32 } from './stack-model.js';
import type { CaptureBlock, RecorderStatus, Region, SampleRecord } from './types.js';

const STATUS_NAMES: RecorderStatus[] = ['ok', 'torn'];
const SECTION_NAMES = [
  'records', 'thread', 'ids', 'time', 'flags', 'status', 'copy', 'errors', 'regions', 'addresses', 'kinds', 'lengths', 'bytes',
  'word count', 'word gap', 'word reference', 'word change', 'pop', 'push', 'stride', 'op', 'image', 'mask', 'change', 'shape', 'registers',
];

/** What the decoder keeps of a thread's previous sample in the block. */
interface Thread {
  record: SampleRecord;
  frames: (FrameList | null)[];
}

/** A frame of a stack region as read, before the region's length is known. */
interface Written {
  offset: number;
  op: number;
  /** the image it is (OP_CHILD, OP_IMAGE) or is changed from (-1: its bytes, or the base region's frame) */
  from: number;
  /** the image it makes (ops that make one; -1 once the block's images are full) */
  made: number;
  bytes: Uint8Array | null;
  mask: number;
  changes: bigint[];
}

/**
 * The records and samples of a section block's unpacked payload. Problems are returned as
 * messages (the caller names the block); `block` is null when not even the records could be read.
 */
export function decodeSectionBlock(payload: Uint8Array, index: number, offset: number): { block: CaptureBlock | null; problems: string[] } {
  const problems: string[] = [];
  let views: Uint8Array[];
  try {
    views = sectionViews(payload);
  } catch (e) {
    if (!(e instanceof DecodeError)) throw e;
    return { block: null, problems: [`section table: ${e.message}`] };
  }
  if (views.length < SECTION_COUNT) return { block: null, problems: [`${views.length} sections, fewer than the ${SECTION_COUNT} of format 1.4`] };
  const block: CaptureBlock = { index, offset, codes: [], samples: [], names: [], objects: [], missed: 0 };
  readRecords(views[SEC_RECORDS]!, block, problems);
  const d = new SectionDecoder(views, problems);
  const r = d.reader(SEC_THREAD);
  let n = 0;
  while (r.pos < r.end) {
    try {
      block.samples.push(d.sample(n));
    } catch (e) {
      if (!(e instanceof DecodeError)) throw e;
      problems.push(`sample ${n} (${SECTION_NAMES[d.failedIn(e)] ?? 'a'} section, byte ${e.at}): ${e.message}; the block's ${d.remaining()} later samples cannot be read`);
      return { block, problems };
    }
    n++;
  }
  for (let k = 1; k < SECTION_COUNT; k++) {
    const left = d.reader(k).remaining;
    if (left > 0) problems.push(`${left} bytes left in the ${SECTION_NAMES[k]} section after the block's samples`);
  }
  d.registersLeft();
  return { block, problems };
}

/** The records section: missed count, then code and thread-name records as in a record block. */
function readRecords(bytes: Uint8Array, block: CaptureBlock, problems: string[]): void {
  const r = new ByteReader(bytes);
  try {
    block.missed = r.uint('missed count');
  } catch (e) {
    if (!(e instanceof DecodeError)) throw e;
    problems.push(`records section: ${e.message}`);
    return;
  }
  let skipped = 0;
  const unknown = new Map<number, number>();
  const budget = new NativeBudget();
  while (r.pos < r.end) {
    const at = r.pos;
    let type: number;
    let length: number;
    try {
      type = r.u8('record type');
      length = r.uint('record length');
      if (length > r.remaining) r.fail(`record length ${length} passes the end of the section (${r.remaining} bytes left)`, at);
    } catch (e) {
      if (!(e instanceof DecodeError)) throw e;
      problems.push(`records section byte ${at}: ${e.message}; the rest of the section was not read`);
      return;
    }
    const body = new ByteReader(bytes, r.pos, r.pos + length);
    r.pos += length;
    try {
      if (type === RECORD_CODE) block.codes.push(readCodeRecord(body));
      else if (type === RECORD_THREAD_NAME) block.names.push(readThreadNameRecord(body));
      else if (type === RECORD_NATIVE_OBJECT) block.objects.push(readNativeObjectRecord(body, budget));
      else unknown.set(type, (unknown.get(type) ?? 0) + 1);
    } catch (e) {
      if (!(e instanceof DecodeError)) throw e;
      if (skipped++ === 0) problems.push(`${type === RECORD_CODE ? 'code' : type === RECORD_NATIVE_OBJECT ? 'native object' : 'thread name'} record at records section byte ${at}: ${e.message} (at byte ${e.at})`);
    }
  }
  if (skipped > 1) problems.push(`${skipped} records skipped in all`);
  for (const [type, n] of unknown) problems.push(`${n} record(s) of type ${type} skipped (not one a section block's records section holds)`);
}

class SectionDecoder {
  private readonly readers: ByteReader[];
  private readonly threads: Thread[] = [];
  private readonly model = new StackModel(false);
  private readonly refs = new Refs();
  private lastTime = 0;
  private wordBytes = 0;
  private frameWords = 0;
  /** region bytes of the block's samples made so far, against MAX_BLOCK_SAMPLE_BYTES */
  private made = 0;
  /**
   * the registers section (format 1.5), while it can be read: null when the block lists none, or
   * once an entry did not decode — the samples from there on have no registers (the block engine
   * does not read it: a damaged one costs the registers, not the samples, both ways)
   */
  private registers: ByteReader | null;

  constructor(
    views: Uint8Array[],
    private readonly problems: string[],
  ) {
    this.readers = views.map((v) => new ByteReader(v));
    this.registers = this.readers[SEC_REGISTERS] ?? null;
  }

  /** The sample's registers, against its thread's previous sample's (undefined: none, or none readable). */
  private sampleRegisters(n: number, prev: NativeRegisters | undefined): NativeRegisters | undefined {
    const r = this.registers;
    if (!r) return undefined;
    try {
      return readSectionRegisters(r, prev);
    } catch (e) {
      if (!(e instanceof DecodeError)) throw e;
      this.problems.push(`sample ${n} (registers section, byte ${e.at}): ${e.message}; the block's samples from there on have no registers`);
      this.registers = null;
      return undefined;
    }
  }

  /** Reports bytes the block's samples left in the registers section. */
  registersLeft(): void {
    const left = this.registers?.remaining ?? 0;
    if (left > 0) this.problems.push(`${left} bytes left in the registers section after the block's samples`);
  }

  reader(k: number): ByteReader {
    return this.readers[k]!;
  }

  /** the section whose reader a DecodeError came from (the one whose buffer holds its offset: best effort) */
  failedIn(e: DecodeError & { section?: number }): number {
    return e.section ?? -1;
  }

  /** samples left to read, as the thread section counts them (one slot each) */
  remaining(): number {
    const r = this.readers[SEC_THREAD]!;
    let n = 0;
    for (let p = r.pos; p < r.end; p++) if (r.buf[p]! < 0x80) n++;
    return n;
  }

  /** Reads from section k, naming it in any error. */
  private read<T>(k: number, f: (r: ByteReader) => T): T {
    try {
      return f(this.readers[k]!);
    } catch (e) {
      if (e instanceof DecodeError) (e as DecodeError & { section?: number }).section ??= k;
      throw e;
    }
  }

  private uint(k: number, what: string): number {
    return this.read(k, (r) => r.uint(what));
  }

  private fail(k: number, message: string): never {
    const e = new DecodeError(message, this.readers[k]!.pos) as DecodeError & { section?: number };
    e.section = k;
    throw e;
  }

  /** The next sample; `n`: how many the block gave before it (for messages). */
  sample(n: number): SampleRecord {
    const slot = this.uint(SEC_THREAD, 'thread slot');
    if (slot > this.threads.length) this.fail(SEC_THREAD, `thread slot ${slot}, but the block has ${this.threads.length} threads so far`);
    const th = slot < this.threads.length ? this.threads[slot]! : null;
    let threadStateAddress: bigint;
    let interpreterId: bigint;
    let threadId: bigint;
    let nativeThreadId: bigint;
    if (!th) {
      threadStateAddress = this.read(SEC_IDS, (r) => r.big('thread state address'));
      interpreterId = this.read(SEC_IDS, (r) => r.big('interpreter id'));
      threadId = this.read(SEC_IDS, (r) => r.big('thread id'));
      nativeThreadId = this.read(SEC_IDS, (r) => r.big('native thread id'));
      if (this.threads.some((t) => t.record.threadStateAddress === threadStateAddress)) this.fail(SEC_IDS, `a new slot for thread 0x${threadStateAddress.toString(16)}, which has one`);
    } else {
      const was = th.record;
      threadStateAddress = was.threadStateAddress;
      const mask = this.read(SEC_IDS, (r) => r.u8('id mask'));
      if (mask & ~(ID_INTERPRETER | ID_THREAD | ID_NATIVE)) this.fail(SEC_IDS, `unknown id mask bits 0x${mask.toString(16)}`);
      interpreterId = mask & ID_INTERPRETER ? this.read(SEC_IDS, (r) => r.big('interpreter id')) : was.interpreterId;
      threadId = mask & ID_THREAD ? this.read(SEC_IDS, (r) => r.big('thread id')) : was.threadId;
      nativeThreadId = mask & ID_NATIVE ? this.read(SEC_IDS, (r) => r.big('native thread id')) : was.nativeThreadId;
    }
    const time = this.lastTime + this.read(SEC_TIME, (r) => r.sint('time change'));
    if (time < 0 || time > Number.MAX_SAFE_INTEGER) this.fail(SEC_TIME, `time ${time} out of range`);
    this.lastTime = time;
    const flagsCode = this.uint(SEC_FLAGS, 'flags');
    if (flagsCode === 0 && !th) this.fail(SEC_FLAGS, "a new thread's sample with its previous sample's flags");
    const flags = flagsCode === 0 ? th!.record.flags : flagsCode - 1;
    const statusCode = this.read(SEC_STATUS, (r) => r.u8('recorder status'));
    const recorderStatus = STATUS_NAMES[statusCode] ?? this.fail(SEC_STATUS, `unknown recorder status code ${statusCode}`);
    const copyMicros = this.uint(SEC_COPY, 'copy micros');
    const errorCount = this.read(SEC_ERRORS, (r) => r.count('error count', 1));
    const errors: string[] = new Array(errorCount);
    for (let i = 0; i < errorCount; i++) errors[i] = this.read(SEC_ERRORS, (r) => r.string(`error ${i}`));
    const registers = this.sampleRegisters(n, th?.record.registers);

    const list = this.uint(SEC_REGIONS, 'region list');
    if (list === LIST_UNCHANGED) {
      if (!th) this.fail(SEC_REGIONS, "a new thread's sample with its previous sample's regions");
      const record: SampleRecord = { time, interpreterId, threadStateAddress, threadId, nativeThreadId, flags, recorderStatus, copyMicros, regions: th.record.regions, errors };
      if (registers) record.registers = registers;
      this.threads[slot] = { record, frames: th.frames };
      return record;
    }
    const base = th ? th.record.regions : [];
    let count: number;
    let baseOf: Int32Array;
    if (list === LIST_SAME) {
      if (!th) this.fail(SEC_REGIONS, "a new thread's sample with its previous sample's regions");
      count = base.length;
      baseOf = Int32Array.from({ length: count }, (_, k) => k);
    } else {
      count = list - LIST_EXPLICIT;
      if (count > this.readers[SEC_REGIONS]!.remaining) this.fail(SEC_REGIONS, `${count} regions cannot fit in the section's ${this.readers[SEC_REGIONS]!.remaining} bytes left`);
      baseOf = new Int32Array(count);
      const used = new Uint8Array(base.length);
      for (let k = 0; k < count; k++) {
        const j = this.uint(SEC_REGIONS, 'base region') - 1;
        if (j >= base.length) this.fail(SEC_REGIONS, `region ${k}: base region ${j} does not exist (the previous sample has ${base.length})`);
        if (j >= 0) {
          if (used[j]) this.fail(SEC_REGIONS, `region ${k}: base region ${j} taken twice`);
          used[j] = 1;
        }
        baseOf[k] = j;
      }
    }
    const addresses: bigint[] = new Array(count);
    for (let k = 0; k < count; k++) addresses[k] = baseOf[k]! >= 0 ? base[baseOf[k]!]!.address : this.read(SEC_ADDRESSES, (r) => r.big(`region ${k} address`));
    const kinds = new Uint8Array(count);
    for (let k = 0; k < count; k++) {
      const kind = this.read(SEC_KINDS, (r) => r.u8('region kind'));
      if (kind !== REGION_LITERAL && kind !== REGION_WORDS && kind !== REGION_STACK) this.fail(SEC_KINDS, `region ${k}: unknown region kind ${kind}`);
      if (kind === REGION_WORDS && baseOf[k]! < 0) this.fail(SEC_KINDS, `region ${k}: a words region without a base region`);
      kinds[k] = kind;
    }
    const regions: Region[] = new Array(count);
    const frames: (FrameList | null)[] = new Array<FrameList | null>(count).fill(null);
    this.refs.clear();
    for (let k = 0; k < count; k++) {
      if (kinds[k] !== REGION_STACK) continue;
      const j = baseOf[k]!;
      const got = this.stack(k, addresses[k]!, j >= 0 ? base[j]! : null, j >= 0 ? th!.frames[j]! : null);
      regions[k] = got.region;
      frames[k] = got.frames;
    }
    for (let k = 0; k < count; k++) {
      if (kinds[k] === REGION_WORDS) {
        const from = base[baseOf[k]!]!;
        const n = from.bytes.length + this.read(SEC_LENGTHS, (r) => r.sint(`region ${k} length change`));
        this.checkLength(k, n);
        regions[k] = { address: from.address, bytes: this.words(from.bytes, n, addresses[k]!) };
      } else if (kinds[k] === REGION_LITERAL) {
        const n = this.uint(SEC_LENGTHS, `region ${k} length`);
        if (n > MAX_BLOCK_RAW) this.fail(SEC_LENGTHS, `region ${k}: length ${n} exceeds ${MAX_BLOCK_RAW}`);
        this.charge(n);
        regions[k] = { address: addresses[k]!, bytes: this.read(SEC_BYTES, (r) => r.bytes(n, `region ${k} bytes`)) };
      }
    }
    const record: SampleRecord = { time, interpreterId, threadStateAddress, threadId, nativeThreadId, flags, recorderStatus, copyMicros, regions, errors };
    if (registers) record.registers = registers;
    this.threads[slot] = { record, frames };
    return record;
  }

  private checkLength(k: number, n: number): void {
    if (!Number.isSafeInteger(n) || n < 0 || n > MAX_BLOCK_RAW) this.fail(SEC_LENGTHS, `region ${k}: length ${n} (from 0 to ${MAX_BLOCK_RAW})`);
  }

  /** Counts bytes a region takes anew against the block's budget. */
  private charge(n: number): void {
    this.made += n;
    if (this.made > MAX_BLOCK_SAMPLE_BYTES) this.fail(SEC_LENGTHS, `the block's samples make more than ${MAX_BLOCK_SAMPLE_BYTES} region bytes`);
  }

  private stack(k: number, address: bigint, base: Region | null, baseFrames: FrameList | null): { region: Region; frames: FrameList } {
    if (this.wordBytes === 0) {
      const wb = this.uint(SEC_SHAPE, 'frame word size');
      const nw = this.uint(SEC_SHAPE, 'frame words');
      if ((wb !== 4 && wb !== 8) || nw < 1 || nw > MAX_FRAME_WORDS) this.fail(SEC_SHAPE, `frames of ${nw} words of ${wb} bytes (words of 4 or 8 bytes, 1 to ${MAX_FRAME_WORDS} of them)`);
      this.wordBytes = wb;
      this.frameWords = nw;
    }
    const wb = this.wordBytes;
    const nw = this.frameWords;
    const size = wb * nw;
    const model = this.model;
    const bOffs = baseFrames ? baseFrames.offsets : new Int32Array(0);
    const bImgs = baseFrames ? baseFrames.images : new Int32Array(0);
    const bc = bOffs.length;
    const oldLength = base ? base.bytes.length : 0;
    const pop = this.uint(SEC_POP, `region ${k} frames popped`);
    if (pop > bc) this.fail(SEC_POP, `region ${k}: ${pop} frames popped of a base region with ${bc}`);
    const keep = bc - pop;
    const push = this.read(SEC_PUSH, (r) => r.uint(`region ${k} frames written`));
    if (push > this.readers[SEC_OP]!.remaining) this.fail(SEC_PUSH, `region ${k}: ${push} frames cannot fit in the op section's ${this.readers[SEC_OP]!.remaining} bytes left`);
    const fc = keep + push;
    const offsets = new Int32Array(fc);
    const ids = new Int32Array(fc);
    offsets.set(bOffs.subarray(0, keep));
    ids.set(bImgs.subarray(0, keep));
    const written: Written[] = new Array(push);
    for (let i = keep; i < fc; i++) {
      const below = i > 0 ? ids[i - 1]! : -1;
      const belowAt = i > 0 ? offsets[i - 1]! : 0;
      const stride = model.strideOf(below);
      const predicted = i > 0 ? belowAt + (stride >= 0 ? stride : 0) : bc > 0 ? bOffs[0]! : 0;
      const off = predicted + this.read(SEC_STRIDE, (r) => r.sint('frame offset change'));
      const lowest = i > 0 ? belowAt + size : 0;
      if (!Number.isSafeInteger(off) || off < lowest || off > MAX_BLOCK_RAW) this.fail(SEC_STRIDE, `region ${k}: a frame at ${off}, below ${lowest} (frames follow each other without overlapping)`);
      const op = this.uint(SEC_OP, 'frame op');
      const w: Written = { offset: off, op, from: -1, made: -1, bytes: null, mask: 0, changes: [] };
      if (op === OP_CHILD) {
        w.from = model.childOf(below);
        if (w.from < 0) this.fail(SEC_OP, `region ${k}: a frame as the child of ${below < 0 ? 'no frame' : `image ${below}, which has none`}`);
      } else if (op === OP_IMAGE || op === OP_IMAGE_CHANGED) {
        const e = this.uint(SEC_IMAGE, 'frame image');
        if (e >= model.count) this.fail(SEC_IMAGE, `region ${k}: image ${e} of the block's ${model.count}`);
        w.from = e;
      } else if (op === OP_RAN) {
        if (i !== keep || keep >= bc || bOffs[keep] !== off || off + size > oldLength) this.fail(SEC_OP, `region ${k}: a frame run on at ${off}, where the base region has no frame to run on`);
        w.from = bImgs[keep]!;
      } else if (op === OP_CHILD_CHANGED) {
        w.from = model.childOf(below);
        if (w.from < 0) this.fail(SEC_OP, `region ${k}: a changed child of ${below < 0 ? 'no frame' : `image ${below}, which has none`}`);
      } else if (op === OP_LITERAL) {
        w.bytes = this.read(SEC_BYTES, (r) => r.bytes(size, 'frame bytes'));
      } else {
        this.fail(SEC_OP, `region ${k}: unknown frame op ${op}`);
      }
      if (op === OP_RAN || op === OP_CHILD_CHANGED || op === OP_IMAGE_CHANGED) {
        const mask = this.uint(SEC_MASK, 'changed words');
        if (mask === 0 || mask >= 2 ** nw) this.fail(SEC_MASK, `region ${k}: changed-word mask 0x${mask.toString(16)} for frames of ${nw} words`);
        w.mask = mask;
        for (let q = 0; q < nw; q++) {
          if (!((mask >>> q) & 1)) continue;
          const z = this.read(SEC_DELTA, (r) => r.big('word change'));
          if (wb === 4 && z >= 1n << 33n) this.fail(SEC_DELTA, `region ${k}: a change of ${z} to a 4-byte word`);
          w.changes.push((z >> 1n) ^ -(z & 1n));
        }
      }
      if (op !== OP_CHILD && op !== OP_IMAGE) w.made = model.made(op === OP_LITERAL ? -1 : w.from);
      const id = op === OP_CHILD || op === OP_IMAGE ? w.from : w.made;
      offsets[i] = off;
      ids[i] = id;
      if (i > 0) model.above(below, id, off - belowAt);
      written[i - keep] = w;
    }
    const last = fc - 1;
    const lastStride = last >= 0 ? model.strideOf(ids[last]!) : -1;
    const predictedLength = lastStride >= 0 ? offsets[last]! + lastStride : oldLength;
    const n = predictedLength + this.read(SEC_LENGTHS, (r) => r.sint(`region ${k} length change`));
    this.checkLength(k, n);
    if (last >= 0 && offsets[last]! + size > n) this.fail(SEC_LENGTHS, `region ${k}: a frame at ${offsets[last]} passes the region's length ${n}`);
    const [lo, hi] = halves(address);
    this.refs.addRegion(lo, hi, n, offsets, fc);
    const frames = { offsets, images: ids };
    // unchanged: the base region's bytes, shared
    if (base && push === 0 && pop === 0 && n === oldLength && this.peekNoWords()) {
      this.uint(SEC_WORD_COUNT, 'changed words');
      return { region: base, frames };
    }
    // the base's bytes, cut or zero-extended; where frames changed, none past the frames kept
    const upTo = pop === 0 && push === 0 ? n : keep > 0 ? offsets[keep - 1]! + size : fc > 0 ? offsets[0]! : n;
    const out = new Uint8Array(n);
    this.charge(n);
    if (base) out.set(base.bytes.subarray(0, Math.min(upTo, oldLength, n)));
    const images = model.images;
    const place = framePlace(address, n, 0);
    for (const w of written) {
      placeAt(place, w.offset);
      if (w.op === OP_LITERAL) out.set(w.bytes!, w.offset);
      else if (w.op === OP_RAN) out.set(base!.bytes.subarray(w.offset, w.offset + size), w.offset);
      else if (w.from >= 0) images.materialize(w.from, place, out, w.offset);
      else this.fail(SEC_OP, `region ${k}: a frame changed from an image the block could not keep`);
      let c = 0;
      for (let q = 0; q < nw; q++) if ((w.mask >>> q) & 1) addToWord(out, w.offset + q * wb, wb, w.changes[c++]!);
      if (w.made >= 0 && images.add(out, w.offset, wb, nw, place) !== w.made) throw new Error('internal: frame images out of step');
    }
    return { region: { address, bytes: this.applyWords(out, address, k) }, frames };
  }

  /** Is the next changed-word count 0? (not consumed) */
  private peekNoWords(): boolean {
    const r = this.readers[SEC_WORD_COUNT]!;
    return r.pos < r.end && r.buf[r.pos] === 0;
  }

  /** A words region: its base's bytes cut or zero-extended to n, then its changed words (shared with the base when none changed). */
  private words(from: Uint8Array, n: number, address: bigint): Uint8Array {
    if (n === from.length && this.peekNoWords()) {
      this.uint(SEC_WORD_COUNT, 'changed words');
      return from;
    }
    const out = new Uint8Array(n);
    this.charge(n);
    out.set(n >= from.length ? from : from.subarray(0, n));
    return this.applyWords(out, address, -1);
  }

  /** Applies the next changed words to `out` (a region at `address`). */
  private applyWords(out: Uint8Array, address: bigint, k: number): Uint8Array {
    const what = k >= 0 ? `region ${k}` : 'a words region';
    const count = this.uint(SEC_WORD_COUNT, 'changed words');
    if (count > this.readers[SEC_WORD_GAP]!.remaining) this.fail(SEC_WORD_COUNT, `${what}: ${count} changed words cannot fit in the gap section's ${this.readers[SEC_WORD_GAP]!.remaining} bytes left`);
    const refs = this.refs;
    const P = this.wordBytes === 4 ? 4 : 8;
    const addressLo = Number(address & 0xffff_ffffn);
    let next = 0;
    for (let i = 0; i < count; i++) {
      const word = next + this.uint(SEC_WORD_GAP, 'word gap');
      const at = word * 4;
      if (at >= out.length) this.fail(SEC_WORD_GAP, `${what}: a changed word at ${at} passes the region's length ${out.length}`);
      const ref = this.uint(SEC_WORD_REF, 'word reference');
      if (ref > refs.count) this.fail(SEC_WORD_REF, `${what}: reference ${ref} of the sample's ${refs.count}`);
      const z = this.uint(SEC_WORD_DELTA, 'word change');
      if (z > 0xffff_ffff) this.fail(SEC_WORD_DELTA, `${what}: a change of ${z} to a 4-byte word`);
      if (at + 4 <= out.length) {
        const from = ref === 0 ? u32(out, at) : refs.half(ref - 1, (addressLo + at) >>> 0, P);
        putU32(out, at, unzig32(from, z));
      } else {
        // a last word cut by the region's end: its bytes there, zeros after (which must stay zeros)
        let old = 0;
        for (let i = at; i < out.length; i++) old |= out[i]! << (8 * (i - at));
        const v = unzig32(ref === 0 ? old >>> 0 : refs.half(ref - 1, (addressLo + at) >>> 0, P), z);
        if (v >>> (8 * (out.length - at)) !== 0) this.fail(SEC_WORD_DELTA, `${what}: the last word, cut at ${out.length - at} bytes, changed past the region's end`);
        for (let i = at; i < out.length; i++) out[i] = v >>> (8 * (i - at));
      }
      next = word + 1;
    }
    return out;
  }
}

/** A word of wb bytes at out[at], plus a signed change, modulo 2^(8 wb). */
function addToWord(out: Uint8Array, at: number, wb: number, change: bigint): void {
  const lo = u32(out, at);
  if (wb === 4) {
    putU32(out, at, (lo + Number(BigInt.asIntN(32, change))) >>> 0);
    return;
  }
  const v = BigInt.asUintN(64, ((BigInt(u32(out, at + 4)) << 32n) | BigInt(lo)) + change);
  putU32(out, at, Number(v & 0xffff_ffffn));
  putU32(out, at + 4, Number(v >> 32n));
}
