// A capture written again in blocks of about `bytes` raw bytes: many blocks from a short
// recording, so that processing workers get several each and meet code records sent in blocks
// other workers process.

import { CaptureWriter, fileSink, openCapture } from '../../src/capture/index.js';
import { frameHintOf } from '../../src/capture/frame-hint.js';
import { layoutFromSource } from '../../src/layout/index.js';

/** (`blocks`: as the writer writes them; each sample's frame hint found again, as a recorder gives it) */
export async function reblocked(file: string, bytes: number, out = file.replace(/\.pyuw$/, `-${bytes}.pyuw`), blocks: 'sections' | 'records' = 'sections'): Promise<string> {
  const reader = await openCapture(file);
  const layout = layoutFromSource(reader.header.layoutSource);
  const writer = new CaptureWriter(fileSink(out), reader.header, { blockBytes: bytes, blocks });
  for (const block of reader.blocks()) {
    for (const c of block.codes) writer.addCode(c);
    for (const s of block.samples) writer.addSample({ ...s, frames: frameHintOf(layout, s) });
    for (const n of block.names) writer.addThreadName(n);
    writer.addMissed(block.missed);
  }
  writer.close();
  reader.close();
  return out;
}
