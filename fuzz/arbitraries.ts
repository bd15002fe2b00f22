// Generators of hostile walker input, shared by the property tests (test/walk-property.test.ts)
// and the fuzzer (fuzz/targets.ts): memory shaped like frame chains and random memory, for
// parameter blocks shaped like real layouts — and parameter blocks a hostile capture header
// could make.
import fc from 'fast-check';
import type { WalkParams } from '../src/layout/walk-params.js';
import type { CodeRange, Region, WalkSample } from '../src/walk/types.js';
import { concatBytes } from '../src/capture/concat.js';

// Parameter sets shaped like real layouts (64-bit 3.15, 3.14, 3.12 via cframe, 3.11 is_entry; wasm32 3.15)
export const WALK_PARAMS: WalkParams[] = [
  { pointerSize: 8, tstateNeed: 232, tstateCurrentFrame: 72, cframeCurrentFrame: -1, tstateBaseFrame: 80, frameSize: 80, framePrevious: 8, frameExecutable: 0, frameInstrPtr: 56, frameOwner: 74, frameIsEntry: -1, tagMask: 3, ownerPythonMask: 0b11, ownerSkipMask: 0b1000, bottom: 0, instrPtrIsPrevious: false, maxDepth: 64, ownerThread: 0, cframePrevious: -1 },
  { pointerSize: 8, tstateNeed: 80, tstateCurrentFrame: 72, cframeCurrentFrame: -1, tstateBaseFrame: -1, frameSize: 80, framePrevious: 8, frameExecutable: 0, frameInstrPtr: 56, frameOwner: 74, frameIsEntry: -1, tagMask: 3, ownerPythonMask: 0b11, ownerSkipMask: 0b11000, bottom: 1, instrPtrIsPrevious: false, maxDepth: 64, ownerThread: 0, cframePrevious: -1 },
  { pointerSize: 8, tstateNeed: 64, tstateCurrentFrame: 56, cframeCurrentFrame: 0, tstateBaseFrame: -1, frameSize: 80, framePrevious: 8, frameExecutable: 0, frameInstrPtr: 56, frameOwner: 70, frameIsEntry: -1, tagMask: 0, ownerPythonMask: 0b11, ownerSkipMask: 0b1000, bottom: 1, instrPtrIsPrevious: true, maxDepth: 64, ownerThread: 0, cframePrevious: -1 },
  { pointerSize: 8, tstateNeed: 64, tstateCurrentFrame: 56, cframeCurrentFrame: 8, tstateBaseFrame: -1, frameSize: 80, framePrevious: 48, frameExecutable: 32, frameInstrPtr: 56, frameOwner: 69, frameIsEntry: 68, tagMask: 0, ownerPythonMask: 0b11, ownerSkipMask: 0, bottom: 2, instrPtrIsPrevious: true, maxDepth: 64, ownerThread: 0, cframePrevious: 16 },
  { pointerSize: 4, tstateNeed: 64, tstateCurrentFrame: 56, cframeCurrentFrame: -1, tstateBaseFrame: 60, frameSize: 44, framePrevious: 4, frameExecutable: 0, frameInstrPtr: 28, frameOwner: 38, frameIsEntry: -1, tagMask: 3, ownerPythonMask: 0b11, ownerSkipMask: 0b1000, bottom: 0, instrPtrIsPrevious: false, maxDepth: 64, ownerThread: 0, cframePrevious: -1 },
];

const u64 = fc.bigInt({ min: 0n, max: (1n << 64n) - 1n });

/** A random graph of frames laid out in regions, with a thread state pointing into it. */
export const structuredMemory = (p: WalkParams) =>
  fc
    .record({
      frameCount: fc.integer({ min: 0, max: 12 }),
      base: fc.constantFrom(0x1000n, 0x7fff_0000_0000n, (1n << 64n) - 0x10000n, 0xffff_f000n),
      stride: fc.constantFrom(p.frameSize, p.frameSize + 8, p.frameSize + 1, 4096),
      links: fc.array(fc.oneof(fc.integer({ min: -1, max: 12 }), fc.constant(-2)), { minLength: 12, maxLength: 12 }),
      owners: fc.array(fc.oneof(fc.constantFrom(0, 1, 3, 3, 4), fc.integer({ min: 0, max: 255 })), { minLength: 12, maxLength: 12 }),
      codes: fc.array(fc.oneof(fc.integer({ min: 0, max: 3 }), fc.constant(-1)), { minLength: 12, maxLength: 12 }),
      ipDelta: fc.array(fc.oneof(fc.integer({ min: -4, max: 40 }), fc.integer()), { minLength: 12, maxLength: 12 }),
      entry: fc.array(fc.boolean(), { minLength: 12, maxLength: 12 }),
      cut: fc.array(fc.integer({ min: 0, max: 100 }), { minLength: 12, maxLength: 12 }),
      split: fc.array(fc.boolean(), { minLength: 12, maxLength: 12 }),
      current: fc.integer({ min: -2, max: 12 }),
      // 3.11: the calling eval loop's current frame (-3: no calling eval loop)
      entered: fc.integer({ min: -3, max: 12 }),
      baseFrame: fc.integer({ min: -2, max: 12 }),
      tstateCut: fc.integer({ min: 0, max: 40 }),
      random: u64,
      codeBase: fc.constantFrom(0x5000_0000n, 0x5000_0000n, 1n, 0xffff_ffff_ffff_fff0n),
      // a well-formed chain (then at most one field disturbed) reaches the trusted statuses
      wellFormed: fc.boolean(),
      // each code's frame size (co_framesize bytes): 0 = unknown, the stride (frames then follow
      // their callers exactly), or anything
      frameSizes: fc.array(fc.oneof(fc.constant(0), fc.constant(p.frameSize), fc.integer({ min: 0, max: 5000 })), { minLength: 4, maxLength: 4 }),
      disturb: fc.integer({ min: -1, max: 11 }),
      deep: fc.boolean(),
    })
    .map((g): { sample: WalkSample; codes: CodeRange[]; maxDepth: number } => {
      if (g.wellFormed) {
        const n = g.frameCount;
        g.codeBase = 0x5000_0000n;
        // callers below callees, as on a data stack: frame i's caller is frame i-1; frame 0 is the
        // bottom (an entry frame, or the is_entry frame on 3.11)
        for (let i = 0; i < 12; i++) {
          if (i === g.disturb) continue;
          g.links[i] = i > 0 ? i - 1 : -1;
          g.owners[i] = i === 0 && p.bottom !== 2 ? 3 : i % 3 === 2 ? 1 : 0;
          g.codes[i] = i % 4;
          g.ipDelta[i] = 2 * (i % 8);
          g.entry[i] = i === 0;
          g.cut[i] = 100;
        }
        g.current = n - 1;
        g.baseFrame = 0;
        g.tstateCut = 40;
        g.frameSizes = [g.stride, g.stride, g.stride, g.stride];
      }
      const P = p.pointerSize;
      const mask = P === 8 ? (1n << 64n) - 1n : 0xffff_ffffn;
      const addrs = Array.from({ length: g.frameCount }, (_, i) => (g.base + BigInt(i * g.stride)) & mask);
      const codes: CodeRange[] = [0, 1, 2, 3].map((k) => {
        const address = (g.codeBase + BigInt(k * 0x1000)) & ((1n << 64n) - 1n);
        return { address, bytecodeStart: address + 200n, bytecodeEnd: address + 200n + BigInt(2 * (k + 1) * 8), frameSize: g.frameSizes[k]! };
      });
      const target = (i: number): bigint => (i === -1 ? 0n : i === -2 ? g.random & mask : i < g.frameCount ? addrs[i]! : (g.base + BigInt(g.frameCount * g.stride) - 1n) & mask);
      const regions: Region[] = [];
      let cur: { address: bigint; chunks: Uint8Array[] } | null = null;
      for (let i = 0; i < g.frameCount; i++) {
        const b = new Uint8Array(g.stride);
        const dv = new DataView(b.buffer);
        const put = (off: number, v: bigint) => (P === 8 ? dv.setBigUint64(off, v & ((1n << 64n) - 1n), true) : dv.setUint32(off, Number(v & 0xffff_ffffn), true));
        const ci = g.codes[i]!;
        const code = ci < 0 ? 0n : codes[ci]!.address | BigInt(g.owners[i]! & 1);
        put(p.framePrevious, target(g.links[i]!));
        put(p.frameExecutable, code);
        put(p.frameInstrPtr, ci < 0 ? 0n : codes[ci]!.bytecodeStart + BigInt(g.ipDelta[i]!));
        b[p.frameOwner] = g.owners[i]!;
        if (p.frameIsEntry >= 0) b[p.frameIsEntry] = g.entry[i] ? 1 : 0;
        const bytes = g.cut[i]! < 10 ? b.subarray(0, Math.floor((p.frameSize * g.cut[i]!) / 10)) : b;
        if (!cur || g.split[i] || bytes.length < b.length) {
          if (cur) regions.push({ address: cur.address, bytes: concat(cur.chunks) });
          cur = { address: addrs[i]!, chunks: [bytes] };
          if (bytes.length < b.length) {
            regions.push({ address: cur.address, bytes: concat(cur.chunks) });
            cur = null;
          }
        } else cur.chunks.push(bytes);
      }
      if (cur) regions.push({ address: cur.address, bytes: concat(cur.chunks) });
      const tstate = 0x9000_0000n;
      const ts = new Uint8Array(Math.max(p.tstateNeed + 64, 256));
      const tv = new DataView(ts.buffer);
      const putTs = (off: number, v: bigint) => (P === 8 ? tv.setBigUint64(off, v & ((1n << 64n) - 1n), true) : tv.setUint32(off, Number(v & 0xffff_ffffn), true));
      if (p.cframeCurrentFrame >= 0) {
        putTs(p.tstateCurrentFrame, tstate + 128n);
        putTs(128 + p.cframeCurrentFrame, target(g.current));
        if (p.cframePrevious >= 0 && g.entered !== -3) {
          // the calling eval loop's _PyCFrame, after this one
          putTs(128 + p.cframePrevious, tstate + 192n);
          putTs(192 + p.cframeCurrentFrame, target(g.entered));
        }
      } else putTs(p.tstateCurrentFrame, target(g.current));
      if (p.tstateBaseFrame >= 0) putTs(p.tstateBaseFrame, target(g.baseFrame));
      regions.push({ address: tstate, bytes: g.tstateCut < 5 ? ts.subarray(0, g.tstateCut * 16) : ts });
      return { sample: { threadStateAddress: tstate, regions }, codes, maxDepth: g.deep ? 5 : p.maxDepth };
    });

/** The parts, one after the other, in one array. */
export const concat = concatBytes;

/** Random regions of random bytes, and a thread state address somewhere near them. */
export const randomMemory = fc
  .record({
    regions: fc.array(
      fc.record({ address: fc.oneof(u64, fc.bigInt({ min: 0n, max: 0x2000n })), bytes: fc.uint8Array({ maxLength: 300 }) }),
      { maxLength: 6 },
    ),
    pick: fc.nat(),
    offset: fc.integer({ min: -16, max: 64 }),
    codes: fc.array(fc.record({ address: u64, bytecodeStart: u64, bytecodeEnd: u64, frameSize: fc.nat() }), { maxLength: 4 }),
  })
  .map(({ regions, pick, offset, codes }) => {
    const r = regions.length ? regions[pick % regions.length]! : { address: 0n };
    const tstate = (r.address + BigInt(offset)) & ((1n << 64n) - 1n);
    return { sample: { threadStateAddress: tstate, regions } as WalkSample, codes: codes as CodeRange[], maxDepth: 64 };
  });

// A hostile capture header can make any parameter block: each field of a real one replaced by
// a value from anywhere in its slot (and beyond it, and fractions). Both walkers must refuse
// the same blocks with the same message, and on the blocks they accept give the same results.
const FIELDS = Object.keys(WALK_PARAMS[0]!) as (keyof WalkParams)[];
const hostileValue = fc.oneof(
  fc.integer({ min: -2, max: 9 }),
  fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }),
  fc.constantFrom(2 ** 31, 2 ** 32 - 1, 2 ** 32, 0.5, -0.5, 4096, 4097, 1 << 20, (1 << 24) + 1, Number.NaN),
);


/** A real parameter block with one to three fields replaced by hostile values, and memory to walk with it. */
export const hostileParams = fc.integer({ min: 0, max: WALK_PARAMS.length - 1 }).chain((pi) =>
  fc
    .record({
      changes: fc.array(fc.tuple(fc.constantFrom(...FIELDS), hostileValue), { minLength: 1, maxLength: 3 }),
      batch: fc.array(fc.oneof({ weight: 3, arbitrary: structuredMemory(WALK_PARAMS[pi]!) }, { weight: 1, arbitrary: randomMemory }), { minLength: 1, maxLength: 3 }),
    })
    .map(({ changes, batch }) => {
      const p = { ...WALK_PARAMS[pi]! } as Record<string, unknown>;
      for (const [k, v] of changes) p[k] = typeof WALK_PARAMS[pi]![k] === 'boolean' ? v % 2 === 1 : v;
      return { params: p as unknown as WalkParams, batch };
    }),
);
