// What `npm run fuzz` feeds hostile input to, each a fast-check property: it holds when the
// code under test either accepts the input and behaves, or refuses it with its own error —
// never another exception (a crash), a trap, or a disagreement between the WebAssembly
// kernel and the TypeScript reference. Hangs are caught by the runner (fuzz/run.ts).
//
// The inputs start from real memory: captures recorded from real interpreters and real
// _Py_DebugOffsets (test/fixtures/), mutated — bytes flipped, runs zeroed or repeated, blocks
// truncated — at the file level and inside the blocks' payloads (under new block headers
// with valid checksums, so that the decoding past the checksums is what gets the hostile bytes).
// The native unwinder's inputs: the CFI reader gets the .eh_frame of the libc this process
// maps, cut and changed, and CFI programs of any bytes; the kernel's unwinder and its reference
// get hostile tables, stacks and registers (fuzz/native-arbitraries.ts).

import fs from 'node:fs';
import path from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import fc from 'fast-check';
import { BlockProcessor, openBlock } from '../src/pipeline/block-processor.js';
import type { PseudoFrames } from '../src/pipeline/sample-chain.js';
import { BLOCK_TYPE, COMPRESSION, blockWithHeader, crc32, encodeBlock, encodeTrailer } from '../src/capture/format.js';
import { readCaptureBytes, type RawBlock } from '../src/capture/reader.js';
import { CaptureError, type CodeRecord } from '../src/capture/types.js';
import { layoutFromDebugOffsets, layoutFromSource, LayoutError, type Layout } from '../src/layout/index.js';
import { Profile } from '../src/profile/profile.js';
import { decodeCodeObject } from '../src/symbols/code-object.js';
import { opcodeTable } from '../src/symbols/opcodes.js';
import { decodeLocationTable, SymbolError } from '../src/symbols/location-table.js';
import { checkParams, walkParams, type WalkParams } from '../src/layout/walk-params.js';
import { ReferenceWalker } from '../src/walk/reference-walker.js';
import { KernelWalker, readKernelBytes } from '../src/kernel/walker.js';
import { RegionMemory } from '../src/walk/region-memory.js';
import { concat, hostileParams, randomMemory, structuredMemory, WALK_PARAMS } from './arbitraries.js';
import { SAMPLING_MODES, type SamplingMode } from '../src/capture/types.js';
import { CfiError, readFrameSection } from '../src/native/eh-frame.js';
import { unwindNative } from '../src/native/unwind.js';
import { KernelNativeUnwinder } from '../src/kernel/native-unwinder.js';
import { frameSectionBytes, nativeInput, realFrameSections } from './native-arbitraries.js';
import { objectHeap } from './object-arbitraries.js';
import { builtinLayout } from '../src/layout/builtin.js';
import { ObjectReader } from '../src/objects/object-reader.js';
import { frameLocals } from '../src/objects/frame-locals.js';

export interface Target {
  name: string;
  /** share of the cases (weights are relative) */
  weight: number;
  // (each target's own argument types)
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  property: fc.IRawProperty<any, boolean>;
}

/** A disagreement or a crash: what the property reports. */
export class FuzzFailure extends Error {
  override name = 'FuzzFailure';
}

const FIXTURES = path.resolve(import.meta.dirname, '../test/fixtures');

/** The corpus: real captures and real debug offsets. */
export function loadCorpus(): { captures: { name: string; bytes: Uint8Array }[]; debugOffsets: { name: string; bytes: Uint8Array }[] } {
  const read = (dir: string, ext: string) =>
    fs
      .readdirSync(dir)
      .filter((f) => f.endsWith(ext))
      .sort()
      .map((f) => ({ name: f, bytes: new Uint8Array(fs.readFileSync(path.join(dir, f))) }));
  return { captures: read(path.join(FIXTURES, 'captures'), '.pyuw'), debugOffsets: read(path.join(FIXTURES, 'debug-offsets'), '.bin') };
}

// ---- mutations ----

type Mutation = { kind: 'flip' | 'set' | 'zero' | 'repeat' | 'truncate' | 'insert'; at: number; n: number; value: number };

const mutation: fc.Arbitrary<Mutation> = fc.record({
  kind: fc.constantFrom('flip', 'flip', 'set', 'zero', 'repeat', 'truncate', 'insert'),
  at: fc.nat(),
  n: fc.integer({ min: 1, max: 64 }),
  value: fc.integer({ min: 0, max: 255 }),
});

function mutate(bytes: Uint8Array, ms: readonly Mutation[]): Uint8Array {
  let b = bytes.slice();
  for (const m of ms) {
    if (b.length === 0) break;
    const at = m.at % b.length;
    switch (m.kind) {
      case 'flip':
        b[at] = b[at]! ^ (1 << (m.value & 7));
        break;
      case 'set':
        b[at] = m.value;
        break;
      case 'zero':
        b.fill(0, at, at + m.n);
        break;
      case 'repeat': {
        const piece = b.slice(at, at + m.n);
        const out = new Uint8Array(b.length + piece.length);
        out.set(b.subarray(0, at + piece.length));
        out.set(piece, at + piece.length);
        out.set(b.subarray(at + piece.length), at + 2 * piece.length);
        b = out;
        break;
      }
      case 'truncate':
        b = b.slice(0, at);
        break;
      case 'insert': {
        const out = new Uint8Array(b.length + m.n);
        out.set(b.subarray(0, at));
        out.fill(m.value, at, at + m.n);
        out.set(b.subarray(at), at + m.n);
        b = out;
        break;
      }
    }
  }
  return b;
}

/** A capture with one block's payload mutated and given a new block header (valid checksums and trailer). */
export function mutatePayload(file: Uint8Array, blockPick: number, ms: readonly Mutation[]): Uint8Array {
  const reader = readCaptureBytes(file, 'fixture');
  const blocks: RawBlock[] = [...reader.rawBlocks()];
  if (blocks.length === 0) return file;
  const headerEnd = blocks[0]!.offset;
  const k = blockPick % blocks.length;
  const parts: Uint8Array[] = [file.subarray(0, headerEnd)];
  blocks.forEach((raw, i) => {
    const opened = openBlock(raw);
    if ('warning' in opened) return;
    const payload = i === k ? mutate(opened.block.payload, ms) : opened.block.payload;
    // (a section block as its unpacked payload: every section stored as it is)
    if (raw.type === BLOCK_TYPE.SECTIONS) parts.push(blockWithHeader({ type: raw.type, compression: COMPRESSION.NONE, seq: i, flags: 0, storedLength: payload.length, rawLength: payload.length, payloadCrc: crc32(payload) }, payload));
    else parts.push(encodeBlock(BLOCK_TYPE.RECORDS, i, payload, 0));
  });
  parts.push(encodeBlock(BLOCK_TYPE.END, blocks.length, encodeTrailer({ blocks: blocks.length, samples: 0, codes: 0, missed: 0 }), 0));
  return concat(parts);
}

// ---- processing a capture both ways ----

let kernelModule: WebAssembly.Module | null = null;

/** The profile of a capture (as bytes) by the block engine and by the reference walker, keeping the samples `mode` keeps, with the pseudo-frames asked for (frames with their instructions: `opcodes`); null if refused. */
export async function processBoth(bytes: Uint8Array, mode: SamplingMode = 'wall', pseudo: PseudoFrames = {}, opcodes = false): Promise<{ engine: string; reference: string } | null> {
  let reader;
  try {
    reader = readCaptureBytes(bytes, 'fuzzed');
  } catch (e) {
    if (e instanceof CaptureError) return null;
    throw e;
  }
  let layout: Layout;
  try {
    layout = layoutFromSource(reader.header.layoutSource);
  } catch (e) {
    if (e instanceof LayoutError) return null;
    throw e;
  }
  kernelModule ??= await WebAssembly.compile((await readKernelBytes(false)) as Uint8Array<ArrayBuffer>);
  const engine = await BlockProcessor.load(layout, { module: kernelModule, mode, ...pseudo, opcodes });
  const reference = await BlockProcessor.load(layout, { walker: new ReferenceWalker(), mode, ...pseudo, opcodes });
  const profiles = [new Profile(), new Profile()];
  const warnings: string[][] = [[], []];
  for (const raw of reader.rawBlocks()) {
    const opened = openBlock(raw);
    if ('warning' in opened) continue;
    [engine, reference].forEach((p, i) => {
      p.addCodes(opened.codes);
      const done = p.process(opened.block);
      for (const w of done.result.warnings) warnings[i]!.push(w.message);
      if (done.result.decoded) profiles[i]!.merge(done.profile);
    });
  }
  return {
    engine: JSON.stringify({ profile: profiles[0]!.toJSON(), warnings: warnings[0] }),
    reference: JSON.stringify({ profile: profiles[1]!.toJSON(), warnings: warnings[1] }),
  };
}

// ---- the targets ----

/** The targets; `onCase` is called as each case starts (the runner's heartbeat). */
export async function targets(onCase: () => void = () => {}): Promise<Target[]> {
  const corpus = loadCorpus();
  if (corpus.captures.length === 0) throw new Error(`no captures in ${path.join(FIXTURES, 'captures')}`);
  const kernel = await KernelWalker.load();
  const reference = new ReferenceWalker();
  const nativeKernel = await KernelNativeUnwinder.load();
  // real CFI to mutate: the .eh_frame of the libc this process maps (none off Linux)
  const realCfi = realFrameSections().map((s) => s.bytes);

  const walkBoth = (params: WalkParams, codes: Parameters<ReferenceWalker['walk']>[1], samples: Parameters<ReferenceWalker['walk']>[2]): void => {
    const run = (w: { walk: ReferenceWalker['walk'] }) => {
      try {
        return { results: w.walk(params, codes, samples), error: null as string | null };
      } catch (e) {
        if (e instanceof RangeError && e.message.startsWith('walk parameters: ')) return { results: null, error: e.message };
        throw e;
      }
    };
    const a = run(kernel);
    const b = run(reference);
    if (a.error !== b.error) throw new FuzzFailure(`parameter block refused differently: kernel ${a.error}, reference ${b.error}`);
    if (a.results === null) return;
    const show = (r: typeof a.results) => JSON.stringify(r, (_, v) => (typeof v === 'bigint' ? `0x${v.toString(16)}` : v));
    if (show(a.results) !== show(b.results!)) throw new FuzzFailure(`kernel and reference disagree: ${show(a.results).slice(0, 400)} / ${show(b.results!).slice(0, 400)}`);
  };

  const captureIndex = fc.integer({ min: 0, max: corpus.captures.length - 1 });
  // a mode keeps some samples of a thread and leaves out others (mutated flags say which)
  const samplingMode = fc.constantFrom(...SAMPLING_MODES);
  // the pseudo-frames a report adds (<GC>, <native>): the engine adds them as nodes, the reference path to each sample
  const pseudoFrames = fc.record({ gcFrames: fc.boolean(), nativeFrames: fc.boolean() });
  const offsetsIndex = fc.integer({ min: 0, max: corpus.debugOffsets.length - 1 });
  // the 64-bit layouts locals are read with: 3.11 and 3.12 built in, 3.13+ from real debug offsets
  const objectLayouts = [builtinLayout(0x030b07f0, 'x86_64'), builtinLayout(0x030c01f0, 'x86_64'), ...corpus.debugOffsets.filter((d) => d.name.startsWith('native-')).map((d) => layoutFromDebugOffsets(d.bytes))];

  return [
    {
      name: 'walk: kernel vs reference over hostile memory',
      weight: 40,
      property: fc.property(
        fc.integer({ min: 0, max: WALK_PARAMS.length - 1 }).chain((pi) =>
          fc.record({ pi: fc.constant(pi), batch: fc.array(fc.oneof({ weight: 3, arbitrary: structuredMemory(WALK_PARAMS[pi]!) }, { weight: 1, arbitrary: randomMemory }), { minLength: 1, maxLength: 4 }) }),
        ),
        ({ pi, batch }) => (onCase(), walkBoth({ ...WALK_PARAMS[pi]!, maxDepth: batch[0]!.maxDepth }, batch.flatMap((b) => b.codes), batch.map((b) => b.sample))),
      ),
    },
    {
      name: 'parameter block: kernel vs reference',
      weight: 20,
      property: fc.property(hostileParams, ({ params, batch }) => (onCase(), walkBoth(params, batch.flatMap((b) => b.codes), batch.map((b) => b.sample)))),
    },
    {
      name: 'layout: hostile debug offsets',
      weight: 15,
      property: fc.property(offsetsIndex, fc.array(mutation, { minLength: 1, maxLength: 6 }), (i, ms) => {
        onCase();
        const bytes = mutate(corpus.debugOffsets[i]!.bytes, ms);
        let layout: Layout;
        try {
          layout = layoutFromDebugOffsets(bytes);
        } catch (e) {
          if (e instanceof LayoutError) return;
          throw e;
        }
        // a layout accepted must be one the walkers accept
        const bad = checkParams(walkParams(layout));
        if (bad) throw new FuzzFailure(`a layout from debug offsets the walkers refuse: ${bad}`);
      }),
    },
    {
      name: 'symbols: hostile code objects and location tables',
      weight: 15,
      property: fc.property(captureIndex, fc.nat(), fc.array(mutation, { minLength: 1, maxLength: 6 }), fc.integer({ min: -5, max: 2000 }), (ci, pick, ms, firstLine) => {
        onCase();
        const reader = readCaptureBytes(corpus.captures[ci]!.bytes, 'fixture');
        const layout = layoutFromSource(reader.header.layoutSource);
        const codes: CodeRecord[] = [];
        for (const b of reader.blocks()) codes.push(...b.codes);
        if (codes.length === 0) return;
        const code = codes[pick % codes.length]!;
        const r = pick % code.regions.length;
        const regions = code.regions.map((x, j) => (j === r ? { address: x.address, bytes: mutate(x.bytes, ms) } : x));
        try {
          const info = decodeCodeObject(new RegionMemory(regions, layout.pointerSize), layout, code.address);
          // the instructions of hostile bytecode: read within it, whatever its bytes say
          const table = opcodeTable(layout.code.opcodes);
          if (info.bytecode && table) {
            const units = info.bytecode.length >> 1;
            for (const index of [-1, 0, pick % Math.max(1, units), units - 1, units]) {
              const op = table.instructionAt(info.bytecode, index, layout.frame.instrPtrIsPrevious);
              if (op !== null && !(op >= 0 && op < 256)) throw new FuzzFailure(`instructionAt(${index}) gave ${op}`);
            }
            table.instructionKey(info.bytecode);
          }
        } catch (e) {
          if (!(e instanceof SymbolError)) throw e;
        }
        try {
          decodeLocationTable(mutate(code.regions[r]!.bytes, ms), firstLine);
        } catch (e) {
          if (!(e instanceof SymbolError)) throw e;
        }
      }),
    },
    {
      name: 'capture file: mutated bytes, engine vs reference',
      weight: 5,
      property: fc.asyncProperty(captureIndex, fc.array(mutation, { minLength: 1, maxLength: 4 }), samplingMode, pseudoFrames, fc.boolean(), async (ci, ms, mode, pseudo, opcodes) => {
        onCase();
        const got = await processBoth(mutate(corpus.captures[ci]!.bytes, ms), mode, pseudo, opcodes);
        if (got && got.engine !== got.reference) throw new FuzzFailure(`engine and reference profiles differ: ${got.engine.slice(0, 300)} / ${got.reference.slice(0, 300)}`);
      }),
    },
    {
      name: 'capture blocks: mutated payloads (valid checksums), engine vs reference',
      weight: 5,
      property: fc.asyncProperty(captureIndex, fc.nat(), fc.array(mutation, { minLength: 1, maxLength: 4 }), samplingMode, pseudoFrames, fc.boolean(), async (ci, block, ms, mode, pseudo, opcodes) => {
        onCase();
        const got = await processBoth(mutatePayload(corpus.captures[ci]!.bytes, block, ms), mode, pseudo, opcodes);
        if (got && got.engine !== got.reference) throw new FuzzFailure(`engine and reference profiles differ: ${got.engine.slice(0, 300)} / ${got.reference.slice(0, 300)}`);
      }),
    },
    {
      name: 'native CFI: hostile .eh_frame and .debug_frame bytes',
      weight: 5,
      property: fc.property(frameSectionBytes(realCfi), ({ bytes, address, flavour }) => {
        onCase();
        const started = performance.now();
        let table;
        try {
          table = readFrameSection(bytes, address, flavour);
        } catch (e) {
          if (e instanceof CfiError) return;
          throw e;
        }
        // (bounded: a few KiB of CFI is read in well under this)
        const ms = performance.now() - started;
        if (ms > 2000) throw new FuzzFailure(`${bytes.length} bytes of CFI took ${ms.toFixed(0)} ms`);
        if (table.rules.length !== table.starts.length * 5) throw new FuzzFailure(`${table.starts.length} rows with ${table.rules.length} rule fields`);
        // rows in address order, each start once: a lookup finds the row that holds a pc
        for (let i = 1; i < table.starts.length; i++) {
          if (!(table.starts[i]! > table.starts[i - 1]!)) throw new FuzzFailure(`row ${i} starts at 0x${table.starts[i]!.toString(16)}, not after row ${i - 1} (0x${table.starts[i - 1]!.toString(16)})`);
        }
      }),
    },
    {
      name: 'objects: hostile heaps through the locals decoder',
      weight: 5,
      property: fc.property(fc.integer({ min: 0, max: objectLayouts.length - 1 }).chain((i) => fc.tuple(fc.constant(i), objectHeap(objectLayouts[i]!))), ([i, heap]) => {
        onCase();
        const layout = objectLayouts[i]!;
        const started = performance.now();
        const reader = new ObjectReader(heap.source, layout);
        for (const address of heap.objects) {
          const v = reader.value(address);
          // bounded: what one value shows (MAX_ITEMS items of MAX_DEPTH levels, strings cut)
          if (v?.repr && v.repr.length > 100_000) throw new FuzzFailure(`a value shown in ${v.repr.length} characters`);
        }
        const locals = frameLocals(heap.source, layout, reader, { frame: heap.frame, code: heap.code, instrPtr: 0n, callsThroughC: false });
        if (typeof locals !== 'string' && locals.length > 256) throw new FuzzFailure(`${locals.length} locals`);
        const ms = performance.now() - started;
        if (ms > 2000) throw new FuzzFailure(`a heap of ${heap.objects.length} objects took ${ms.toFixed(0)} ms`);
      }),
    },
    {
      name: 'native unwind: kernel vs reference over hostile tables, stacks and registers',
      weight: 10,
      property: fc.property(nativeInput, ({ regs, stack, objects, maxFrames }) => {
        onCase();
        const want = unwindNative(regs, stack, objects, maxFrames);
        nativeKernel.setObjects(objects);
        const got = nativeKernel.unwind(regs, stack, maxFrames);
        const show = (r: typeof got) => JSON.stringify(r, (_, v) => (typeof v === 'bigint' ? `0x${v.toString(16)}` : v));
        if (!isDeepStrictEqual(got, want)) throw new FuzzFailure(`kernel and reference unwinds disagree: ${show(got).slice(0, 400)} / ${show(want).slice(0, 400)}`);
      }),
    },
  ];
}
