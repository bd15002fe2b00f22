// An ELF core file (x86-64 Linux) as a memory source for post-mortem work: its memory (the
// PT_LOAD segments — what the kernel or gcore dumped; a segment with less in the file than in
// memory has the rest unread, not zero), each thread's registers (NT_PRSTATUS notes), the
// files mapped (NT_FILE) and the command (NT_PRPSINFO).
//
// A core comes from outside: every offset and count is checked against the file, every loop is
// bounded by what the file holds, and what is wrong is said with where it is (CoreError).

import type { NativeRegisters } from '../../native/unwind.js';

export class CoreError extends Error {
  override name = 'CoreError';
}

const ET_CORE = 4;
const EM_X86_64 = 62;
const PT_LOAD = 1;
const PT_NOTE = 4;
const NT_PRSTATUS = 1;
const NT_PRPSINFO = 3;
const NT_FILE = 0x46494c45;
/** struct elf_prstatus (x86-64): pr_cursig (short) at 12, pr_pid at 32, pr_reg (27 × 8 bytes, user_regs_struct) at 112 */
const PRSTATUS_CURSIG = 12;
const PRSTATUS_PID = 32;
const PRSTATUS_REGS = 112;
const PRSTATUS_SIZE = PRSTATUS_REGS + 27 * 8;
/** user_regs_struct slots: rbp 4, rip 16, rsp 19 */
const REG_RBP = 4;
const REG_RIP = 16;
const REG_RSP = 19;
/** struct elf_prpsinfo (x86-64): pr_pid at 24, pr_fname[16] at 40, pr_psargs[80] at 56 */
const PRPSINFO_PID = 24;
const PRPSINFO_FNAME = 40;
const PRPSINFO_ARGS = 56;
const PRPSINFO_SIZE = 136;
/** Limits far above any real core, so that a hostile one cannot make us loop or allocate without end. */
const MAX_PHDRS = 1 << 20;
const MAX_NOTES = 1 << 20;
const MAX_FILES = 1 << 20;

export interface CoreSegment {
  /** the memory's address and size */
  vaddr: bigint;
  memsz: bigint;
  /** where its bytes are in the core, and how many are there (0: not dumped) */
  offset: bigint;
  filesz: bigint;
  flags: number;
}

export interface CoreThread {
  tid: number;
  /** pr_cursig: the signal that ended the process (the kernel writes it for every thread, and
   * the thread that took it first); 0 in gcore's cores */
  signal: number;
  /** all 27 general registers, as user_regs_struct orders them */
  regs: BigUint64Array;
  registers: NativeRegisters;
}

export interface CoreMappedFile {
  start: bigint;
  end: bigint;
  /** the file offset the mapping starts at (bytes) */
  offset: bigint;
  path: string;
}

export interface CoreFile {
  pid: number | null;
  /** the command's name and arguments as the kernel kept them (truncated to 15 and 80 bytes), or null */
  command: { name: string; args: string } | null;
  segments: CoreSegment[];
  threads: CoreThread[];
  files: CoreMappedFile[];
  /** `length` bytes at `address` (null: not all of them are in the core) */
  read(address: bigint, length: number): Uint8Array | null;
}

export function parseCore(bytes: Uint8Array, name = 'core file'): CoreFile {
  const fail = (what: string): never => {
    throw new CoreError(`${name}: ${what}`);
  };
  const size = BigInt(bytes.length);
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const within = (what: string, offset: bigint, length: bigint): number => {
    if (offset < 0n || length < 0n || offset + length > size) fail(`${what} (offset ${offset}, ${length} bytes) runs past the end of the file (${bytes.length} bytes)`);
    return Number(offset);
  };
  if (bytes.length < 64 || bytes[0] !== 0x7f || bytes[1] !== 0x45 || bytes[2] !== 0x4c || bytes[3] !== 0x46) fail('not an ELF file (no \\x7fELF magic)');
  if (bytes[4] !== 2 || bytes[5] !== 1) fail('not a 64-bit little-endian ELF file');
  const type = dv.getUint16(16, true);
  if (type !== ET_CORE) fail(`ELF type ${type} is not a core file (4)`);
  const machine = dv.getUint16(18, true);
  if (machine !== EM_X86_64) fail(`machine ${machine} is not supported (only x86-64, machine 62)`);
  const phoff = dv.getBigUint64(32, true);
  const phentsize = dv.getUint16(54, true);
  const phnum = dv.getUint16(56, true);
  if (phnum === 0) fail('no program headers');
  if (phentsize < 56) fail(`program header size ${phentsize} is smaller than 56`);
  if (phnum > MAX_PHDRS) fail(`${phnum} program headers`);
  const base = within('the program header table', phoff, BigInt(phnum) * BigInt(phentsize));

  const segments: CoreSegment[] = [];
  const notes: { offset: number; length: number }[] = [];
  for (let i = 0; i < phnum; i++) {
    const o = base + i * phentsize;
    const ptype = dv.getUint32(o, true);
    const flags = dv.getUint32(o + 4, true);
    const offset = dv.getBigUint64(o + 8, true);
    const vaddr = dv.getBigUint64(o + 16, true);
    const filesz = dv.getBigUint64(o + 32, true);
    const memsz = dv.getBigUint64(o + 40, true);
    if (ptype === PT_LOAD) {
      if (filesz > memsz) fail(`segment at ${hex(vaddr)}: ${filesz} bytes in the file, more than its ${memsz} in memory`);
      if (vaddr + memsz > 1n << 64n) fail(`segment at ${hex(vaddr)} (${memsz} bytes) leaves the address space`);
      // (a segment cut short by a core size limit: what is in the file is its start)
      const inFile = offset >= size ? 0n : offset + filesz > size ? size - offset : filesz;
      segments.push({ vaddr, memsz, offset, filesz: inFile, flags });
    } else if (ptype === PT_NOTE) {
      notes.push({ offset: within(`note segment ${i}`, offset, filesz), length: Number(filesz) });
    }
  }
  segments.sort((a, b) => (a.vaddr < b.vaddr ? -1 : a.vaddr > b.vaddr ? 1 : 0));

  const threads: CoreThread[] = [];
  const files: CoreMappedFile[] = [];
  let pid: number | null = null;
  let command: CoreFile['command'] = null;
  let count = 0;
  for (const n of notes) {
    let at = n.offset;
    const end = n.offset + n.length;
    while (at + 12 <= end) {
      if (++count > MAX_NOTES) fail(`more than ${MAX_NOTES} notes`);
      const namesz = dv.getUint32(at, true);
      const descsz = dv.getUint32(at + 4, true);
      const ntype = dv.getUint32(at + 8, true);
      const descAt = at + 12 + align4(namesz);
      const next = descAt + align4(descsz);
      if (next > end || next <= at) fail(`note at offset ${at} (name ${namesz} bytes, data ${descsz}) runs past its segment`);
      const owner = latin1(bytes, at + 12, namesz);
      const desc = bytes.subarray(descAt, descAt + descsz);
      if (owner === 'CORE' && ntype === NT_PRSTATUS) threads.push(prstatus(desc, descAt, fail));
      else if (owner === 'CORE' && ntype === NT_PRPSINFO && desc.length >= PRPSINFO_SIZE) {
        const d = new DataView(desc.buffer, desc.byteOffset, desc.byteLength);
        pid = d.getInt32(PRPSINFO_PID, true);
        command = { name: cString(desc, PRPSINFO_FNAME, 16), args: cString(desc, PRPSINFO_ARGS, 80) };
      } else if (owner === 'CORE' && ntype === NT_FILE) files.push(...mappedFiles(desc, descAt, fail));
      at = next;
    }
  }
  if (pid === null && threads.length > 0) pid = threads[0]!.tid;

  const read = (address: bigint, length: number): Uint8Array | null => {
    if (!(length >= 0) || address < 0n) return null;
    const s = segmentAt(segments, address);
    if (!s) return null;
    const off = address - s.vaddr;
    if (off + BigInt(length) > s.filesz) return null;
    const at = Number(s.offset + off);
    return bytes.subarray(at, at + length);
  };
  return { pid, command, segments, threads, files, read };
}

/** The segment (sorted by address) whose memory holds `address`, or null. */
export function segmentAt(segments: readonly CoreSegment[], address: bigint): CoreSegment | null {
  // the last segment starting at or below the address
  let lo = 0;
  let hi = segments.length - 1;
  let found: CoreSegment | null = null;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (segments[mid]!.vaddr <= address) {
      found = segments[mid]!;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  return found && address < found.vaddr + found.memsz ? found : null;
}

function prstatus(desc: Uint8Array, at: number, fail: (what: string) => never): CoreThread {
  if (desc.length < PRSTATUS_SIZE) fail(`NT_PRSTATUS note at offset ${at}: ${desc.length} bytes, fewer than ${PRSTATUS_SIZE}`);
  const d = new DataView(desc.buffer, desc.byteOffset, desc.byteLength);
  const regs = new BigUint64Array(27);
  for (let k = 0; k < 27; k++) regs[k] = d.getBigUint64(PRSTATUS_REGS + 8 * k, true);
  return { tid: d.getInt32(PRSTATUS_PID, true), signal: d.getInt16(PRSTATUS_CURSIG, true), regs, registers: { rip: regs[REG_RIP]!, rsp: regs[REG_RSP]!, rbp: regs[REG_RBP]! } };
}

/** NT_FILE: count, page size, count × (start, end, page offset), then count NUL-ended paths. */
function mappedFiles(desc: Uint8Array, at: number, fail: (what: string) => never): CoreMappedFile[] {
  if (desc.length < 16) fail(`NT_FILE note at offset ${at}: ${desc.length} bytes`);
  const d = new DataView(desc.buffer, desc.byteOffset, desc.byteLength);
  const count = d.getBigUint64(0, true);
  const page = d.getBigUint64(8, true);
  if (count > BigInt(MAX_FILES) || 16n + count * 24n > BigInt(desc.length)) fail(`NT_FILE note at offset ${at}: ${count} files do not fit in its ${desc.length} bytes`);
  const n = Number(count);
  const out: CoreMappedFile[] = [];
  let name = 16 + n * 24;
  for (let i = 0; i < n; i++) {
    const e = 16 + i * 24;
    const nul = desc.indexOf(0, name);
    if (nul < 0) fail(`NT_FILE note at offset ${at}: path ${i} is not ended`);
    out.push({ start: d.getBigUint64(e, true), end: d.getBigUint64(e + 8, true), offset: d.getBigUint64(e + 16, true) * page, path: new TextDecoder().decode(desc.subarray(name, nul)) });
    name = nul + 1;
  }
  return out;
}

function align4(n: number): number {
  return (n + 3) & ~3;
}

function latin1(bytes: Uint8Array, at: number, n: number): string {
  let s = '';
  for (let i = 0; i < n && bytes[at + i] !== 0; i++) s += String.fromCharCode(bytes[at + i]!);
  return s;
}

function cString(bytes: Uint8Array, at: number, max: number): string {
  const sub = bytes.subarray(at, at + max);
  const nul = sub.indexOf(0);
  return new TextDecoder().decode(nul < 0 ? sub : sub.subarray(0, nul)).trimEnd();
}

function hex(v: bigint): string {
  return `0x${v.toString(16)}`;
}
