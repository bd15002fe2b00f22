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
/** (format 1.5) a mapped object's unwind table and symbols, for native stacks */
export const RECORD_NATIVE_OBJECT = 4;

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

// ---- section blocks (block type 3, format 1.4: docs/capture-format.md, "Section block") ----
/** a block whose payload is sections: the samples' fields, each kind in a stream of its own */
export const BLOCK_SECTIONS = 3;
/** how a section is stored */
export const CODEC_STORED = 0;
export const CODEC_DEFLATE = 1;
/** the sections of a section block, in the order of its section table */
export const SEC_RECORDS = 0; // missed count, then code and thread-name records as in a record block
export const SEC_THREAD = 1; // per sample: its thread's slot in the block (the next slot: a new thread)
export const SEC_IDS = 2; // a new thread's ids; per later sample an id mask and the ids that changed
export const SEC_TIME = 3; // per sample: time − the block's previous sample's, zigzag
export const SEC_FLAGS = 4; // per sample: 0 = its thread's previous flags, else flags + 1
export const SEC_STATUS = 5; // per sample: recorder status
export const SEC_COPY = 6; // per sample: copy micros
export const SEC_ERRORS = 7; // per sample: error count, then the errors
export const SEC_REGIONS = 8; // per sample: its region list
export const SEC_ADDRESSES = 9; // the address of each region without a base
export const SEC_KINDS = 10; // per region: literal, words or stack
export const SEC_LENGTHS = 11; // per region: its length (literal) or the difference from its prediction
export const SEC_BYTES = 12; // literal regions' bytes and literal frames' bytes
export const SEC_WORD_COUNT = 13; // per words region (and stack region): 4-byte words changed
export const SEC_WORD_GAP = 14; // per changed word: words since the previous one
export const SEC_WORD_REF = 15; // per changed word: 0 = its base value, k = the sample's reference k
export const SEC_WORD_DELTA = 16; // per changed word: the change, zigzag, modulo 2^32
export const SEC_POP = 17; // per stack region: frames of the base region not kept
export const SEC_PUSH = 18; // per stack region: frames written
export const SEC_STRIDE = 19; // per frame written: its offset − its prediction, zigzag
export const SEC_OP = 20; // per frame written: how
export const SEC_IMAGE = 21; // image numbers, counted back from the newest
export const SEC_MASK = 22; // per changed frame: which words change
export const SEC_DELTA = 23; // per changed word of a frame: the change, zigzag, modulo 2^(8 × word size)
export const SEC_SHAPE = 24; // the block's frames: word size and words (empty: no stack region)
/**
 * sections a section block must list: format 1.4's (a table may list more: a later minor
 * version's). The block engine reads these and ignores any after them.
 */
export const SECTION_COUNT = 25;
/**
 * (format 1.5) per sample: its native registers, against its thread's previous sample's. Listed
 * only by a block with a sample that has them; a block without it: none of its samples has.
 */
export const SEC_REGISTERS = 25;
/** the sections this version reads (later ones: a later minor version's, ignored) */
export const SECTIONS_KNOWN = 26;
/** a sample's region list in SEC_REGIONS */
export const LIST_SAME = 0; // the regions of its thread's previous sample, in order, each with its data
export const LIST_UNCHANGED = 1; // those regions, every byte as it was: nothing more follows
export const LIST_EXPLICIT = 2; // LIST_EXPLICIT + count, then per region base index + 1 (0: none)
/** a region's kind in SEC_KINDS */
export const REGION_LITERAL = 0;
export const REGION_WORDS = 1;
export const REGION_STACK = 2;
/** a frame written into a stack region, SEC_OP */
export const OP_CHILD = 0; // the image the frame below was last followed by
export const OP_IMAGE = 1; // an image of the block
export const OP_RAN = 2; // the base region's frame here, some words changed
export const OP_CHILD_CHANGED = 3; // OP_CHILD, some words changed
export const OP_IMAGE_CHANGED = 4; // OP_IMAGE, some words changed
export const OP_LITERAL = 5; // the frame's bytes
/** references a sample's changed words may take their value from */
export const MAX_REFS = 16;
