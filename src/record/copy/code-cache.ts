// The recorder's code objects: each copied once per address, and checked again whenever it may
// have died since it was last confirmed.
//
// A code object's identity is its content — names, file, first line, bytecode length, frame
// size, line table — not its address. CPython reuses the address of a dead code object, and
// the allocator's free lists often put the new object's name strings and line table at the old
// ones' addresses too, so equal pointers do not prove the same function. Two rules follow:
//
// - A code object is read (checked or copied) inside the copy window of the sample whose frame
//   refers to it. The copy's own check (anchor or re-read, or the target being stopped) proves
//   that frame alive through the window, and a live frame holds its code object: what is read
//   there is the frame's code object, not a successor. `check` reads; `commit` keeps what it
//   read only for a copy that did not move.
// - A confirmed entry stays good while no code object of its interpreter has died: CPython
//   3.14+ counts deaths (interpreter_state.code_object_generation), read inside the window.
//   Without that counter (3.11–3.13), or after a death, the entry is checked again: its header
//   (type, size, first line, the pointers to its strings and line table) and then its qualname's
//   text; only a difference there makes a full copy, and a record is written only when the
//   copy's content differs from the one recorded for that address.
//
// Each copy holds the code object's bytecode (co_code_adaptive, inline after its fixed part:
// one region with it), for the opcodes. The interpreter rewrites that bytecode as the code
// runs (quickening, specialization, and back), so a copy made when the code object was first
// seen may predate the specialized form of its hot loop. So the bytecode of a code object is
// read again — by the first copy that reaches it once it is due, inside that copy's window —
// 10 ms after it was copied, then after twice as long each time, up to every 10.24 s (each
// refresh falls on a multiple of its interval on the copier's clock, so that refreshes come
// together: see beginPass); when its instructions differ from the recorded ones (the opcodes
// at instruction starts, not the inline caches, which count as the code runs) the code object
// is recorded again with the new bytecode — a record that replaces the earlier one from the
// next sample on, as for a reused address (and so begins a new block). Specialization happens
// in a code object's first moments, which the early refreshes see; the interval never shrinks
// again, so an instruction the interpreter keeps re-specializing (there are such: a `+` whose
// operands outgrow small ints, a test of str or None) costs at most one record every 10 s.

import type { Layout } from '../../layout/layout.js';
import { decodeCodeObject } from '../../symbols/code-object.js';
import { opcodeTable, type OpcodeTable } from '../../symbols/opcodes.js';
import { SymbolError } from '../../symbols/location-table.js';
import { pyBytesExtent, pyBytesHeaderSize, pyStringExtent, pyStringHeaderSize, readPyBytes, readPyString } from '../../symbols/strings.js';
import { RegionMemory, readPointer } from '../../walk/region-memory.js';
import type { Region } from '../../walk/types.js';
import type { MemorySource } from './source.js';
import type { CodeRecord } from '../../capture/types.js';

const MAX_OBJECT_BYTES = 64 << 20;

/** Bytecode longer than this is not copied (its frames get no opcode): 64 K instructions and more. */
const MAX_BYTECODE_BYTES = 1 << 20;

/** Time from a code object's copy to its first refresh (ms) ... */
const REFRESH_FIRST_MS = 10;
/** ... and twice as long after each refresh, up to this (a power of two times the first). */
const REFRESH_MAX_MS = REFRESH_FIRST_MS << 10;

interface Entry {
  /** the copy recorded for this address (null: none, or withdrawn) */
  snapshot: CodeRecord | null;
  /**
   * the capture holds a record for this address — a code object or a withdrawal (set by
   * commit): a later record replaces it, and so must begin a new block
   */
  recorded?: boolean;
  /** what the processing side will make of the snapshot (see contentKey) */
  key: string;
  /** header fields that tell code objects apart (type, size, names, line table, first line) */
  identity: Uint8Array | null;
  /** the qualname's text when last confirmed */
  qualname: string | null;
  /** interpreter and code_object_generation of the last confirmation (null: no such counter) */
  confirmedBy: bigint;
  confirmedAt: bigint | null;
  /** bytes of the snapshot's first region: the fixed part and the bytecode (0: no bytecode copied) */
  whole: number;
  /** the snapshot's instructions (OpcodeTable.instructionKey; null: no bytecode or no table) */
  ops: string | null;
  /** when the bytecode is to be read again (ms, the copier's clock; see beginPass) */
  refreshAt: number;
  /** the interval that gave refreshAt */
  gap: number;
  /** made by a refresh of a confirmed object: only its bytecode changed (not a new object at the address) */
  refreshed?: boolean;
}

/** Checks made inside one copy window, to be committed if the copy holds. */
export type PendingCodes = Map<bigint, Entry>;

/** Bytes already read (with a copy, in its window) at [address, address+length), or null. */
export type Prefetch = (address: bigint, length: number) => Uint8Array | null;

/** where co_qualname's pointer is in an entry's identity bytes, in pointers (see identity()) */
const QUALNAME_IN_IDENTITY = 2;

export class CodeCache {
  private readonly entries = new Map<bigint, Entry>();
  /** type object address → is it the code type (checked once by tp_name) */
  private readonly codeTypes = new Map<bigint, boolean>();
  private readonly P: 4 | 8;
  /** reads during a check (see check's `reader`) */
  private reader: Prefetch | null = null;
  private readonly opcodes: OpcodeTable | null;
  /** the time of the current pass (ms) */
  private now = 0;
  /** a new round begins when an entry's refresh falls due (see beginPass) */
  private round = 0;
  /** the earliest refreshAt after the round began */
  private nextDueAt = Infinity;

  constructor(
    private readonly source: MemorySource,
    private readonly layout: Layout,
    /** copy each code object's bytecode, and refresh it (false: the fixed part only, as before 0.2) */
    private readonly bytecode = true,
  ) {
    this.P = layout.pointerSize;
    this.opcodes = opcodeTable(layout.code.opcodes);
  }

  /**
   * Called by the copier at the start of each pass, with the time (ms). A code object's
   * refresh falls on a multiple of its interval (10 ms, 20, 40, … 10.24 s) since the clock's
   * zero, so those due at one time come together, and a new *round* begins when one falls due:
   * a steady copy (steady-copy.ts), which remembers which code objects are confirmed, asks
   * again then, and gives the copy to the general path (which reads the bytecode) for those due.
   */
  beginPass(now: number): void {
    this.now = now;
    if (now < this.nextDueAt) return;
    this.round++;
    let next = Infinity;
    for (const e of this.entries.values()) if (e.refreshAt > now && e.refreshAt < next) next = e.refreshAt;
    this.nextDueAt = next;
  }

  /** The refresh round (a steady copy asks about its code objects again when it changes). */
  get refreshRound(): number {
    return this.round;
  }

  /** Is the entry's bytecode to be read again now? */
  private due(e: Entry): boolean {
    return e.whole > 0 && this.now >= e.refreshAt;
  }

  /** The entry's next refresh: `gap` after now, on a multiple of it. */
  private schedule(e: Entry, gap: number): Entry {
    e.gap = gap;
    e.refreshAt = e.whole > 0 ? (Math.floor(this.now / gap) + 1) * gap : Infinity;
    return e;
  }

  /** The copy recorded for a code object (null: none). */
  snapshot(address: bigint): CodeRecord | null {
    return this.entries.get(address)?.snapshot ?? null;
  }

  get size(): number {
    return this.entries.size;
  }

  /**
   * Check the code objects at `addresses` — inside the copy window, so that each is the live
   * frame's own object. `generation` is the interpreter's code_object_generation read in the
   * window (null where there is none). Returns what changed or was confirmed by reading; the
   * cache itself is untouched until `commit`.
   */
  check(
    addresses: Iterable<bigint>,
    interp: bigint,
    generation: bigint | null,
    pending: PendingCodes = new Map(),
    prefetched: Prefetch = () => null,
    reader: Prefetch | null = null,
  ): PendingCodes {
    this.reader = reader;
    try {
      for (const address of addresses) {
        if (pending.has(address)) continue;
        const entry = this.entries.get(address);
        if (entry && generation !== null && entry.confirmedAt === generation && entry.confirmedBy === interp) {
          // no code object has died since it was confirmed: it is the same object
          if (this.due(entry)) pending.set(address, this.refresh(address, entry, prefetched));
          continue;
        }
        pending.set(address, this.examine(address, entry, interp, generation, prefetched));
      }
    } finally {
      this.reader = null;
    }
    return pending;
  }

  /** A read of the target: the check's own reader if it was given one. */
  private tryRead(address: bigint, length: number): Uint8Array | null {
    return this.reader ? this.reader(address, length) : this.source.tryRead(address, length);
  }

  /**
   * Is the entry for `address` good without a read: confirmed for this interpreter at this
   * code_object_generation (so no code object of it has died since)? Never where there is no
   * such counter (`generation` null).
   */
  confirmed(address: bigint, interp: bigint, generation: bigint | null): boolean {
    if (generation === null) return false;
    const e = this.entries.get(address);
    return e !== undefined && e.confirmedAt === generation && e.confirmedBy === interp && !this.due(e);
  }

  /**
   * The bytecode [start, end) of the code object at `address` as last checked — in `pending`
   * (this window's checks) or as confirmed before; null when it is not known as a code object.
   */
  bytecodeRange(address: bigint, pending?: PendingCodes): [bigint, bigint] | null {
    const identity = (pending?.get(address) ?? this.entries.get(address))?.identity;
    if (!identity) return null;
    const start = address + BigInt(this.layout.code.codeAdaptive);
    // (the identity's second field is ob_size: code units of bytecode)
    return [start, start + readPointer(identity, this.P, this.P) * 2n];
  }

  /**
   * What checking these code objects again will read, for a caller that can read it together
   * with other things (inside the same window). `all` (no count of code-object deaths): each
   * one's header and its qualname's start; else only the bytecode due for a refresh. A header
   * is read with its bytecode when that is due.
   */
  checkRanges(addresses: Iterable<bigint>, all: boolean): { address: bigint; length: number }[] {
    const L = this.layout;
    const out: { address: bigint; length: number }[] = [];
    for (const a of addresses) {
      const e = this.entries.get(a);
      if (!e?.identity) continue;
      const due = this.due(e);
      if (!all && !due) continue;
      out.push({ address: a, length: due ? e.whole : L.code.size });
      if (all) out.push({ address: readPointer(e.identity, QUALNAME_IN_IDENTITY * this.P, this.P), length: pyStringHeaderSize(L) + 64 });
    }
    return out;
  }

  /** Would committing these checks record anything (a code object new, changed or withdrawn)? */
  changes(pending: PendingCodes): boolean {
    for (const [address, next] of pending) {
      const had = this.entries.get(address);
      if (had?.key === next.key || next.refreshed) continue;
      if (next.snapshot === null && !had?.snapshot) continue;
      return true;
    }
    return false;
  }

  /**
   * Keep the checks of a copy that held. Returns the code objects to record before the sample
   * (new, changed or withdrawn), and whether one of them replaces a record already made for
   * its address (the capture must then start a new block, so that earlier samples keep the
   * earlier record).
   */
  commit(pending: PendingCodes): { fresh: CodeRecord[]; replaced: boolean } {
    const fresh: CodeRecord[] = [];
    let replaced = false;
    for (const [address, next] of pending) {
      const had = this.entries.get(address);
      this.entries.set(address, next);
      next.recorded = had?.recorded === true;
      if (next.refreshAt < this.nextDueAt) this.nextDueAt = next.refreshAt;
      if (had?.key === next.key) {
        // same content: keep the record already made
        next.snapshot = had.snapshot;
        continue;
      }
      if (next.snapshot === null && !had?.snapshot) continue; // nothing recorded, nothing to withdraw
      const record = next.snapshot ?? { address, regions: [] };
      next.snapshot = record.regions.length ? record : null;
      // (a withdrawal is a record too: a code object recorded after one, in the same block,
      // would be read before the samples the withdrawal was for — and name their frames)
      replaced ||= next.recorded;
      next.recorded = true;
      fresh.push(record);
    }
    return { fresh, replaced };
  }

  /** Read what is at `address` now and compare it with what was confirmed there. */
  private examine(address: bigint, entry: Entry | undefined, interp: bigint, generation: bigint | null, prefetched: Prefetch): Entry {
    const L = this.layout;
    const header = prefetched(address, L.code.size) ?? this.tryRead(address, L.code.size);
    const identity = header ? this.identity(header) : null;
    if (entry && header && identity && entry.identity && equal(identity, entry.identity) && entry.qualname !== null) {
      // equal pointers: the same object, or a successor whose strings landed at the old
      // addresses — the qualname's text tells them apart
      const qualname = this.readText(readPointer(header, L.code.qualname, this.P), prefetched);
      if (qualname === entry.qualname) {
        const same = { ...entry, confirmedBy: interp, confirmedAt: generation };
        return this.due(entry) ? this.refresh(address, same, prefetched) : same;
      }
    }
    const snapshot = header && this.isCodeType(readPointer(header, L.object.obType, this.P)) ? this.copyCode(address, header, prefetched) : null;
    return this.entryOf(snapshot, snapshot ? identity : null, interp, generation);
  }

  /** The entry of a new copy (or of none: null). */
  private entryOf(snapshot: CodeRecord | null, identity: Uint8Array | null, interp: bigint, generation: bigint | null): Entry {
    const { key, qualname, ops } = this.contentOf(snapshot);
    // (without `bytecode`, a tiny code object's bytecode may still lie in its fixed part's read: not refreshed)
    const whole = this.bytecode && ops !== null ? snapshot!.regions[0]!.bytes.length : 0;
    return this.schedule({ snapshot, key, identity, qualname, confirmedBy: interp, confirmedAt: generation, whole, ops, refreshAt: Infinity, gap: 0 }, REFRESH_FIRST_MS);
  }

  /**
   * Read the bytecode of a confirmed code object again (its fixed part with it, in one region).
   * Unchanged instructions: the entry, to be refreshed again after twice as long. Changed: a
   * new copy — the fixed part and bytecode just read, the strings and line table of the copy it
   * replaces (the same objects: the code object is the same). Either way the next refresh is
   * twice as far.
   */
  private refresh(address: bigint, entry: Entry, prefetched: Prefetch): Entry {
    const gap = Math.min(entry.gap * 2, REFRESH_MAX_MS);
    const whole = prefetched(address, entry.whole) ?? this.tryRead(address, entry.whole);
    const ops = whole && this.opcodes ? this.opcodes.instructionKey(whole.subarray(this.layout.code.codeAdaptive)) : null;
    if (ops === null || ops === entry.ops) return this.schedule({ ...entry }, gap);
    const snapshot: CodeRecord = { address, regions: [{ address, bytes: whole! }, ...entry.snapshot!.regions.slice(1)] };
    const next = this.entryOf(snapshot, entry.identity, entry.confirmedBy, entry.confirmedAt);
    // (a copy that no longer decodes is not the same object after all: keep the one recorded)
    if (next.qualname !== entry.qualname) return this.schedule({ ...entry }, gap);
    return this.schedule({ ...next, refreshed: true }, gap);
  }

  /**
   * What the processing side will make of a copy: its decoded names, first line, bytecode
   * length and frame size, the line table's bytes and the instructions of its bytecode — or the
   * reason it does not decode.
   */
  private contentOf(snapshot: CodeRecord | null): { key: string; qualname: string | null; ops: string | null } {
    if (!snapshot) return { key: 'none', qualname: null, ops: null };
    const mem = new RegionMemory(snapshot.regions, this.P);
    try {
      const info = decodeCodeObject(mem, this.layout, snapshot.address);
      const table = readPyBytes(mem, this.layout, readPointer(snapshot.regions[0]!.bytes, this.layout.code.linetable, this.P));
      const ops = info.bytecode && this.opcodes ? this.opcodes.instructionKey(info.bytecode) : null;
      const key = [info.qualname, info.name, info.filename, info.firstLine, info.bytecodeEnd - info.bytecodeStart, info.frameSize, latin1(table), ops ?? ''].join('\0');
      return { key, qualname: info.qualname, ops };
    } catch (e) {
      if (!(e instanceof SymbolError)) throw e;
      return { key: `error\0${e.message}`, qualname: null, ops: null };
    }
  }

  /** The text of a str object in the target (null: unreadable or not a str). */
  private readText(address: bigint, prefetched: Prefetch): string | null {
    const regions: Region[] = [];
    this.object(address, 'str', regions, prefetched);
    if (!regions.length) return null;
    try {
      return readPyString(new RegionMemory(regions, this.P), this.layout, address);
    } catch (e) {
      if (e instanceof SymbolError) return null;
      throw e;
    }
  }

  /** The bytes of the header fields that tell one code object from another at the same address. */
  private identity(header: Uint8Array): Uint8Array {
    const L = this.layout;
    const P = this.P;
    const parts = [
      [L.object.obType, P],
      [L.object.obSize, P],
      [L.code.qualname, P],
      [L.code.name, P],
      [L.code.filename, P],
      [L.code.linetable, P],
      [L.code.firstlineno, 4],
      [L.code.nlocalsplus, 4],
      [L.code.stacksize, 4],
    ] as const;
    const out = new Uint8Array(parts.reduce((n, [, w]) => n + w, 0));
    let o = 0;
    for (const [off, w] of parts) {
      out.set(header.subarray(off, off + w), o);
      o += w;
    }
    return out;
  }

  private copyCode(address: bigint, header: Uint8Array, prefetched: Prefetch): CodeRecord {
    const L = this.layout;
    // the fixed part with the bytecode after it (ob_size code units), in one region
    const units = readPointer(header, L.object.obSize, this.P);
    const length = L.code.codeAdaptive + Number(units) * 2;
    if (this.bytecode && units > 0n && units <= BigInt(MAX_BYTECODE_BYTES >>> 1) && length > header.length) {
      const whole = prefetched(address, length) ?? this.tryRead(address, length);
      if (whole) header = whole;
    }
    const regions: Region[] = [{ address, bytes: header }];
    const field = (off: number): bigint => readPointer(header, off, this.P);
    for (const s of [field(L.code.qualname), field(L.code.name), field(L.code.filename)]) this.object(s, 'str', regions);
    this.object(field(L.code.linetable), 'bytes', regions);
    return { address, regions };
  }

  /** Copy a str or bytes object with one read (two for long or out-of-line data). */
  private object(address: bigint, kind: 'str' | 'bytes', regions: Region[], prefetched: Prefetch = () => null): void {
    if (address === 0n || regions.some((r) => r.address === address)) return;
    const L = this.layout;
    const headerSize = kind === 'str' ? pyStringHeaderSize(L) : pyBytesHeaderSize(L);
    // most names are short: read a little more than the header so the data comes along
    const first = prefetched(address, headerSize + 64) ?? this.tryRead(address, headerSize + 64) ?? this.tryRead(address, headerSize);
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
      const bytes = total <= first.length ? first.subarray(0, Math.max(total, headerSize)) : this.tryRead(address, total);
      if (bytes) regions.push({ address, bytes });
    } else {
      regions.push({ address, bytes: first.subarray(0, Math.max(extent.headerSize, headerSize)) });
      if (extent.dataLength > MAX_OBJECT_BYTES) return;
      const data = this.tryRead(extent.dataAddress, extent.dataLength);
      if (data) regions.push({ address: extent.dataAddress, bytes: data });
    }
  }

  private isCodeType(type: bigint): boolean {
    const known = this.codeTypes.get(type);
    if (known !== undefined) return known;
    let ok = false;
    const t = this.tryRead(type + BigInt(this.layout.type.tpName), this.P);
    if (t) {
      const name = this.tryRead(readPointer(t, 0, this.P), 5);
      ok = !!name && name[0] === 0x63 && name[1] === 0x6f && name[2] === 0x64 && name[3] === 0x65 && name[4] === 0;
    }
    this.codeTypes.set(type, ok);
    return ok;
  }
}

function equal(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

function latin1(bytes: Uint8Array): string {
  let s = '';
  for (let i = 0; i < bytes.length; i += 4096) s += String.fromCharCode(...bytes.subarray(i, i + 4096));
  return s;
}
