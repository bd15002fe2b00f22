// A memory source over Pyodide: CPython compiled to wasm32, running in this JS process. Its
// wasm linear memory is the target's whole address space, so a read is a bounds-checked copy
// out of `_module.HEAPU8`.
//
// Two emscripten facts shape the code:
// - `_module.HEAPU8` is replaced (a new view over a new buffer) whenever the memory grows, and
//   the old buffer is detached. So the view is looked up again on every read and never kept.
// - Addresses below emscripten's global base (1024) hold no data; a read there is a
//   dereference of a NULL (or nearly NULL) pointer, which native memory would refuse too.
//
// `_PyRuntime` is found by the `xdebugpy` cookie at the start of its `_Py_DebugOffsets`:
// at `_module.__PyRuntime` when Pyodide exports it, else by a scan of linear memory.
//
// Only the few members of the Pyodide API used here are typed (`PyodideLike`), so this module
// does not depend on the pyodide package.

import { DEBUG_OFFSETS_READ_SIZE, formatVersion, layoutFromDebugOffsets, type Layout } from '../../layout/index.js';
import { type MemorySource, ReadError } from '../copy/source.js';

/** What pyunwind uses of a Pyodide instance (the object `loadPyodide()` resolves to). */
export interface PyodideLike {
  /** Pyodide's own version, e.g. "315.0.0a2" */
  readonly version?: string;
  readonly _module: {
    /** the current view of the wasm linear memory (replaced when memory grows) */
    readonly HEAPU8: Uint8Array;
    /** address of `_PyRuntime`, when the build exports it */
    readonly __PyRuntime?: unknown;
  };
}

export interface PyodideSourceOptions {
  /**
   * Where `_PyRuntime` is, when the caller knows. Skips discovery; the cookie must still be
   * there.
   */
  runtimeAddress?: bigint | number;
  /** Ignore `_module.__PyRuntime` and scan the memory for the cookie (default false). */
  forceScan?: boolean;
  /**
   * Reads that touch [0, nullGuard) fail as NULL-pointer reads. Default 1024: emscripten
   * places static data at its global base, 1024, and nothing below it.
   */
  nullGuard?: number;
}

/** How the runtime address was found. */
export type RuntimeDiscovery = 'option' | 'export' | 'scan';

export interface PyodideSource extends MemorySource {
  readonly pointerSize: 4;
  readonly runtimeFoundBy: RuntimeDiscovery;
  /** Current size of linear memory in bytes (it can grow between calls). */
  readonly memorySize: number;
  /**
   * Copy `length` bytes (default: the rest of `target` after `offset`) at `address` into
   * `target` at `offset`, without allocating. Throws ReadError if any byte is not readable
   * (and then leaves `target` unchanged).
   */
  readInto(address: bigint, target: Uint8Array, offset?: number, length?: number): void;
}

/** "xdebugpy": the first 8 bytes of `_Py_DebugOffsets`, which starts `_PyRuntime`. */
const DEBUG_OFFSETS_COOKIE = new Uint8Array([0x78, 0x64, 0x65, 0x62, 0x75, 0x67, 0x70, 0x79]);
const COOKIE_LO = 0x62656478; // "xdeb" as a little-endian u32
const COOKIE_HI = 0x79706775; // "ugpy"
/** cookie (8) + version (u64) + free_threaded (u64): what a plausibility check looks at */
const COOKIE_PROBE_SIZE = 24;
/** Minor versions whose `_Py_DebugOffsets` start with the cookie and that Pyodide ships. */
const PLAUSIBLE_MINOR_MIN = 13;
const PLAUSIBLE_MINOR_MAX = 15;
const WASM32_ADDRESS_LIMIT = 2 ** 32;
const DEFAULT_NULL_GUARD = 1024;

const hex = (n: bigint | number): string => `0x${n.toString(16)}`;

/**
 * Is there a `_Py_DebugOffsets` header at `at`: the cookie, then a version word for CPython
 * 3.13–3.15 (u64: PY_VERSION_HEX, upper half zero, a known release level), then a
 * free-threaded flag of 0 or 1? Returns the version word, or null.
 */
export function plausibleDebugOffsetsAt(heap: Uint8Array, at: number): number | null {
  if (!Number.isSafeInteger(at) || at < 0 || at + COOKIE_PROBE_SIZE > heap.length) return null;
  for (let i = 0; i < 8; i++) if (heap[at + i] !== DEBUG_OFFSETS_COOKIE[i]) return null;
  const view = new DataView(heap.buffer, heap.byteOffset + at, COOKIE_PROBE_SIZE);
  const version = view.getUint32(8, true);
  if (view.getUint32(12, true) !== 0) return null;
  const major = version >>> 24;
  const minor = (version >>> 16) & 0xff;
  const level = (version >>> 4) & 0xf;
  if (major !== 3 || minor < PLAUSIBLE_MINOR_MIN || minor > PLAUSIBLE_MINOR_MAX) return null;
  if (level !== 0xa && level !== 0xb && level !== 0xc && level !== 0xf) return null;
  if (view.getUint32(20, true) !== 0 || view.getUint32(16, true) > 1) return null;
  return version;
}

/**
 * Every 8-byte-aligned address in `heap` that holds a plausible `_Py_DebugOffsets` header
 * (the struct is 8-aligned: it is made of u64s). Stops after `limit` hits.
 */
export function findDebugOffsets(heap: Uint8Array, limit = 16): number[] {
  const hits: number[] = [];
  const end = heap.length - COOKIE_PROBE_SIZE;
  if ((heap.byteOffset & 3) === 0) {
    // Compare two u32 words per candidate: a byte loop over hundreds of MiB would be slow.
    const words = new Uint32Array(heap.buffer, heap.byteOffset, heap.length >>> 2);
    // The u32 view reads host byte order; the cookie words are little-endian.
    const little = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;
    const lo = little ? COOKIE_LO : swap32(COOKIE_LO);
    const hi = little ? COOKIE_HI : swap32(COOKIE_HI);
    for (let w = 0; w * 4 <= end; w += 2) {
      if (words[w] === lo && words[w + 1] === hi && plausibleDebugOffsetsAt(heap, w * 4) !== null) {
        hits.push(w * 4);
        if (hits.length >= limit) break;
      }
    }
  } else {
    for (let at = 0; at <= end; at += 8) {
      if (heap[at] === 0x78 && plausibleDebugOffsetsAt(heap, at) !== null) {
        hits.push(at);
        if (hits.length >= limit) break;
      }
    }
  }
  return hits;
}

function swap32(x: number): number {
  return (((x & 0xff) << 24) | ((x & 0xff00) << 8) | ((x >>> 8) & 0xff00) | (x >>> 24)) >>> 0;
}

function currentHeap(py: PyodideLike | null): Uint8Array | string {
  if (py === null) return 'the source is closed';
  const module = (py as { _module?: unknown })._module;
  if (typeof module !== 'object' || module === null) return 'the Pyodide object has no _module';
  const heap = (module as { HEAPU8?: unknown }).HEAPU8;
  if (!(heap instanceof Uint8Array)) return 'the Pyodide object has no _module.HEAPU8 memory view';
  // A detached buffer (memory grew and the view was not replaced yet) has length 0.
  if (heap.length === 0) return '_module.HEAPU8 is empty (detached by a memory grow?)';
  return heap;
}

function locateRuntime(
  py: PyodideLike,
  heap: Uint8Array,
  options: PyodideSourceOptions,
): { address: number; foundBy: RuntimeDiscovery } {
  if (options.runtimeAddress !== undefined) {
    const a = options.runtimeAddress;
    const at = Number(a) < WASM32_ADDRESS_LIMIT ? Number(a) : -1;
    if (plausibleDebugOffsetsAt(heap, at) === null) {
      throw new Error(
        `pyodide: no _Py_DebugOffsets header (xdebugpy cookie with a CPython 3.${PLAUSIBLE_MINOR_MIN}–3.${PLAUSIBLE_MINOR_MAX} version) at the given runtimeAddress ${hex(a)}`,
      );
    }
    return { address: at, foundBy: 'option' };
  }
  const exported = py._module.__PyRuntime;
  if (!options.forceScan && typeof exported === 'number' && plausibleDebugOffsetsAt(heap, exported) !== null) {
    return { address: exported, foundBy: 'export' };
  }
  const hits = findDebugOffsets(heap);
  const why =
    typeof exported === 'number' && !options.forceScan
      ? `_module.__PyRuntime (${hex(exported)}) does not start with a plausible _Py_DebugOffsets header, and `
      : '';
  if (hits.length === 0) {
    throw new Error(
      `pyodide: cannot find _PyRuntime: ${why}no 8-aligned xdebugpy cookie followed by a CPython 3.${PLAUSIBLE_MINOR_MIN}–3.${PLAUSIBLE_MINOR_MAX} version word in ${heap.length} bytes of linear memory`,
    );
  }
  if (hits.length > 1) {
    throw new Error(
      `pyodide: cannot tell which is _PyRuntime: ${why}${hits.length} plausible xdebugpy cookies at ${hits.map(hex).join(', ')}`,
    );
  }
  return { address: hits[0]!, foundBy: 'scan' };
}

export function pyodideSource(py: PyodideLike, options: PyodideSourceOptions = {}): PyodideSource {
  const initial = currentHeap(py);
  if (typeof initial === 'string') throw new Error(`pyodide: ${initial}`);
  const { address: runtime, foundBy } = locateRuntime(py, initial, options);
  const nullGuard = options.nullGuard ?? DEFAULT_NULL_GUARD;
  if (!Number.isSafeInteger(nullGuard) || nullGuard < 0) throw new RangeError(`pyodide: bad nullGuard ${nullGuard}`);

  // The debug offsets can end within DEBUG_OFFSETS_READ_SIZE of the end of memory only in a
  // corrupt image; read what there is and let the layout code say what is missing.
  const offsetsEnd = Math.min(initial.length, runtime + DEBUG_OFFSETS_READ_SIZE);
  const layout: Layout = layoutFromDebugOffsets(initial.slice(runtime, offsetsEnd));
  if (layout.pointerSize !== 4) {
    throw new Error(`pyodide: the layout of _PyRuntime at ${hex(runtime)} says pointer size ${layout.pointerSize}; wasm32 has 4`);
  }
  const pyodideVersion = typeof py.version === 'string' ? `pyodide ${py.version}` : 'pyodide';
  const description = `${pyodideVersion} (CPython ${formatVersion(layout.version)})`;

  let target: PyodideLike | null = py;

  const fail = (address: unknown, length: unknown, why: string): never => {
    const where = typeof address === 'bigint' ? hex(address) : String(address);
    throw new ReadError(
      typeof address === 'bigint' ? address : -1n,
      typeof length === 'number' ? length : -1,
      `${description}: cannot read ${String(length)} bytes at ${where}: ${why}`,
    );
  };
  // Set by `check` to where the read starts in the view it returns. (A returned object per
  // read would be garbage on the recorder's hot path.)
  let start = 0;
  /** The current memory view if [address, address+length) is readable in it; else ReadError. */
  const check = (address: bigint, length: number): Uint8Array => {
    if (typeof address !== 'bigint') return fail(address, length, 'the address is not a bigint');
    // Exact below 2^53; anything larger converts to a number that is still >= 2^32.
    const at = Number(address);
    if (!(at >= 0 && at < WASM32_ADDRESS_LIMIT)) return fail(address, length, 'not a wasm32 address (0 ≤ address < 2^32)');
    if (!Number.isSafeInteger(length) || length < 0) return fail(address, length, 'the length is not a non-negative integer');
    const heap = currentHeap(target);
    if (typeof heap === 'string') return fail(address, length, heap);
    if (at + length > heap.length) {
      return fail(address, length, `past the end of linear memory (${heap.length} bytes, ends at ${hex(heap.length)})`);
    }
    if (at < nullGuard && length > 0) return fail(address, length, `inside the NULL guard [0, ${hex(nullGuard)}): a NULL pointer?`);
    start = at;
    return heap;
  };

  return {
    description,
    runtimeAddress: BigInt(runtime),
    runtimeFoundBy: foundBy,
    layout,
    pointerSize: 4,
    get memorySize(): number {
      const heap = currentHeap(target);
      return typeof heap === 'string' ? 0 : heap.length;
    },
    read(address: bigint, length: number): Uint8Array {
      const heap = check(address, length);
      return heap.slice(start, start + length);
    },
    tryRead(address: bigint, length: number): Uint8Array | null {
      try {
        const heap = check(address, length);
        return heap.slice(start, start + length);
      } catch (e) {
        if (e instanceof ReadError) return null;
        throw e;
      }
    },
    readInto(address: bigint, into: Uint8Array, offset = 0, length?: number): void {
      if (!(into instanceof Uint8Array)) throw new TypeError(`${description}: readInto needs a Uint8Array target`);
      const n = length ?? into.length - offset;
      if (!Number.isSafeInteger(offset) || offset < 0 || !Number.isSafeInteger(n) || n < 0 || offset + n > into.length) {
        throw new RangeError(
          `${description}: readInto: ${String(n)} bytes at offset ${String(offset)} do not fit a target of ${into.length} bytes`,
        );
      }
      const heap = check(address, n);
      // No copy of the data is allocated: `set` copies between the two buffers through a
      // view. Short reads (pointers, frame headers) skip even the view object.
      if (n <= 64) for (let i = 0; i < n; i++) into[offset + i] = heap[start + i]!;
      else into.set(heap.subarray(start, start + n), offset);
    },
    close(): void {
      target = null;
    },
  };
}
