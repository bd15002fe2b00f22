// Generators of hostile native unwinder input, shared by the property test
// (test/native-unwind.test.ts) and the fuzzer (fuzz/targets.ts): mapped objects with unwind
// tables (sorted or not, rules known and unknown, offsets at the int32 edges, rule arrays
// shorter than their starts), a stack copy whose words point back into the objects and into
// itself (so chains of several frames form), registers — all with values at and past the edges
// of the address space (negative, 2^64 − 1, past 2^64), overlapping and empty mappings, and
// frame limits that are not whole numbers.
import fs from 'node:fs';
import fc from 'fast-check';
import { parseElf } from '../src/record/linux/elf.js';
import { CFA, RA_UNDEFINED, RBP, rowAt } from '../src/native/unwind-table.js';
import { tableRows, type MappedObject, type NativeRegisters, type StackCopy } from '../src/native/unwind.js';
import { lastAtOrBelow } from '../src/walk/region-index.js';

const TOP = 1n << 64n;
const u64 = fc.bigInt({ min: 0n, max: TOP - 1n });
const int32 = fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 });

export interface NativeCase {
  regs: NativeRegisters;
  stack: StackCopy;
  objects: MappedObject[];
  maxFrames: number;
}

const row = fc.record({
  cfa: fc.oneof({ weight: 6, arbitrary: fc.constantFrom(0, 1, 1, 1, 2, 2, 3, 4) }, { weight: 1, arbitrary: fc.constantFrom(5, -1, 99) }),
  cfaOffset: fc.oneof(
    { weight: 6, arbitrary: fc.constantFrom(8, 16, 24, 32, 0, -8, 8 | (11 << 24), 16 | (5 << 24), 8 | (255 << 24), -16 & 0xffffff) },
    { weight: 1, arbitrary: fc.constantFrom(2 ** 31 - 1, -(2 ** 31), 0x7fffff, 0x800000) },
    { weight: 1, arbitrary: int32 },
  ),
  rbp: fc.oneof({ weight: 6, arbitrary: fc.constantFrom(0, 1, 1, 2) }, { weight: 1, arbitrary: fc.constantFrom(3, -1, 1 << 30) }),
  rbpOffset: fc.oneof({ weight: 6, arbitrary: fc.constantFrom(-16, -24, -8, 0, 8) }, { weight: 1, arbitrary: int32 }),
  ra: fc.oneof(
    { weight: 8, arbitrary: fc.constantFrom(-8, -8, -8, -16, 0) },
    { weight: 2, arbitrary: fc.constant(RA_UNDEFINED) },
    { weight: 1, arbitrary: fc.constantFrom(2 ** 31 - 2, -(2 ** 31), 8) },
    { weight: 1, arbitrary: int32 },
  ),
  step: fc.constantFrom(0n, 1n, 4n, 0x10n, 0x10n, 0x40n, 0x100n),
});

const object = fc.record({
  base: fc.oneof(
    { weight: 4, arbitrary: fc.constantFrom(0x40_0000n, 0x40_0000n, 0x7f00_0000_0000n, 0x60_0000n) },
    { weight: 1, arbitrary: fc.constantFrom(0n, TOP - 0x1000n, TOP - 1n, -0x100n, TOP + 0x10n) },
    { weight: 1, arbitrary: u64 },
  ),
  size: fc.oneof({ weight: 4, arbitrary: fc.constantFrom(0x1000n, 0x10000n) }, { weight: 1, arbitrary: fc.constantFrom(0n, 1n, -0x10n, TOP) }, { weight: 1, arbitrary: u64 }),
  // the load bias, as base − vaddr: the object's addresses start at 0, at a page, below 0…
  vaddr: fc.oneof({ weight: 4, arbitrary: fc.constantFrom(0n, 0n, 0x1000n) }, { weight: 1, arbitrary: fc.constantFrom(-0x1000n, TOP, 0x40_0000n) }, { weight: 1, arbitrary: u64 }),
  table: fc.oneof({ weight: 1, arbitrary: fc.constant(null) }, { weight: 5, arbitrary: fc.array(row, { maxLength: 8 }) }),
  first: fc.oneof({ weight: 4, arbitrary: fc.constant(0n) }, { weight: 1, arbitrary: u64 }),
  shuffle: fc.oneof({ weight: 5, arbitrary: fc.constant(0) }, { weight: 1, arbitrary: fc.nat() }),
  // rule arrays that hold fewer rows than the starts (or a part of one)
  cut: fc.oneof({ weight: 6, arbitrary: fc.constant(-1) }, { weight: 1, arbitrary: fc.nat({ max: 40 }) }),
});

/** A value the stack or a register holds: [kind, pick, delta], resolved against the objects and the stack. */
const value = fc.tuple(fc.constantFrom('pc', 'pc', 'pc', 'stack', 'stack', 'zero', 'edge', 'random'), fc.nat(), fc.integer({ min: -3, max: 40 }), u64);
const EDGES = [0n, 1n, TOP - 1n, TOP - 8n, TOP - 16n, -8n, -1n, TOP, TOP + 8n, 0x8000_0000_0000_0000n];

export const nativeCase: fc.Arbitrary<NativeCase> = fc
  .record({
    objects: fc.array(object, { maxLength: 4 }),
    stackAddress: fc.oneof(
      { weight: 5, arbitrary: fc.constantFrom(0x7ffd_0000_0000n, 0x7ffd_0000_0008n, 0x1000n) },
      { weight: 1, arbitrary: fc.constantFrom(0n, TOP - 0x100n, TOP - 0x40n, -0x40n, TOP + 0x10n, TOP - 0x104n) },
      { weight: 1, arbitrary: u64 },
    ),
    words: fc.array(value, { maxLength: 40 }),
    tail: fc.nat({ max: 7 }),
    rip: value,
    rsp: fc.tuple(fc.constantFrom('stack', 'stack', 'stack', 'edge', 'random'), fc.nat(), fc.integer({ min: -3, max: 40 }), u64),
    rbp: value,
    maxFrames: fc.oneof(
      { weight: 4, arbitrary: fc.constantFrom(64, 512, 5, 2) },
      { weight: 1, arbitrary: fc.constantFrom(1, 0, -1, 2.5, Number.NaN, Number.POSITIVE_INFINITY, 1e9, 65536, 65537) },
    ),
  })
  .map((g): NativeCase => {
    const objects: MappedObject[] = g.objects.map((o) => {
      let table: MappedObject['table'] = null;
      if (o.table) {
        let at = o.first;
        const starts = o.table.map((r) => (at = (at + r.step) & (TOP - 1n)));
        if (o.shuffle) for (let i = starts.length - 1; i > 0; i--) { const j = (o.shuffle + i * 7) % (i + 1); [starts[i], starts[j]] = [starts[j]!, starts[i]!]; }
        const rules = o.table.flatMap((r) => [r.cfa, r.cfaOffset, r.rbp, r.rbpOffset, r.ra]);
        table = { starts: BigUint64Array.from(starts), rules: Int32Array.from(o.cut >= 0 ? rules.slice(0, o.cut) : rules) };
      }
      return { start: o.base, end: o.base + o.size, bias: o.base - o.vaddr, table };
    });
    const stackBytes = g.words.length * 8 + g.tail;
    const resolve = ([kind, pick, delta, random]: [string, number, number, bigint]): bigint => {
      if (kind === 'pc' && objects.length) {
        // near a row's start (in the process: + bias), or near the mapping's start
        const o = objects[pick % objects.length]!;
        const rows = o.table?.starts ?? new BigUint64Array(0);
        const base = rows.length && pick % 3 !== 0 ? rows[(pick >> 2) % rows.length]! + o.bias : o.start;
        return base + BigInt(delta);
      }
      if (kind === 'stack' || kind === 'pc') return g.stackAddress + BigInt(stackBytes ? (pick * 8) % (stackBytes + 16) : 0) + BigInt(delta % 3 === 0 ? 0 : delta);
      if (kind === 'zero') return 0n;
      if (kind === 'edge') return EDGES[pick % EDGES.length]!;
      return random;
    };
    const bytes = new Uint8Array(stackBytes);
    const dv = new DataView(bytes.buffer);
    g.words.forEach((w, i) => dv.setBigUint64(i * 8, BigInt.asUintN(64, resolve(w)), true));
    for (let i = 0; i < g.tail; i++) bytes[g.words.length * 8 + i] = 0xa5;
    return {
      regs: { rip: resolve(g.rip), rsp: resolve(g.rsp), rbp: resolve(g.rbp) },
      stack: { address: g.stackAddress, bytes },
      objects,
      maxFrames: g.maxFrames,
    };
  });

/**
 * Chains: objects laid out as a process has them (disjoint, bias = start) with rows of any
 * rules, and a stack written the way the unwinder will read it — each frame's rule followed
 * forward, the return address (or the ucontext of a signal frame) and the saved rbp put where
 * the rule says — so that long chains through every rule form; then a few words disturbed.
 */
export const nativeChain: fc.Arbitrary<NativeCase> = fc
  .record({
    tables: fc.array(fc.array(row, { minLength: 1, maxLength: 8 }), { minLength: 1, maxLength: 3 }),
    noTable: fc.nat({ max: 7 }),
    steps: fc.array(fc.record({ object: fc.nat(), row: fc.nat(), delta: fc.integer({ min: 0, max: 12 }), grow: fc.integer({ min: 1, max: 40 }), rbp: fc.integer({ min: 0, max: 40 }) }), { minLength: 1, maxLength: 14 }),
    end: fc.constantFrom('zero', 'outside', 'none'),
    stackAddress: fc.constantFrom(0x7ffd_0000_0000n, TOP - 0x1000n, 0x2000n),
    rsp: fc.nat({ max: 16 }),
    rbp: fc.nat({ max: 60 }),
    disturb: fc.array(fc.tuple(fc.nat({ max: 600 }), u64), { maxLength: 3 }),
    cut: fc.oneof({ weight: 4, arbitrary: fc.constant(-1) }, { weight: 1, arbitrary: fc.nat({ max: 4800 }) }),
    maxFrames: fc.constantFrom(64, 64, 8, 3),
  })
  .map((g): NativeCase => {
    const objects: MappedObject[] = g.tables.map((rows, i) => {
      const base = 0x40_0000n + BigInt(i) * 0x10_0000n;
      let at = 0x1000n;
      const starts = rows.map((r) => (at += 0x10n + r.step));
      const table = i === g.noTable ? null : { starts: BigUint64Array.from(starts), rules: Int32Array.from(rows.flatMap((r) => [r.cfa, r.cfaOffset, r.rbp, r.rbpOffset, r.ra])) };
      return { start: base, end: base + 0x10000n, bias: base, table };
    });
    const size = 4800;
    const bytes = new Uint8Array(size);
    const dv = new DataView(bytes.buffer);
    const sa = g.stackAddress;
    const put = (at: bigint, v: bigint): void => {
      const off = at - sa;
      if (off >= 0n && off + 8n <= BigInt(size)) dv.setBigUint64(Number(off), BigInt.asUintN(64, v), true);
    };
    /** a pc in a row of a step's object (a return address: one past the row's start at least) */
    const pcOf = (st: (typeof g.steps)[number], returnAddress: boolean): bigint => {
      const o = objects[st.object % objects.length]!;
      const starts = o.table?.starts;
      const start = starts && starts.length ? starts[st.row % starts.length]! + o.bias : o.start + 0x100n;
      return start + BigInt(st.delta) + (returnAddress ? 1n : 0n);
    };
    let rip = pcOf(g.steps[0]!, false);
    let rsp = sa + 8n * BigInt(g.rsp);
    let rbp = sa + 8n * BigInt(g.rbp);
    const regs = { rip, rsp, rbp };
    let exact = true;
    for (let k = 1; k <= g.steps.length; k++) {
      const st = g.steps[k] ?? null;
      const o = objects.find((x) => rip >= x.start && rip < x.end);
      if (!o) break;
      let rule = { cfa: CFA.NONE as number, cfaOffset: 0, rbp: RBP.SAME as number, rbpOffset: 0, raOffset: -8 };
      const n = o.table ? tableRows(o.table) : 0;
      const i = n ? lastAtOrBelow(o.table!.starts.subarray(0, n), BigInt.asUintN(64, rip - o.bias - (exact ? 0n : 1n))) : -1;
      if (i >= 0) rule = rowAt(o.table!, i);
      const next = st ? pcOf(st, rule.cfa !== CFA.SIGNAL) : g.end === 'zero' ? 0n : g.end === 'outside' ? 0x1000n : null;
      const grow = 8n * BigInt(st?.grow ?? 1);
      const newRbp = rsp + grow + 8n * BigInt(st?.rbp ?? 0);
      if (rule.cfa === CFA.SIGNAL) {
        if (next !== null) put(rsp + 168n, next);
        put(rsp + 160n, rsp + 176n + grow);
        put(rsp + 120n, newRbp + 176n);
        rsp = rsp + 176n + grow;
        rbp = newRbp + 176n;
        exact = true;
      } else {
        let cfa: bigint;
        let rbpAt: bigint | null = null;
        let raAt: bigint;
        if (rule.cfa === CFA.RSP || rule.cfa === CFA.RBP || rule.cfa === CFA.PLT) {
          const off = rule.cfa === CFA.PLT ? ((rule.cfaOffset << 8) >> 8) + ((rip & 15n) >= BigInt(rule.cfaOffset >>> 24) ? 8 : 0) : rule.cfaOffset;
          cfa = (rule.cfa === CFA.RBP ? rbp : rsp) + BigInt(off);
          if (rule.raOffset === RA_UNDEFINED) break;
          raAt = cfa + BigInt(rule.raOffset);
          if (rule.rbp === RBP.AT) rbpAt = cfa + BigInt(rule.rbpOffset);
        } else {
          // no rule: the frame pointer
          cfa = rbp + 16n;
          raAt = rbp + 8n;
          rbpAt = rbp;
        }
        if (next !== null) put(raAt, next);
        if (rbpAt !== null) {
          put(rbpAt, newRbp);
          rbp = newRbp;
        } else if (rule.rbp === RBP.UNDEFINED) rbp = 0n;
        rsp = cfa;
        exact = false;
      }
      if (next === null || next === 0n) break;
      rip = next;
    }
    for (const [at, v] of g.disturb) put(sa + BigInt(at * 8), v);
    return { regs, stack: { address: sa, bytes: g.cut >= 0 ? bytes.subarray(0, g.cut) : bytes }, objects, maxFrames: g.maxFrames };
  });

/** Either kind of case: hostile values anywhere, or chains to follow (then disturbed). */
export const nativeInput: fc.Arbitrary<NativeCase> = fc.oneof(nativeCase, nativeChain);

/** The offsets where a real section's entries end (its length fields, followed). */
function entryEnds(b: Uint8Array): number[] {
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const ends: number[] = [];
  for (let at = 0; at + 4 <= b.length; ) {
    const len = dv.getUint32(at, true);
    if (len === 0 || len === 0xffffffff || at + 4 + len > b.length) break;
    at += 4 + len;
    ends.push(at);
  }
  return ends;
}

/** A CIE (zR, pc-relative sdata4 pointers, CFA rsp+8, ra at cfa−8, then `cieOps`) and one FDE running `ops`: the CFI interpreter fed any instructions. */
function synthetic(cieOps: Uint8Array, ops: Uint8Array, range: number): Uint8Array {
  const cieBody = [0, 0, 0, 0, 1, 0x7a, 0x52, 0, 0x01, 0x78, 0x10, 1, 0x1b, 0x0c, 0x07, 0x08, 0x90, 0x01, ...cieOps];
  while ((cieBody.length + 4) % 8) cieBody.push(0);
  const cie = [...u32le(cieBody.length), ...cieBody];
  const fdeBody = [...u32le(cie.length + 4), ...u32le(0x100), ...u32le(range), 0, ...ops];
  return Uint8Array.from([...cie, ...u32le(fdeBody.length), ...fdeBody, 0, 0, 0, 0]);
}
const u32le = (v: number): number[] => [v & 0xff, (v >>> 8) & 0xff, (v >>> 16) & 0xff, (v >>> 24) & 0xff];

/**
 * Bytes as a .eh_frame or .debug_frame: a real section's first entries (whole, or cut
 * anywhere) with bytes set, a CIE and FDE whose instructions are any bytes, or any bytes.
 */
export const frameSectionBytes = (real: readonly Uint8Array[]): fc.Arbitrary<{ bytes: Uint8Array; address: bigint; flavour: '.eh_frame' | '.debug_frame' }> => {
  const ends = real.map(entryEnds);
  const kinds = real.length ? fc.constantFrom('real', 'real', 'synthetic', 'synthetic', 'random') : fc.constantFrom('synthetic', 'random');
  return fc
    .record({
      kind: kinds,
      pick: fc.nat(),
      entries: fc.integer({ min: 1, max: 120 }),
      cut: fc.oneof({ weight: 3, arbitrary: fc.constant(-1) }, { weight: 1, arbitrary: fc.nat() }),
      random: fc.uint8Array({ maxLength: 512 }),
      cieOps: fc.uint8Array({ maxLength: 24 }),
      range: fc.oneof(fc.constantFrom(0x40, 1, 0, 0xffffffff), fc.nat()),
      flips: fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { maxLength: 8 }),
      address: fc.oneof(fc.constantFrom(0n, 0x1000n, 0xffff_ffff_ffff_f000n), u64),
      flavour: fc.oneof({ weight: 3, arbitrary: fc.constant('.eh_frame' as const) }, { weight: 1, arbitrary: fc.constant('.debug_frame' as const) }),
    })
    .map((g) => {
      let bytes: Uint8Array;
      if (g.kind === 'real') {
        const k = g.pick % real.length;
        const e = ends[k]!;
        const end = e.length ? e[Math.min(g.entries, e.length) - 1]! : real[k]!.length;
        bytes = real[k]!.slice(0, g.cut >= 0 ? g.cut % (end + 1) : end);
      } else if (g.kind === 'synthetic') bytes = synthetic(g.cieOps, g.random.subarray(0, 96), g.range);
      else bytes = g.random.slice();
      // (a synthetic section keeps its entries' lengths mostly: the bytes between are what it is for)
      const lengths = g.kind === 'synthetic' && g.pick % 4 !== 0 ? [0, 1, 2, 3].flatMap((i) => [i, 4 + bytes[0]! + i]) : [];
      for (const [at, v] of g.flips) if (bytes.length && !lengths.includes(at % bytes.length)) bytes[at % bytes.length] = v;
      return { bytes, address: g.address, flavour: g.flavour };
    });
};

/** The path of the libc (or, failing that, any shared object) this process maps, or null (not Linux). */
export function mappedLibrary(): string | null {
  let maps: string;
  try {
    maps = fs.readFileSync('/proc/self/maps', 'utf8');
  } catch {
    return null;
  }
  const paths = [...new Set(maps.split('\n').map((l) => l.split(/\s+/)[5] ?? '').filter((f) => f.startsWith('/') && /\.so[.\d]*$/.test(f)))];
  return paths.find((f) => /\/libc[.-]/.test(f)) ?? paths[0] ?? null;
}

/** The .eh_frame of the mapped libc as bytes and its address (the fuzzer's real CFI), or none. */
export function realFrameSections(): { bytes: Uint8Array; address: bigint }[] {
  const file = mappedLibrary();
  if (!file) return [];
  const bytes = new Uint8Array(fs.readFileSync(file));
  const s = parseElf(bytes, file).section('.eh_frame');
  if (!s || s.offset + s.size > BigInt(bytes.length)) return [];
  return [{ bytes: bytes.slice(Number(s.offset), Number(s.offset + s.size)), address: s.addr }];
}
