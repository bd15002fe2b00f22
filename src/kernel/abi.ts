// The WebAssembly ABI: every number the kernel (assembly/) and its hosts (src/kernel/, the
// reference walker) share — statuses, the walk's parameter block, the tables the host lays into
// the kernel's memory and the records the kernel writes back, the block engine's config block,
// slots and nodes. Written once and imported by both sides: AssemblyScript compiles this file
// too, so it holds only integer constants (an i32 there, a number here) and comments.
//
// A kernel built before a change here would read its host's memory the old way: `npm run
// build:wasm` writes the digest of these constants into the kernel (scripts/abi-digest.ts), and
// the host refuses a kernel whose digest is not its own (src/kernel/load.ts checkAbi).

// ---- statuses: one per sample (src/walk/status.ts names them, in this order) ----
export const STATUS_COMPLETE = 0;
export const STATUS_COMPLETE_UNVERIFIABLE = 1;
export const STATUS_IDLE = 2;
export const STATUS_INCOMPLETE = 3;
export const STATUS_DANGLING = 4;
export const STATUS_CYCLE = 5;
export const STATUS_TOO_DEEP = 6;
export const STATUS_CORRUPT = 7;
export const STATUS_NO_THREAD_STATE = 8;
/** set by the recorder, never by the walk */
export const STATUS_TORN = 9;
/**
 * set by the host's native frames (report --native, src/native/mixed-stack.ts), never by the
 * walk: the sample's native chain did not unwind to its outermost frame; or it did, but the
 * eval-loop runs of its Python frames could not all be placed in it
 */
export const STATUS_NATIVE_INCOMPLETE = 10;
export const STATUS_NATIVE_UNMATCHED = 11;
export const STATUS_COUNT = 12;

// ---- the walk's parameter block: i32 slots (src/layout/walk-params.ts encodeParams) ----
export const P_PTR_SIZE = 0;
export const P_TS_NEED = 1;
export const P_TS_CURRENT_FRAME = 2;
export const P_CFRAME_CURRENT = 3;
export const P_TS_BASE_FRAME = 4;
export const P_FR_SIZE = 5;
export const P_FR_PREVIOUS = 6;
export const P_FR_EXECUTABLE = 7;
export const P_FR_INSTR_PTR = 8;
export const P_FR_OWNER = 9;
export const P_FR_IS_ENTRY = 10;
export const P_TAG_MASK = 11;
export const P_OWNER_PYTHON = 12;
export const P_OWNER_SKIP = 13;
export const P_BOTTOM = 14;
export const P_IP_PREVIOUS = 15;
export const P_MAX_DEPTH = 16;
export const P_OWNER_THREAD = 17;
export const P_CFRAME_PREVIOUS = 18;
export const P_COUNT = 19;
/** P_BOTTOM: where a whole chain ends */
export const BOTTOM_BASE_FRAME = 0;
export const BOTTOM_ENTRY_FRAME = 1;
export const BOTTOM_IS_ENTRY_FLAG = 2;

// ---- what the host lays out for `walk` (assembly/kernel.ts) ----
/** a sample: u64 thread state, u32 region table, u32 region count */
export const SAMPLE_SIZE = 16;
export const SAMPLE_TSTATE = 0;
export const SAMPLE_REGIONS = 8;
export const SAMPLE_REGION_COUNT = 12;
/** a region table entry (sorted by address): u64 address, u32 length, u32 offset of its bytes */
export const REGION_SIZE = 16;
export const REGION_ADDRESS = 0;
export const REGION_LENGTH = 8;
export const REGION_DATA = 12;
/** a code table entry (sorted by address): u64 address, u64 bytecode start, u64 bytecode end, u32 frame size, u32 unused */
export const CODE_SIZE = 32;
export const CODE_ADDRESS = 0;
export const CODE_START = 8;
export const CODE_END = 16;
export const CODE_FRAME_SIZE = 24;

// ---- what the kernel writes back ----
/** a walk's result: u32 status, u32 first frame, u32 frame count, u32 frames visited, u64 last frame, u64 failing address */
export const RESULT_SIZE = 32;
export const RESULT_STATUS = 0;
export const RESULT_FRAME_START = 4;
export const RESULT_FRAME_COUNT = 8;
export const RESULT_VISITED = 12;
export const RESULT_LAST = 16;
export const RESULT_FAIL = 24;
/** a Python frame found: u64 frame, u64 code, u64 instruction pointer, u32 flags, u32 unused */
export const FRAME_SIZE = 32;
export const FRAME_ADDRESS = 0;
export const FRAME_CODE = 8;
export const FRAME_IP = 16;
export const FRAME_FLAGS = 24;
/** frame flag: C code lies between this Python frame and the one it called (report --native) */
export const FRAME_CALLS_THROUGH_C = 1;
/** a walk's trace entry (the block engine splices walks with it): u64 frame, u32 linear offset of its bytes, u32 Python frames emitted up to and including it */
export const TRACE_SIZE = 16;
export const TRACE_FRAME = 0;
export const TRACE_BYTES_AT = 8;
export const TRACE_PY = 12;

// ---- the block engine (assembly/engine.ts, src/kernel/block-engine.ts) ----
/** why engineRun stopped */
export const STOP_END = 0;
export const STOP_CODE = 1;
export const STOP_MALFORMED = 2;
export const STOP_FULL = 3;
/** (section blocks) the data arena ran out inside a sample: grow it, and process the block again from its start */
export const STOP_RESTART = 4;
/**
 * the config block: u32 slots giving where each fixed area is and how large (the growable ones —
 * data segments, node chunks, the hash — the host adds by engineAddSegment, engineAddNodeChunk,
 * engineSetHash)
 */
export const C_THREADS = 0;
export const C_THREADS_CAP = 1;
export const C_DESCS = 2;
export const C_DESCS_SIZE = 3;
export const C_SLOTS = 4;
export const C_SLOTS_CAP = 5;
/** COPY_BUCKETS u32: the copy-time buckets counted since the outputs were cleared */
export const C_COPY_TOUCHED = 6;
export const C_FRAMES = 7;
export const C_FILTER = 8;
export const C_FILTER_LO = 9;
export const C_FILTER_HI = 10;
/** COPY_BUCKETS u32: copy times of the counted samples, one bucket per µs */
export const C_COPY_HIST = 11;
/** maxDepth TRACE_SIZE entries: the current walk's trace */
export const C_TRACE = 12;
/** 0, or the sample flag a sample must have to be counted (report --mode) */
export const C_KEEP_FLAGS = 13;
/** 1: a sample flagged GC is counted on a <GC> node above its stack (code GC_CODE) */
export const C_GC_LEAF = 14;
/** 1: a <native> node (code NATIVE_CODE) between a frame and the callee it reached through C */
export const C_NATIVE = 15;
/**
 * 0, or the sample flag that says the recorder could not tell whether the mode's fact held
 * (cpu: FLAG_CPU_UNKNOWN): a sample left out by C_KEEP_FLAGS with it is counted (engineUndetermined)
 */
export const C_UNKNOWN_FLAGS = 16;
export const C_COUNT = 17;
/** engineTreeNeed: the table a sample may not fit — slots (harvest and reset), nodes (another chunk), the hash (a bigger one) */
export const TREE_SLOTS = 1;
export const TREE_NODES = 2;
export const TREE_HASH = 3;
/** … or the frame keys (a bigger list and hash) */
export const TREE_KEYS = 4;
/** nodes come in chunks of 2^NODE_CHUNK_BITS, each with its part of the weighted list (u32 node numbers: the nodes whose weight is not 0, in the order they got it) */
export const NODE_CHUNK_BITS = 14;
/** C_FILTER: which samples are counted */
export const FILTER_ALL = 0;
export const FILTER_THREAD = 1;
export const COPY_BUCKETS = 65536;
/** a thread's image in the engine: its ids, time, regions and last walk */
export const THREAD_SIZE = 112;
/** a region descriptor of a thread image (with, in a section block, the frames of a stack region) */
export const DESC_SIZE = 40;
/** a slot: one thread (its ids) and its counts since the outputs were cleared — u64 thread state, interpreter, thread id, native id, first and last time, latest time flagged main (-1: none), STATUS_COUNT u32 counts */
export const SLOT_SIZE = 104;
export const S_TSA = 0;
export const S_INTERP = 8;
export const S_TID = 16;
export const S_NTID = 24;
export const S_FIRST = 32;
export const S_LAST = 40;
export const S_MAIN_TIME = 48;
export const S_COUNTS = 56;
/**
 * a node: a stack as a tree node — u32 caller's node (0xffffffff: a root of its slot), u32 slot,
 * u32 frame (the host's number for its (code, instruction): engine frame keys), u32 samples that
 * ended on it since the outputs were cleared, u32 its newest child, u32 its caller's next older
 * child (0xffffffff: none), u32 its children (counted up to one more than a list keeps: more are
 * in the hash), u32 the host's stack for it (0xffffffff until the host says)
 */
export const NODE_SIZE = 32;
export const N_PARENT = 0;
export const N_SLOT = 4;
export const N_FRAME = 8;
export const N_WEIGHT = 12;
export const N_FIRST = 16;
export const N_NEXT = 20;
export const N_FANOUT = 24;
export const N_STACK = 28;
/** a frame key: u64 code address, u64 instruction address, u32 the host's frame number for them, u32 unused */
export const KEY_SIZE = 24;
export const K_CODE = 0;
export const K_IP = 8;
export const K_FRAME = 16;
/** the pseudo-code of a <GC> node and of a <native> node: 2^64 - 1 and 2^64 - 2, as the two 32-bit halves a node holds */
export const PSEUDO_CODE_HI = 0xffffffff;
export const GC_CODE_LO = 0xffffffff;
export const NATIVE_CODE_LO = 0xfffffffe;

// ---- the native (x86-64) unwinder (assembly/native-unwind.ts, src/kernel/native-unwinder.ts;
// src/native/unwind.ts is its reference and src/native/unwind-table.ts names the rules — the
// numbers below are those, written again because AssemblyScript cannot compile that file;
// test/native-unwind.test.ts checks they agree) ----
/**
 * a request: u64 rip, u64 rsp, u64 rbp, u64 stack copy address, u32 its length, u32 its bytes,
 * u32 object table, u32 its entries, u32 frame limit, u32 pcs out (u64 each), u32 found out
 * (u8 each, for each pc after the first), u32 room in the outputs, u32 sps out (u64 each: rsp
 * while each pc runs); written back: u32 status, u32 pcs
 */
export const NU_SIZE = 80;
export const NU_RIP = 0;
export const NU_RSP = 8;
export const NU_RBP = 16;
export const NU_STACK_ADDRESS = 24;
export const NU_STACK_LENGTH = 32;
export const NU_STACK_DATA = 36;
export const NU_OBJECTS = 40;
export const NU_OBJECT_COUNT = 44;
export const NU_MAX_FRAMES = 48;
export const NU_PCS = 52;
export const NU_FOUND = 56;
export const NU_CAPACITY = 60;
export const NU_SPS = 64;
export const NU_STATUS = 68;
export const NU_COUNT = 72;
/**
 * an object table entry (sorted by start, disjoint): u64 first address, u64 last address
 * (inclusive: a mapping may end at 2^64), u64 load bias, u32 rows, u32 row starts (u64 each),
 * u32 row rules (NATIVE_ROW_FIELDS i32 each), u32 unused
 */
export const NO_SIZE = 40;
export const NO_START = 0;
export const NO_LAST = 8;
export const NO_BIAS = 16;
export const NO_ROWS = 24;
export const NO_STARTS = 28;
export const NO_RULES = 32;
/** the most pcs one unwind gives (a larger limit is taken as this) */
export const NATIVE_FRAMES_LIMIT = 65536;
/** statuses (src/native/unwind.ts UNWIND_STATUS names them, in this order) */
export const NATIVE_COMPLETE = 0;
export const NATIVE_NO_OBJECT = 1;
export const NATIVE_NO_RULE = 2;
export const NATIVE_STACK_SHORT = 3;
export const NATIVE_NOT_GROWING = 4;
export const NATIVE_TOO_DEEP = 5;
/** how a caller was found (src/native/unwind.ts FOUND) */
export const NATIVE_FOUND_CFI = 0;
export const NATIVE_FOUND_FRAME_POINTER = 1;
export const NATIVE_FOUND_SIGNAL = 2;
/** a row's rules (src/native/unwind-table.ts CFA, RBP, RA_UNDEFINED, ROW_FIELDS, R_*) */
export const NATIVE_CFA_NONE = 0;
export const NATIVE_CFA_RSP = 1;
export const NATIVE_CFA_RBP = 2;
export const NATIVE_CFA_PLT = 3;
export const NATIVE_CFA_SIGNAL = 4;
export const NATIVE_RBP_SAME = 0;
export const NATIVE_RBP_AT = 1;
export const NATIVE_RBP_UNDEFINED = 2;
export const NATIVE_RA_UNDEFINED = 0x7fffffff;
export const NATIVE_ROW_FIELDS = 5;
export const NATIVE_R_CFA = 0;
export const NATIVE_R_CFA_OFFSET = 1;
export const NATIVE_R_RBP = 2;
export const NATIVE_R_RBP_OFFSET = 3;
export const NATIVE_R_RA_OFFSET = 4;
