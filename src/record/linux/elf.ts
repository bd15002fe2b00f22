// A minimal ELF64 reader: just enough to find _PyRuntime (and Py_Version) in an interpreter
// binary or libpython and to compute where the file was loaded. The file comes from the
// target machine and is untrusted: every table is bounds-checked against the file before it
// is walked, so a truncated or hostile file gives an ElfError naming what is wrong, never an
// exception from a typed-array read or an unbounded loop.

export class ElfError extends Error {
  override name = 'ElfError';
}

export const PT_LOAD = 1;
export const SHT_SYMTAB = 2;
export const SHT_STRTAB = 3;
export const SHT_NOBITS = 8;
export const SHT_DYNSYM = 11;
export const PT_NOTE = 4;
const NT_GNU_BUILD_ID = 3;
const STT_FUNC = 2;
const STT_GNU_IFUNC = 10;
const SHN_UNDEF = 0;
const SHN_LORESERVE = 0xff00;
const SHN_ABS = 0xfff1;
const SHN_XINDEX = 0xffff;
const PN_XNUM = 0xffff;
const EM_X86_64 = 62;
const ET_EXEC = 2;
const ET_DYN = 3;

const EHDR_SIZE = 64;
const PHDR_SIZE = 56;
const SHDR_SIZE = 64;
const SYM_SIZE = 24;

export interface ProgramHeader {
  type: number;
  flags: number;
  offset: bigint;
  vaddr: bigint;
  filesz: bigint;
  memsz: bigint;
  align: bigint;
}

export interface SectionHeader {
  index: number;
  name: string;
  type: number;
  flags: bigint;
  addr: bigint;
  offset: bigint;
  size: bigint;
  link: number;
  info: number;
  entsize: bigint;
}

export interface ElfSymbol {
  name: string;
  value: bigint;
  size: bigint;
  /** the table it was found in */
  table: '.dynsym' | '.symtab';
  /** st_shndx: the section the symbol is defined in */
  sectionIndex: number;
}

export interface ElfInfo {
  /** ET_EXEC (fixed addresses) or ET_DYN (position-independent: PIE executable or shared object) */
  type: 'exec' | 'dyn';
  /** true for ET_DYN: the file is mapped at a load bias chosen at run time */
  pie: boolean;
  programHeaders: ProgramHeader[];
  /** PT_LOAD headers in file order (the ELF spec requires ascending p_vaddr) */
  loads: ProgramHeader[];
  sections: SectionHeader[];
  /** The first section with this name, or null. */
  section(name: string): SectionHeader | null;
  /**
   * A defined symbol with this name, from .dynsym (present even in stripped files) or else
   * .symtab; null if neither defines it. Undefined references (imports) are not returned.
   */
  symbol(name: string): ElfSymbol | null;
  /**
   * Every defined function symbol (STT_FUNC, STT_GNU_IFUNC) of .symtab and .dynsym with a
   * non-zero address, sorted by address; where both tables (or aliases) name one address, the
   * first name read wins — .symtab before .dynsym, which it repeats. `aliases`: every name,
   * several per address.
   */
  functions(aliases?: boolean): FunctionSymbol[];
  /** The GNU build id (hex) from a .note.gnu.build-id note (or any PT_NOTE), or null. */
  buildId(): string | null;
  /** The file name a .gnu_debuglink section names (the separate debug file), or null. */
  debugLink(): string | null;
}

/** A function symbol: its address in the object, bytes (0: unknown) and name. */
export interface FunctionSymbol {
  value: bigint;
  size: number;
  name: string;
}

/** Reads little-endian fields at file offsets that the caller has already bounds-checked. */
class Reader {
  private readonly view: DataView;
  constructor(readonly bytes: Uint8Array) {
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }
  u8(o: number): number {
    return this.view.getUint8(o);
  }
  u16(o: number): number {
    return this.view.getUint16(o, true);
  }
  u32(o: number): number {
    return this.view.getUint32(o, true);
  }
  u64(o: number): bigint {
    return this.view.getBigUint64(o, true);
  }
}

const hex = (v: number | bigint): string => '0x' + v.toString(16);

/**
 * Parse an ELF64 little-endian x86-64 file. `name` is used in error messages (e.g. the path).
 * Throws ElfError if the file is not such an ELF file or a table it needs is malformed.
 */
export function parseElf(file: Uint8Array, name = 'ELF file'): ElfInfo {
  const fail = (what: string): never => {
    throw new ElfError(`${name}: ${what}`);
  };
  const fileSize = BigInt(file.length);
  /** A table of `count` entries of `entsize` bytes at `offset`, checked to lie inside the file. */
  const table = (what: string, offset: bigint, count: bigint, entsize: bigint): number => {
    const end = offset + count * entsize;
    if (end > fileSize) {
      fail(
        `${what} (offset ${hex(offset)}, ${count} × ${entsize} bytes) runs past the end of the file (${file.length} bytes)`,
      );
    }
    return Number(offset);
  };

  if (file.length < 16 || file[0] !== 0x7f || file[1] !== 0x45 || file[2] !== 0x4c || file[3] !== 0x46) {
    fail('not an ELF file (no \\x7fELF magic)');
  }
  if (file[4] !== 2) fail(`ELF class ${file[4]} is not supported (only 64-bit ELF)`);
  if (file[5] !== 1) fail(`ELF data encoding ${file[5]} is not supported (only little-endian)`);
  if (file.length < EHDR_SIZE) fail(`truncated ELF header (${file.length} of ${EHDR_SIZE} bytes)`);
  const r = new Reader(file);

  const eType = r.u16(16);
  const machine = r.u16(18);
  if (machine !== EM_X86_64) fail(`machine ${machine} is not supported (only x86-64, machine 62)`);
  if (eType !== ET_EXEC && eType !== ET_DYN) {
    fail(`ELF type ${eType} is not an executable or shared object`);
  }
  const phoff = r.u64(0x20);
  const shoff = r.u64(0x28);
  const phentsize = r.u16(0x36);
  let phnum = r.u16(0x38);
  const shentsize = r.u16(0x3a);
  let shnum = r.u16(0x3c);
  let shstrndx = r.u16(0x3e);

  // Section 0 carries the real counts when they do not fit in the ELF header's 16-bit fields.
  let section0: number | null = null;
  if (shoff !== 0n) {
    if (shentsize < SHDR_SIZE) fail(`section header size ${shentsize} is smaller than ${SHDR_SIZE}`);
    section0 = table('section header 0', shoff, 1n, BigInt(shentsize));
    if (shnum === 0) {
      const real = r.u64(section0 + 32);
      // an index must also fit the 32-bit sh_link/sh_info fields that refer to sections
      if (real > 0xffffffffn) fail(`section count ${real} in section 0 is impossible`);
      shnum = Number(real);
    }
    if (shstrndx === SHN_XINDEX) shstrndx = r.u32(section0 + 40);
  }
  if (phnum === PN_XNUM) {
    if (section0 === null) fail('program header count is in section 0 but there is no section table');
    phnum = r.u32(section0! + 44);
  }

  const programHeaders: ProgramHeader[] = [];
  if (phnum > 0) {
    if (phentsize < PHDR_SIZE) fail(`program header size ${phentsize} is smaller than ${PHDR_SIZE}`);
    const base = table('program header table', phoff, BigInt(phnum), BigInt(phentsize));
    for (let i = 0; i < phnum; i++) {
      const o = base + i * phentsize;
      programHeaders.push({
        type: r.u32(o),
        flags: r.u32(o + 4),
        offset: r.u64(o + 8),
        vaddr: r.u64(o + 16),
        filesz: r.u64(o + 32),
        memsz: r.u64(o + 40),
        align: r.u64(o + 48),
      });
    }
  }
  const loads = programHeaders.filter((p) => p.type === PT_LOAD);

  const sections: SectionHeader[] = [];
  if (shoff !== 0n && shnum > 0) {
    const base = table('section header table', shoff, BigInt(shnum), BigInt(shentsize));
    for (let i = 0; i < shnum; i++) {
      const o = base + i * shentsize;
      sections.push({
        index: i,
        name: '',
        type: r.u32(o + 4),
        flags: r.u64(o + 8),
        addr: r.u64(o + 16),
        offset: r.u64(o + 24),
        size: r.u64(o + 32),
        link: r.u32(o + 40),
        info: r.u32(o + 44),
        entsize: r.u64(o + 56),
      });
    }
    if (shstrndx !== 0) {
      const strtab = sections[shstrndx];
      if (!strtab) fail(`section name table index ${shstrndx} is out of range (${shnum} sections)`);
      const start = table('section name table', strtab!.offset, strtab!.size, 1n);
      const end = start + Number(strtab!.size);
      for (const s of sections) {
        const nameOff = r.u32(base + s.index * shentsize);
        s.name =
          cString(file, start + nameOff, end) ??
          fail(`section ${s.index}: name offset ${nameOff} is outside the section name table`);
      }
    }
  }

  const symbolTables: { name: '.dynsym' | '.symtab'; header: SectionHeader }[] = [];
  for (const type of [SHT_DYNSYM, SHT_SYMTAB]) {
    const header = sections.find((s) => s.type === type);
    if (header) symbolTables.push({ name: type === SHT_DYNSYM ? '.dynsym' : '.symtab', header });
  }

  const symbol = (wanted: string): ElfSymbol | null => {
    const key = new TextEncoder().encode(wanted);
    for (const { name: tableName, header } of symbolTables) {
      const where = `${tableName} (section ${header.index})`;
      if (header.entsize !== 0n && header.entsize !== BigInt(SYM_SIZE)) {
        fail(`${where}: entry size ${header.entsize} is not ${SYM_SIZE}`);
      }
      const count = header.size / BigInt(SYM_SIZE);
      const base = table(where, header.offset, count, BigInt(SYM_SIZE));
      const strtab = sections[header.link];
      if (!strtab || strtab.type !== SHT_STRTAB) fail(`${where}: linked string table ${header.link} is not a string table`);
      const strStart = table(`string table of ${tableName}`, strtab!.offset, strtab!.size, 1n);
      const strEnd = strStart + Number(strtab!.size);
      for (let i = 0; i < Number(count); i++) {
        const o = base + i * SYM_SIZE;
        const nameOff = r.u32(o);
        const shndx = r.u16(o + 6);
        if (shndx === SHN_UNDEF) continue;
        if (!bytesAt(file, strStart + nameOff, strEnd, key)) continue;
        // A symbol in a reserved index other than SHN_ABS has no address we can use.
        if (shndx >= SHN_LORESERVE && shndx !== SHN_ABS && shndx !== SHN_XINDEX) continue;
        return { name: wanted, value: r.u64(o + 8), size: r.u64(o + 16), table: tableName, sectionIndex: shndx };
      }
    }
    return null;
  };

  const functions = (aliases = false): FunctionSymbol[] => {
    const out: FunctionSymbol[] = [];
    const seen = new Set<bigint>();
    const named = new Set<string>();
    // .symtab first: it has the static functions too, and .dynsym repeats its exported ones
    for (const { name: tableName, header } of [...symbolTables].reverse()) {
      if (header.type === SHT_NOBITS) continue;
      const where = `${tableName} (section ${header.index})`;
      if (header.entsize !== 0n && header.entsize !== BigInt(SYM_SIZE)) fail(`${where}: entry size ${header.entsize} is not ${SYM_SIZE}`);
      const count = Number(header.size / BigInt(SYM_SIZE));
      const base = table(where, header.offset, BigInt(count), BigInt(SYM_SIZE));
      const strtab = sections[header.link];
      if (!strtab || strtab.type !== SHT_STRTAB) fail(`${where}: linked string table ${header.link} is not a string table`);
      const strStart = table(`string table of ${tableName}`, strtab!.offset, strtab!.size, 1n);
      const strEnd = strStart + Number(strtab!.size);
      for (let i = 0; i < count; i++) {
        const o = base + i * SYM_SIZE;
        const type = r.u8(o + 4) & 0xf;
        if (type !== STT_FUNC && type !== STT_GNU_IFUNC) continue;
        const shndx = r.u16(o + 6);
        if (shndx === SHN_UNDEF || (shndx >= SHN_LORESERVE && shndx !== SHN_XINDEX)) continue;
        const value = r.u64(o + 8);
        if (value === 0n || (!aliases && seen.has(value))) continue;
        const name = cString(file, strStart + r.u32(o), strEnd);
        if (!name) continue;
        if (aliases) {
          const key = `${value}:${name}`;
          if (named.has(key)) continue;
          named.add(key);
        }
        seen.add(value);
        const size = r.u64(o + 16);
        out.push({ value, size: size > 0xffffffffn ? 0 : Number(size), name });
      }
    }
    return out.sort((a, b) => (a.value < b.value ? -1 : a.value > b.value ? 1 : 0));
  };

  /** The GNU build id in the notes of [offset, offset + size), or null. */
  const buildIdIn = (offset: bigint, size: bigint): string | null => {
    if (offset + size > fileSize) return null;
    let at = Number(offset);
    const end = at + Number(size);
    // a note: namesz, descsz, type, name (padded to 4), desc (padded to 4)
    for (let k = 0; k < 64 && at + 12 <= end; k++) {
      const namesz = r.u32(at);
      const descsz = r.u32(at + 4);
      const type = r.u32(at + 8);
      const nameAt = at + 12;
      const descAt = nameAt + ((namesz + 3) & ~3);
      const next = descAt + ((descsz + 3) & ~3);
      if (namesz > 256 || descsz > 1024 || next > end) return null;
      if (type === NT_GNU_BUILD_ID && namesz === 4 && file[nameAt] === 0x47 && file[nameAt + 1] === 0x4e && file[nameAt + 2] === 0x55 && file[nameAt + 3] === 0) {
        return Array.from(file.subarray(descAt, descAt + descsz), (b) => b.toString(16).padStart(2, '0')).join('');
      }
      at = next;
    }
    return null;
  };
  const buildId = (): string | null => {
    const s = sections.find((x) => x.name === '.note.gnu.build-id' && x.type !== SHT_NOBITS);
    if (s) return buildIdIn(s.offset, s.size);
    for (const p of programHeaders) {
      if (p.type !== PT_NOTE) continue;
      const id = buildIdIn(p.offset, p.filesz);
      if (id) return id;
    }
    return null;
  };
  const debugLink = (): string | null => {
    const s = sections.find((x) => x.name === '.gnu_debuglink' && x.type !== SHT_NOBITS);
    if (!s || s.offset + s.size > fileSize) return null;
    const name = cString(file, Number(s.offset), Number(s.offset + s.size));
    // a file name in the same or a debug directory: never a path
    return name && !name.includes('/') && name !== '.' && name !== '..' ? name : null;
  };

  return {
    functions,
    buildId,
    debugLink,
    type: eType === ET_EXEC ? 'exec' : 'dyn',
    pie: eType === ET_DYN,
    programHeaders,
    loads,
    sections,
    section: (wanted) => sections.find((s) => s.name === wanted) ?? null,
    symbol,
  };
}

/** The NUL-terminated string at `start`, which must end before `end`; null if it does not. */
function cString(file: Uint8Array, start: number, end: number): string | null {
  if (start >= end) return null;
  const nul = file.subarray(start, end).indexOf(0);
  if (nul < 0) return null;
  return new TextDecoder('latin1').decode(file.subarray(start, start + nul));
}

/** Whether the NUL-terminated string at `start` (ending before `end`) equals `key`. */
function bytesAt(file: Uint8Array, start: number, end: number, key: Uint8Array): boolean {
  if (start + key.length >= end) return false;
  for (let i = 0; i < key.length; i++) if (file[start + i] !== key[i]) return false;
  return file[start + key.length] === 0;
}
