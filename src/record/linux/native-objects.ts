// The objects a process has mapped executable, read for native frames (src/native/objects.ts):
// for each, where it lies, its load bias, build id, unwind rows (.eh_frame, else .debug_frame)
// and function symbols — from the file as the process maps it, and from its separate debug file
// where one is installed (found by build id, else by .gnu_debuglink, under /usr/lib/debug as
// gdb looks). Files are read once per identity (device, inode, size, times) and kept.

import path from 'node:path';
import { parseElf, ElfError, SHT_NOBITS, type ElfInfo, type FunctionSymbol } from './elf.js';
import { readProcMaps, type MapEntry } from './proc-maps.js';
import { readWholeFile, useMappedFile } from './process.js';
import { readFrameSection, CfiError, type FunctionRange } from '../../native/eh-frame.js';
import { lastAtOrBelow } from '../../walk/region-index.js';
import type { NativeObject, NativeSymbols } from '../../native/objects.js';
import type { UnwindTable } from '../../native/unwind-table.js';

/** What an object's file gives, whatever the process maps it at. */
export interface FileFacts {
  buildId: string | null;
  table: UnwindTable;
  symbols: NativeSymbols;
  /** PT_LOAD headers: (file offset, address) pairs that place a mapping */
  loads: { offset: bigint; vaddr: bigint; filesz: bigint }[];
  /** why the table or symbols are partial (a section that could not be read), if anything */
  problems: string[];
}

const cache = new Map<string, FileFacts | string>();
const EMPTY_TABLE: UnwindTable = { starts: new BigUint64Array(0), rules: new Int32Array(0) };

/** The function symbols as NativeSymbols (sorted, as FunctionSymbol lists come). */
function symbolsOf(list: FunctionSymbol[]): NativeSymbols {
  const starts = new BigUint64Array(list.length);
  const sizes = new Uint32Array(list.length);
  const names: string[] = [];
  list.forEach((s, i) => {
    starts[i] = s.value;
    sizes[i] = s.size;
    names.push(s.name);
  });
  return { starts, sizes, names };
}

/**
 * The symbols, and a nameless one (name "") for each function the unwind table knows that no
 * symbol holds — the static functions of a stripped file — so that its frames are one function
 * (src/native/symbolize.ts), not one per return address. Sorted by start.
 */
function withUnnamed(symbols: FunctionSymbol[], functions: readonly FunctionRange[]): FunctionSymbol[] {
  if (functions.length === 0) return symbols;
  const starts = BigUint64Array.from(symbols.map((f) => f.value));
  const out = [...symbols];
  for (const f of functions) {
    const i = lastAtOrBelow(starts, f.begin);
    // (held: by a symbol reaching over its start — a symbol of size 0 reaches to the next)
    if (i >= 0 && (f.begin < starts[i]! + BigInt(symbols[i]!.size) || (symbols[i]!.size === 0 && (i + 1 >= starts.length || f.begin < starts[i + 1]!)))) continue;
    const size = f.end - f.begin;
    out.push({ name: '', value: f.begin, size: size > 0xffffffffn ? 0xffffffff : Number(size) });
  }
  return out.sort((a, b) => (a.value < b.value ? -1 : a.value > b.value ? 1 : 0));
}

/**
 * The separate debug file of `file` (a path as seen from `root`, "" for this machine's), where
 * gdb looks for one: by build id, then by the debug link beside the file or under /usr/lib/debug.
 */
export function debugFileOf(root: string, file: string, elf: ElfInfo): { elf: ElfInfo; path: string } | null {
  const id = elf.buildId();
  const candidates: string[] = [];
  if (id && id.length > 2) candidates.push(`/usr/lib/debug/.build-id/${id.slice(0, 2)}/${id.slice(2)}.debug`);
  const link = elf.debugLink();
  if (link) {
    const dir = path.posix.dirname(file);
    candidates.push(`${dir}/${link}`, `${dir}/.debug/${link}`, `/usr/lib/debug${dir}/${link}`);
  }
  for (const c of candidates) {
    if (c === file) continue;
    const bytes = readWholeFile(root + c);
    if (typeof bytes === 'string') continue;
    try {
      const debug = parseElf(bytes, c);
      // a debug link names a file, not a build: the ids must agree where both have one
      const other = debug.buildId();
      if (id && other && other !== id) continue;
      return { elf: debug, path: c };
    } catch (e) {
      if (!(e instanceof ElfError)) throw e;
    }
  }
  return null;
}

function frameTable(elf: ElfInfo, bytes: Uint8Array, name: string, problems: string[]): (UnwindTable & { functions: FunctionRange[] }) | null {
  for (const section of ['.eh_frame', '.debug_frame'] as const) {
    const s = elf.section(section);
    if (!s || s.type === SHT_NOBITS || s.size === 0n) continue;
    if (s.offset + s.size > BigInt(bytes.length)) {
      problems.push(`${name}: ${section} runs past the end of the file`);
      continue;
    }
    try {
      const t = readFrameSection(bytes.subarray(Number(s.offset), Number(s.offset + s.size)), s.addr, section, `${name} ${section}`);
      if (t.starts.length > 0) return { starts: t.starts, rules: t.rules, functions: t.functions };
    } catch (e) {
      if (!(e instanceof CfiError)) throw e;
      problems.push(e.message);
    }
  }
  return null;
}

/** The FileFacts of an object's bytes; `root` is where its debug file is looked for ("": this machine). */
export function nativeFactsOf(root: string, mappedPath: string) {
  return (bytes: Uint8Array, file: string): FileFacts | string => {
    let elf: ElfInfo;
    try {
      elf = parseElf(bytes, file);
    } catch (e) {
      if (e instanceof ElfError) return e.message;
      throw e;
    }
    const problems: string[] = [];
    const debug = debugFileOf(root, mappedPath, elf);
    let table = frameTable(elf, bytes, mappedPath, problems);
    let functions: FunctionSymbol[] = [];
    try {
      functions = elf.functions();
    } catch (e) {
      if (!(e instanceof ElfError)) throw e;
      problems.push(e.message);
    }
    if (debug) {
      // the debug file's .symtab names the static functions a stripped file's .dynsym lacks
      try {
        const more = debug.elf.functions();
        if (more.length > functions.length) functions = more;
      } catch (e) {
        if (!(e instanceof ElfError)) throw e;
      }
      if (!table) {
        const debugBytes = readWholeFile(root + debug.path);
        if (typeof debugBytes !== 'string') table = frameTable(debug.elf, debugBytes, debug.path, problems);
      }
    }
    return {
      buildId: elf.buildId(),
      table: table ? { starts: table.starts, rules: table.rules } : EMPTY_TABLE,
      symbols: symbolsOf(withUnnamed(functions, table?.functions ?? [])),
      loads: elf.loads.map((l) => ({ offset: l.offset, vaddr: l.vaddr, filesz: l.filesz })),
      problems,
    };
  };
}

/** An object that could not be read, and why (it still has a mapping: its pcs are named by it). */
export interface UnreadObject {
  path: string;
  start: bigint;
  end: bigint;
  why: string;
}

/**
 * The executable file mappings of process `pid` as NativeObjects, sorted by start, and the
 * ones that could not be read. `maps` may be given (already read).
 */
export function readNativeObjects(pid: number, maps: MapEntry[] = readProcMaps(pid)): { objects: NativeObject[]; unread: UnreadObject[] } {
  const byPath = new Map<string, MapEntry[]>();
  for (const m of maps) if (m.path.startsWith('/')) byPath.set(m.path, [...(byPath.get(m.path) ?? []), m]);
  return nativeObjectsFrom(maps, (m) => {
    const all = byPath.get(m.path)!;
    return useMappedFile(pid, m.path, [m, ...all.filter((x) => x !== m)], nativeFactsOf(`/proc/${pid}/root`, m.path), cache);
  });
}

/**
 * The executable file mappings of `maps` as NativeObjects, sorted by start, and the ones that
 * could not be read — each file's facts from `factsFor` (a live process's files, or those a
 * core names).
 */
export function nativeObjectsFrom(maps: readonly MapEntry[], factsFor: (m: MapEntry) => FileFacts | string): { objects: NativeObject[]; unread: UnreadObject[] } {
  const objects: NativeObject[] = [];
  const unread: UnreadObject[] = [];
  for (const m of maps) {
    if (m.perms[2] !== 'x' || !m.path.startsWith('/')) continue;
    const facts = factsFor(m);
    if (typeof facts === 'string') {
      unread.push({ path: m.path, start: m.start, end: m.end, why: facts });
      continue;
    }
    // the segment this mapping shows: its file offset lies in the segment's bytes
    const load = facts.loads.find((l) => l.offset <= m.offset && m.offset < l.offset + (l.filesz === 0n ? 1n : l.filesz));
    if (!load) {
      unread.push({ path: m.path, start: m.start, end: m.end, why: `no PT_LOAD segment holds file offset 0x${m.offset.toString(16)}` });
      continue;
    }
    const bias = m.start - (load.vaddr + (m.offset - load.offset));
    objects.push({ start: m.start, end: m.end, bias, path: m.path, buildId: facts.buildId, table: facts.table, symbols: facts.symbols });
  }
  objects.sort((a, b) => (a.start < b.start ? -1 : a.start > b.start ? 1 : 0));
  return { objects, unread };
}

/** Exists for tests: forget the files read. */
export function forgetNativeFiles(): void {
  cache.clear();
}

