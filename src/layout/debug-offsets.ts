// Layout from the `_Py_DebugOffsets` table that CPython 3.13+ keeps at the start of
// `_PyRuntime`. The bytes come from the target and are untrusted: every value the Layout
// exposes is bounds-checked against the size of the struct it belongs to, and a table whose
// shape is not known (3.15 changed it several times during its cycle) is rejected rather
// than guessed at.

import { checkParams, walkParams } from './walk-params.js';
import { DICTS_311, LayoutError, type Layout, type PythonVersion, type ThreadNamesLayout } from './layout.js';

/** Bytes to read from the start of `_PyRuntime`: more than every known table (888 at most). */
export const DEBUG_OFFSETS_READ_SIZE = 1024;

const COOKIE = 'xdebugpy';
const HEADER_SIZE = 24; // cookie[8], version, free_threaded
const MAX_SECTION_SIZE = 16 * 1024 * 1024;

const LEVEL_SUFFIX: Record<number, string> = { 0xa: 'a', 0xb: 'b', 0xc: 'rc', 0xf: '' };

export function parseVersionHex(hex: number): PythonVersion {
  if (!Number.isInteger(hex) || hex < 0 || hex > 0xffffffff) {
    throw new LayoutError(`version: ${hex} is not a PY_VERSION_HEX (a 32-bit unsigned integer)`);
  }
  const level = (hex >>> 4) & 0xf;
  if (!(level in LEVEL_SUFFIX)) {
    throw new LayoutError(
      `version: 0x${hex.toString(16)} has release level 0x${level.toString(16)} (expected 0xa, 0xb, 0xc or 0xf)`,
    );
  }
  return {
    major: (hex >>> 24) & 0xff,
    minor: (hex >>> 16) & 0xff,
    micro: (hex >>> 8) & 0xff,
    level,
    serial: hex & 0xf,
    hex,
  };
}

export function formatVersion(v: PythonVersion): string {
  const base = `${v.major}.${v.minor}.${v.micro}`;
  const suffix = LEVEL_SUFFIX[v.level];
  if (suffix === undefined) return `${base} (level 0x${v.level.toString(16)})`;
  return suffix === '' ? base : `${base}${suffix}${v.serial}`;
}

export function hasDebugOffsetsCookie(bytes: Uint8Array): boolean {
  if (bytes.length < COOKIE.length) return false;
  for (let i = 0; i < COOKIE.length; i++) if (bytes[i] !== COOKIE.charCodeAt(i)) return false;
  return true;
}

// ---------------------------------------------------------------------------------------------
// Table shapes. Every field after the cookie is a uint64, so a shape is the ordered list of
// sections and their fields; positions follow from the order. Sections whose first field is
// `size` describe a C struct; the others (err_stackitem, llist_node, debugger_support) do not.

type Section = readonly [name: string, fields: readonly string[]];

const RUNTIME: Section = ['runtime_state', ['size', 'finalizing', 'interpreters_head']];
const INTERP_313: Section = [
  'interpreter_state',
  ['size', 'id', 'next', 'threads_head', 'gc', 'imports_modules', 'sysdict', 'builtins', 'ceval_gil',
   'gil_runtime_state', 'gil_runtime_state_enabled', 'gil_runtime_state_locked', 'gil_runtime_state_holder'],
];
const INTERP_314: Section = [
  'interpreter_state',
  ['size', 'id', 'next', 'threads_head', 'threads_main', 'gc', 'imports_modules', 'sysdict', 'builtins',
   'ceval_gil', 'gil_runtime_state', 'gil_runtime_state_enabled', 'gil_runtime_state_locked',
   'gil_runtime_state_holder', 'code_object_generation', 'tlbc_generation'],
];
const TSTATE_313: Section = [
  'thread_state',
  ['size', 'prev', 'next', 'interp', 'current_frame', 'thread_id', 'native_thread_id', 'datastack_chunk', 'status'],
];
const FRAME_313: Section = ['interpreter_frame', ['size', 'previous', 'executable', 'instr_ptr', 'localsplus', 'owner']];
const FRAME_314: Section = [
  'interpreter_frame',
  ['size', 'previous', 'executable', 'instr_ptr', 'localsplus', 'owner', 'stackpointer', 'tlbc_index'],
];
const CODE_FIELDS = ['size', 'filename', 'name', 'qualname', 'linetable', 'firstlineno', 'argcount',
  'localsplusnames', 'localspluskinds', 'co_code_adaptive'];
const CODE_313: Section = ['code_object', CODE_FIELDS];
const CODE_314: Section = ['code_object', [...CODE_FIELDS, 'co_tlbc']];
const PYOBJECT: Section = ['pyobject', ['size', 'ob_type']];
const TYPE_313: Section = ['type_object', ['size', 'tp_name', 'tp_repr', 'tp_flags']];
const TUPLE: Section = ['tuple_object', ['size', 'ob_item', 'ob_size']];
const LIST: Section = ['list_object', ['size', 'ob_item', 'ob_size']];
const SET: Section = ['set_object', ['size', 'used', 'table', 'mask']];
const DICT: Section = ['dict_object', ['size', 'ma_keys', 'ma_values']];
const FLOAT: Section = ['float_object', ['size', 'ob_fval']];
const LONG: Section = ['long_object', ['size', 'lv_tag', 'ob_digit']];
const BYTES: Section = ['bytes_object', ['size', 'ob_size', 'ob_sval']];
const UNICODE_313: Section = ['unicode_object', ['size', 'state', 'length', 'asciiobject_size']];
const GC_313: Section = ['gc', ['size', 'collecting']];
const GEN: Section = ['gen_object', ['size', 'gi_name', 'gi_iframe', 'gi_frame_state']];
const LLIST: Section = ['llist_node', ['next', 'prev']];
const DEBUGGER: Section = [
  'debugger_support',
  ['eval_breaker', 'remote_debugger_support', 'remote_debugging_enabled', 'debugger_pending_call',
   'debugger_script_path', 'debugger_script_path_size'],
];

/**
 * The 3.15 cycle grew the table in steps. `full` is the 888-byte table of 3.15.0 final and
 * 3.15.2 (and of the rc1 Pyodide ships), read from 3.15.2's installed header. The smaller
 * ones are development states seen in main snapshots: 824 has none of the optional groups;
 * 840 is inferred as 824 plus the gc generation-stats pair — the dict-introspection fields
 * (tp_basicsize, tp_dictoffset, heap_type_object) were merged after the 840-byte
 * validation header existed, and last_profiled_frame_seq later still (3.15.0b4).
 */
function table315(opt: { seq: boolean; dictIntrospection: boolean; compactSize: boolean; gcStats: boolean }): Section[] {
  return [
    RUNTIME,
    INTERP_314,
    ['thread_state', [
      'size', 'prev', 'next', 'interp', 'current_frame', 'base_frame', 'last_profiled_frame',
      ...(opt.seq ? ['last_profiled_frame_seq'] : []),
      'thread_id', 'native_thread_id', 'datastack_chunk', 'status', 'holds_gil', 'gil_requested',
      'current_exception', 'exc_state',
    ]],
    ['err_stackitem', ['exc_value']],
    FRAME_314,
    CODE_314,
    PYOBJECT,
    ['type_object', ['size', 'tp_name', 'tp_repr', 'tp_flags', ...(opt.dictIntrospection ? ['tp_basicsize', 'tp_dictoffset'] : [])]],
    ...(opt.dictIntrospection ? [['heap_type_object', ['size', 'ht_cached_keys']] as Section] : []),
    TUPLE, LIST, SET, DICT, FLOAT, LONG, BYTES,
    ['unicode_object', ['size', 'state', 'length', 'asciiobject_size', ...(opt.compactSize ? ['compactunicodeobject_size'] : [])]],
    ['gc', ['size', 'collecting', 'frame', ...(opt.gcStats ? ['generation_stats_size', 'generation_stats'] : [])]],
    GEN, LLIST, DEBUGGER,
  ];
}

export interface TableShape {
  minor: number;
  /** sizeof(_Py_DebugOffsets) */
  size: number;
  /** byte position inside the table of "section.field" */
  at: ReadonlyMap<string, number>;
  /** the sections in table order; those describing a C struct start with `size` */
  sections: readonly Section[];
}

function shape(minor: number, sections: Section[]): TableShape {
  const at = new Map<string, number>();
  let pos = HEADER_SIZE;
  for (const [name, fields] of sections) {
    for (const f of fields) {
      at.set(`${name}.${f}`, pos);
      pos += 8;
    }
  }
  return { minor, size: pos, at, sections };
}

/** Every table shape pyunwind knows, by minor version; for 3.15 in order of preference. */
export const TABLE_SHAPES: ReadonlyMap<number, readonly TableShape[]> = new Map([
  [13, [shape(13, [RUNTIME, INTERP_313, TSTATE_313, FRAME_313, CODE_313, PYOBJECT, TYPE_313, TUPLE, LIST,
    DICT, FLOAT, LONG, BYTES, UNICODE_313, GC_313])]],
  [14, [shape(14, [RUNTIME, INTERP_314, TSTATE_313, FRAME_314, CODE_314, PYOBJECT, TYPE_313, TUPLE, LIST,
    SET, DICT, FLOAT, LONG, BYTES, UNICODE_313, GC_313, GEN, LLIST, DEBUGGER])]],
  [15, [
    shape(15, table315({ seq: true, dictIntrospection: true, compactSize: true, gcStats: true })),
    shape(15, table315({ seq: false, dictIntrospection: false, compactSize: false, gcStats: true })),
    shape(15, table315({ seq: false, dictIntrospection: false, compactSize: false, gcStats: false })),
  ]],
]);

/** Values that are sizes of other structs or offsets into other structs, not into their section. */
const NOT_OFFSETS = new Set([
  'interpreter_state.gil_runtime_state_enabled', // offset inside the GIL struct
  'unicode_object.asciiobject_size',
  'unicode_object.compactunicodeobject_size',
  'gc.generation_stats_size',
]);

// ---------------------------------------------------------------------------------------------

class Table {
  constructor(
    readonly bytes: Uint8Array,
    readonly shape: TableShape,
  ) {}

  has(key: string): boolean {
    return this.shape.at.has(key);
  }

  raw(key: string): bigint {
    const pos = this.shape.at.get(key);
    if (pos === undefined) throw new Error(`internal: ${key} is not in the ${this.shape.size}-byte table`);
    return new DataView(this.bytes.buffer, this.bytes.byteOffset + pos, 8).getBigUint64(0, true);
  }
}

/** Problems that make `table` not a table of its shape (empty when it fits). */
function anchorFailures(t: Table): string[] {
  const out: string[] = [];
  const want = (key: string, ok: (v: bigint) => boolean, what: string) => {
    if (!t.has(key)) return;
    const v = t.raw(key);
    if (!ok(v)) out.push(`${key} = ${v} (expected ${what})`);
  };
  want('pyobject.size', (v) => v === 16n || v === 8n, '16 or 8');
  want('pyobject.ob_type', (v) => v === 8n || v === 4n, '8 or 4');
  want('thread_state.prev', (v) => v === 0n, '0');
  want('thread_state.next', (v) => v === 8n || v === 4n, 'the pointer size, 8 or 4');
  const ptr = t.raw('thread_state.next');
  if (ptr === 8n || ptr === 4n) {
    want('interpreter_frame.previous', (v) => v === ptr, `the pointer size ${ptr}`);
    want('llist_node.prev', (v) => v === ptr, `the pointer size ${ptr}`);
  }
  want('llist_node.next', (v) => v === 0n, '0');
  for (const [name, fields] of t.shape.sections) {
    if (fields[0] !== 'size') continue;
    const size = t.raw(`${name}.size`);
    if (size === 0n || size > BigInt(MAX_SECTION_SIZE)) {
      out.push(`${name}.size = ${size} (expected 1..${MAX_SECTION_SIZE})`);
      continue;
    }
    for (const f of fields.slice(1)) {
      const key = `${name}.${f}`;
      if (NOT_OFFSETS.has(key)) continue;
      const v = t.raw(key);
      if (v >= size) out.push(`${key} = ${v} is outside ${name}.size = ${size}`);
    }
  }
  return out;
}

/** Reads checked fields of one table into Layout numbers; the first problem throws. */
class FieldReader {
  constructor(
    private readonly t: Table,
    private readonly ptr: number,
    private readonly where: string,
  ) {}

  fail(message: string): never {
    throw new LayoutError(`debug offsets (${this.where}): ${message}`);
  }

  size(section: string): number {
    const v = this.t.raw(`${section}.size`);
    if (v === 0n) this.fail(`${section}.size is 0`);
    if (v > BigInt(MAX_SECTION_SIZE)) this.fail(`${section}.size = ${v} is absurd (more than ${MAX_SECTION_SIZE})`);
    return Number(v);
  }

  /** The offset of `section.field`, a `width`-byte value aligned to `align` (default: width). */
  field(section: string, field: string, width: number, align = width): number {
    return this.check(section, `${section}.${field}`, this.t.raw(`${section}.${field}`), width, align);
  }

  /** Checks an offset (read from the table, or derived from one that was) against its section. */
  check(section: string, name: string, raw: bigint, width: number, align = width): number {
    const size = this.size(section);
    if (raw >= BigInt(size)) this.fail(`${name} = ${raw} is outside ${section}.size = ${size}`);
    const v = Number(raw);
    if (v + width > size) this.fail(`${name} = ${v} with width ${width} runs past ${section}.size = ${size}`);
    if (align > 1 && v % align !== 0) this.fail(`${name} = ${v} is not aligned to ${align} bytes`);
    return v;
  }

  pointer(section: string, field: string): number {
    return this.field(section, field, this.ptr);
  }

  /** A size-valued field that must not exceed its section (e.g. sizeof(PyASCIIObject)). */
  innerSize(section: string, field: string): number {
    const size = this.size(section);
    const v = this.t.raw(`${section}.${field}`);
    if (v === 0n || v > BigInt(size)) this.fail(`${section}.${field} = ${v} is outside ${section}.size = ${size}`);
    if (Number(v) % this.ptr !== 0) this.fail(`${section}.${field} = ${v} is not aligned to ${this.ptr} bytes`);
    return Number(v);
  }
}

function selectShape(bytes: Uint8Array, version: PythonVersion, versionWord: bigint): Table {
  const shapes = TABLE_SHAPES.get(version.minor)!;
  const label = `${version.major}.${version.minor}`;
  const fits: Table[] = [];
  const failures: { size: number; why: string }[] = [];
  for (const s of shapes) {
    if (bytes.length < s.size) {
      failures.push({ size: s.size, why: `the buffer holds only ${bytes.length} bytes` });
      continue;
    }
    const t = new Table(bytes, s);
    const bad = anchorFailures(t);
    if (bad.length === 0) fits.push(t);
    else failures.push({ size: s.size, why: `${bad.slice(0, 4).join('; ')}${bad.length > 4 ? `; and ${bad.length - 4} more` : ''}` });
  }
  if (fits.length === 1) return fits[0]!;
  const ver = `0x${versionWord.toString(16)}`;
  if (fits.length > 1) {
    throw new LayoutError(
      `debug offsets: ${fits.map((t) => t.shape.size).join(' and ')}-byte ${label} tables both fit (version ${ver}); refusing to guess`,
    );
  }
  if (shapes.length === 1) {
    throw new LayoutError(`debug offsets: invalid ${label} table (${failures[0]!.size} bytes, version ${ver}): ${failures[0]!.why}`);
  }
  throw new LayoutError(
    `debug offsets: no known ${label} table layout fits (version ${ver}): ` +
      failures.map((f) => `${f.size}-byte table: ${f.why}`).join(' | '),
  );
}

export function layoutFromDebugOffsets(bytes: Uint8Array): Layout {
  if (!hasDebugOffsetsCookie(bytes)) {
    const got = Array.from(bytes.subarray(0, 8), (b) => (b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : '.')).join('');
    throw new LayoutError(`debug offsets: no "${COOKIE}" cookie at the start of _PyRuntime (found "${got}", ${bytes.length} bytes)`);
  }
  if (bytes.length < HEADER_SIZE) {
    throw new LayoutError(`debug offsets: buffer holds ${bytes.length} bytes; the table header alone needs ${HEADER_SIZE}`);
  }
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const versionWord = dv.getBigUint64(8, true);
  const freeThreaded = dv.getBigUint64(16, true);
  const ver = `0x${versionWord.toString(16)}`;
  const hex = Number(versionWord & 0xffffffffn);
  const major = (hex >>> 24) & 0xff;
  const minor = (hex >>> 16) & 0xff;
  if (versionWord > 0xffffffffn) {
    throw new LayoutError(`debug offsets: version ${ver} is not a PY_VERSION_HEX (more than 32 bits)`);
  }
  if (major !== 3 || !TABLE_SHAPES.has(minor)) {
    throw new LayoutError(`debug offsets: unsupported Python ${major}.${minor} (debug offsets version ${ver})`);
  }
  let version: PythonVersion;
  try {
    version = parseVersionHex(hex);
  } catch (e) {
    throw new LayoutError(`debug offsets: ${(e as Error).message}`);
  }
  if (freeThreaded !== 0n) {
    throw new LayoutError(
      `debug offsets: free-threaded build (free_threaded = ${freeThreaded}, version ${ver}) is not supported: ` +
        'its object header, frame and string layouts differ and there is no such build to test against',
    );
  }
  const shapes = TABLE_SHAPES.get(minor)!;
  const smallest = Math.min(...shapes.map((s) => s.size));
  if (bytes.length < smallest) {
    throw new LayoutError(
      `debug offsets: buffer holds ${bytes.length} bytes but the ${major}.${minor} table is ` +
        `${shapes.length === 1 ? '' : 'at least '}${smallest} bytes`,
    );
  }
  const t = selectShape(bytes, version, versionWord);
  return buildLayout(t, version);
}

function buildLayout(t: Table, version: PythonVersion): Layout {
  const minor = version.minor;
  const ptr = Number(t.raw('thread_state.next')) as 4 | 8; // anchors made it 4 or 8
  const r = new FieldReader(t, ptr, `${version.major}.${minor}, ${t.shape.size}-byte table`);
  const opt = (key: string, read: () => number): number | null => (t.has(key) ? read() : null);

  const chunk = r.pointer('thread_state', 'datastack_chunk');
  const tstate = {
    size: r.size('thread_state'),
    prev: r.pointer('thread_state', 'prev'),
    next: r.pointer('thread_state', 'next'),
    interp: r.pointer('thread_state', 'interp'),
    currentFrame: r.pointer('thread_state', 'current_frame'),
    cframeCurrentFrame: null,
    cframePrevious: null,
    baseFrame: opt('thread_state.base_frame', () => r.pointer('thread_state', 'base_frame')),
    lastProfiledFrame: opt('thread_state.last_profiled_frame', () => r.pointer('thread_state', 'last_profiled_frame')),
    lastProfiledFrameSeq: opt('thread_state.last_profiled_frame_seq', () =>
      r.pointer('thread_state', 'last_profiled_frame_seq'),
    ),
    // after the embedded base frame: Py_ssize_t refcount, then the three uintptr_t (layout.ts)
    cStack: t.has('thread_state.base_frame') ? { top: ptr, softLimit: 2 * ptr, hardLimit: 3 * ptr } : null,
    // unsigned long: as wide as a pointer on both LP64 and ILP32
    threadId: r.pointer('thread_state', 'thread_id'),
    nativeThreadId: r.pointer('thread_state', 'native_thread_id'),
    datastackChunk: chunk,
    // datastack_top and datastack_limit directly follow datastack_chunk (3.11–3.15 headers)
    datastackTop: r.check('thread_state', 'datastack_top (datastack_chunk + pointer)', BigInt(chunk + ptr), ptr),
    datastackLimit: r.check('thread_state', 'datastack_limit (datastack_chunk + 2 pointers)', BigInt(chunk + 2 * ptr), ptr),
    holdsGil: opt('thread_state.holds_gil', () => r.field('thread_state', 'holds_gil', 4)),
    currentException: opt('thread_state.current_exception', () => r.pointer('thread_state', 'current_exception')),
    // exc_state is a _PyErr_StackItem inside the thread state: its exc_value at err_stackitem's offset
    handledException:
      t.has('thread_state.exc_state') && t.has('err_stackitem.exc_value')
        ? r.check('thread_state', 'thread_state.exc_state + err_stackitem.exc_value', t.raw('thread_state.exc_state') + t.raw('err_stackitem.exc_value'), ptr)
        : null,
  };

  const frameSize = r.size('interpreter_frame');
  const frame = {
    size: frameSize,
    previous: r.pointer('interpreter_frame', 'previous'),
    executable: r.pointer('interpreter_frame', 'executable'),
    instrPtr: r.pointer('interpreter_frame', 'instr_ptr'),
    owner: r.field('interpreter_frame', 'owner', 1),
    isEntry: null,
    localsplus: r.pointer('interpreter_frame', 'localsplus'),
    instrPtrIsPrevious: false,
  };

  const firstlineno = r.field('code_object', 'firstlineno', 4);
  const codeSize = r.size('code_object');
  const codeInt = (name: string, off: number): number => {
    if (off < 0 || off + 4 > codeSize) throw new LayoutError(`debug offsets: code_object.${name} would be at ${off}, outside code_object.size = ${codeSize}`);
    return off;
  };

  const objectSize = r.size('pyobject');
  const asciiSize = r.innerSize('unicode_object', 'asciiobject_size');
  const compactSize = t.has('unicode_object.compactunicodeobject_size')
    ? r.innerSize('unicode_object', 'compactunicodeobject_size')
    : asciiSize + 2 * ptr; // PyCompactUnicodeObject adds utf8_length and utf8 (3.12+)
  // PyUnicodeObject.data (a pointer) follows the compact header
  const legacyData = r.check('unicode_object', 'PyUnicodeObject.data (at the compact size)', BigInt(compactSize), ptr);

  let gen: Layout['gen'];
  if (t.has('gen_object.size')) {
    gen = {
      iframe: r.field('gen_object', 'gi_iframe', frameSize, ptr),
      frameState: r.field('gen_object', 'gi_frame_state', 1),
    };
  } else {
    // 3.13 has no gen_object section: offsetof(PyGenObject, gi_iframe / gi_frame_state),
    // measured on 3.13.0 and 3.13.18 (x86-64) and Pyodide's 3.13.2 (wasm32)
    gen = ptr === 8 ? { iframe: 72, frameState: 67 } : { iframe: 36, frameState: 35 };
  }

  // the GIL: the table gives the interpreter's own struct (`_gil`) and two of its fields as
  // offsets in the interpreter state, and the pointer to the GIL it runs under (`ceval.gil`);
  // unsigned long switch_number follows int locked (3.13–3.15 headers: interval, last_holder,
  // locked, switch_number; an unsigned long is as wide and as aligned as a pointer on LP64 and
  // ILP32)
  let gil: Layout['gil'] = null;
  if (['ceval_gil', 'gil_runtime_state', 'gil_runtime_state_holder', 'gil_runtime_state_locked'].every((f) => t.has(`interpreter_state.${f}`))) {
    const own = r.pointer('interpreter_state', 'gil_runtime_state');
    const holder = r.pointer('interpreter_state', 'gil_runtime_state_holder');
    const locked = r.field('interpreter_state', 'gil_runtime_state_locked', 4);
    const switches = r.check('interpreter_state', 'gil_runtime_state_locked + a pointer (switch_number)', BigInt(locked + ptr), ptr);
    if (holder < own || locked < own) throw new LayoutError(`debug offsets: the GIL's fields (holder ${holder}, locked ${locked}) lie before its struct (${own})`);
    gil = { interpPointer: r.pointer('interpreter_state', 'ceval_gil'), runtime: null, lastHolder: holder - own, locked: locked - own, switchNumber: switches - own };
  }

  const layout: Layout = {
    id: `debug-offsets/${version.major}.${minor}/${t.shape.size}`,
    // a copy: a Buffer's slice() would share the caller's memory
    source: { kind: 'debug-offsets', bytes: new Uint8Array(t.bytes.subarray(0, t.shape.size)) },
    version,
    pointerSize: ptr,
    freeThreaded: false,
    // 3.14+ frames hold a tagged _PyStackRef; Py_TAG_BITS is 3 in GIL builds
    executableTagMask: minor >= 14 ? 3 : 0,
    bottom: minor >= 15 ? 'base-frame' : 'entry-frame',
    runtime: { interpretersHead: r.pointer('runtime_state', 'interpreters_head') },
    interp: {
      id: r.field('interpreter_state', 'id', 8),
      next: r.pointer('interpreter_state', 'next'),
      threadsHead: r.pointer('interpreter_state', 'threads_head'),
      threadsMain: opt('interpreter_state.threads_main', () => r.pointer('interpreter_state', 'threads_main')),
      codeObjectGeneration: opt('interpreter_state.code_object_generation', () =>
        r.field('interpreter_state', 'code_object_generation', 8),
      ),
      // the collector's state is a struct inside the interpreter state: its `collecting` int
      gcCollecting:
        t.has('interpreter_state.gc') && t.has('gc.collecting')
          ? r.check('interpreter_state', 'interpreter_state.gc + gc.collecting', t.raw('interpreter_state.gc') + t.raw('gc.collecting'), 4)
          : null,
    },
    tstate,
    frame,
    owners: {
      thread: 0,
      generator: 1,
      frameObject: 2,
      interpreter: minor >= 14 ? 3 : null,
      cstack: minor === 13 ? 3 : minor === 14 ? 4 : null,
    },
    chunk: { previous: 0, size: ptr, top: 2 * ptr, data: 3 * ptr },
    object: {
      size: objectSize,
      obType: r.pointer('pyobject', 'ob_type'),
      obSize: objectSize,
    },
    type: {
      tpName: r.pointer('type_object', 'tp_name'),
      tpFlags: r.pointer('type_object', 'tp_flags'),
    },
    code: {
      size: r.size('code_object'),
      filename: r.pointer('code_object', 'filename'),
      name: r.pointer('code_object', 'name'),
      qualname: r.pointer('code_object', 'qualname'),
      linetable: r.pointer('code_object', 'linetable'),
      firstlineno,
      // not in the table: in every version co_stacksize is the int just before co_firstlineno
      // and co_nlocalsplus the int just after (checked against offsetof in test/layout.test.ts)
      stacksize: codeInt('co_stacksize', firstlineno - 4),
      nlocalsplus: codeInt('co_nlocalsplus', firstlineno + 4),
      codeAdaptive: r.field('code_object', 'co_code_adaptive', 1),
      opcodes: `${version.major}.${minor}`,
      // not in the table: co_flags is the int after the three object pointers that follow the
      // header, and co_kwonlyargcount two ints after co_argcount (co_posonlyargcount between), in
      // every version (checked against offsetof by test/fixtures/offsets.c)
      ...(ptr === 8
        ? {
            locals: {
              // PyObject_VAR_HEAD, co_consts, co_names, co_exceptiontable, then int co_flags
              flags: objectSize + ptr + 3 * ptr,
              argcount: r.field('code_object', 'argcount', 4),
              kwonlyargcount: r.field('code_object', 'argcount', 4) + 8,
              localsplusnames: r.pointer('code_object', 'localsplusnames'),
              localspluskinds: r.pointer('code_object', 'localspluskinds'),
            },
          }
        : {}),
    },
    ...(ptr === 8
      ? {
          values: {
            tupleItems: r.pointer('tuple_object', 'ob_item'),
            listItems: r.pointer('list_object', 'ob_item'),
            floatValue: r.field('float_object', 'ob_fval', 8),
          },
        }
      : {}),
    unicode: {
      length: r.pointer('unicode_object', 'length'),
      state: r.field('unicode_object', 'state', 4),
      asciiSize,
      compactSize,
      legacyData,
      kindShift: 2,
      compactBit: 5,
      asciiBit: 6,
    },
    bytes: {
      obSize: r.pointer('bytes_object', 'ob_size'),
      obSval: r.field('bytes_object', 'ob_sval', 1),
    },
    gen,
    gil,
    threadNames: ptr === 8 ? threadNamesLayout(t, r, minor) : null,
    ...(t.has('interpreter_frame.stackpointer') && t.has('set_object.size') && t.has('long_object.size')
      ? {
          objects: {
            stackpointer: r.pointer('interpreter_frame', 'stackpointer'),
            // CPython's own reader (Modules/_remote_debugging) takes stackpointer[-1] on 3.14 and
            // stackpointer[-2] from 3.15 on, where SEND keeps the value sent above the awaitable
            awaitedSlot: minor >= 15 ? 2 : 1,
            // PyFrameState was renumbered in 3.15 (pycore_frame.h)
            frameStates: minor >= 15 ? { suspendedYieldFrom: 2, suspendedYieldFromLocked: 3, executing: 4, cleared: 5 } : { suspendedYieldFrom: -1, suspendedYieldFromLocked: null, executing: 0, cleared: 4 },
            set: { used: r.pointer('set_object', 'used'), table: r.pointer('set_object', 'table'), mask: r.pointer('set_object', 'mask') },
            long: { lvTag: r.pointer('long_object', 'lv_tag'), obDigit: r.field('long_object', 'ob_digit', 4) },
          },
        }
      : {}),
  };
  // a table the walk could not use (offsets past the frame, sizes beyond reason: found by
  // fuzzing) is the table's fault, said as such — not a walker's refusal later on
  const bad = checkParams(walkParams(layout));
  if (bad) throw new LayoutError(`debug offsets: the walk cannot use them: ${bad}`);
  return layout;
}

/**
 * What reading thread names needs (64-bit targets): the modules dict, the dict and int offsets
 * from the table; the rest — not in the 3.13/3.14 tables — as measured with offsetof on each
 * version's headers (test/fixtures/offsets.c: the same from 3.13 through 3.15, but
 * ht_cached_keys, which 3.15's full table gives).
 */
function threadNamesLayout(t: Table, r: FieldReader, minor: number): ThreadNamesLayout {
  const has = (key: string): boolean => t.has(key);
  return {
    ...DICTS_311,
    interpModules: r.pointer('interpreter_state', 'imports_modules'),
    dictKeys: r.pointer('dict_object', 'ma_keys'),
    dictValues: r.pointer('dict_object', 'ma_values'),
    longSize: r.field('long_object', 'lv_tag', 8),
    longDigits: r.field('long_object', 'ob_digit', 4),
    typeBasicsize: has('type_object.tp_basicsize') ? r.pointer('type_object', 'tp_basicsize') : DICTS_311.typeBasicsize,
    heapCachedKeys: has('heap_type_object.ht_cached_keys') ? r.pointer('heap_type_object', 'ht_cached_keys') : minor >= 15 ? 888 : 880,
    // 3.13+: PyDictValues starts with capacity, size, embedded and valid bytes
    valuesValues: 8,
    valuesCapacity: 0,
    valuesValid: 3,
    flagInlineValues: 4,
    managedValues: null,
    valuesTag: null,
    longTagShift: 3,
  };
}
