// The block engine decodes frames regions (format 1.3) exactly where the reference reader does,
// and gives a block to the reference path wherever the reader would refuse a sample of it: a
// frames region that names a base region in a whole sample (a whole sample has none, even when
// its thread had an earlier sample in the block), an image that does not exist yet, a second
// shape in one block. Real recordings of every interpreter (test/capture-exact.test.ts,
// test/engine-property.test.ts) check the engine's profiles against the reference path's; this
// holds it to the reader on payloads made to be wrong in one way each.
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { openCapture } from '../src/capture/index.js';
import { BLOCK_TYPE, ByteWriter, FRAME_OP, RECORD_TYPE, REGION_KIND, SAMPLE_FORM } from '../src/capture/format.js';
import { decodeBlock } from '../src/capture/reader.js';
import { layoutFromSource } from '../src/layout/index.js';
import { BlockEngine, CopyStats } from '../src/kernel/block-engine.js';
import { Profile } from '../src/profile/index.js';

const FIXTURE = path.resolve('test/fixtures/captures/astwalk-3.15.pyuw');
const TSA = 0x5000n;
const CHUNK = 0x7000_0000n;
const S = 88; // 11 words of 8 bytes

/** A frame of S bytes whose first word is `exec` and whose second points at `prev` (inside the chunk). */
function frame(exec: number, prev: bigint): Uint8Array {
  const b = new Uint8Array(S);
  const dv = new DataView(b.buffer);
  dv.setBigUint64(0, BigInt(exec), true);
  dv.setBigUint64(8, prev, true);
  return b;
}

type Body = (w: ByteWriter) => void;

/** A sample record body: its form, then regions written by `regions`. */
function sample(form: 'whole' | 'patch', time: number, regions: Body[]): Body {
  return (w) => {
    w.big(TSA);
    if (form === 'whole') {
      w.u8(SAMPLE_FORM.WHOLE);
      w.uint(time);
      w.big(0n);
      w.big(1n);
      w.big(2n);
    } else {
      w.u8(SAMPLE_FORM.PATCH);
      w.sint(time);
      w.u8(0);
    }
    w.uint(0); // flags
    w.u8(0); // ok
    w.uint(0); // copy µs
    w.uint(0); // errors
    w.uint(regions.length);
    for (const r of regions) r(w);
  };
}

/** A frames region: base j + 1 (0: the address follows), keep, frames (gap, op, …), no runs. */
function framesRegion(j: number, length: number, keep: number, frames: Array<{ gap: number; op: number; image?: number; bytes?: Uint8Array }>, words = 11): Body {
  return (w) => {
    w.u8(REGION_KIND.FRAMES);
    w.uint(j);
    if (j === 0) w.big(CHUNK);
    w.uint(length);
    w.uint(8);
    w.uint(words);
    w.uint(keep);
    w.uint(frames.length);
    for (const f of frames) {
      w.uint(f.gap);
      w.uint(f.op);
      if (f.op === FRAME_OP.LITERAL) w.bytes(f.bytes!);
      else w.uint(f.image!);
    }
    w.uint(0);
  };
}

function payloadOf(samples: Body[]): Uint8Array {
  const w = new ByteWriter();
  w.uint(0);
  for (const s of samples) {
    const body = new ByteWriter();
    s(body);
    w.u8(RECORD_TYPE.SAMPLE);
    w.uint(body.length);
    w.bytes(body.view());
  }
  return w.view().slice();
}

const first = sample('whole', 10, [framesRegion(0, 400, 0, [{ gap: 24, op: FRAME_OP.LITERAL, bytes: frame(0x1111, 0n) }, { gap: 0, op: FRAME_OP.LITERAL, bytes: frame(0x2222, CHUNK + 24n) }])]);

describe('frames regions in the block engine', async () => {
  const reader = await openCapture(FIXTURE);
  const layout = layoutFromSource(reader.header.layoutSource);
  reader.close();

  /** Whether the engine gave the block to the reference path, and whether the reader refused a sample of it. */
  async function run(samples: Body[]): Promise<{ engineRefused: boolean; readerRefused: boolean; decoded: number }> {
    const payload = payloadOf(samples);
    const engine = await BlockEngine.load(layout);
    let engineRefused = false;
    engine.processPayload({ type: BLOCK_TYPE.RECORDS, index: 0, offset: 0, payload }, new Profile(), new CopyStats(), () => {
      engineRefused = true;
      return { samples: 0 } as never;
    });
    const { block, warnings } = decodeBlock({ type: BLOCK_TYPE.RECORDS, index: 0, offset: 0, compression: 0, flags: 0, rawLength: payload.length, stored: payload });
    return { engineRefused, readerRefused: warnings.length > 0, decoded: block?.samples.length ?? 0 };
  }

  it('decodes what the writer writes: literal frames, then a patch sample keeping them and naming an image', async () => {
    const r = await run([first, sample('patch', 5, [framesRegion(1, 400, 24 + S, [{ gap: 0, op: FRAME_OP.IMAGE, image: 0 }])])]);
    expect(r).toEqual({ engineRefused: false, readerRefused: false, decoded: 2 });
  });

  it.each([
    ['a whole sample naming a base region', [first, sample('whole', 20, [framesRegion(1, 400, 0, [])])]],
    ['an image not made yet', [first, sample('patch', 5, [framesRegion(1, 400, 0, [{ gap: 24, op: FRAME_OP.IMAGE, image: 2 }])])]],
    ['a second shape in the block', [first, sample('patch', 5, [framesRegion(1, 400, 0, [], 10)])]],
    ['keeping more than the base holds', [first, sample('patch', 5, [framesRegion(1, 800, 401, [])])]],
    ['a frame past the region', [first, sample('patch', 5, [framesRegion(1, 400, 0, [{ gap: 400 - S + 1, op: FRAME_OP.IMAGE, image: 0 }])])]],
  ] as const)('refuses %s, where the reader does', async (_, samples) => {
    const r = await run([...samples]);
    expect(r.readerRefused).toBe(true);
    expect(r.decoded).toBe(1);
    expect(r.engineRefused).toBe(true);
  });
});
