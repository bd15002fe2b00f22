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
    /** 3.11/3.12: offset of `previous` (the calling eval loop's _PyCFrame) inside _PyCFrame; null after */
    cframePrevious: number | null;
    /** offset of the `base_frame` pointer field (3.15+), null before */
    baseFrame: number | null;
    lastProfiledFrame: number | null;
    lastProfiledFrameSeq: number | null;
    /**
     * 3.15+: where the thread's C stack is, as CPython keeps it for its overflow check
     * (_PyThreadStateImpl's c_stack_top, c_stack_soft_limit, c_stack_hard_limit): offsets
     * counted from the end of the base frame embedded in the thread state, not from its start
     * (the debug offsets do not give them; they follow the base frame and a Py_ssize_t in
     * pycore_tstate.h: checked with offsetof by test/layout.test.ts, and against /proc/PID/maps by
     * test/c-stack.test.ts). Entry frames live
     * there; no Python frame ever does (consistency.ts). null before 3.15.
     */
    cStack: { top: number; softLimit: number; hardLimit: number } | null;
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
    /**
     * What reading a frame's local variables needs (dump --locals): int co_flags, co_argcount
     * and co_kwonlyargcount, and the co_localsplusnames tuple and co_localspluskinds bytes.
     * Absent where locals are not read (wasm32).
     */
    locals?: { flags: number; argcount: number; kwonlyargcount: number; localsplusnames: number; localspluskinds: number };
  };
  /**
   * Where the values of the containers and floats dump --locals shows are: a tuple's items
   * (inline; 3.14+ keep a hash before them), a list's ob_item pointer, a float's double.
   * Absent where locals are not read (wasm32).
   */
  values?: { tupleItems: number; listItems: number; floatValue: number };
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
  /**
   * The GIL (struct _gil_runtime_state): the thread state that took it last, whether it is
   * taken, and how many times it was handed to another thread — what `--mode gil` and the GIL's
   * proof of a copy (src/record/copy/consistency.ts) read. Null where not known (wasm32 before 3.13:
   * Pyodide runs one thread).
   */
  gil: GilLayout | null;
  /**
   * What reading the names `threading` gives threads needs (sys.modules → threading → _active →
   * each Thread's `_name`: src/record/copy/thread-names.ts); null where they are not read (wasm32:
   * Pyodide runs one thread).
   */
  threadNames: ThreadNamesLayout | null;
  /**
   * What the async-aware view reads of objects besides frames (3.14+, from the debug offsets;
   * absent before): a suspended coroutine's awaited object, sets (a task's awaiters) and ints
   * (a task's default name).
   */
  objects?: AsyncObjects;
}

export interface GilLayout {
  /** 3.12+: offset in the interpreter state of `ceval.gil`, the pointer to the GIL it runs under (its own `_gil`, or the main interpreter's it shares) */
  interpPointer: number | null;
  /** 3.11: offset in _PyRuntime of the one GIL (`ceval.gil`) */
  runtime: number | null;
  /** offsets inside the struct: `last_holder` (a thread state), `locked` (an int), `switch_number` (an unsigned long) */
  lastHolder: number;
  locked: number;
  switchNumber: number;
}

export interface AsyncObjects {
  /** offset of interpreter_frame.stackpointer */
  stackpointer: number;
  /** a coroutine suspended in `await` keeps the awaited object this many words below its stackpointer */
  awaitedSlot: number;
  /**
   * gi_frame_state (a signed byte) of a coroutine suspended in `await`; of one suspended so
   * and being resumed or closed by someone (3.15: FRAME_SUSPENDED_YIELD_FROM_LOCKED; null before);
   * of one running; of one whose frame is gone
   */
  frameStates: { suspendedYieldFrom: number; suspendedYieldFromLocked: number | null; executing: number; cleared: number };
  /** PySetObject: used, table, mask; a table entry is (key, hash), two words */
  set: { used: number; table: number; mask: number };
  /** PyLongObject: lv_tag (digit count << 3 | sign) and the 30-bit digits */
  long: { lvTag: number; obDigit: number };
}

/** Offsets for reading thread names remotely; every one checked against offsetof by test/fixtures/offsets.c. */
export interface ThreadNamesLayout {
  /** the interpreter state's sys.modules dict pointer: interp->modules (3.11), interp->imports.modules (3.12+) */
  interpModules: number;
  /** PyModuleObject.md_dict */
  moduleDict: number;
  /** PyDictObject.ma_keys and ma_values (a split dict's values; NULL for a combined one) */
  dictKeys: number;
  dictValues: number;
  /** PyDictKeysObject: the uint8 dk_log2_size, dk_log2_index_bytes and dk_kind, Py_ssize_t dk_nentries, dk_indices[] */
  keysLog2Size: number;
  keysLog2IndexBytes: number;
  keysKind: number;
  keysNentries: number;
  keysIndices: number;
  /** PyDictKeyEntry (a general dict's: hash, key, value) */
  entrySize: number;
  entryKey: number;
  entryValue: number;
  /** PyDictUnicodeEntry (a dict with only str keys, and split keys: key, value) */
  unicodeEntrySize: number;
  unicodeEntryKey: number;
  unicodeEntryValue: number;
  /** PyDictValues.values[] (3.13+ has capacity, size, embedded and valid bytes before it) */
  valuesValues: number;
  /** 3.13+: PyDictValues.capacity and .valid (uint8); null before */
  valuesCapacity: number | null;
  valuesValid: number | null;
  /** PyTypeObject.tp_basicsize (3.13+: an instance's inline values start there) */
  typeBasicsize: number;
  /** PyHeapTypeObject.ht_cached_keys: the keys a type's instances share (split dicts) */
  heapCachedKeys: number;
  /** Py_TPFLAGS_MANAGED_DICT: the instance's dict lives before the object */
  flagManagedDict: number;
  /** 3.13+: Py_TPFLAGS_INLINE_VALUES (the values follow the object, at tp_basicsize); null before */
  flagInlineValues: number | null;
  /** where the instance's dict pointer is, from the object (negative: in the pre-header); 3.12: its dict-or-values word */
  managedDict: number;
  /** 3.11: where the instance's values pointer is (negative); null after */
  managedValues: number | null;
  /** 3.12: the dict-or-values word holds values − valuesTag when its low bit is set (1); null otherwise */
  valuesTag: number | null;
  /** PyLongObject: ob_size (3.11: signed digit count) or lv_tag (3.12+), and ob_digit[] */
  longSize: number;
  longDigits: number;
  /** 3.12+: the digit count is lv_tag >> this (the low bits: sign); null: ob_size is the signed count */
  longTagShift: number | null;
  /** bits per digit (PyLong_SHIFT) */
  digitBits: number;
}

// What reading thread names needs that is the same on x86-64 from 3.11 on (dict, keys, entries,
// module, type and int layouts; measured by test/fixtures/offsets.c), Pyodide (wasm32) aside:
// it runs one thread, and its names are not read.
export const DICTS_311: Omit<ThreadNamesLayout, 'interpModules' | 'valuesValues' | 'valuesCapacity' | 'valuesValid' | 'heapCachedKeys' | 'flagInlineValues' | 'managedValues' | 'valuesTag' | 'longTagShift'> = {
  moduleDict: 16,
  dictKeys: 32,
  dictValues: 40,
  keysLog2Size: 8,
  keysLog2IndexBytes: 9,
  keysKind: 10,
  keysNentries: 24,
  keysIndices: 32,
  entrySize: 24,
  entryKey: 8,
  entryValue: 16,
  unicodeEntrySize: 16,
  unicodeEntryKey: 0,
  unicodeEntryValue: 8,
  typeBasicsize: 32,
  flagManagedDict: 16,
  managedDict: -24,
  longSize: 16,
  longDigits: 24,
  digitBits: 30,
};

export class LayoutError extends Error {
  override name = 'LayoutError';
}
