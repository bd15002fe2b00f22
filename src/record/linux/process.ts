// A live CPython process on Linux as a memory source: /proc/PID/maps and the interpreter's ELF
// file say where _PyRuntime is; reads are pread() on /proc/PID/mem, one system call per read.

import fs from 'node:fs';
import path from 'node:path';

import {
  builtinLayout,
  DEBUG_OFFSETS_READ_SIZE,
  formatVersion,
  hasDebugOffsetsCookie,
  layoutFromDebugOffsets,
  LayoutError,
  type Layout,
} from '../../layout/index.js';
import { ElfError, parseElf, SHT_NOBITS, type ElfInfo } from './elf.js';
import { loadNative, type NativeCalls, type PreparedRead } from './native.js';
import { ProcMapsError, readProcMaps, type MapEntry } from './proc-maps.js';
import { ReadError, type MemorySource } from '../copy/source.js';
import { ASYNCIO_OFFSETS_SIZE, parseAsyncioOffsets, type AsyncioOffsets } from '../../layout/asyncio-offsets.js';

export type TargetErrorKind =
  | 'invalid-pid'
  | 'no-process'
  | 'permission'
  | 'not-python'
  | 'no-version'
  | 'unsupported'
  | 'read';

/** Why a target process cannot be used; the message is one line, fit for the CLI to print. */
export class TargetError extends Error {
  override name = 'TargetError';
  constructor(
    readonly kind: TargetErrorKind,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

export interface RuntimeLocation {
  /** the mapped file that holds _PyRuntime, as /proc/PID/maps names it */
  file: string;
  /** run-time address minus link-time address for that file (0 for a non-PIE executable) */
  loadBias: bigint;
  runtimeAddress: bigint;
  /** address of the exported `Py_Version` (PY_VERSION_HEX), or null if the file has none */
  pyVersionAddress: bigint | null;
  /** the file is position-independent (ET_DYN: a PIE executable or a shared library) */
  pie: boolean;
}

const PAGE_SIZE = 0x1000n;
// python3.11, python3.15 (also behind an ld.so launcher), libpython3.12.so.1.0, python3.13d …
export const CANDIDATE_NAME = /^(?:lib)?python3\.\d+/;
// Files we are willing to read whole; libpython with full debug info is ~100 MB.
const MAX_ELF_FILE_SIZE = 1 << 30;
const MAX_CANDIDATES = 32;
// pread's position is an off_t; the kernel never maps user memory near this anyway.
const MAX_POSITION = (1n << 63n) - 1n;
// Linux returns at most this many bytes from one read() (MAX_RW_COUNT).
export const MAX_READ_LENGTH = 0x7ffff000;

const hex = (v: bigint | number): string => '0x' + v.toString(16);

function checkPid(pid: number): void {
  if (!Number.isSafeInteger(pid) || pid <= 0) throw new TargetError('invalid-pid', `invalid pid ${String(pid)}`);
}

/**
 * The TargetError for a failed access to /proc/PID/<what>: a missing process and missing
 * permission get the messages the CLI shows; anything else names the error.
 */
export function targetErrorFromErrno(pid: number, error: unknown, what: string): TargetError {
  const code = (error as NodeJS.ErrnoException | null)?.code;
  if (code === 'ENOENT' || code === 'ESRCH') {
    if (code === 'ENOENT' && !fs.existsSync('/proc/self/maps')) {
      return new TargetError('no-process', `cannot read /proc/${pid}/${what}: /proc is not mounted`, { cause: error });
    }
    return new TargetError('no-process', `no process with pid ${pid}`, { cause: error });
  }
  if (code === 'EACCES' || code === 'EPERM') {
    return new TargetError(
      'permission',
      `cannot read memory of pid ${pid}: permission denied (run as the same user as the target, or with CAP_SYS_PTRACE)`,
      { cause: error },
    );
  }
  const message = error instanceof Error ? error.message : String(error);
  return new TargetError('read', `cannot read /proc/${pid}/${what}: ${message}`, { cause: error });
}

// ---------------------------------------------------------------------------------------------
// Locating _PyRuntime

/**
 * Find _PyRuntime in process `pid`: the first mapped python3.N / libpython3.N file with a
 * `.PyRuntime` section (or else a `_PyRuntime` symbol), relocated by that file's load bias.
 * Throws TargetError.
 */
export function locateRuntime(pid: number): RuntimeLocation {
  checkPid(pid);
  let maps: MapEntry[];
  try {
    maps = readProcMaps(pid);
  } catch (e) {
    if (e instanceof ProcMapsError) throw new TargetError('read', `pid ${pid}: ${e.message}`, { cause: e });
    throw targetErrorFromErrno(pid, e, 'maps');
  }
  // Zombies and kernel threads have a /proc entry but no memory.
  if (maps.length === 0) {
    throw new TargetError('not-python', `pid ${pid} has no memory mappings (it has exited, or it is a kernel thread)`);
  }

  const byFile = new Map<string, MapEntry[]>();
  for (const m of maps) {
    if (!m.path.startsWith('/') || !CANDIDATE_NAME.test(path.posix.basename(m.path))) continue;
    const list = byFile.get(m.path);
    if (list) list.push(m);
    else if (byFile.size < MAX_CANDIDATES) byFile.set(m.path, [m]);
  }

  const checked: string[] = [];
  for (const [file, mappings] of byFile) {
    const found = locateInFile(pid, file, mappings);
    if (typeof found !== 'string') return found;
    checked.push(`${file}: ${found}`);
  }
  const files = new Set(maps.filter((m) => m.path.startsWith('/')).map((m) => m.path)).size;
  throw new TargetError(
    'not-python',
    `pid ${pid} does not look like CPython: no _PyRuntime in any mapped file (checked: ${
      checked.length ? checked.join('; ') : `no python3.N or libpython3.N among ${files} mapped files`
    })`,
  );
}

/** What locating _PyRuntime needs of an interpreter file: the same for every process that maps it. */
export interface ElfFacts {
  /** link-time address of _PyRuntime (null: the file has none) */
  runtimeVaddr: bigint | null;
  /** link-time address of Py_Version (null: none) */
  pyVersion: bigint | null;
  /** the first PT_LOAD's file offset and address, page-aligned (null: none) */
  firstOffset: bigint | null;
  linkBase: bigint;
  pie: boolean;
}

/**
 * ElfFacts (or why the file has none) by file identity — device, inode, size and change time —
 * so that the processes of one interpreter (a program's subprocesses, record --subprocesses)
 * read and parse its binary once: that is most of the time attaching takes (measured: 33 ms for
 * Debian's python3.15, 100 ms for pyenv's libpython3.12 with its debug information).
 */
const elfFacts = new Map<string, ElfFacts | string>();
const MAX_CACHED_FILES = 16;

/** What locating _PyRuntime needs of an interpreter file's bytes, or why they do not give it. */
export function runtimeFactsOf(bytes: Uint8Array, path: string): ElfFacts | string {
  let elf: ElfInfo;
  try {
    elf = parseElf(bytes, path);
  } catch (e) {
    if (e instanceof ElfError) return e.message;
    throw e;
  }
  let runtimeVaddr: bigint | null = null;
  const section = elf.section('.PyRuntime');
  if (section && section.type !== SHT_NOBITS && section.size > 0n && section.addr !== 0n) runtimeVaddr = section.addr;
  let pyVersion: bigint | null;
  try {
    if (runtimeVaddr === null) {
      const sym = elf.symbol('_PyRuntime');
      if (sym && sym.value !== 0n) runtimeVaddr = sym.value;
    }
    pyVersion = elf.symbol('Py_Version')?.value ?? null;
  } catch (e) {
    if (e instanceof ElfError) return e.message;
    throw e;
  }
  const first = elf.loads[0];
  // The loader maps the first segment page-aligned: file offset pageDown(p_offset) (0 in
  // practice) lands at pageDown(p_vaddr) + load bias.
  return {
    runtimeVaddr,
    pyVersion,
    firstOffset: first ? first.offset & ~(PAGE_SIZE - 1n) : null,
    linkBase: first ? first.vaddr & ~(PAGE_SIZE - 1n) : 0n,
    pie: elf.pie,
  };
}

/** The runtime location if `file` holds _PyRuntime, else why not. */
function locateInFile(pid: number, file: string, mappings: MapEntry[]): RuntimeLocation | string {
  const facts = readMappedFile(pid, file, mappings);
  if (typeof facts === 'string') return facts;
  return placeRuntime(file, facts, mappings);
}

/** Where _PyRuntime lands, the file's facts placed by its mappings (a process's or a core's), else why not. */
export function placeRuntime(file: string, facts: ElfFacts, mappings: readonly { start: bigint; end: bigint; offset: bigint }[]): RuntimeLocation | string {
  const { runtimeVaddr, pyVersion, firstOffset, linkBase } = facts;
  if (runtimeVaddr === null) return 'no .PyRuntime section or _PyRuntime symbol';
  if (firstOffset === null) return 'no PT_LOAD segment';
  const starts = mappings.filter((m) => m.offset === firstOffset).sort((a, b) => (a.start < b.start ? -1 : 1));
  if (starts.length === 0) return `no mapping of the file at offset ${hex(firstOffset)} (its first PT_LOAD)`;
  // A file mapped twice (by the loader, and again as data) must not fool us: take the first
  // placement at which _PyRuntime lands inside a mapping of this file.
  for (const start of starts) {
    const loadBias = start.start - linkBase;
    const runtimeAddress = loadBias + runtimeVaddr;
    if (!mappings.some((m) => m.start <= runtimeAddress && runtimeAddress < m.end)) continue;
    return {
      file,
      loadBias,
      runtimeAddress,
      pyVersionAddress: pyVersion === null ? null : loadBias + pyVersion,
      pie: facts.pie,
    };
  }
  return `_PyRuntime (link address ${hex(runtimeVaddr)}) is outside every mapping of the file at load bias ${hex(
    starts[0]!.start - linkBase,
  )}`;
}

/**
 * The ElfFacts of the file behind `mappings` (read and parsed, or cached). Maps paths are
 * relative to the reader's root, so the path is tried as-is and under /proc/PID/root (another
 * mount namespace); a file is only taken if its inode is the mapped one, because a same-named
 * file elsewhere, or one replaced since the process started (" (deleted)"), has different
 * addresses. /proc/PID/map_files gives the mapped file itself, but needs CAP_SYS_ADMIN or
 * CAP_CHECKPOINT_RESTORE.
 */
function readMappedFile(pid: number, file: string, mappings: MapEntry[]): ElfFacts | string {
  return useMappedFile(pid, file, mappings, runtimeFactsOf, elfFacts);
}

/**
 * `use` applied to the bytes of the file a process maps at `mappings` — found as it is mapped
 * (its path, through /proc/PID/root, or map_files; the mapped inode checked) — or why not.
 * With `cache`: by file identity (see elfFacts), read only the first time.
 */
export function useMappedFile<T>(pid: number, file: string, mappings: MapEntry[], use: (bytes: Uint8Array, path: string) => T | string, cache?: Map<string, T | string>): T | string {
  const inode = mappings[0]!.inode;
  const tried: string[] = [];
  const first = mappings[0]!;
  const mapFile = `/proc/${pid}/map_files/${first.start.toString(16)}-${first.end.toString(16)}`;
  for (const candidate of [file, `/proc/${pid}/root${file}`, mapFile]) {
    let st: fs.BigIntStats;
    try {
      st = fs.statSync(candidate, { bigint: true });
    } catch (e) {
      tried.push(`${candidate}: ${(e as NodeJS.ErrnoException).code ?? String(e)}`);
      continue;
    }
    if (!st.isFile()) {
      tried.push(`${candidate}: not a regular file`);
      continue;
    }
    if (inode !== 0n && st.ino !== inode) {
      tried.push(`${candidate}: inode ${st.ino} is not the mapped inode ${inode}`);
      continue;
    }
    const key = `${st.dev}:${st.ino}:${st.size}:${st.mtimeNs}:${st.ctimeNs}`;
    const cached = cache?.get(key);
    if (cached !== undefined) return cached;
    const read = readWholeFile(candidate);
    if (typeof read === 'string') {
      tried.push(`${candidate}: ${read}`);
      continue;
    }
    const got = use(read, candidate);
    if (cache) {
      if (cache.size >= MAX_CACHED_FILES) cache.delete(cache.keys().next().value!);
      cache.set(key, got);
    }
    return got;
  }
  return `cannot open the mapped file${mappings[0]!.deleted ? ' (deleted)' : ''} (${tried.join(', ')})`;
}

export function readWholeFile(file: string): Uint8Array | string {
  let fd: number;
  try {
    fd = fs.openSync(file, 'r');
  } catch (e) {
    return (e as NodeJS.ErrnoException).code ?? String(e);
  }
  try {
    const size = fs.fstatSync(fd).size;
    if (size > MAX_ELF_FILE_SIZE) return `${size} bytes is too large to be an interpreter binary`;
    const bytes = new Uint8Array(size);
    let done = 0;
    // bounded: each pass reads at least one byte or stops
    while (done < size) {
      const got = fs.readSync(fd, bytes, done, size - done, done);
      if (got === 0) return `file shrank while reading (${done} of ${size} bytes)`;
      done += got;
    }
    return bytes;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code ?? String(e);
  } finally {
    fs.closeSync(fd);
  }
}

// ---------------------------------------------------------------------------------------------
// Reading memory

/** pread() on /proc/PID/mem: one system call per read, no caching. */
export class ProcessMemory {
  private fd: number;
  /** opened only when something is written (the profiler anchor) */
  private writeFd = -1;

  /** Opens /proc/PID/mem; throws TargetError (no such process, permission denied). */
  constructor(readonly pid: number) {
    checkPid(pid);
    try {
      this.fd = fs.openSync(`/proc/${pid}/mem`, 'r');
    } catch (e) {
      throw targetErrorFromErrno(pid, e, 'mem');
    }
  }

  /** `length` bytes at `address` in a new array; throws ReadError naming address and length. */
  read(address: bigint, length: number): Uint8Array {
    const bad = this.checkLength(length);
    if (bad !== null) throw this.error(address, length, bad);
    const out = new Uint8Array(length);
    this.readInto(address, out, 0, length);
    return out;
  }

  /** Like read, but null when the memory cannot be read. */
  tryRead(address: bigint, length: number): Uint8Array | null {
    if (this.checkLength(length) !== null) return null;
    const out = new Uint8Array(length);
    return this.fill(address, out, 0, length) === null ? out : null;
  }

  /**
   * Copy `length` bytes (default: the rest of `target` after `offset`) at `address` into
   * `target` at `offset`, allocating nothing. Throws ReadError; `target` may then hold a
   * partial copy.
   */
  readInto(address: bigint, target: Uint8Array, offset = 0, length = target.length - offset): void {
    checkTarget(target, offset, length);
    const failure = this.fill(address, target, offset, length);
    if (failure !== null) throw this.error(address, length, failure);
  }

  /** Like readInto, but returns false instead of throwing when the memory cannot be read. */
  tryReadInto(address: bigint, target: Uint8Array, offset = 0, length = target.length - offset): boolean {
    checkTarget(target, offset, length);
    return this.fill(address, target, offset, length) === null;
  }

  /**
   * Write `bytes` at `address` (pwrite on /proc/PID/mem, opened for writing on first use).
   * Throws ReadError (naming the write) when it cannot.
   */
  write(address: bigint, bytes: Uint8Array): void {
    if (this.fd < 0) throw this.error(address, bytes.length, 'the memory source is closed', 'write');
    if (this.writeFd < 0) {
      try {
        this.writeFd = fs.openSync(`/proc/${this.pid}/mem`, 'r+');
      } catch (e) {
        throw this.error(address, bytes.length, (e as NodeJS.ErrnoException).code ?? String(e), 'write');
      }
    }
    let put: number;
    try {
      // user-space addresses are far below 2^53: exact as a number
      if (address < 0n || address > BigInt(Number.MAX_SAFE_INTEGER)) throw new Error('address out of range');
      put = fs.writeSync(this.writeFd, bytes, 0, bytes.length, Number(address));
    } catch (e) {
      throw this.error(address, bytes.length, (e as NodeJS.ErrnoException).code ?? String(e), 'write');
    }
    if (put !== bytes.length) throw this.error(address, bytes.length, `short write of ${put} bytes`, 'write');
  }

  close(): void {
    if (this.writeFd >= 0) {
      fs.closeSync(this.writeFd);
      this.writeFd = -1;
    }
    if (this.fd < 0) return;
    const fd = this.fd;
    this.fd = -1;
    fs.closeSync(fd);
  }

  get closed(): boolean {
    return this.fd < 0;
  }

  private checkLength(length: number): string | null {
    if (!Number.isSafeInteger(length) || length < 0) return 'invalid length';
    if (length > MAX_READ_LENGTH) return `longer than the ${MAX_READ_LENGTH} bytes one read can return`;
    return null;
  }

  /** Reads into target; null on success, else why it failed. */
  private fill(address: bigint, target: Uint8Array, offset: number, length: number): string | null {
    if (this.fd < 0) return 'the memory source is closed';
    if (length > MAX_READ_LENGTH) return `longer than the ${MAX_READ_LENGTH} bytes one read can return`;
    if (address < 0n || address + BigInt(length) > MAX_POSITION) return 'address out of range';
    if (length === 0) return null;
    let got: number;
    try {
      // Node 20 takes a bigint position, so addresses stay exact beyond 2^53.
      got = fs.readSync(this.fd, target, offset, length, address);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === 'EIO' || code === 'EFAULT') return `not mapped (${code})`;
      if (code === 'ESRCH') return 'the process has exited';
      return code ?? String(e);
    }
    if (got !== length) return `short read: got ${got} bytes (the range runs into unmapped memory, or the process exited)`;
    return null;
  }

  private error(address: bigint, length: number, why: string, what = 'read'): ReadError {
    return new ReadError(address, length, `cannot ${what} ${length} bytes at ${hex(address)} in pid ${this.pid}: ${why}`);
  }
}

function checkTarget(target: Uint8Array, offset: number, length: number): void {
  if (!Number.isSafeInteger(offset) || !Number.isSafeInteger(length) || offset < 0 || length < 0) {
    throw new RangeError(`invalid offset ${offset} or length ${length}`);
  }
  if (offset + length > target.length) {
    throw new RangeError(`offset ${offset} + length ${length} is past the end of the ${target.length}-byte target`);
  }
}

// ---------------------------------------------------------------------------------------------
// The memory source

/**
 * The layout for a target, from the bytes at _PyRuntime (debug offsets on 3.13+) or else the
 * exported Py_Version (3.11/3.12). `context` names the target in errors ("pid 12 (python3.12)").
 */
export function chooseLayout(context: string, runtimeBytes: Uint8Array, pyVersion: number | null): Layout {
  try {
    if (hasDebugOffsetsCookie(runtimeBytes)) return layoutFromDebugOffsets(runtimeBytes);
    if (pyVersion === null) {
      throw new TargetError(
        'no-version',
        `${context}: _PyRuntime has no debug offsets (so it is CPython 3.11 or 3.12, or not CPython) and the file exports no Py_Version to tell which version it is`,
      );
    }
    return builtinLayout(pyVersion, 'x86_64');
  } catch (e) {
    if (e instanceof LayoutError) throw new TargetError('unsupported', `${context}: ${e.message}`, { cause: e });
    throw e;
  }
}

export class LinuxProcessSource implements MemorySource {
  readonly description: string;
  readonly nativeThreadIds = true;
  readonly runtimeAddress: bigint;
  /** process_vm_readv/writev where they work here (else /proc/PID/mem); null once closed */
  private native: NativeCalls | null;

  constructor(
    readonly pid: number,
    readonly location: RuntimeLocation,
    readonly layout: Layout,
    private readonly memory: ProcessMemory,
  ) {
    this.runtimeAddress = location.runtimeAddress;
    this.description = `pid ${pid} (${path.posix.basename(location.file)}, ${formatVersion(layout.version)})`;
    const native = loadNative();
    // one trial read of what was just read through /proc/PID/mem: the call may be forbidden
    // (a sandbox) even where it exists
    this.native = typeof native !== 'string' && native.readv(pid, [{ address: location.runtimeAddress, length: 8 }])[0] ? native : null;
  }

  read(address: bigint, length: number): Uint8Array {
    if (this.native) {
      const got = this.native.readv(this.pid, [{ address, length }])[0];
      if (got) return got;
    }
    return this.memory.read(address, length);
  }
  tryRead(address: bigint, length: number): Uint8Array | null {
    if (this.native) return this.native.readv(this.pid, [{ address, length }])[0] ?? null;
    return this.memory.tryRead(address, length);
  }
  readv(ranges: readonly { address: bigint; length: number }[]): (Uint8Array | null)[] {
    if (this.native) return this.native.readv(this.pid, ranges);
    return ranges.map((r) => this.memory.tryRead(r.address, r.length));
  }
  prepareRead(ranges: readonly { address: bigint; length: number }[]): PreparedRead {
    if (this.native) return this.native.prepare(this.pid, ranges);
    // without process_vm_readv: the same contract, one pread per range
    let length = 0;
    for (const r of ranges) length += r.length;
    const bytes = new Uint8Array(length);
    const read = (): number => {
      let o = 0;
      for (const r of ranges) {
        if (!this.memory.tryReadInto(r.address, bytes, o, r.length)) return o;
        o += r.length;
      }
      return o;
    };
    return { bytes, length, read };
  }
  readInto(address: bigint, target: Uint8Array, offset?: number, length?: number): void {
    this.memory.readInto(address, target, offset, length);
  }
  tryReadInto(address: bigint, target: Uint8Array, offset?: number, length?: number): boolean {
    return this.memory.tryReadInto(address, target, offset, length);
  }
  write(address: bigint, bytes: Uint8Array): void {
    if (this.native?.write(this.pid, address, bytes)) return;
    this.memory.write(address, bytes);
  }
  close(): void {
    this.native = null;
    this.memory.close();
  }
}

/**
 * Open a running CPython for reading: find _PyRuntime, read the layout from it, keep
 * /proc/PID/mem open. Throws TargetError.
 */
export function openLinuxProcess(pid: number): LinuxProcessSource {
  const location = locateRuntime(pid);
  const memory = new ProcessMemory(pid);
  try {
    const context = `pid ${pid} (${path.posix.basename(location.file)})`;
    const runtimeBytes = memory.tryRead(location.runtimeAddress, DEBUG_OFFSETS_READ_SIZE);
    if (!runtimeBytes) {
      throw new TargetError('read', `${context}: cannot read _PyRuntime at ${hex(location.runtimeAddress)}`);
    }
    let pyVersion: number | null = null;
    if (!hasDebugOffsetsCookie(runtimeBytes) && location.pyVersionAddress !== null) {
      const word = memory.tryRead(location.pyVersionAddress, 4);
      if (!word) throw new TargetError('read', `${context}: cannot read Py_Version at ${hex(location.pyVersionAddress)}`);
      pyVersion = new DataView(word.buffer, word.byteOffset, 4).getUint32(0, true);
    }
    return new LinuxProcessSource(pid, location, chooseLayout(context, runtimeBytes, pyVersion), memory);
  } catch (e) {
    memory.close();
    throw e;
  }
}

/**
 * Is process `pid` still running? A process that exited but was not reaped yet (a zombie:
 * its parent has not waited for it, or there is no init to do it) counts as gone.
 */
export function processIsRunning(pid: number): boolean {
  let stat: string;
  try {
    stat = fs.readFileSync(`/proc/${pid}/stat`, 'latin1');
  } catch {
    return false;
  }
  // the state follows the command name, which is in parentheses and may contain anything
  const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
  return state !== 'Z' && state !== 'X' && state !== 'x';
}

/** Files that may hold the asyncio module's debug table: the interpreter (built-in _asyncio) or the _asyncio extension. */
const ASYNCIO_CANDIDATE = /^(?:(?:lib)?python3\.\d+|_asyncio\.)/;

/**
 * Where the `AsyncioDebug` section (the asyncio module's debug offsets, 3.14+) is in process
 * `pid`: in the interpreter's file when _asyncio is built in, else in the loaded _asyncio
 * extension. A string says why not (e.g. asyncio is not imported yet).
 */
export function locateAsyncioDebug(pid: number): { address: bigint; file: string } | string {
  checkPid(pid);
  let maps: MapEntry[];
  try {
    maps = readProcMaps(pid);
  } catch (e) {
    return e instanceof Error ? e.message : String(e);
  }
  return locateAsyncioDebugIn(maps, (file, mappings) => useMappedFile(pid, file, mappings, (bytes, path) => ({ bytes, path })));
}

/**
 * Where the `AsyncioDebug` section is among `maps` (a process's, or a core's), each candidate
 * file's bytes from `open`; a string says why not.
 */
export function locateAsyncioDebugIn(maps: readonly MapEntry[], open: (file: string, mappings: MapEntry[]) => { bytes: Uint8Array; path: string } | string): { address: bigint; file: string } | string {
  const byFile = new Map<string, MapEntry[]>();
  for (const m of maps) {
    if (!m.path.startsWith('/') || !ASYNCIO_CANDIDATE.test(path.posix.basename(m.path))) continue;
    const list = byFile.get(m.path);
    if (list) list.push(m);
    else if (byFile.size < MAX_CANDIDATES) byFile.set(m.path, [m]);
  }
  const checked: string[] = [];
  for (const [file, mappings] of byFile) {
    const opened = open(file, mappings);
    if (typeof opened === 'string') {
      checked.push(`${file}: ${opened}`);
      continue;
    }
    let elf: ElfInfo;
    try {
      elf = parseElf(opened.bytes, opened.path);
    } catch (e) {
      if (e instanceof ElfError) {
        checked.push(`${file}: ${e.message}`);
        continue;
      }
      throw e;
    }
    // (the section is `.AsyncioDebug` in Debian's builds, `AsyncioDebug` as CPython's macro names it)
    const section = elf.section('.AsyncioDebug') ?? elf.section('AsyncioDebug');
    const first = elf.loads[0];
    if (!section || section.type === SHT_NOBITS || section.addr === 0n || !first) continue;
    const firstOffset = first.offset & ~(PAGE_SIZE - 1n);
    const linkBase = first.vaddr & ~(PAGE_SIZE - 1n);
    for (const start of mappings.filter((m) => m.offset === firstOffset)) {
      const address = start.start - linkBase + section.addr;
      if (mappings.some((m) => m.start <= address && address < m.end)) return { address, file };
    }
    checked.push(`${file}: its AsyncioDebug section is outside every mapping of the file`);
  }
  return `no AsyncioDebug section in any mapped file (the program has not imported asyncio yet${checked.length ? `; ${checked.join('; ')}` : ''})`;
}

/** A target's asyncio debug offsets: parsed, and as read (the capture header keeps them). */
export interface AsyncioFound {
  offsets: AsyncioOffsets;
  debugOffsets: Uint8Array;
}

/**
 * The asyncio module's debug offsets of a target (3.14+) if it has imported asyncio, else why
 * not yet (a string); TargetError before 3.14.
 */
export function asyncioOffsetsNow(source: LinuxProcessSource): AsyncioFound | string {
  return asyncioOffsetsAt(source, () => locateAsyncioDebug(source.pid));
}

/** The asyncio debug offsets of `source`, where `locate` finds them (TargetError before 3.14). */
export function asyncioOffsetsAt(source: MemorySource, locate: () => { address: bigint } | string): AsyncioFound | string {
  if (!source.layout.objects) {
    throw new TargetError('unsupported', `--async-aware: CPython publishes asyncio tasks to profilers from 3.14 on (${source.description})`);
  }
  const found = locate();
  if (typeof found === 'string') return found;
  const bytes = source.read(found.address, ASYNCIO_OFFSETS_SIZE);
  return { offsets: parseAsyncioOffsets(bytes), debugOffsets: bytes };
}
