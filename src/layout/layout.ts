// The one description of a target interpreter's memory that the rest of pyunwind uses.
//
// Every offset is in bytes from the start of the struct it belongs to. Nothing outside
// src/layout/ knows a Python version number: code elsewhere asks the Layout for an offset
// or a rule (how a chain must end, which frame owners are Python frames), never "is it 3.12".

export interface PythonVersion {
  major: number;
  minor: number;
  micro: number;
  /** 0xA alpha, 0xB beta, 0xC release candidate, 0xF final */
  level: number;
  serial: number;
  /** PY_VERSION_HEX */
  hex: number;
}

/** Where a Layout came from; stored in capture files so the layout can be rebuilt. */
export type LayoutSource =
  | { kind: 'debug-offsets'; bytes: Uint8Array }
  | { kind: 'builtin'; id: string; versionHex: number };

/**
 * How a correct frame chain ends, i.e. what the walk checks at the bottom.
 * - `base-frame`: 3.15+. The chain must end exactly at the thread state's base frame.
 * - `entry-frame`: 3.12–3.14. The chain must end at a non-Python (entry/shim) frame,
 *   because every chain starts where C code entered the eval loop. This catches a chain cut at
 *   a Python frame but not one cut at an inner entry frame.
 * - `is-entry-flag`: 3.11. No shim frames; the bottom frame has its `is_entry` byte set.
 */
export type BottomRule = 'base-frame' | 'entry-frame' | 'is-entry-flag';

export interface Layout {
  /** e.g. "debug-offsets/3.15/888" or "builtin/3.11/x86_64" */
  id: string;
  source: LayoutSource;
  version: PythonVersion;
  pointerSize: 4 | 8;
  freeThreaded: boolean;
  /** Low bits to clear from a frame's executable (tagged _PyStackRef on 3.14+; 0 before). */
  executableTagMask: number;
  bottom: BottomRule;

  runtime: {
    /** offset of interpreters.head in _PyRuntime */
    interpretersHead: number;
  };
  interp: {
    id: number;
    next: number;
    threadsHead: number;
    /** null where the table does not give it */
    threadsMain: number | null;
    /** offset of code_object_generation (3.14+), null before */
    codeObjectGeneration: number | null;
    /**
     * offset of the thread state holding the interpreter's own GIL (gil_runtime_state_holder,
     * 3.13+), null where the table does not give it
     */
    gilHolder: number | null;
    /** offset of the int saying whether that GIL is taken (gil_runtime_state_locked, 3.13+), null where not given */
    gilLocked: number | null;
    /** offset of the int saying the garbage collector is running (gc + gc.collecting, 3.13+), null where not given */
    gcCollecting: number | null;
  };
  tstate: {
    size: number;
    prev: number;
    next: number;
    interp: number;
    /**
     * 3.13+: offset of `current_frame` in the thread state.
     * 3.11/3.12: offset of the `cframe` pointer; the frame pointer is then at
     * `cframeCurrentFrame` inside the _PyCFrame it points to.
     */
    currentFrame: number;
    cframeCurrentFrame: number | null;
    /** offset of the `base_frame` pointer field (3.15+), null before */
    baseFrame: number | null;
    lastProfiledFrame: number | null;
    lastProfiledFrameSeq: number | null;
    threadId: number;
    nativeThreadId: number;
    datastackChunk: number;
    /** datastack_top and datastack_limit follow datastack_chunk in every version */
    datastackTop: number;
    datastackLimit: number;
    /** 3.15+: int holds_gil; null before */
    holdsGil: number | null;
    /** 3.15+: the exception being raised (PyObject *current_exception); null where not given */
    currentException: number | null;
    /** 3.15+: the exception being handled (exc_state.exc_value, inside the thread state); null where not given */
    handledException: number | null;
  };
  frame: {
    size: number;
    previous: number;
    executable: number;
    instrPtr: number;
    owner: number;
    /** 3.11: bool is_entry; null after */
    isEntry: number | null;
    /** where the frame's local variables begin: the frame header's size, FRAME_SPECIALS_SIZE words */
    localsplus: number;
    /**
     * 3.11/3.12 store `prev_instr` (the code unit before the next instruction, which can be
     * one unit before the first instruction); 3.13+ store `instr_ptr` (the current one).
     */
    instrPtrIsPrevious: boolean;
  };
  owners: {
    thread: number;
    generator: number;
    frameObject: number;
    /** owner of entry/shim frames and the base frame (3.14+: 3), null if none */
    interpreter: number | null;
    /** 3.12/3.13: owner of shim frames (3); 3.14: defined (4) but unused; null if none */
    cstack: number | null;
  };
  /** _PyStackChunk header */
  chunk: { previous: number; size: number; top: number; data: number };
  object: {
    /** sizeof(PyObject): the header every object starts with */
    size: number;
    obType: number;
    /** PyVarObject.ob_size (follows the PyObject header) */
    obSize: number;
  };
  type: { tpName: number; tpFlags: number };
  code: {
    size: number;
    filename: number;
    name: number;
    qualname: number;
    linetable: number;
    firstlineno: number;
    /** int co_stacksize and int co_nlocalsplus: with frame.localsplus they give the size a frame of
     * this code takes on the data stack (co_framesize words) */
    stacksize: number;
    nlocalsplus: number;
    /** co_code_adaptive: the bytecode, ob_size code units of 2 bytes, inline at the end of the object */
    codeAdaptive: number;
    /** how this Python numbers its opcodes: the id of its table in src/symbols/opcodes.ts ("3.14") */
    opcodes: string;
  };
  unicode: {
    length: number;
    state: number;
    /** sizeof(PyASCIIObject): data of a compact ASCII string starts here */
    asciiSize: number;
    /** sizeof(PyCompactUnicodeObject): data of a compact non-ASCII string starts here */
    compactSize: number;
    /** offset of the data pointer of a non-compact (legacy) string: PyUnicodeObject.data */
    legacyData: number;
    /** bit positions inside the 32-bit state word */
    kindShift: number;
    compactBit: number;
    asciiBit: number;
  };
  bytes: { obSize: number; obSval: number };
  gen: { iframe: number; frameState: number } | null;
}

export class LayoutError extends Error {
  override name = 'LayoutError';
}
