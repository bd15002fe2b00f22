// The codes of the capture format (docs/capture-format.md) that the block engine decodes in
// WebAssembly (assembly/engine.ts) as well as src/capture/ in TypeScript: record types, sample
// forms, region kinds, the bits of a patched sample's ids, the sample flags, and the size a
// block may inflate to. Written once and imported by both: AssemblyScript compiles this file too,
// so it holds only integer constants (the objects format.ts and types.ts export are built from
// them). The kernel's own ABI is src/kernel/abi.ts.

// ---- record types ----
export const RECORD_CODE = 1;
export const RECORD_SAMPLE = 2;
export const RECORD_THREAD_NAME = 3;

// ---- a sample record: whole, or a patch of its thread's previous sample ----
export const FORM_WHOLE = 0;
export const FORM_PATCH = 1;
/** a region of a sample: its bytes whole, or patched from the base sample's region */
export const KIND_LITERAL = 0;
export const KIND_PATCH = 1;
/** (format 1.3) a region of frame headers: kept from the base region, frame images, and runs */
export const KIND_FRAMES = 2;
/** a frame of a frames region: its bytes, a frame image of the block, or an image with some words changed */
export const FRAME_LITERAL = 0;
export const FRAME_IMAGE = 1;
export const FRAME_CHANGED = 2;
/** frame images a block may hold (src/capture/frame-images.ts); frames past them make none */
export const MAX_FRAME_IMAGES = 16384;
/** words a frame image may have */
export const MAX_FRAME_WORDS = 32;
/** a patched sample's id mask: which ids differ from the base's */
export const ID_INTERPRETER = 1;
export const ID_THREAD = 2;
export const ID_NATIVE = 4;

// ---- sample flags (SAMPLE_FLAG in types.ts) ----
/** the thread held the GIL */
export const FLAG_GIL = 1;
/** the main thread of its interpreter */
export const FLAG_MAIN = 2;
/** copied with the target stopped (or the target waited for the copy) */
export const FLAG_STOPPED = 4;
/** the first copy was not proven and was made again */
export const FLAG_RETRIED = 8;
/** the thread was on a CPU (running or runnable) when its copy was made */
export const FLAG_ON_CPU = 16;
/** the thread was handling (or raising) an exception */
export const FLAG_EXCEPTION = 32;
/** the garbage collector was running in the thread (a `<GC>` frame above its stack) */
export const FLAG_GC = 64;
/** the recorder could not tell whether the thread was on a CPU (its state was unreadable; format 1.2+) */
export const FLAG_CPU_UNKNOWN = 128;

/** the most a block's payload may inflate to */
export const MAX_BLOCK_RAW = 64 << 20;
