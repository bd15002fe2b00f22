// .eh_frame (and .debug_frame) → an unwind table (./unwind-table.ts): every FDE's CFI program
// run once, on the host, into rows of the three x86-64 rules the unwinder applies.
//
// The bytes come from files named by a capture or a process: untrusted. Every read is bounds
// checked, every program bounded by its FDE's length; an FDE we cannot follow (a CFA given by
// an expression other than the PLT's, a CFA register other than rsp or rbp) yields rows with
// CFA.NONE — the unwind stops there with a status, never guesses.

import { CFA, RA_UNDEFINED, RBP, ROW_FIELDS, type UnwindTable } from './unwind-table.js';

export class CfiError extends Error {
  override name = 'CfiError';
}

// DWARF register numbers on x86-64 (System V ABI, figure 3.36)
const REG_RBP = 6;
const REG_RSP = 7;
const REG_RA = 16;

// pointer encodings (LSB: format; next bits: application)
const PE_OMIT = 0xff;
const PE_FORMAT = 0x0f;
const PE_APPLY = 0x70;
const PE_INDIRECT = 0x80;

/** Which section's flavour: .eh_frame (CIE pointer relative, id 0) or .debug_frame (absolute offset, id ~0). */
export type FrameSection = '.eh_frame' | '.debug_frame';

class Bytes {
  private readonly view: DataView;
  constructor(
    readonly b: Uint8Array,
    readonly name: string,
  ) {
    this.view = new DataView(b.buffer, b.byteOffset, b.byteLength);
  }
  need(at: number, n: number, what: string): void {
    if (at < 0 || at + n > this.b.length) throw new CfiError(`${this.name}: ${what} at offset ${at} runs past the end (${this.b.length} bytes)`);
  }
  u8(at: number): number {
    this.need(at, 1, 'a byte');
    return this.b[at]!;
  }
  u16(at: number): number {
    this.need(at, 2, 'a 16-bit value');
    return this.view.getUint16(at, true);
  }
  u32(at: number): number {
    this.need(at, 4, 'a 32-bit value');
    return this.view.getUint32(at, true);
  }
  u64(at: number): bigint {
    this.need(at, 8, 'a 64-bit value');
    return this.view.getBigUint64(at, true);
  }
  /** [value, next offset] */
  uleb(at: number): [number, number] {
    let v = 0;
    let shift = 0;
    for (let i = 0; i < 10; i++) {
      const byte = this.u8(at++);
      if (shift < 53) v += (byte & 0x7f) * 2 ** shift;
      shift += 7;
      if (!(byte & 0x80)) return [v, at];
    }
    throw new CfiError(`${this.name}: a LEB128 number at offset ${at - 10} longer than 10 bytes`);
  }
  sleb(at: number): [number, number] {
    let v = 0;
    let shift = 0;
    for (let i = 0; i < 10; i++) {
      const byte = this.u8(at++);
      if (shift < 53) v += (byte & 0x7f) * 2 ** shift;
      shift += 7;
      if (!(byte & 0x80)) {
        if (byte & 0x40 && shift < 64) v -= 2 ** Math.min(shift, 53);
        return [v, at];
      }
    }
    throw new CfiError(`${this.name}: a LEB128 number at offset ${at - 10} longer than 10 bytes`);
  }
  cstr(at: number, end: number): [string, number] {
    let s = '';
    for (let i = at; i < end; i++) {
      const c = this.u8(i);
      if (c === 0) return [s, i + 1];
      s += String.fromCharCode(c);
    }
    throw new CfiError(`${this.name}: an unterminated string at offset ${at}`);
  }
}

interface Cie {
  codeAlign: number;
  dataAlign: number;
  raRegister: number;
  fdeEncoding: number;
  signal: boolean;
  hasAugData: boolean;
  /** the initial instructions */
  start: number;
  end: number;
}

/** The rules being built while a CFI program runs. */
interface State {
  cfa: number;
  cfaReg: number;
  cfaOffset: number;
  pltExtra: number;
  rbp: number;
  rbpOffset: number;
  raOffset: number;
}

const initialState = (): State => ({ cfa: CFA.NONE, cfaReg: -1, cfaOffset: 0, pltExtra: 0, rbp: RBP.SAME, rbpOffset: 0, raOffset: RA_UNDEFINED });

/** Rows as they are found: start address, then the rule fields. */
class RowsOut {
  starts: bigint[] = [];
  rules: number[] = [];
  push(start: bigint, s: State | null): void {
    // (a return address found by a rule we do not follow: no row, rather than a wrong one —
    // RA_UNDEFINED would say the chain ends here)
    if (s !== null && s.raOffset === RA_LOST) s = null;
    const cfa = s === null ? CFA.NONE : s.cfa;
    const fields = s === null ? [CFA.NONE, 0, RBP.SAME, 0, RA_UNDEFINED] : [cfa, cfa === CFA.PLT ? s.cfaOffset | (s.pltExtra << 24) : s.cfaOffset, s.rbp, s.rbpOffset, s.raOffset];
    // a row at the same start as the last replaces it (advance_loc by 0, several rules at one pc)
    const n = this.starts.length;
    // rows go up in address: hostile CFI that moves back (DW_CFA_set_loc) adds none
    if (n && start < this.starts[n - 1]!) return;
    if (n && this.starts[n - 1] === start) {
      this.rules.splice((n - 1) * ROW_FIELDS, ROW_FIELDS, ...fields);
      return;
    }
    this.starts.push(start);
    this.rules.push(...fields);
  }
  /** Forget the rows from the `n`th on (an FDE that turned out unreadable). */
  truncate(n: number): void {
    this.starts.length = Math.min(this.starts.length, n);
    this.rules.length = this.starts.length * ROW_FIELDS;
  }
}

/** A return address rule we cannot follow (register, expression, same value): the row is dropped. */
const RA_LOST = 0x7ffffffe;

/** Decode a pointer of encoding `enc` at `at`; `sectionAddr` is the section's address (pcrel). */
function readEncoded(r: Bytes, at: number, enc: number, sectionAddr: bigint, what: string): [bigint, number] {
  if (enc === PE_OMIT) return [0n, at];
  if (enc & PE_INDIRECT) throw new CfiError(`${r.name}: ${what} at offset ${at}: indirect pointers are not followed`);
  let v: bigint;
  let next: number;
  switch (enc & PE_FORMAT) {
    case 0x00:
    case 0x04:
      v = r.u64(at);
      next = at + 8;
      break;
    case 0x01: {
      const [x, n] = r.uleb(at);
      v = BigInt(x);
      next = n;
      break;
    }
    case 0x02:
      v = BigInt(r.u16(at));
      next = at + 2;
      break;
    case 0x03:
      v = BigInt(r.u32(at));
      next = at + 4;
      break;
    case 0x09: {
      const [x, n] = r.sleb(at);
      v = BigInt(x);
      next = n;
      break;
    }
    case 0x0a:
      v = BigInt((r.u16(at) << 16) >> 16);
      next = at + 2;
      break;
    case 0x0b:
      v = BigInt(r.u32(at) | 0);
      next = at + 4;
      break;
    case 0x0c:
      v = BigInt.asIntN(64, r.u64(at));
      next = at + 8;
      break;
    default:
      throw new CfiError(`${r.name}: ${what} at offset ${at}: pointer encoding 0x${enc.toString(16)} is not known`);
  }
  switch (enc & PE_APPLY) {
    case 0x00:
      break;
    case 0x10:
      v += sectionAddr + BigInt(at);
      break;
    default:
      // datarel/textrel/funcrel do not occur in .eh_frame's FDEs on x86-64
      throw new CfiError(`${r.name}: ${what} at offset ${at}: pointer application 0x${(enc & PE_APPLY).toString(16)} is not supported`);
  }
  return [BigInt.asUintN(64, v), next];
}

/** Decode only the size of an encoded value (a pc range uses the format, never the application). */
function readRange(r: Bytes, at: number, enc: number): [bigint, number] {
  return readEncoded(r, at, enc & PE_FORMAT, 0n, 'an address range');
}

/**
 * Recognize the PLT's CFA expression: DW_OP_breg7 (rsp) N; DW_OP_breg16 (rip) 0; DW_OP_lit15;
 * DW_OP_and; DW_OP_litK; DW_OP_ge; DW_OP_lit3; DW_OP_shl; DW_OP_plus → [N, K], else null.
 */
function pltExpression(r: Bytes, at: number, len: number): [number, number] | null {
  const end = at + len;
  if (r.u8(at) !== 0x77) return null;
  const [n, p] = r.sleb(at + 1);
  if (p + 9 > end + 1) return null;
  const ops = [r.u8(p), r.u8(p + 1), r.u8(p + 2), r.u8(p + 3)];
  if (ops[0] !== 0x80 || ops[1] !== 0x00 || ops[2] !== 0x3f || ops[3] !== 0x1a) return null;
  const litK = r.u8(p + 4);
  if (litK < 0x30 || litK > 0x4f) return null;
  if (r.u8(p + 5) !== 0x2a || r.u8(p + 6) !== 0x33 || r.u8(p + 7) !== 0x24 || r.u8(p + 8) !== 0x22) return null;
  if (p + 9 !== end) return null;
  return [n, litK - 0x30];
}

/** Run a CIE's or FDE's instructions from `at` to `end`, pushing a row at each advance. */
function run(r: Bytes, cie: Cie, at: number, end: number, state: State, initial: State, loc: bigint, limit: bigint, sectionAddr: bigint, out: RowsOut | null): bigint {
  const stack: State[] = [];
  const setCfa = (reg: number, offset: number): void => {
    state.cfaReg = reg;
    state.cfaOffset = offset;
    state.cfa = reg === REG_RSP ? CFA.RSP : reg === REG_RBP ? CFA.RBP : CFA.NONE;
  };
  const setRule = (reg: number, rule: 'offset' | 'undefined' | 'same' | 'restore' | 'other', offset = 0): void => {
    if (reg === REG_RBP) {
      if (rule === 'offset') {
        state.rbp = RBP.AT;
        state.rbpOffset = offset;
      } else if (rule === 'same') {
        state.rbp = RBP.SAME;
        state.rbpOffset = 0;
      } else if (rule === 'restore') {
        state.rbp = initial.rbp;
        state.rbpOffset = initial.rbpOffset;
      } else state.rbp = RBP.UNDEFINED;
    } else if (reg === cie.raRegister) {
      if (rule === 'offset') state.raOffset = offset;
      else if (rule === 'restore') state.raOffset = initial.raOffset;
      else if (rule === 'undefined') state.raOffset = RA_UNDEFINED;
      // (any other rule for the return address: we cannot find it)
      else state.raOffset = RA_LOST;
    }
  };
  const from = loc;
  const advance = (to: bigint): void => {
    if (out && to > loc && to <= limit && loc >= from) out.push(loc, cie.signal ? { ...state, cfa: CFA.SIGNAL } : state);
    loc = to;
  };
  while (at < end) {
    const op = r.u8(at++);
    const high = op & 0xc0;
    const low = op & 0x3f;
    if (high === 0x40) {
      advance(loc + BigInt(low * cie.codeAlign));
      continue;
    }
    if (high === 0x80) {
      const [off, n] = r.uleb(at);
      at = n;
      setRule(low, 'offset', off * cie.dataAlign);
      continue;
    }
    if (high === 0xc0) {
      setRule(low, 'restore');
      continue;
    }
    switch (op) {
      case 0x00: // nop
        break;
      case 0x01: {
        // set_loc
        const [v, n] = readEncoded(r, at, cie.fdeEncoding, sectionAddr, 'DW_CFA_set_loc');
        at = n;
        advance(v);
        break;
      }
      case 0x02:
        advance(loc + BigInt(r.u8(at) * cie.codeAlign));
        at += 1;
        break;
      case 0x03:
        advance(loc + BigInt(r.u16(at) * cie.codeAlign));
        at += 2;
        break;
      case 0x04:
        advance(loc + BigInt(r.u32(at) * cie.codeAlign));
        at += 4;
        break;
      case 0x05: {
        const [reg, n1] = r.uleb(at);
        const [off, n2] = r.uleb(n1);
        at = n2;
        setRule(reg, 'offset', off * cie.dataAlign);
        break;
      }
      case 0x06: {
        const [reg, n] = r.uleb(at);
        at = n;
        setRule(reg, 'restore');
        break;
      }
      case 0x07: {
        const [reg, n] = r.uleb(at);
        at = n;
        setRule(reg, 'undefined');
        break;
      }
      case 0x08: {
        const [reg, n] = r.uleb(at);
        at = n;
        setRule(reg, 'same');
        break;
      }
      case 0x09: {
        // register: reg1's value is in reg2 (we do not follow other registers)
        const [reg, n1] = r.uleb(at);
        const [, n2] = r.uleb(n1);
        at = n2;
        setRule(reg, 'other');
        break;
      }
      case 0x0a:
        if (stack.length >= 64) throw new CfiError(`${r.name}: DW_CFA_remember_state nested deeper than 64 at offset ${at - 1}`);
        stack.push({ ...state });
        break;
      case 0x0b: {
        const s = stack.pop();
        if (!s) throw new CfiError(`${r.name}: DW_CFA_restore_state with nothing remembered at offset ${at - 1}`);
        // (the CFA is not part of the remembered state in some readers; DWARF 5 says it is)
        Object.assign(state, s);
        break;
      }
      case 0x0c: {
        const [reg, n1] = r.uleb(at);
        const [off, n2] = r.uleb(n1);
        at = n2;
        setCfa(reg, off);
        break;
      }
      case 0x0d: {
        const [reg, n] = r.uleb(at);
        at = n;
        setCfa(reg, state.cfaOffset);
        break;
      }
      case 0x0e: {
        const [off, n] = r.uleb(at);
        at = n;
        setCfa(state.cfaReg, off);
        break;
      }
      case 0x0f: {
        // def_cfa_expression: the PLT's is the one we follow
        const [len, n] = r.uleb(at);
        r.need(n, len, 'a DWARF expression');
        const plt = len > 0 ? pltExpression(r, n, len) : null;
        if (plt) {
          state.cfa = CFA.PLT;
          state.cfaReg = REG_RSP;
          state.cfaOffset = plt[0];
          state.pltExtra = plt[1];
        } else {
          state.cfa = CFA.NONE;
          state.cfaReg = -1;
        }
        at = n + len;
        break;
      }
      case 0x10:
      case 0x16: {
        // expression / val_expression for a register: not followed
        const [reg, n1] = r.uleb(at);
        const [len, n2] = r.uleb(n1);
        r.need(n2, len, 'a DWARF expression');
        at = n2 + len;
        setRule(reg, 'other');
        break;
      }
      case 0x11: {
        const [reg, n1] = r.uleb(at);
        const [off, n2] = r.sleb(n1);
        at = n2;
        setRule(reg, 'offset', off * cie.dataAlign);
        break;
      }
      case 0x12: {
        const [reg, n1] = r.uleb(at);
        const [off, n2] = r.sleb(n1);
        at = n2;
        setCfa(reg, off * cie.dataAlign);
        break;
      }
      case 0x13: {
        const [off, n] = r.sleb(at);
        at = n;
        setCfa(state.cfaReg, off * cie.dataAlign);
        break;
      }
      case 0x14:
      case 0x15: {
        // val_offset(_sf): the register's value is CFA + offset (not a saved slot)
        const [reg, n1] = r.uleb(at);
        const [, n2] = op === 0x14 ? r.uleb(n1) : r.sleb(n1);
        at = n2;
        setRule(reg, 'other');
        break;
      }
      case 0x2e: {
        // GNU_args_size: nothing to do for unwinding
        const [, n] = r.uleb(at);
        at = n;
        break;
      }
      case 0x2f: {
        const [reg, n1] = r.uleb(at);
        const [off, n2] = r.uleb(n1);
        at = n2;
        setRule(reg, 'offset', -off * cie.dataAlign);
        break;
      }
      default:
        throw new CfiError(`${r.name}: CFI instruction 0x${op.toString(16)} at offset ${at - 1} is not known`);
    }
  }
  return loc;
}

function parseCie(r: Bytes, at: number, end: number, flavour: FrameSection, sectionAddr: bigint): Cie {
  const version = r.u8(at);
  if (version !== 1 && version !== 3 && version !== 4) throw new CfiError(`${r.name}: CIE at offset ${at} has version ${version}`);
  let p = at + 1;
  const [aug, p1] = r.cstr(p, end);
  p = p1;
  if (aug.includes('eh')) p += 8;
  if (version === 4) p += 2; // address size, segment size
  const [codeAlign, p2] = r.uleb(p);
  const [dataAlign, p3] = r.sleb(p2);
  p = p3;
  let raRegister: number;
  if (version === 1) raRegister = r.u8(p++);
  else [raRegister, p] = r.uleb(p);
  const cie: Cie = { codeAlign, dataAlign, raRegister, fdeEncoding: 0, signal: false, hasAugData: false, start: 0, end };
  if (aug.startsWith('z')) {
    cie.hasAugData = true;
    const [len, p4] = r.uleb(p);
    const dataEnd = p4 + len;
    r.need(p4, len, 'CIE augmentation data');
    let q = p4;
    for (const c of aug.slice(1)) {
      if (c === 'R') cie.fdeEncoding = r.u8(q++);
      else if (c === 'L') q++;
      else if (c === 'P') {
        const enc = r.u8(q++);
        [, q] = readEncoded(r, q, enc & ~PE_INDIRECT, sectionAddr, 'a personality pointer');
      } else if (c === 'S') cie.signal = true;
      else if (c === 'B' || c === 'G') {
        /* (AArch64 and memory-tagging letters: no data) */
      } else break; // an unknown letter: the rest of the data is skipped by its length
    }
    p = dataEnd;
  } else if (aug !== '' && aug !== 'eh') {
    throw new CfiError(`${r.name}: CIE at offset ${at}: augmentation "${aug}" is not known`);
  }
  cie.start = p;
  return cie;
}

/**
 * The code an FDE covers, [begin, end) in object addresses: one function (or one part of a
 * function a compiler split off, as GCC's .cold parts) — what names a function no symbol names.
 */
export interface FunctionRange {
  begin: bigint;
  end: bigint;
}

/**
 * Read a .eh_frame or .debug_frame section (its bytes, and its address for pc-relative
 * pointers) into an unwind table. FDEs whose CIE cannot be read are skipped and counted in
 * `skipped`; a malformed section throws CfiError naming the offset.
 */
export function readFrameSection(bytes: Uint8Array, sectionAddr: bigint, flavour: FrameSection = '.eh_frame', name: string = flavour): UnwindTable & { fdes: number; skipped: number; functions: FunctionRange[] } {
  const r = new Bytes(bytes, name);
  const cies = new Map<number, Cie>();
  type Fde = { begin: bigint; end: bigint; cie: Cie; start: number; stop: number };
  const fdes: Fde[] = [];
  let skipped = 0;
  let at = 0;
  // every entry has a length, so the loop is bounded by the section's size
  while (at + 4 <= bytes.length) {
    const entry = at;
    let len = r.u32(at);
    at += 4;
    let idSize = 4;
    if (len === 0) {
      if (flavour === '.eh_frame') break; // the terminator
      continue;
    }
    if (len === 0xffffffff) {
      const big = r.u64(at);
      if (big > BigInt(bytes.length)) throw new CfiError(`${name}: entry at offset ${entry} is ${big} bytes long, past the section's end`);
      len = Number(big);
      at += 8;
      idSize = 8;
    }
    const end = at + len;
    if (end > bytes.length || len < idSize) throw new CfiError(`${name}: entry at offset ${entry} (${len} bytes) runs past the section's end (${bytes.length})`);
    const idAt = at;
    const id = idSize === 4 ? r.u32(at) : Number(r.u64(at) & 0xffffffffn);
    at += idSize;
    const isCie = flavour === '.eh_frame' ? id === 0 : id === 0xffffffff;
    if (isCie) {
      try {
        cies.set(entry, parseCie(r, at, end, flavour, sectionAddr));
      } catch (e) {
        if (!(e instanceof CfiError)) throw e;
      }
    } else {
      const cieAt = flavour === '.eh_frame' ? idAt - id : id;
      let cie = cies.get(cieAt);
      if (!cie && cieAt >= 0 && cieAt < bytes.length && cieAt !== entry) {
        // a CIE after its FDE (allowed): read it where it is
        try {
          const clen = r.u32(cieAt);
          if (clen !== 0 && clen !== 0xffffffff && cieAt + 4 + clen <= bytes.length) {
            cie = parseCie(r, cieAt + 8, cieAt + 4 + clen, flavour, sectionAddr);
            cies.set(cieAt, cie);
          }
        } catch (e) {
          if (!(e instanceof CfiError)) throw e;
        }
      }
      if (!cie) {
        skipped++;
      } else {
        const [begin, p1] = readEncoded(r, at, cie.fdeEncoding, sectionAddr, 'an FDE start');
        const [range, p2] = readRange(r, p1, cie.fdeEncoding);
        let p = p2;
        if (cie.hasAugData) {
          const [alen, p3] = r.uleb(p);
          p = p3 + alen;
        }
        if (p > end) throw new CfiError(`${name}: FDE at offset ${entry}: its header runs past its end`);
        if (range > 0n && begin + range <= 0xffffffffffffffffn) fdes.push({ begin, end: begin + range, cie, start: p, stop: end });
      }
    }
    at = end;
  }

  // one function after another, in address order; a gap between two gets a NONE row
  fdes.sort((a, b) => (a.begin < b.begin ? -1 : a.begin > b.begin ? 1 : 0));
  const out = new RowsOut();
  const functions: FunctionRange[] = [];
  let lastEnd = -1n;
  for (const f of fdes) {
    if (f.begin < lastEnd) {
      skipped++; // overlapping FDEs: keep the first
      continue;
    }
    functions.push({ begin: f.begin, end: f.end });
    if (lastEnd >= 0n && f.begin > lastEnd) out.push(lastEnd, null);
    const initial = initialState();
    const mark = out.starts.length;
    try {
      run(r, f.cie, f.cie.start, f.cie.end, initial, initial, f.begin, f.begin, sectionAddr, null);
      if (f.cie.signal) initial.cfa = CFA.SIGNAL;
      const state = { ...initial };
      const loc = run(r, f.cie, f.start, f.stop, state, initial, f.begin, f.end, sectionAddr, out);
      if (f.cie.signal) state.cfa = CFA.SIGNAL;
      if (loc >= f.begin && loc < f.end) out.push(loc, state);
    } catch (e) {
      if (!(e instanceof CfiError)) throw e;
      skipped++;
      out.truncate(mark);
      out.push(f.begin, null);
    }
    lastEnd = f.end;
  }
  if (lastEnd >= 0n) out.push(lastEnd, null);
  return { starts: BigUint64Array.from(out.starts), rules: Int32Array.from(out.rules), fdes: fdes.length, skipped, functions };
}
