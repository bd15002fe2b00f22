// A core file as a memory source: `dump --core`. The core holds what its writer dumped (the
// kernel or gdb's gcore: anonymous and written memory, the first page of each mapped ELF file);
// what it left out (code, read-only data such as the interpreter's type names) is read from the
// files it names (NT_FILE), each checked against the core by its GNU build id. _PyRuntime and the
// layout are found as for a live process, from the interpreter file the core maps.
//
// A core and its files come from outside: reads are bounded by what the core and the files
// hold; a file that is missing or not the one mapped is said (one line per file), never used.

import fs from 'node:fs';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { DEBUG_OFFSETS_READ_SIZE, formatVersion, hasDebugOffsetsCookie, type Layout } from '../../layout/index.js';
import { ReadError, type MemorySource } from '../copy/source.js';
import { asyncioOffsetsAt, CANDIDATE_NAME, chooseLayout, locateAsyncioDebugIn, placeRuntime, readWholeFile, runtimeFactsOf, TargetError, type AsyncioFound, type RuntimeLocation } from '../linux/process.js';
import { parseElf, ElfError } from '../linux/elf.js';
import type { MapEntry } from '../linux/proc-maps.js';
import { nativeFactsOf, nativeObjectsFrom, type UnreadObject } from '../linux/native-objects.js';
import type { NativeObject } from '../../native/objects.js';
import { CoreError, parseCore, segmentAt, type CoreFile, type CoreMappedFile, type CoreThread } from './core-file.js';
import { lastAtOrBelow } from '../../walk/region-index.js';

/** A core larger than this is refused: the core is read whole, and Node reads at most 2 GiB into one buffer. */
const MAX_CORE_BYTES = 2 ** 31 - 1;
/** a read from the core or its files at most this long (far above any structure pyunwind reads) */
const MAX_READ = 1 << 28;
/** the first page of a mapped ELF file, which a core keeps (coredump_filter bit 4) */
const HEAD_PAGE = 4096;
/** bytes above a thread's stack pointer that are checked for the zeros a writer leaves where it could not read */
const STACK_PROBE = 512;

export interface CoreOptions {
  /** the interpreter's executable, where the core's path does not hold it (or holds another build) */
  executable?: string;
  /** directories where files the core names are looked for by their base name */
  libPaths?: readonly string[];
}

/** A file the core maps, and how it was found. */
export interface CoreFileCheck {
  /** the path as the core names it */
  path: string;
  /**
   * ok: found, and its build id is the core's; unchecked: found, but the core keeps no build id
   * for it (no ELF header page, or none in it); missing: no file found; different: the files
   * found all have another build id (not used)
   */
  status: 'ok' | 'unchecked' | 'missing' | 'different';
  /** the file read in its place (null: none) */
  used: string | null;
  /** what was tried, for missing and different */
  why: string;
}

/** A thread whose stack the core holds as zeros above its stack pointer: its writer could not read it. */
export interface ZeroStack {
  tid: number;
  start: bigint;
  end: bigint;
}

export class CoreSource implements MemorySource {
  readonly description: string;
  readonly nativeThreadIds = true;
  readonly runtimeAddress: bigint;
  readonly layout: Layout;
  /** the process the core was made of (its main thread's id), where the core says */
  readonly pid: number | null;
  private readonly starts: BigUint64Array;
  private readonly fds = new Map<string, number>();

  constructor(
    readonly name: string,
    readonly core: CoreFile,
    readonly location: RuntimeLocation,
    layout: Layout,
    /** the NT_FILE mappings, sorted by start, each with the file read in its place (null: none) */
    private readonly mapped: readonly { m: CoreMappedFile; file: string | null }[],
    /** ranges the core holds as zeros it could not read (see zeroStacks): not memory */
    private readonly holes: readonly ZeroStack[],
  ) {
    this.layout = layout;
    this.runtimeAddress = location.runtimeAddress;
    this.starts = BigUint64Array.from(mapped.map((x) => x.m.start));
    this.pid = core.pid;
    const pid = core.pid === null ? '' : `pid ${core.pid}, `;
    // (the placeholder layout used to read the real one has no version)
    const version = (layout as Partial<Layout>).version;
    this.description = `core ${path.basename(name)} (${pid}${path.posix.basename(location.file)}${version ? `, ${formatVersion(version)}` : ""})`;
  }

  read(address: bigint, length: number): Uint8Array {
    const got = this.tryRead(address, length);
    if (!got) throw new ReadError(address, length, `${this.description}: ${length} bytes at 0x${address.toString(16)} are not in the core or its files`);
    return got;
  }

  tryRead(address: bigint, length: number): Uint8Array | null {
    if (!Number.isSafeInteger(length) || length < 0 || length > MAX_READ || address < 0n || address + BigInt(length) > 1n << 64n) return null;
    const whole = this.core.read(address, length);
    // (a copy: callers own what they read, and may clear parts of it)
    if (whole && !this.inHole(address, length)) return Uint8Array.prototype.slice.call(whole);
    const out = new Uint8Array(length);
    let done = 0;
    // each pass copies at least one byte or gives up
    while (done < length) {
      const at = address + BigInt(done);
      const n = this.piece(at, out, done, length - done);
      if (n <= 0) return null;
      done += n;
    }
    return out;
  }

  /** Copy the bytes at `at` (as many as one segment or file mapping holds) into out; how many (0: none). */
  private piece(at: bigint, out: Uint8Array, offset: number, want: number): number {
    if (this.inHole(at, 1)) return 0;
    const s = segmentAt(this.core.segments, at);
    if (s && at - s.vaddr < s.filesz) {
      const n = Math.min(want, Number(s.filesz - (at - s.vaddr)));
      const hole = this.holes.find((h) => h.start > at && h.start < at + BigInt(n));
      const take = hole ? Number(hole.start - at) : n;
      const src = this.core.read(at, take);
      if (!src) return 0;
      out.set(src, offset);
      return take;
    }
    // not dumped: the file's bytes, where a file holds them (code, read-only data)
    const i = lastAtOrBelow(this.starts, at);
    if (i < 0) return 0;
    const { m, file } = this.mapped[i]!;
    if (file === null || at >= m.end) return 0;
    const n = Math.min(want, Number(m.end - at));
    const fd = this.fd(file);
    if (fd === null) return 0;
    const position = m.offset + (at - m.start);
    try {
      const got = fs.readSync(fd, out, offset, n, position);
      return got;
    } catch {
      return 0;
    }
  }

  private inHole(address: bigint, length: number): boolean {
    const end = address + BigInt(length);
    return this.holes.some((h) => address < h.end && h.start < end);
  }

  private fd(file: string): number | null {
    let fd = this.fds.get(file);
    if (fd === undefined) {
      try {
        fd = fs.openSync(file, 'r');
      } catch {
        return null;
      }
      this.fds.set(file, fd);
    }
    return fd;
  }

  /** The core's threads, as its NT_PRSTATUS notes give them (the first is the one that crashed, for a crash). */
  get threads(): CoreThread[] {
    return this.core.threads;
  }

  close(): void {
    for (const fd of this.fds.values()) fs.closeSync(fd);
    this.fds.clear();
  }
}

export interface OpenedCore {
  source: CoreSource;
  /** every file the core maps, once, in the order it names them */
  files: CoreFileCheck[];
  /** threads whose stacks the core holds as zeros (see zeroStacks) */
  zeroStacks: ZeroStack[];
  /** the executable mappings as NativeObjects (read from the files found), and those not read */
  nativeObjects(): { objects: NativeObject[]; unread: UnreadObject[] };
  /** the asyncio module's debug offsets (3.14+), from the file that holds them, or why not */
  asyncio(): AsyncioFound | string;
}

/** The core's bytes: the file as it is, or unpacked where it is gzip (.gz). Throws CoreError. */
export function readCoreBytes(file: string): Uint8Array {
  let bytes: Uint8Array;
  try {
    const size = fs.statSync(file).size;
    if (size > MAX_CORE_BYTES) throw new CoreError(`${file}: ${size} bytes is larger than the ${MAX_CORE_BYTES} bytes a core may have here`);
    const b = fs.readFileSync(file);
    // (a plain view: a Buffer's slice() would not copy)
    bytes = new Uint8Array(b.buffer, b.byteOffset, b.length);
  } catch (e) {
    if (e instanceof CoreError) throw e;
    throw new CoreError(`${file}: cannot read it (${(e as NodeJS.ErrnoException).code ?? String(e)})`);
  }
  if (bytes.length >= 2 && bytes[0] === 0x1f && bytes[1] === 0x8b) {
    try {
      const b = gunzipSync(bytes, { maxOutputLength: MAX_CORE_BYTES });
      bytes = new Uint8Array(b.buffer, b.byteOffset, b.length);
    } catch (e) {
      throw new CoreError(`${file}: a gzip file that does not unpack (${(e as Error).message})`);
    }
  }
  return bytes;
}

/**
 * Open a core file for reading its Python threads: find the files it maps, _PyRuntime and the
 * layout. Throws CoreError (the core) or TargetError (no CPython found in it).
 */
export function openCore(file: string, options: CoreOptions = {}): OpenedCore {
  const bytes = readCoreBytes(file);
  const core = parseCore(bytes, file);
  if (core.files.length === 0) throw new CoreError(`${file}: the core names no mapped files (no NT_FILE note), so its interpreter cannot be found`);
  const files = resolveFiles(core, options);
  const byPath = new Map(files.map((f) => [f.path, f]));
  const usable = (p: string): string | null => {
    const f = byPath.get(p)!;
    return f.status === 'ok' || f.status === 'unchecked' ? f.used : null;
  };
  const mapped = [...core.files].sort((a, b) => (a.start < b.start ? -1 : a.start > b.start ? 1 : 0)).map((m) => ({ m, file: usable(m.path) }));
  const zeros = zeroStacks(core);

  // _PyRuntime: in the interpreter file the core maps (python3.N, libpython3.N)
  const tried: string[] = [];
  let location: RuntimeLocation | null = null;
  let runtimeFacts: ReturnType<typeof runtimeFactsOf> | null = null;
  for (const f of files) {
    if (!CANDIDATE_NAME.test(path.posix.basename(f.path))) continue;
    const used = usable(f.path);
    if (used === null) {
      tried.push(`${f.path}: ${f.status} (${f.why})`);
      continue;
    }
    const read = readWholeFile(used);
    if (typeof read === 'string') {
      tried.push(`${used}: ${read}`);
      continue;
    }
    runtimeFacts = runtimeFactsOf(read, used);
    if (typeof runtimeFacts === 'string') {
      tried.push(`${used}: ${runtimeFacts}`);
      continue;
    }
    const placed = placeRuntime(f.path, runtimeFacts, core.files.filter((m) => m.path === f.path));
    if (typeof placed === 'string') {
      tried.push(`${used}: ${placed}`);
      continue;
    }
    location = placed;
    break;
  }
  if (!location) {
    throw new TargetError('not-python', `${file}: no CPython found in the core (${tried.length ? tried.join('; ') : 'no python3.N or libpython3.N among the files it maps'})${tried.some((t) => / (missing|different) /.test(t)) ? '; give the interpreter with --executable PATH' : ''}`);
  }
  const provisional = new CoreSource(file, core, location, PLACEHOLDER_LAYOUT, mapped, zeros);
  const context = `${file} (${path.posix.basename(location.file)})`;
  const runtimeBytes = provisional.tryRead(location.runtimeAddress, DEBUG_OFFSETS_READ_SIZE);
  if (!runtimeBytes) throw new TargetError('read', `${context}: _PyRuntime at 0x${location.runtimeAddress.toString(16)} is not in the core`);
  let pyVersion: number | null = null;
  if (!hasDebugOffsetsCookie(runtimeBytes) && location.pyVersionAddress !== null) {
    const word = provisional.tryRead(location.pyVersionAddress, 4);
    if (!word) throw new TargetError('read', `${context}: Py_Version at 0x${location.pyVersionAddress.toString(16)} is neither in the core nor in its file`);
    pyVersion = new DataView(word.buffer, word.byteOffset, 4).getUint32(0, true);
  }
  const layout = chooseLayout(context, runtimeBytes, pyVersion);
  const source = new CoreSource(file, core, location, layout, mapped, zeros);
  return {
    source,
    files,
    zeroStacks: zeros,
    asyncio: () =>
      asyncioOffsetsAt(source, () =>
        locateAsyncioDebugIn(mapsOf(core, () => null), (file) => {
          const used = usable(file);
          if (used === null) return `${byPath.get(file)?.status ?? 'not named'}: ${byPath.get(file)?.why ?? ''}`;
          const bytes = readWholeFile(used);
          return typeof bytes === 'string' ? bytes : { bytes, path: used };
        }),
      ),
    nativeObjects: () =>
      nativeObjectsFrom(mapsOf(core, usable), (m) => {
        const f = byPath.get(m.path);
        const used = usable(m.path);
        if (!f || used === null) return f ? `${f.status}: ${f.why}` : 'not named by the core';
        const read = readWholeFile(used);
        if (typeof read === 'string') return `${used}: ${read}`;
        // (separate debug files are looked for on this machine, by the build id the core gives)
        return nativeFactsOf('', used)(read, used);
      }),
  };
}

// a layout is needed to build the source that reads _PyRuntime, before the layout is known: only
// its reads are used then
const PLACEHOLDER_LAYOUT = {} as Layout;

/** Each distinct file the core maps: found where the core says, by --executable, or in --lib-path; checked by build id. */
function resolveFiles(core: CoreFile, options: CoreOptions): CoreFileCheck[] {
  const out: CoreFileCheck[] = [];
  const seen = new Set<string>();
  const exe = options.executable ? path.resolve(options.executable) : null;
  // the file --executable stands for: the mapped one of its name, else the interpreter's
  const exeFor = exe === null ? null : (core.files.find((m) => path.posix.basename(m.path) === path.basename(exe))?.path ?? core.files.find((m) => CANDIDATE_NAME.test(path.posix.basename(m.path)))?.path ?? null);
  for (const m of core.files) {
    if (seen.has(m.path)) continue;
    seen.add(m.path);
    if (!m.path.startsWith('/')) continue;
    const want = coreBuildId(core, m.path);
    // (a file replaced or removed after it was mapped: the kernel names it "PATH (deleted)")
    const named = m.path.replace(/ \(deleted\)$/, '');
    const candidates = m.path === exeFor ? [exe!] : [named, ...(options.libPaths ?? []).map((d) => path.join(d, path.posix.basename(named)))];
    const tried: string[] = [];
    let found: CoreFileCheck | null = null;
    for (const c of candidates) {
      const id = fileBuildId(c);
      if (id === undefined) {
        tried.push(`${c}: not found`);
        continue;
      }
      if (want === null) {
        found = { path: m.path, status: 'unchecked', used: c, why: id === NOT_ELF ? 'not an ELF file' : 'the core keeps no build id for it' };
        break;
      }
      if (id === want) {
        found = { path: m.path, status: 'ok', used: c, why: '' };
        break;
      }
      tried.push(`${c}: build id ${id === NOT_ELF ? 'none (not an ELF file)' : (id ?? 'none')}, the core's is ${want}`);
    }
    if (!found) {
      const different = tried.some((t) => t.includes('build id'));
      found = { path: m.path, status: different ? 'different' : 'missing', used: null, why: tried.join('; ') };
    }
    out.push(found);
  }
  return out;
}

/** fileBuildId of a file that is not ELF (a locale archive, a cache the program maps) */
const NOT_ELF = '';

/** The build id of the file at `file` (null: it has none; NOT_ELF: not an ELF file; undefined: no such readable file). */
function fileBuildId(file: string): string | null | undefined {
  let st: fs.Stats;
  try {
    st = fs.statSync(file);
  } catch {
    return undefined;
  }
  if (!st.isFile()) return undefined;
  // the head first: a large data file the program maps is not read whole, and an ELF file's
  // build id note is near its start (the whole file is read only where it is not)
  const head = new Uint8Array(HEAD_PAGE);
  let got: number;
  try {
    const fd = fs.openSync(file, 'r');
    try {
      got = fs.readSync(fd, head, 0, HEAD_PAGE, 0);
    } finally {
      fs.closeSync(fd);
    }
  } catch {
    return undefined;
  }
  if (got < 4 || head[0] !== 0x7f || head[1] !== 0x45 || head[2] !== 0x4c || head[3] !== 0x46) return NOT_ELF;
  const early = buildIdOfHead(head.subarray(0, got));
  if (early !== null) return early;
  const read = readWholeFile(file);
  if (typeof read === 'string') return undefined;
  try {
    return parseElf(read, file).buildId();
  } catch (e) {
    if (e instanceof ElfError) return null;
    throw e;
  }
}

/** The GNU build id the core keeps for a mapped file: from the ELF header page it dumped (null: none). */
function coreBuildId(core: CoreFile, file: string): string | null {
  const first = core.files.find((m) => m.path === file && m.offset === 0n);
  if (!first) return null;
  const head = core.read(first.start, HEAD_PAGE) ?? core.read(first.start, 64);
  if (!head) return null;
  return buildIdOfHead(head);
}

/** The build id in the notes that a file's first bytes (its ELF header and program headers) place within them. */
export function buildIdOfHead(head: Uint8Array): string | null {
  if (head.length < 64 || head[0] !== 0x7f || head[1] !== 0x45 || head[2] !== 0x4c || head[3] !== 0x46 || head[4] !== 2 || head[5] !== 1) return null;
  const dv = new DataView(head.buffer, head.byteOffset, head.byteLength);
  const phoff = Number(dv.getBigUint64(32, true) & 0xffffffffn);
  const phentsize = dv.getUint16(54, true);
  const phnum = dv.getUint16(56, true);
  if (phentsize < 56) return null;
  for (let i = 0; i < phnum && i < 256; i++) {
    const o = phoff + i * phentsize;
    if (o + 56 > head.length) return null;
    if (dv.getUint32(o, true) !== 4) continue;
    const offset = dv.getBigUint64(o + 8, true);
    const size = dv.getBigUint64(o + 32, true);
    if (offset + size > BigInt(head.length)) continue;
    let at = Number(offset);
    const end = at + Number(size);
    for (let k = 0; k < 64 && at + 12 <= end; k++) {
      const namesz = dv.getUint32(at, true);
      const descsz = dv.getUint32(at + 4, true);
      const type = dv.getUint32(at + 8, true);
      const descAt = at + 12 + ((namesz + 3) & ~3);
      const next = descAt + ((descsz + 3) & ~3);
      if (namesz > 256 || descsz > 1024 || next > end) break;
      if (type === 3 && namesz === 4 && head[at + 12] === 0x47 && head[at + 13] === 0x4e && head[at + 14] === 0x55 && head[at + 15] === 0) {
        return Array.from(head.subarray(descAt, descAt + descsz), (b) => b.toString(16).padStart(2, '0')).join('');
      }
      at = next;
    }
  }
  return null;
}

/**
 * Threads whose stack the core holds as zeros from the stack pointer up: a live thread's stack
 * there always holds return addresses, so the writer could not read it and left zeros (gdb's
 * gcore stops copying a mapping at its first unreadable page — such as the guard page glibc 2.42+
 * installs at the bottom of a thread's stack with MADV_GUARD_INSTALL — and leaves the rest
 * unwritten). Those bytes are not memory; reads of them fail.
 */
export function zeroStacks(core: CoreFile): ZeroStack[] {
  const out: ZeroStack[] = [];
  for (const t of core.threads) {
    const sp = t.registers.rsp;
    const s = segmentAt(core.segments, sp);
    if (!s || sp - s.vaddr >= s.filesz) continue;
    const probe = core.read(sp, Math.min(STACK_PROBE, Number(s.filesz - (sp - s.vaddr))));
    if (!probe || probe.some((b) => b !== 0)) continue;
    // the zeros reach over the whole segment in such a core: the segment is taken as unread
    out.push({ tid: t.tid, start: s.vaddr, end: s.vaddr + s.filesz });
  }
  return out;
}

/**
 * The core's file mappings as maps entries, with permissions (PF_R 4, PF_W 2, PF_X 1) from the
 * core's segment of each — the kernel writes one for every mapping — or, where the core has none
 * (gcore leaves out mappings it does not dump), from the file's own segment at that offset.
 */
function mapsOf(core: CoreFile, fileFor: (path: string) => string | null): MapEntry[] {
  const loads = new Map<string, { offset: bigint; filesz: bigint; flags: number }[] | null>();
  const fromFile = (m: CoreMappedFile): number => {
    const file = fileFor(m.path);
    if (file === null) return 0;
    if (!loads.has(file)) {
      const read = readWholeFile(file);
      let got: { offset: bigint; filesz: bigint; flags: number }[] | null = null;
      if (typeof read !== 'string') {
        try {
          got = parseElf(read, file).loads.map((l) => ({ offset: l.offset, filesz: l.filesz, flags: l.flags }));
        } catch (e) {
          if (!(e instanceof ElfError)) throw e;
        }
      }
      loads.set(file, got);
    }
    // (a segment is mapped from its page-aligned start)
    return loads.get(file)?.find((l) => (l.offset & ~0xfffn) <= m.offset && m.offset < l.offset + l.filesz)?.flags ?? 0;
  };
  return core.files.map((m) => {
    const s = core.segments.find((x) => x.vaddr === m.start);
    const f = s ? s.flags : fromFile(m);
    const perms = `${f & 4 ? 'r' : '-'}${f & 2 ? 'w' : '-'}${f & 1 ? 'x' : '-'}p`;
    return { start: m.start, end: m.end, perms, offset: m.offset, dev: '00:00', inode: 0n, path: m.path, deleted: false };
  });
}
