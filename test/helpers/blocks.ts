// Blocks of a capture rewritten for a test — a payload edited, a flag set — as a writer would
// store them: a record block deflated, a section block with its (unpacked) sections as they are.
import { BLOCK_TYPE, COMPRESSION, blockWithHeader, crc32, encodeBlock } from '../../src/capture/format.js';
import { packSections, sectionViews } from '../../src/capture/section-block.js';

/** A block of `type` holding this unpacked payload (as `unpack` gives it), with these flags. */
export function blockOf(type: number, seq: number, payload: Uint8Array, flags = 0): Uint8Array {
  if (type !== BLOCK_TYPE.SECTIONS) return encodeBlock(type, seq, payload, 6, flags);
  return blockWithHeader({ type, compression: COMPRESSION.NONE, seq, flags, storedLength: payload.length, rawLength: payload.length, payloadCrc: crc32(payload) }, payload);
}

/** A section block's unpacked payload with section k as `edit` makes it. */
export function withSection(payload: Uint8Array, k: number, edit: (section: Uint8Array) => Uint8Array): Uint8Array {
  const views = sectionViews(payload);
  views[k] = edit(views[k]!);
  return packSections(views, 0).stored;
}
