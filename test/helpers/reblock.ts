// A capture written again in blocks of about `bytes` raw bytes: many blocks from a short
// recording, so that processing workers get several each and meet code records sent in blocks
// other workers process.

import { CaptureWriter, fileSink, openCapture } from '../../src/capture/index.js';

export async function reblocked(file: string, bytes: number, out = file.replace(/\.pyuw$/, `-${bytes}.pyuw`)): Promise<string> {
  const reader = await openCapture(file);
  const writer = new CaptureWriter(fileSink(out), reader.header, { blockBytes: bytes });
  for (const block of reader.blocks()) {
    for (const c of block.codes) writer.addCode(c);
    for (const s of block.samples) writer.addSample(s);
    for (const n of block.names) writer.addThreadName(n);
    writer.addMissed(block.missed);
  }
  writer.close();
  reader.close();
  return out;
}
