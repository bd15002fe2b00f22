// The .pyuw capture container: what a recording is stored in and read back from.
// Byte format: docs/capture-format.md. This index includes the Node file functions (./file.ts);
// code that must run anywhere imports ./reader.js and ./writer.js.

export * from './types.js';
export { CaptureWriter, memorySink, type CaptureSink, type CaptureWriterOptions } from './writer.js';
export { CaptureReader, decodeBlock, readCaptureBytes, type CaptureSource, type RawBlock } from './reader.js';
// Node: files
export { fileSink, openCapture } from './file.js';
export { FORMAT_MAJOR, FORMAT_MINOR, MAX_BLOCK_RAW, type CaptureTrailer } from './format.js';
export { MAX_BLOCK_SAMPLE_BYTES } from './patch.js';
export { replaceObjects, objectsOverlap } from './native-object-record.js';
