// The .pyuw capture container: what a recording is stored in and read back from.
// Byte format: docs/capture-format.md.

export * from './types.js';
export { CaptureWriter, fileSink, memorySink, type CaptureSink, type CaptureWriterOptions } from './writer.js';
export { CaptureReader, decodeBlock, openCapture, readCaptureBytes, type CaptureSource, type RawBlock } from './reader.js';
export { FORMAT_MAJOR, FORMAT_MINOR, MAX_BLOCK_RAW, type CaptureTrailer } from './format.js';
export { MAX_BLOCK_SAMPLE_BYTES } from './patch.js';
