// Layouts for CPython 3.11 and 3.12, which carry no _Py_DebugOffsets. The x86-64 numbers are
// offsetof/sizeof against the installed internal headers of 3.11.7 and 3.12.1 (Debian's 3.11.2
// headers give the same numbers); the test compiles test/fixtures/offsets.c and compares. The
// wasm32 numbers are the same structs under the ILP32 ABI, checked against the memory of
// Pyodide 0.25.1 (3.11.3) and 0.27.7 (3.12.7) — but for the GIL, not read there (Pyodide runs
// one thread).

import { parseVersionHex } from './debug-offsets.js';
import { DICTS_311, LayoutError, type Layout } from './layout.js';

export type BuiltinArch = 'x86_64' | 'wasm32';

type Tables = Omit<Layout, 'id' | 'source' | 'version'>;

const OWNERS_311: Layout['owners'] = { thread: 0, generator: 1, frameObject: 2, interpreter: null, cstack: null };
// 3.12 added FRAME_OWNED_BY_CSTACK for the shim frame each eval-loop entry pushes
const OWNERS_312: Layout['owners'] = { thread: 0, generator: 1, frameObject: 2, interpreter: null, cstack: 3 };

// PyASCIIObject.state: interned 0-1, kind 2-4, compact 5, ascii 6 (3.11's bit 7 is `ready`)
const STATE_BITS = { kindShift: 2, compactBit: 5, asciiBit: 6 };

const TABLES: Record<string, Tables> = {
  '3.11/x86_64': {
    pointerSize: 8,
    freeThreaded: false,
    executableTagMask: 0,
    bottom: 'is-entry-flag',
    runtime: { interpretersHead: 40 },
    interp: { id: 48, next: 0, threadsHead: 16, threadsMain: null, codeObjectGeneration: null, gcCollecting: null },
    tstate: {
      size: 360, prev: 0, next: 8, interp: 16, currentFrame: 56, cframeCurrentFrame: 8, cframePrevious: 16,
      baseFrame: null, lastProfiledFrame: null, lastProfiledFrameSeq: null, cStack: null,
      threadId: 152, nativeThreadId: 160, datastackChunk: 296, datastackTop: 304, datastackLimit: 312,
      holdsGil: null,
      currentException: null,
      handledException: null,
    },
    frame: { size: 80, previous: 48, executable: 32, instrPtr: 56, owner: 69, isEntry: 68, localsplus: 72, instrPtrIsPrevious: true },
    owners: OWNERS_311,
    chunk: { previous: 0, size: 8, top: 16, data: 24 },
    object: { size: 16, obType: 8, obSize: 16 },
    type: { tpName: 24, tpFlags: 168 },
    code: { size: 192, filename: 112, name: 120, qualname: 128, linetable: 136, firstlineno: 72, stacksize: 68, nlocalsplus: 76, codeAdaptive: 184, opcodes: '3.11', locals: { flags: 48, argcount: 56, kwonlyargcount: 64, localsplusnames: 96, localspluskinds: 104 } },
    values: { tupleItems: 24, listItems: 24, floatValue: 16 },
    // 3.11's PyASCIIObject still has the wstr pointer, so both headers are one pointer longer
    unicode: { length: 16, state: 32, asciiSize: 48, compactSize: 72, legacyData: 72, ...STATE_BITS },
    bytes: { obSize: 16, obSval: 32 },
    gen: { iframe: 80, frameState: 75 },
    gil: { interpPointer: null, runtime: 360, lastHolder: 8, locked: 16, switchNumber: 24 },

    threadNames: { ...DICTS_311, interpModules: 888, valuesValues: 0, valuesCapacity: null, valuesValid: null, heapCachedKeys: 872, flagInlineValues: null, managedValues: -32, valuesTag: null, longTagShift: null },
  },
  '3.11/wasm32': {
    pointerSize: 4,
    freeThreaded: false,
    executableTagMask: 0,
    bottom: 'is-entry-flag',
    // measured in Pyodide's 3.11.3: 8 bytes further than the ILP32 computation (28) puts it
    runtime: { interpretersHead: 36 },
    interp: { id: 40, next: 0, threadsHead: 16, threadsMain: null, codeObjectGeneration: null, gcCollecting: null },
    tstate: {
      size: 208, prev: 0, next: 4, interp: 8, currentFrame: 40, cframeCurrentFrame: 4, cframePrevious: 8,
      baseFrame: null, lastProfiledFrame: null, lastProfiledFrameSeq: null, cStack: null,
      threadId: 88, nativeThreadId: 92, datastackChunk: 172, datastackTop: 176, datastackLimit: 180,
      holdsGil: null,
      currentException: null,
      handledException: null,
    },
    frame: { size: 44, previous: 24, executable: 16, instrPtr: 28, owner: 37, isEntry: 36, localsplus: 40, instrPtrIsPrevious: true },
    owners: OWNERS_311,
    chunk: { previous: 0, size: 4, top: 8, data: 12 },
    object: { size: 8, obType: 4, obSize: 8 },
    type: { tpName: 12, tpFlags: 84 },
    code: { size: 120, filename: 80, name: 84, qualname: 88, linetable: 92, firstlineno: 48, stacksize: 44, nlocalsplus: 52, codeAdaptive: 116, opcodes: '3.11' },
    unicode: { length: 8, state: 16, asciiSize: 24, compactSize: 36, legacyData: 36, ...STATE_BITS },
    bytes: { obSize: 8, obSval: 16 },
    gen: { iframe: 40, frameState: 39 },
    gil: null,
    threadNames: null,
  },
  '3.12/x86_64': {
    pointerSize: 8,
    freeThreaded: false,
    executableTagMask: 0,
    bottom: 'entry-frame',
    runtime: { interpretersHead: 40 },
    interp: { id: 8, next: 0, threadsHead: 72, threadsMain: null, codeObjectGeneration: null, gcCollecting: null },
    tstate: {
      size: 288, prev: 0, next: 8, interp: 16, currentFrame: 56, cframeCurrentFrame: 0, cframePrevious: 8,
      baseFrame: null, lastProfiledFrame: null, lastProfiledFrameSeq: null, cStack: null,
      threadId: 136, nativeThreadId: 144, datastackChunk: 232, datastackTop: 240, datastackLimit: 248,
      holdsGil: null,
      currentException: null,
      handledException: null,
    },
    frame: { size: 80, previous: 8, executable: 0, instrPtr: 56, owner: 70, isEntry: null, localsplus: 72, instrPtrIsPrevious: true },
    owners: OWNERS_312,
    chunk: { previous: 0, size: 8, top: 16, data: 24 },
    object: { size: 16, obType: 8, obSize: 16 },
    type: { tpName: 24, tpFlags: 168 },
    code: { size: 200, filename: 112, name: 120, qualname: 128, linetable: 136, firstlineno: 68, stacksize: 64, nlocalsplus: 72, codeAdaptive: 192, opcodes: '3.12', locals: { flags: 48, argcount: 52, kwonlyargcount: 60, localsplusnames: 96, localspluskinds: 104 } },
    values: { tupleItems: 24, listItems: 24, floatValue: 16 },
    unicode: { length: 16, state: 32, asciiSize: 40, compactSize: 56, legacyData: 56, ...STATE_BITS },
    bytes: { obSize: 16, obSval: 32 },
    gen: { iframe: 72, frameState: 67 },
    gil: { interpPointer: 384, runtime: null, lastHolder: 8, locked: 16, switchNumber: 24 },

    threadNames: { ...DICTS_311, interpModules: 944, valuesValues: 0, valuesCapacity: null, valuesValid: null, heapCachedKeys: 880, flagInlineValues: null, managedValues: null, valuesTag: 1, longTagShift: 3 },
  },
  '3.12/wasm32': {
    pointerSize: 4,
    freeThreaded: false,
    executableTagMask: 0,
    bottom: 'entry-frame',
    runtime: { interpretersHead: 28 },
    interp: { id: 8, next: 0, threadsHead: 64, threadsMain: null, codeObjectGeneration: null, gcCollecting: null },
    tstate: {
      size: 168, prev: 0, next: 4, interp: 8, currentFrame: 40, cframeCurrentFrame: 0, cframePrevious: 4,
      baseFrame: null, lastProfiledFrame: null, lastProfiledFrameSeq: null, cStack: null,
      threadId: 80, nativeThreadId: 84, datastackChunk: 136, datastackTop: 140, datastackLimit: 144,
      holdsGil: null,
      currentException: null,
      handledException: null,
    },
    frame: { size: 44, previous: 4, executable: 0, instrPtr: 28, owner: 38, isEntry: null, localsplus: 40, instrPtrIsPrevious: true },
    owners: OWNERS_312,
    chunk: { previous: 0, size: 4, top: 8, data: 12 },
    object: { size: 8, obType: 4, obSize: 8 },
    type: { tpName: 12, tpFlags: 84 },
    code: { size: 128, filename: 80, name: 84, qualname: 88, linetable: 92, firstlineno: 44, stacksize: 40, nlocalsplus: 48, codeAdaptive: 124, opcodes: '3.12' },
    unicode: { length: 8, state: 16, asciiSize: 20, compactSize: 28, legacyData: 28, ...STATE_BITS },
    bytes: { obSize: 8, obSval: 16 },
    gen: { iframe: 36, frameState: 35 },
    gil: null,
    threadNames: null,
  },
};

const ARCHES: readonly BuiltinArch[] = ['x86_64', 'wasm32'];

export function builtinLayout(versionHex: number, arch: BuiltinArch): Layout {
  const version = parseVersionHex(versionHex);
  if (!ARCHES.includes(arch)) {
    throw new LayoutError(`builtin layout: unknown architecture "${String(arch)}" (expected x86_64 or wasm32)`);
  }
  const key = `${version.major}.${version.minor}/${arch}`;
  const tables = TABLES[key];
  if (!tables) {
    const hint = version.major === 3 && version.minor >= 13 ? '; 3.13+ carry _Py_DebugOffsets: use layoutFromDebugOffsets' : '';
    throw new LayoutError(
      `builtin layout: none for Python ${version.major}.${version.minor} on ${arch} (version 0x${versionHex.toString(16)}); ` +
        `built-in layouts cover 3.11 and 3.12${hint}`,
    );
  }
  const id = `builtin/${key}`;
  return structuredClone({ ...tables, id, source: { kind: 'builtin', id, versionHex }, version });
}

/** Splits a builtin Layout id ("builtin/3.11/x86_64") into its minor version and arch. */
export function parseBuiltinId(id: string): { major: number; minor: number; arch: BuiltinArch } {
  const m = /^builtin\/(\d+)\.(\d+)\/(x86_64|wasm32)$/.exec(id);
  if (!m) throw new LayoutError(`builtin layout: malformed id "${id}" (expected e.g. "builtin/3.11/x86_64")`);
  return { major: Number(m[1]), minor: Number(m[2]), arch: m[3] as BuiltinArch };
}
