// The names Python's `threading` module gives threads, read out of a running target the way
// py-spy reads them: each interpreter's sys.modules dict → the "threading" module → its dict →
// `_active` (a dict: thread ident → Thread object) → each Thread's instance dict → `_name`.
// The ident is what the thread state holds as thread_id (pthread_self), so a name belongs to the
// thread state with that thread_id.
//
// An instance dict is kept differently by each version (ThreadNamesLayout; offsets checked
// against offsetof by test/fixtures/offsets.c):
// - 3.11: a dict pointer before the object (managedDict) or, while there is no dict, a values
//   pointer before it (managedValues); the keys are the type's shared ht_cached_keys;
// - 3.12: one word before the object: a dict pointer, or (low bit set) values − 1;
// - 3.13+: a dict pointer before the object or, while there is none, values inline after the
//   object (at tp_basicsize, Py_TPFLAGS_INLINE_VALUES), with a `valid` byte.
// Strings are decoded as code-object strings are (src/symbols/strings.ts: compact ASCII, compact
// latin-1/UCS-2/UCS-4, legacy).
//
// Everything is read while the target runs and is untrusted: every size is bounded, every read
// may fail, and anything of an unexpected shape gives no name for that thread (or none at all):
// never an error for the recording. Reads are gathered (one system call for many objects).

import type { Layout, ThreadNamesLayout } from '../../layout/layout.js';
import { RegionMemory } from '../../walk/region-memory.js';
import { pyStringHeaderSize, readPyString } from '../../symbols/strings.js';
import { readMany, type MemorySource } from './source.js';
import type { ThreadNameRecord } from '../../capture/types.js';
import { MAX_INTERPRETERS } from './thread-list.js';
import { dictItems, keysShape, type Item, type KeysShape } from '../../objects/dict-items.js';

/** One thread's name, as its interpreter's `threading` module had it. */
export interface ThreadName {
  interpreterId: bigint;
  /** Thread.ident: the thread state's thread_id */
  threadId: bigint;
  name: string;
}

/** A name longer than this (characters) is not read. */
const MAX_NAME_CHARS = 1024;
/** Bytes read at a str beyond its header: short names come with the header in one read. */
const STRING_SLACK = 64;
/** Threads (entries of `_active`) read at most. */
const MAX_THREADS = 4096;
/** Ranges per gathered read (process_vm_readv takes at most IOV_MAX = 1024). */
const GATHER = 512;


/**
 * The names of the threads of every interpreter of the target, where `threading` knows them
 * (an interpreter that never imported threading has none). Never throws for what the target's
 * memory holds: what cannot be read gives no name.
 */
export function readThreadNames(source: MemorySource, layout: Layout = source.layout): ThreadName[] {
  return readNames(source, layout).names;
}

/** The names, and the interpreters whose `threading` was found (their threads not named are unknown to it). */
export function readNames(source: MemorySource, layout: Layout = source.layout): { names: ThreadName[]; threading: Set<bigint> } {
  const N = layout.threadNames;
  const threading = new Set<bigint>();
  if (!N || layout.pointerSize !== 8) return { names: [], threading };
  try {
    return { names: new NameReader(source, layout, N, threading).all(), threading };
  } catch (e) {
    // a read that failed in a way the bounds did not foresee: no names this time
    if (e instanceof RangeError || e instanceof TypeError) return { names: [], threading: new Set() };
    throw e;
  }
}

class NameReader {
  private readonly P = 8;
  constructor(
    private readonly source: MemorySource,
    private readonly L: Layout,
    private readonly N: ThreadNamesLayout,
    /** interpreters whose threading._active was read */
    private readonly threading: Set<bigint>,
  ) {}

  all(): ThreadName[] {
    const out: ThreadName[] = [];
    const L = this.L;
    const f = L.interp;
    const head = this.source.tryRead(this.source.runtimeAddress + BigInt(L.runtime.interpretersHead), this.P);
    let interp = head ? ptr(head, 0) : 0n;
    const seen = new Set<bigint>();
    const lo = Math.min(f.id, f.next, this.N.interpModules);
    const hi = Math.max(f.id + 8, f.next + this.P, this.N.interpModules + this.P);
    for (let i = 0; interp !== 0n && i < MAX_INTERPRETERS && !seen.has(interp); i++) {
      seen.add(interp);
      const block = this.source.tryRead(interp + BigInt(lo), hi - lo);
      if (!block) break;
      const interpreterId = BigInt.asIntN(64, ptr(block, f.id - lo));
      const names = this.interpreter(ptr(block, this.N.interpModules - lo));
      if (names) {
        this.threading.add(interpreterId);
        for (const [threadId, name] of names) out.push({ interpreterId, threadId, name });
      }
      interp = ptr(block, f.next - lo);
    }
    return out;
  }

  /** ident → name for one interpreter, from its sys.modules dict; null: no threading._active found there. */
  private interpreter(modules: bigint): Map<bigint, string> | null {
    const names = new Map<bigint, string>();
    if (!aligned(modules)) return null;
    const threading = this.lookup(modules, 'threading');
    if (threading === null) return null;
    const mod = this.source.tryRead(threading, this.N.moduleDict + this.P);
    if (!mod) return null;
    const active = this.lookup(ptr(mod, this.N.moduleDict), '_active');
    if (active === null) return null;
    const items = this.dictItems(active);
    if (!items || items.length > MAX_THREADS) return null;
    // the idents (int keys) and the Thread objects, with the words before them, in one read
    const N = this.N;
    const before = Math.min(N.managedDict, N.managedValues ?? 0, 0);
    const objectEnd = this.L.object.obType + this.P;
    const got = this.gather([
      ...items.map((it) => ({ address: it.key, length: N.longDigits + 12 })),
      ...items.map((it) => ({ address: it.value + BigInt(before), length: objectEnd - before })),
    ]);
    const threads: { ident: bigint; obj: bigint; head: Uint8Array; type: bigint }[] = [];
    items.forEach((it, k) => {
      const ident = got[k] ? this.int(got[k]!) : null;
      const head = got[items.length + k];
      if (ident === null || !head) return;
      const type = ptr(head, this.L.object.obType - before);
      if (aligned(type)) threads.push({ ident, obj: it.value, head, type });
    });
    // each distinct type once: its flags, basic size and shared keys
    const typeEnd = Math.max(this.L.type.tpFlags, N.typeBasicsize, N.heapCachedKeys) + this.P;
    const typeAddrs = [...new Set(threads.map((t) => t.type))];
    const typeBytes = this.gather(typeAddrs.map((address) => ({ address, length: typeEnd })));
    const types = new Map<bigint, { flags: bigint; basicsize: bigint; cachedKeys: bigint }>();
    typeAddrs.forEach((a, k) => {
      const b = typeBytes[k];
      if (b) types.set(a, { flags: ptr(b, this.L.type.tpFlags), basicsize: BigInt.asIntN(64, ptr(b, N.typeBasicsize)), cachedKeys: ptr(b, N.heapCachedKeys) });
    });
    // each thread's `_name` value: from its dict, or from its values and its type's shared keys
    const nameOf = new Map<bigint, bigint>();
    const shared = new Map<bigint, { ident: bigint; values: bigint }[]>();
    const split = (keys: bigint, ident: bigint, values: bigint): void => {
      let list = shared.get(keys);
      if (!list) shared.set(keys, (list = []));
      list.push({ ident, values });
    };
    for (const t of threads) {
      const type = types.get(t.type);
      if (!type || (type.flags & BigInt(N.flagManagedDict)) === 0n) continue;
      const word = ptr(t.head, N.managedDict - before);
      if (N.valuesTag !== null) {
        // 3.12: a dict, or (low bit set) the values
        if ((word & BigInt(N.valuesTag)) !== 0n) split(type.cachedKeys, t.ident, word + BigInt(N.valuesTag));
        else if (word !== 0n) this.fromDict(word, t.ident, nameOf);
      } else if (word !== 0n) {
        this.fromDict(word, t.ident, nameOf);
      } else if (N.managedValues !== null) {
        const values = ptr(t.head, N.managedValues - before);
        if (values !== 0n) split(type.cachedKeys, t.ident, values);
      } else if (N.flagInlineValues !== null && (type.flags & BigInt(N.flagInlineValues)) !== 0n && type.basicsize > 0n && type.basicsize < 1n << 20n) {
        split(type.cachedKeys, t.ident, t.obj + type.basicsize);
      }
    }
    // per shared keys object, where `_name` is among the keys; then every thread's value there, in one read
    for (const [keys, list] of shared) {
      const ix = this.keyIndex(keys, '_name');
      if (ix === null) continue;
      const got = this.gather(list.map((v) => ({ address: v.values, length: N.valuesValues + (ix + 1) * this.P })));
      list.forEach((v, k) => {
        const b = got[k];
        if (!b) return;
        // 3.13+: the values say how many they hold, and (inline) whether they are in use
        if (N.valuesCapacity !== null && b[N.valuesCapacity]! <= ix) return;
        if (N.valuesValid !== null && b[N.valuesValid] === 0) return;
        const value = ptr(b, N.valuesValues + ix * this.P);
        if (aligned(value)) nameOf.set(v.ident, value);
      });
    }
    const idents = [...nameOf.keys()];
    const strings = this.strings(idents.map((i) => nameOf.get(i)!));
    idents.forEach((ident, k) => {
      const s = strings[k];
      if (s !== null && s !== undefined) names.set(ident, s);
    });
    return names;
  }

  private fromDict(dict: bigint, ident: bigint, into: Map<bigint, bigint>): void {
    const v = this.lookup(dict, '_name');
    if (v !== null) into.set(ident, v);
  }

  /** The value of the str key `key` in the dict at `dict` (null: absent, or not a dict as expected). */
  private lookup(dict: bigint, key: string): bigint | null {
    const items = this.dictItems(dict);
    return items ? this.find(items, key) : null;
  }

  private find(items: Item[], key: string): bigint | null {
    const keys = this.strings(items.map((it) => it.key), key.length);
    const k = keys.indexOf(key);
    return k < 0 ? null : items[k]!.value;
  }

  /** Where the str key `key` is among the entries of a split dict's shared keys (its values' index). */
  private keyIndex(keys: bigint, key: string): number | null {
    const entries = this.keysEntries(keys, true);
    if (!entries) return null;
    const k = this.strings(entries.keys, key.length).indexOf(key);
    return k < 0 ? null : entries.index[k]!;
  }

  /** The keys of a split dict's shared keys object and the index of each (NULL keys left out). */
  private keysEntries(keys: bigint, splitOnly: boolean): { keys: bigint[]; index: number[] } | null {
    const N = this.N;
    if (!aligned(keys)) return null;
    const h = this.source.tryRead(keys, N.keysIndices);
    if (!h) return null;
    const shape = this.keysShape(h);
    if (!shape || (splitOnly && shape.kind !== 2)) return null;
    if (shape.n === 0) return { keys: [], index: [] };
    const entries = this.source.tryRead(keys + BigInt(N.keysIndices + (1 << shape.log2Index)), shape.n * shape.size);
    if (!entries) return null;
    const out: { keys: bigint[]; index: number[] } = { keys: [], index: [] };
    for (let i = 0; i < shape.n; i++) {
      const key = ptr(entries, i * shape.size + shape.keyAt);
      if (!aligned(key)) continue;
      out.keys.push(key);
      out.index.push(i);
    }
    return out;
  }

  private keysShape(h: Uint8Array): KeysShape | null {
    return keysShape(h, this.N);
  }

  private dictItems(address: bigint): Item[] | null {
    return dictItems(this.source, this.N, address);
  }

  /**
   * The text of each str object (null: not a str as expected, or too long). `only`: the length
   * the caller looks for — a str of another length is null without reading its characters.
   */
  private strings(addresses: readonly bigint[], only?: number): (string | null)[] {
    const head = pyStringHeaderSize(this.L);
    const want = head + (only ?? STRING_SLACK);
    const got = this.gather(addresses.map((address) => ({ address, length: want })));
    const out: (string | null)[] = [];
    const again: number[] = [];
    addresses.forEach((address, k) => {
      let bytes = got[k] ?? null;
      // (a read past the object's end may reach an unmapped page: the header alone then)
      if (!bytes) bytes = this.source.tryRead(address, head);
      if (!bytes) return out.push(null);
      const s = this.decode(address, [{ address, bytes }], only);
      if (s === undefined) again.push(k);
      out.push(s ?? null);
    });
    // longer than what came with the header: read where its characters are
    for (const k of again) {
      const address = addresses[k]!;
      const bytes = got[k] ?? this.source.tryRead(address, head);
      const u = this.L.unicode;
      const length = Number(BigInt.asIntN(64, ptr(bytes!, u.length)));
      const data = this.source.tryRead(address, Math.max(u.compactSize, u.asciiSize) + length * 4);
      out[k] = data ? (this.decode(address, [{ address, bytes: data }], only) ?? null) : null;
    }
    return out;
  }

  /** A str from the bytes read at its address; undefined: its characters are not all there yet; null: not a str wanted. */
  private decode(address: bigint, regions: { address: bigint; bytes: Uint8Array }[], only?: number): string | null | undefined {
    const u = this.L.unicode;
    const bytes = regions[0]!.bytes;
    if (bytes.length < u.length + 8) return null;
    const length = BigInt.asIntN(64, ptr(bytes, u.length));
    if (length < 0n || length > BigInt(MAX_NAME_CHARS) || (only !== undefined && length !== BigInt(only))) return null;
    try {
      return readPyString(new RegionMemory(regions, 8), this.L, address);
    } catch {
      // characters past what was read (a longer or wider str), or a legacy str elsewhere
      const state = bytes.length >= u.state + 4 ? new DataView(bytes.buffer, bytes.byteOffset).getUint32(u.state, true) : 0;
      const compact = ((state >>> u.compactBit) & 1) === 1;
      if (compact && regions[0]!.bytes.length < u.compactSize + Number(length) * 4) return undefined;
      if (!compact) return this.legacy(address, bytes);
      return null;
    }
  }

  /** A non-compact str: its characters are where its data pointer says. */
  private legacy(address: bigint, header: Uint8Array): string | null {
    const u = this.L.unicode;
    if (header.length < u.legacyData + 8) return null;
    const data = ptr(header, u.legacyData);
    const length = Number(BigInt.asIntN(64, ptr(header, u.length)));
    if (!aligned(data) || length < 0 || length > MAX_NAME_CHARS) return null;
    const chars = this.source.tryRead(data, length * 4);
    if (!chars) return null;
    try {
      return readPyString(new RegionMemory([{ address, bytes: header }, { address: data, bytes: chars }], 8), this.L, address);
    } catch {
      return null;
    }
  }

  /** A non-negative int that fits 64 bits, from the bytes read at its address; null otherwise. */
  private int(b: Uint8Array): bigint | null {
    const N = this.N;
    const word = ptr(b, N.longSize);
    let digits: bigint;
    if (N.longTagShift === null) {
      const size = BigInt.asIntN(64, word);
      if (size < 0n) return null;
      digits = size;
    } else {
      // the low bits: sign (0 positive, 1 zero, 2 negative)
      const sign = word & 3n;
      if (sign === 1n) return 0n;
      if (sign !== 0n) return null;
      digits = word >> BigInt(N.longTagShift);
    }
    if (digits > 3n) return null;
    let v = 0n;
    const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
    for (let i = Number(digits) - 1; i >= 0; i--) {
      const at = N.longDigits + i * 4;
      if (at + 4 > b.length) return null;
      const d = dv.getUint32(at, true);
      if (d >= 2 ** N.digitBits) return null;
      v = (v << BigInt(N.digitBits)) | BigInt(d);
    }
    return v < 1n << 64n ? v : null;
  }

  private gather(ranges: { address: bigint; length: number }[]): (Uint8Array | null)[] {
    const out: (Uint8Array | null)[] = [];
    for (let i = 0; i < ranges.length; i += GATHER) {
      const part = ranges.slice(i, i + GATHER);
      // (an address that is not one: no read)
      const ok = part.map((r) => aligned(r.address));
      const got = readMany(this.source, part.filter((_, k) => ok[k]));
      let j = 0;
      for (let k = 0; k < part.length; k++) out.push(ok[k] ? (got[j++] ?? null) : null);
    }
    return out;
  }
}

let lastBytes: Uint8Array | null = null;
let lastView: DataView | null = null;

/** The 8-byte little-endian word at `at` (the view is kept for the next word of the same bytes). */
function ptr(b: Uint8Array, at: number): bigint {
  if (b !== lastBytes) {
    lastBytes = b;
    lastView = new DataView(b.buffer, b.byteOffset, b.byteLength);
  }
  return lastView!.getBigUint64(at, true);
}

/** A plausible object address: not NULL, 8-byte aligned, in the user half of the address space. */
function aligned(a: bigint): boolean {
  return a > 0xfffn && (a & 7n) === 0n && a < 1n << 63n;
}

/** The ids of a thread the recorder copied. */
export interface ThreadIds {
  interpreterId: bigint;
  threadId: bigint;
  nativeThreadId: bigint;
}

/** Names read again this often (renames), ms. */
export const NAMES_REFRESH_MS = 1000;
/** Names read at most this often for threads that appeared (or are still unnamed), ms. */
export const NAMES_MIN_GAP_MS = 20;
/** Reads made for a thread that stays unnamed before only the refresh reads it (a thread `threading` does not know; none where threading is not imported). */
const UNNAMED_TRIES = 3;

/**
 * When a recorder reads thread names, and which it writes. Names are read at the first call (the sampler makes it in its warm-up, at time 0),
 * when a thread appears (at most every NAMES_MIN_GAP_MS: a burst of new threads costs one read),
 * again for a thread still unnamed (a Thread enters `_active` right after its thread starts, so a
 * copy can see the thread first) a few times, and every NAMES_REFRESH_MS for renames — never on
 * every tick. A record is written when a thread's name is first known and when it changes.
 */
export class ThreadNamer {
  /** reads made, and the time they took (µs) */
  reads = 0;
  micros = 0;
  private lastRead = -Infinity;
  private lastCheck = -Infinity;
  private pending = true;
  /** name last written per thread, and reads that found a live thread unnamed */
  private written = new Map<string, string>();
  private tries = new Map<string, number>();
  private readonly refreshMs: number;
  private readonly minGapMs: number;

  constructor(
    private readonly source: MemorySource,
    options: { refreshMs?: number; minGapMs?: number } = {},
  ) {
    this.refreshMs = options.refreshMs ?? NAMES_REFRESH_MS;
    this.minGapMs = options.minGapMs ?? NAMES_MIN_GAP_MS;
  }

  /** Whether this target's names can be read at all. */
  get enabled(): boolean {
    return this.source.layout.threadNames !== null && this.source.layout.pointerSize === 8;
  }

  /**
   * After a tick's copies (every thread copied, whether its sample is kept or not): the name
   * records to write for it, at `time` (µs of the recording). Mostly none.
   */
  tick(threads: readonly ThreadIds[], time: number, now = performance.now()): ThreadNameRecord[] {
    if (!this.enabled || threads.length === 0) return [];
    const since = now - this.lastRead;
    // (new threads are looked for every half gap, not at every tick: a tick at 10 kHz has 100 µs)
    if (since < this.refreshMs && now - this.lastCheck < this.minGapMs / 2) return [];
    this.lastCheck = now;
    for (const t of threads) {
      if (!this.written.has(key(t)) && (this.tries.get(key(t)) ?? 0) < UNNAMED_TRIES) {
        this.pending = true;
        break;
      }
    }
    if (!(since >= this.refreshMs || (this.pending && since >= this.minGapMs))) return [];
    this.pending = false;
    this.lastRead = now;
    const started = performance.now();
    const { names, threading } = readNames(this.source);
    this.micros += Math.round((performance.now() - started) * 1000);
    this.reads++;
    const byIdent = new Map(names.map((n) => [`${n.interpreterId}:${n.threadId}`, n.name]));
    const out: ThreadNameRecord[] = [];
    const written = new Map<string, string>();
    const tries = new Map<string, number>();
    for (const t of threads) {
      const k = key(t);
      const name = byIdent.get(`${t.interpreterId}:${t.threadId}`);
      if (name === undefined) {
        // (what was written stays: the next read that finds it again writes nothing new)
        const before = this.written.get(k);
        if (before !== undefined) written.set(k, before);
        // (an interpreter without threading yet: nothing to try again for before the refresh)
        tries.set(k, threading.has(t.interpreterId) ? (this.tries.get(k) ?? 0) + 1 : UNNAMED_TRIES);
        continue;
      }
      if (this.written.get(k) !== name) out.push({ time, interpreterId: t.interpreterId, threadId: t.threadId, nativeThreadId: t.nativeThreadId, name });
      written.set(k, name);
    }
    // only the threads alive now are remembered
    this.written = written;
    this.tries = tries;
    return out;
  }
}

const key = (t: ThreadIds): string => `${t.interpreterId}:${t.threadId}:${t.nativeThreadId}`;
