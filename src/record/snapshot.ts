// A snapshot: the memory of every thread of every interpreter, copied as regions
// (address, bytes), plus each code object the stacks reach with its names and location table.
//
// Per thread it copies: the thread state (on 3.15 through the base frame, which lies past
// thread_state.size), the _PyCFrame on 3.11/3.12 when it is outside the thread state, the used
// part of each data-stack chunk, and every frame the chain reaches outside those (generator
// and coroutine frames inside their objects, entry frames on the C stack). Reads are whole
// structures. The copy does not judge the stack: the walk does, over exactly these bytes.

import type { Layout } from '../layout/layout.js';
import { pyBytesExtent, pyBytesHeaderSize, pyStringExtent, pyStringHeaderSize } from '../symbols/strings.js';
import { readPointer } from '../walk/region-memory.js';
import type { Region } from '../walk/types.js';
import type { MemorySource } from './source.js';

export interface ThreadSnapshot {
  interpreterId: bigint;
  threadStateAddress: bigint;
  /** pthread handle (thread_id) */
  threadId: bigint;
  /** kernel thread id (0 where the platform has none) */
  nativeThreadId: bigint;
  regions: Region[];
  /** what could not be copied (the walk will then reject the sample, with a reason) */
  errors: string[];
}

export interface CodeObjectSnapshot {
  address: bigint;
  /** the code object header, and its qualname, name, filename and location-table objects */
  regions: Region[];
}

export interface Snapshot {
  layout: Layout;
  description: string;
  runtimeAddress: bigint;
  /** wall-clock time of the copy, ms since the epoch */
  time: number;
  threads: ThreadSnapshot[];
  codeObjects: CodeObjectSnapshot[];
}

export interface SnapshotOptions {
  /** frames followed per thread while looking for frames outside the chunks */
  maxFrames?: number;
  /**
   * Code objects already copied, by address; new ones are added. Pass the same map to later
   * snapshots to copy each code object once.
   */
  codeObjects?: Map<bigint, CodeObjectSnapshot | null>;
}

// Bounds on what a (possibly corrupt) target can make the copy do.
const MAX_INTERPRETERS = 256;
const MAX_THREADS = 8192;
const MAX_CHUNKS = 4096;
const MAX_CHUNK_BYTES = 64 << 20;
const MAX_TSTATE_TAIL = 64 << 10;
const MAX_OBJECT_BYTES = 64 << 20;

const hex = (a: bigint): string => `0x${a.toString(16)}`;

export function takeSnapshot(source: MemorySource, options: SnapshotOptions = {}): Snapshot {
  const layout = source.layout;
  const codes = options.codeObjects ?? new Map<bigint, CodeObjectSnapshot | null>();
  const copier = new Copier(source, layout, codes, options.maxFrames ?? 8192);
  const threads: ThreadSnapshot[] = [];
  const time = Date.now();
  const P = layout.pointerSize;
  const ptrAt = (addr: bigint): bigint => readPointer(source.read(addr, P), 0, P);

  let interp = ptrAt(source.runtimeAddress + BigInt(layout.runtime.interpretersHead));
  const seenInterps = new Set<bigint>();
  for (let i = 0; interp !== 0n && i < MAX_INTERPRETERS && !seenInterps.has(interp); i++) {
    seenInterps.add(interp);
    const f = layout.interp;
    const lo = Math.min(f.id, f.next, f.threadsHead);
    const hi = Math.max(f.id + 8, f.next + P, f.threadsHead + P);
    const block = source.read(interp + BigInt(lo), hi - lo);
    const dv = new DataView(block.buffer, block.byteOffset, block.byteLength);
    const interpreterId = dv.getBigInt64(f.id - lo, true);
    let tstate = readPointer(block, f.threadsHead - lo, P);
    const seenThreads = new Set<bigint>();
    for (let t = 0; tstate !== 0n && t < MAX_THREADS && !seenThreads.has(tstate); t++) {
      seenThreads.add(tstate);
      const thread = copier.thread(interpreterId, tstate);
      threads.push(thread);
      const ts = thread.regions[0];
      if (!ts || ts.address !== tstate) break;
      tstate = readPointer(ts.bytes, layout.tstate.next, P);
    }
    interp = readPointer(block, f.next - lo, P);
  }
  const codeObjects = [...copier.used].map((a) => codes.get(a)).filter((c): c is CodeObjectSnapshot => !!c);
  return { layout, description: source.description, runtimeAddress: source.runtimeAddress, time, threads, codeObjects };
}

class Copier {
  readonly used = new Set<bigint>();
  private readonly P: 4 | 8;
  /** type object address → is it the code type (checked once by tp_name) */
  private readonly codeTypes = new Map<bigint, boolean>();

  constructor(
    private readonly source: MemorySource,
    private readonly layout: Layout,
    private readonly codes: Map<bigint, CodeObjectSnapshot | null>,
    private readonly maxFrames: number,
  ) {
    this.P = layout.pointerSize;
  }

  thread(interpreterId: bigint, tstate: bigint): ThreadSnapshot {
    const L = this.layout;
    const P = this.P;
    const errors: string[] = [];
    const regions: Region[] = [];
    const snap: ThreadSnapshot = { interpreterId, threadStateAddress: tstate, threadId: 0n, nativeThreadId: 0n, regions, errors };

    let ts = this.source.tryRead(tstate, L.tstate.size);
    if (!ts) {
      errors.push(`thread state ${hex(tstate)}: not readable`);
      return snap;
    }
    // 3.15: the base frame sits inside _PyThreadStateImpl, past thread_state.size; copy the
    // thread state through its end in the same region
    if (L.tstate.baseFrame !== null) {
      const base = readPointer(ts, L.tstate.baseFrame, P);
      const end = base + BigInt(L.frame.size);
      if (base >= tstate + BigInt(L.tstate.size) && end - tstate <= BigInt(L.tstate.size + MAX_TSTATE_TAIL)) {
        const whole = this.source.tryRead(tstate, Number(end - tstate));
        if (whole) ts = whole;
        else errors.push(`base frame ${hex(base)}: not readable`);
      }
    }
    regions.push({ address: tstate, bytes: ts });
    snap.threadId = readPointer(ts, L.tstate.threadId, P);
    snap.nativeThreadId = readPointer(ts, L.tstate.nativeThreadId, P);
    const mem = new GrowingMemory(regions, P);

    let frame = readPointer(ts, L.tstate.currentFrame, P);
    if (L.tstate.cframeCurrentFrame !== null) {
      // 3.11/3.12: tstate->cframe->current_frame; root_cframe is inside the thread state, a
      // running eval loop's _PyCFrame is on the C stack
      const cframe = frame;
      frame = 0n;
      if (cframe !== 0n) {
        const field = cframe + BigInt(L.tstate.cframeCurrentFrame);
        if (!mem.contains(field, P)) {
          const bytes = this.source.tryRead(cframe, L.tstate.cframeCurrentFrame + P);
          if (bytes) mem.add({ address: cframe, bytes });
          else errors.push(`cframe ${hex(cframe)}: not readable`);
        }
        frame = mem.ptr(field) ?? 0n;
      }
    }

    this.copyChunks(ts, mem, errors);
    this.followFrames(frame, L.tstate.baseFrame !== null ? readPointer(ts, L.tstate.baseFrame, P) : 0n, mem, errors);
    return snap;
  }

  /** The used part of every data-stack chunk: [chunk, datastack_top) for the newest, [chunk, data + top) below. */
  private copyChunks(ts: Uint8Array, mem: GrowingMemory, errors: string[]): void {
    const L = this.layout;
    const P = this.P;
    let chunk = readPointer(ts, L.tstate.datastackChunk, P);
    const top = readPointer(ts, L.tstate.datastackTop, P);
    const header = L.chunk.data;
    for (let i = 0; chunk !== 0n && i < MAX_CHUNKS; i++) {
      let used: bigint;
      let bytes: Uint8Array | null;
      if (i === 0 && top > chunk && top - chunk <= BigInt(MAX_CHUNK_BYTES)) {
        used = top - chunk;
        bytes = this.source.tryRead(chunk, Number(used));
      } else {
        const head = this.source.tryRead(chunk, header);
        if (!head) {
          errors.push(`data-stack chunk ${hex(chunk)}: not readable`);
          return;
        }
        const slots = readPointer(head, L.chunk.top, P);
        const size = readPointer(head, L.chunk.size, P);
        used = BigInt(header) + slots * BigInt(P);
        if (used > size || used > BigInt(MAX_CHUNK_BYTES)) {
          errors.push(`data-stack chunk ${hex(chunk)}: top ${slots} is past its size ${size}`);
          mem.add({ address: chunk, bytes: head });
          chunk = readPointer(head, L.chunk.previous, P);
          continue;
        }
        bytes = used === BigInt(header) ? head : this.source.tryRead(chunk, Number(used));
      }
      if (!bytes) {
        errors.push(`data-stack chunk ${hex(chunk)} (${used} bytes): not readable`);
        return;
      }
      mem.add({ address: chunk, bytes });
      chunk = readPointer(bytes, L.chunk.previous, P);
    }
  }

  /**
   * Follow the chain from the current frame, copying each frame that is not in memory yet
   * (generator/coroutine frames, entry frames on the C stack) and each code object reached.
   */
  private followFrames(frame: bigint, base: bigint, mem: GrowingMemory, errors: string[]): void {
    const L = this.layout;
    const P = this.P;
    const size = L.frame.size;
    const tag = BigInt(L.executableTagMask);
    const seen = new Set<bigint>();
    for (let depth = 0; frame !== 0n && depth < this.maxFrames && !seen.has(frame); depth++) {
      seen.add(frame);
      let bytes = mem.bytes(frame, size);
      if (!bytes) {
        const copy = this.source.tryRead(frame, size);
        if (!copy) {
          errors.push(`frame ${hex(frame)}: not readable`);
          return;
        }
        mem.add({ address: frame, bytes: copy });
        bytes = copy;
      }
      const owner = bytes[L.frame.owner]!;
      if (owner === L.owners.thread || owner === L.owners.generator) {
        const code = readPointer(bytes, L.frame.executable, P) & ~tag;
        if (code !== 0n) this.code(code);
      }
      if (frame === base) return;
      frame = readPointer(bytes, L.frame.previous, P);
    }
  }

  /** Copy a code object once: its header, qualname, name, filename and location table. */
  private code(address: bigint): void {
    this.used.add(address);
    if (this.codes.has(address)) return;
    const L = this.layout;
    const P = this.P;
    const header = this.source.tryRead(address, L.code.size);
    if (!header || !this.isCodeType(readPointer(header, L.object.obType, P))) {
      this.codes.set(address, null);
      return;
    }
    const regions: Region[] = [{ address, bytes: header }];
    const field = (off: number): bigint => readPointer(header, off, P);
    for (const s of [field(L.code.qualname), field(L.code.name), field(L.code.filename)]) this.object(s, 'str', regions);
    this.object(field(L.code.linetable), 'bytes', regions);
    this.codes.set(address, { address, regions });
  }

  /** Copy a str or bytes object with one read (two for long or out-of-line data). */
  private object(address: bigint, kind: 'str' | 'bytes', regions: Region[]): void {
    if (address === 0n || regions.some((r) => r.address === address)) return;
    const L = this.layout;
    const headerSize = kind === 'str' ? pyStringHeaderSize(L) : pyBytesHeaderSize(L);
    // most names are short: read a little more than the header so the data comes along
    const guess = headerSize + 64;
    const first = this.source.tryRead(address, guess) ?? this.source.tryRead(address, headerSize);
    if (!first) return;
    let extent;
    try {
      extent = kind === 'str' ? pyStringExtent(first, L, address) : pyBytesExtent(first, L, address);
    } catch {
      return; // not a valid object: symbolization will say so
    }
    if (extent.dataAddress === null) {
      const total = extent.headerSize + extent.dataLength;
      if (total > MAX_OBJECT_BYTES) return;
      const bytes = total <= first.length ? first.subarray(0, Math.max(total, headerSize)) : this.source.tryRead(address, total);
      if (bytes) regions.push({ address, bytes });
    } else {
      regions.push({ address, bytes: first.subarray(0, Math.max(extent.headerSize, headerSize)) });
      if (extent.dataLength > MAX_OBJECT_BYTES) return;
      const data = this.source.tryRead(extent.dataAddress, extent.dataLength);
      if (data) regions.push({ address: extent.dataAddress, bytes: data });
    }
  }

  private isCodeType(type: bigint): boolean {
    const known = this.codeTypes.get(type);
    if (known !== undefined) return known;
    let ok = false;
    const t = this.source.tryRead(type + BigInt(this.layout.type.tpName), this.P);
    if (t) {
      const name = this.source.tryRead(readPointer(t, 0, this.P), 5);
      ok = !!name && name[0] === 0x63 && name[1] === 0x6f && name[2] === 0x64 && name[3] === 0x65 && name[4] === 0;
    }
    this.codeTypes.set(type, ok);
    return ok;
  }
}

/** A RegionMemory that regions can be added to while copying (few regions: linear search). */
class GrowingMemory {
  constructor(
    private readonly regions: Region[],
    private readonly P: 4 | 8,
  ) {}

  add(r: Region): void {
    this.regions.push(r);
  }

  bytes(address: bigint, length: number): Uint8Array | null {
    for (const r of this.regions) {
      const off = address - r.address;
      if (off >= 0n && off + BigInt(length) <= BigInt(r.bytes.length)) {
        return r.bytes.subarray(Number(off), Number(off) + length);
      }
    }
    return null;
  }

  contains(address: bigint, length: number): boolean {
    return this.bytes(address, length) !== null;
  }

  ptr(address: bigint): bigint | null {
    const b = this.bytes(address, this.P);
    return b ? readPointer(b, 0, this.P) : null;
  }
}

