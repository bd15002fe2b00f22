// The Pyodide memory source over real CPython 3.14 and 3.15 (wasm32), and the known-stack
// program (test/fixtures/known_stack.py) that the walker's stack-equality tests run: on Pyodide
// (capture from inside the program) and natively (two threads parked at the checkpoint).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it, type TestContext } from 'vitest';
import { DEBUG_OFFSETS_READ_SIZE, type Layout } from '../src/layout/index.js';
import { findDebugOffsets, plausibleDebugOffsetsAt, pyodideSource, type PyodideLike, type PyodideSource } from '../src/record/pyodide/source.js';
import { ReadError } from '../src/record/copy/source.js';
import { readPointer } from '../src/walk/region-memory.js';
import { recordCoverage, skipTest } from './helpers/coverage.js';
import { nativeInterpreters } from '../harness/interpreters.js';
import { type LoadedPyodide, loadPyodideVersion, type PyodideVersion, runWithCapture, withoutNetwork } from './helpers/pyodide.js';

const FIXTURES = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures');
const KNOWN_STACK_PATH = path.join(FIXTURES, 'known_stack.py');
const KNOWN_STACK = fs.readFileSync(KNOWN_STACK_PATH, 'utf8');
/** 1-based line of the checkpoint: where every thread of known_stack.py stops */
const CHECKPOINT_LINE = KNOWN_STACK.split('\n').findIndex((l) => l.includes('# CHECKPOINT') && !l.trimStart().startsWith('#')) + 1;
const RECURSION_DEPTH = 32;
/** known_stack.py's main-thread stack at the checkpoint, outermost first (its own frames only) */
const MAIN_STACK = [
  '<module>',
  'main',
  'run',
  'Climber.method',
  'Climber.via_class',
  'Climber.via_static',
  'outer',
  'outer.<locals>.inner',
  'größe_函数',
  '<lambda>',
  ...Array<string>(RECURSION_DEPTH).fill('recurse'),
  'after_recursion',
  'gen_for',
  'gen_next',
  'coro_outer',
  'coro_inner',
  'checkpoint',
];
const WORKER_STACK = ['Thread._bootstrap', 'Thread._bootstrap_inner', 'Thread.run', 'worker', 'helper', 'checkpoint'];

interface ReportedFrame {
  qualname: string;
  name: string;
  filename: string;
  line: number;
}
interface Report {
  thread: number;
  ident: number;
  name: string;
  stack: ReportedFrame[];
}

const P = 4;
const big = (n: number): bigint => BigInt(n);
const ptr = (src: PyodideSource, at: bigint): bigint => readPointer(src.read(at, P), 0, P);

interface ThreadStateView {
  interp: bigint;
  tstate: bigint;
  currentFrame: bigint;
  baseFrame: bigint | null;
  threadId: bigint;
}

/** The first thread state of the first interpreter, read field by field from live memory. */
function readThreadState(src: PyodideSource): ThreadStateView {
  const L = src.layout;
  const interp = ptr(src, src.runtimeAddress + big(L.runtime.interpretersHead));
  const tstate = ptr(src, interp + big(L.interp.threadsHead));
  return {
    interp,
    tstate,
    currentFrame: ptr(src, tstate + big(L.tstate.currentFrame)),
    baseFrame: L.tstate.baseFrame === null ? null : ptr(src, tstate + big(L.tstate.baseFrame)),
    threadId: ptr(src, tstate + big(L.tstate.threadId)),
  };
}

/** A compact str object's text (enough for code-object names; the symbolizer does it all). */
function readString(src: PyodideSource, at: bigint): string {
  const U = src.layout.unicode;
  const header = src.read(at, U.compactSize);
  const dv = new DataView(header.buffer, header.byteOffset, header.byteLength);
  const state = dv.getUint32(U.state, true);
  const length = dv.getUint32(U.length, true);
  const kind = (state >>> U.kindShift) & 7;
  if (!((state >>> U.compactBit) & 1)) throw new Error(`str at 0x${at.toString(16)} is not compact`);
  const ascii = (state >>> U.asciiBit) & 1;
  if (length > 4096 || ![1, 2, 4].includes(kind)) throw new Error(`str at 0x${at.toString(16)}: length ${length} kind ${kind}`);
  const data = src.read(at + big(ascii ? U.asciiSize : U.compactSize), length * kind);
  const ddv = new DataView(data.buffer, data.byteOffset, data.byteLength);
  let s = '';
  for (let i = 0; i < length; i++) {
    const c = kind === 1 ? data[i]! : kind === 2 ? ddv.getUint16(2 * i, true) : ddv.getUint32(4 * i, true);
    s += String.fromCodePoint(c);
  }
  return s;
}

interface RawChain {
  /** qualnames of the Python frames, innermost first */
  qualnames: string[];
  /** address and owner of the last frame of the chain (its previous is NULL) */
  last: { address: bigint; owner: number };
}

/** Follow `previous` from `frame` in live memory; the frames' code objects give the qualnames. */
function rawChain(src: PyodideSource, frame: bigint): RawChain {
  const L: Layout = src.layout;
  const qualnames: string[] = [];
  let last = { address: 0n, owner: -1 };
  for (let depth = 0; frame !== 0n; depth++) {
    if (depth > 10_000) throw new Error('frame chain longer than 10000: a cycle?');
    const bytes = src.read(frame, L.frame.size);
    const owner = bytes[L.frame.owner]!;
    last = { address: frame, owner };
    if (owner !== L.owners.interpreter && owner !== L.owners.cstack) {
      const code = readPointer(bytes, L.frame.executable, P) & ~big(L.executableTagMask);
      qualnames.push(readString(src, ptr(src, code + big(L.code.qualname))));
    }
    frame = readPointer(bytes, L.frame.previous, P);
  }
  return { qualnames, last };
}

function ownOnly(stack: ReportedFrame[], filename: string): string[] {
  return stack.filter((f) => f.filename === filename).map((f) => f.qualname);
}

// ---------------------------------------------------------------------------------------------
// Runtime discovery on synthetic memory (no Pyodide needed)

describe('pyodide source: finding _PyRuntime', () => {
  const offsets = fs.readFileSync(path.join(FIXTURES, 'debug-offsets', 'pyodide-3.15.0rc1.bin'));
  const fake = (size: number, at: number[], exported?: number): PyodideLike => {
    const heap = new Uint8Array(size);
    for (const a of at) heap.set(offsets, a);
    return { version: '0.0.0-test', _module: { HEAPU8: heap, __PyRuntime: exported } };
  };

  it('uses the exported address when the cookie is there', () => {
    const src = pyodideSource(fake(1 << 16, [0x2000], 0x2000));
    expect(src.runtimeAddress).toBe(0x2000n);
    expect(src.runtimeFoundBy).toBe('export');
    expect(src.description).toBe('pyodide 0.0.0-test (CPython 3.15.0rc1)');
    expect(src.layout.pointerSize).toBe(4);
  });

  it('scans when there is no export, or the export points elsewhere', () => {
    expect(pyodideSource(fake(1 << 16, [0x3008])).runtimeFoundBy).toBe('scan');
    const src = pyodideSource(fake(1 << 16, [0x3008], 0x100));
    expect([src.runtimeAddress, src.runtimeFoundBy]).toEqual([0x3008n, 'scan']);
  });

  it('fails clearly with no hit or with two', () => {
    expect(() => pyodideSource(fake(1 << 16, []))).toThrow(/cannot find _PyRuntime.*65536 bytes/);
    expect(() => pyodideSource(fake(1 << 16, [0x2000, 0x8000]))).toThrow(/2 plausible xdebugpy cookies at 0x2000, 0x8000/);
    // with an export that is wrong, the message says so
    expect(() => pyodideSource(fake(1 << 16, [], 0x40))).toThrow(/__PyRuntime \(0x40\) does not start/);
  });

  it('ignores unaligned cookies and implausible version words', () => {
    const heap = new Uint8Array(1 << 14);
    heap.set(offsets, 0x1004); // not 8-aligned
    heap.set(offsets, 0x2000);
    heap[0x2000 + 11] = 2; // version 0x0200_00c1 (major 2)
    heap.set(offsets, 0x3000);
    heap[0x3000 + 12] = 1; // upper half of the u64 version not zero
    heap.set(offsets, 0x3800);
    heap[0x3800 + 16] = 7; // free_threaded = 7
    expect(findDebugOffsets(heap)).toEqual([]);
    heap.set(offsets, 0x3808);
    expect(findDebugOffsets(heap)).toEqual([0x3808]);
    expect(plausibleDebugOffsetsAt(heap, 0x3808)).toBe(0x30f00c1);
    expect(plausibleDebugOffsetsAt(heap, heap.length - 8)).toBeNull();
  });

  it('checks a runtimeAddress option', () => {
    expect(pyodideSource(fake(1 << 16, [0x2000]), { runtimeAddress: 0x2000n }).runtimeFoundBy).toBe('option');
    expect(() => pyodideSource(fake(1 << 16, [0x2000]), { runtimeAddress: 0x2008 })).toThrow(/no _Py_DebugOffsets header .* 0x2008/);
    expect(() => pyodideSource(fake(1 << 16, [0x2000]), { runtimeAddress: 1n << 40n })).toThrow(/runtimeAddress 0x10000000000/);
  });

  it('refuses reads once closed', () => {
    const src = pyodideSource(fake(1 << 16, [0x2000], 0x2000));
    expect(src.read(0x2000n, 8)).toHaveLength(8);
    src.close();
    expect(() => src.read(0x2000n, 8)).toThrow(/cannot read 8 bytes at 0x2000: the source is closed/);
    expect(src.tryRead(0x2000n, 8)).toBeNull();
  });

  it('reads through the current view after the memory is replaced (grown)', () => {
    const module: { HEAPU8: Uint8Array; __PyRuntime: number } = { HEAPU8: new Uint8Array(1 << 14), __PyRuntime: 0x2000 };
    module.HEAPU8.set(offsets, 0x2000);
    const src = pyodideSource({ _module: module });
    expect(() => src.read(0x5000n, 4)).toThrow(ReadError);
    const grown = new Uint8Array(1 << 16);
    grown.set(module.HEAPU8);
    grown.set([1, 2, 3, 4], 0x5000);
    module.HEAPU8 = grown; // what emscripten does on memory.grow
    expect(src.memorySize).toBe(1 << 16);
    expect([...src.read(0x5000n, 4)]).toEqual([1, 2, 3, 4]);
  });
});

// ---------------------------------------------------------------------------------------------
// Real Pyodide

const VERSIONS: PyodideVersion[] = ['3.14', '3.15'];

it('the offline loader refuses the network while it loads, and restores fetch after', async () => {
  const real = globalThis.fetch;
  const { result, attempts } = await withoutNetwork(async () => {
    expect(globalThis.fetch).not.toBe(real);
    try {
      await globalThis.fetch('https://cdn.jsdelivr.net/pyodide/x.whl');
      return 'fetched';
    } catch (e) {
      return (e as Error).message;
    }
  });
  expect(result).toMatch(/network access while loading Pyodide offline/);
  expect(attempts).toEqual(['https://cdn.jsdelivr.net/pyodide/x.whl']);
  expect(globalThis.fetch).toBe(real);
});

describe.each(VERSIONS)('pyodide %s', (which) => {
  let loaded: LoadedPyodide | null = null;
  let absent = `pyodide ${which} did not load`;
  let src: PyodideSource;
  const SUITE = 'pyodide-source';

  beforeAll(async () => {
    const r = await loadPyodideVersion(which);
    if ('missing' in r) {
      absent = r.missing;
      return;
    }
    loaded = r;
    src = pyodideSource(r.py);
    recordCoverage(SUITE, r.label, true);
  });
  afterAll(() => src?.close());

  const need = (ctx: TestContext): LoadedPyodide => loaded ?? skipTest(ctx, SUITE, `pyodide-${which}`, absent);

  it('finds _PyRuntime by its cookie at _module.__PyRuntime, and by a scan at the same address', (ctx) => {
    const { py } = need(ctx);
    expect(typeof py._module.__PyRuntime).toBe('number');
    expect(src.runtimeAddress).toBe(BigInt(py._module.__PyRuntime as number));
    expect(src.runtimeFoundBy).toBe('export');
    const scanned = pyodideSource(py, { forceScan: true });
    expect(scanned.runtimeFoundBy).toBe('scan');
    expect(scanned.runtimeAddress).toBe(src.runtimeAddress);
    expect(new TextDecoder().decode(src.read(src.runtimeAddress, 8))).toBe('xdebugpy');
  });

  it("has the interpreter's version, pointer size 4 and a description", (ctx) => {
    const { py } = need(ctx);
    const hexversion = py.runPython('import sys; sys.hexversion') as number;
    expect(src.layout.version.hex).toBe(hexversion);
    expect(`${src.layout.version.major}.${src.layout.version.minor}`).toBe(which);
    expect(src.layout.pointerSize).toBe(4);
    expect(src.pointerSize).toBe(4);
    const cpython = py.runPython("import sys; sys.version.split()[0]") as string;
    expect(src.description).toBe(`pyodide ${py.version} (CPython ${cpython})`);
    expect(src.layout.source).toMatchObject({ kind: 'debug-offsets' });
    expect(DEBUG_OFFSETS_READ_SIZE).toBeGreaterThanOrEqual(888);
  });

  it('reads the thread state while Python is stopped in a capture', (ctx) => {
    const { py } = need(ctx);
    const program = [
      'import threading',
      'from pyunwind_probe import capture',
      'def probe_inner():',
      '    capture(threading.get_ident())',
      'def probe_outer():',
      '    probe_inner()',
      'probe_outer()',
      'print("probe done")',
      'threading.get_ident()',
    ].join('\n');
    const run = runWithCapture(py, program, () => {
      const t = readThreadState(src);
      return { ...t, chain: rawChain(src, t.currentFrame) };
    });
    expect(run.captures).toHaveLength(1);
    const [{ value, args }] = run.captures as [(typeof run.captures)[0]];
    expect(value.currentFrame).not.toBe(0n);
    expect(value.threadId).toBe(BigInt(args[0] as number));
    expect(run.result).toBe(args[0]);
    expect([run.stdout, run.stderr]).toEqual(['probe done\n', '']);
    expect(value.chain.qualnames.slice(0, 3)).toEqual(['probe_inner', 'probe_outer', '<module>']);
    const L = src.layout;
    if (L.tstate.baseFrame !== null) {
      // 3.15: the base frame is embedded just past the public PyThreadState, and every chain
      // ends exactly there.
      expect(value.baseFrame).toBe(value.tstate + big(L.tstate.size));
      expect(value.chain.last.address).toBe(value.baseFrame);
    } else {
      // 3.14: the chain ends at the outermost entry frame
      expect(value.chain.last.owner).toBe(L.owners.interpreter);
    }
  });

  it('copies into a caller buffer, and rejects reads outside linear memory with ReadError', (ctx) => {
    need(ctx);
    const size = src.memorySize;
    expect(size).toBeGreaterThanOrEqual(30 << 20);
    const at = src.runtimeAddress;
    const target = new Uint8Array(300).fill(0xee);
    src.readInto(at, target, 10, 256);
    expect(target.subarray(10, 266)).toEqual(src.read(at, 256));
    expect(target[9]).toBe(0xee);
    expect(target[266]).toBe(0xee);
    src.readInto(at, target.subarray(0, 8));
    expect(new TextDecoder().decode(target.subarray(0, 8))).toBe('xdebugpy');
    expect(() => src.readInto(at, target, 290, 20)).toThrow(RangeError);

    const bad: [bigint, number][] = [
      [big(size), 1], // one past the end
      [big(size - 4), 8], // straddles the end
      [1n << 32n, 1], // not a wasm32 address
      [(1n << 32n) - 1n, 1], // a wasm32 address but beyond memory
      [-8n, 4],
      [0n, 4], // NULL
      [16n, 4], // a field of a NULL struct pointer
      [at, -1],
      [at, 1.5],
    ];
    for (const [address, length] of bad) {
      let error: unknown;
      try {
        src.read(address, length);
      } catch (e) {
        error = e;
      }
      expect(error, `read(${address}, ${length})`).toBeInstanceOf(ReadError);
      expect((error as Error).message).toContain(src.description);
      expect(src.tryRead(address, length)).toBeNull();
      // readInto takes its length from the target, so only the bad addresses apply to it
      if (Number.isInteger(length) && length > 0) expect(() => src.readInto(address, new Uint8Array(length))).toThrow(ReadError);
    }
    expect(() => src.read(big(size), 1)).toThrow(/past the end of linear memory/);
    expect(() => src.read(1n << 32n, 1)).toThrow(/not a wasm32 address/);
    expect(() => src.read(0n, 4)).toThrow(/NULL/);
    expect(src.read(big(size - 4), 4)).toHaveLength(4);
    expect(src.read(big(size), 0)).toHaveLength(0);
  });

  it('follows the memory when it grows (the view is replaced, never kept)', (ctx) => {
    const { py } = need(ctx);
    const before = src.memorySize;
    const oldView = py._module.HEAPU8;
    // Keep an object larger than the whole memory alive in Python, so the memory must grow
    // and the object must end past the old end; its last 4 bytes are a marker, at
    // id(obj) + ob_sval + len - 4.
    const address = py.runPython(
      `_pyunwind_big = bytes(${before + (16 << 20)}) + b"\\xde\\xad\\xbe\\xef"\n` +
        `id(_pyunwind_big) + ${src.layout.bytes.obSval} + len(_pyunwind_big) - 4`,
    ) as number;
    expect(src.memorySize).toBeGreaterThan(before);
    // emscripten replaced the view and the old buffer is detached: a kept view would read nothing
    expect(py._module.HEAPU8 === oldView).toBe(false);
    expect(oldView.byteLength).toBe(0);
    expect(address + 4).toBeGreaterThan(before);
    expect([...src.read(big(address), 4)]).toEqual([0xde, 0xad, 0xbe, 0xef]);
    py.runPython('del _pyunwind_big');
  });

  it('runs known_stack.py: the capture sees the stack the program reports', (ctx) => {
    const { py } = need(ctx);
    const filename = '/home/pyodide/known_stack.py';
    const run = runWithCapture(
      py,
      KNOWN_STACK,
      () => {
        const t = readThreadState(src);
        return { ...t, chain: rawChain(src, t.currentFrame) };
      },
      { filename },
    );
    expect(run.captures).toHaveLength(1);
    const [{ value, args }] = run.captures as [(typeof run.captures)[0]];
    const report = JSON.parse(args[0] as string) as Report;
    expect(report.name).toBe('MainThread');
    expect(BigInt(report.ident)).toBe(value.threadId);

    // The program's own frames are the innermost ones, in the documented order; below them
    // only Pyodide's frames (eval_code and friends).
    const own = ownOnly(report.stack, filename);
    expect(own).toEqual(MAIN_STACK);
    expect(report.stack.slice(-own.length).map((f) => f.qualname)).toEqual(MAIN_STACK);
    expect(report.stack.length).toBeGreaterThan(own.length);
    const top = report.stack.at(-1)!;
    expect([top.qualname, top.line]).toEqual(['checkpoint', CHECKPOINT_LINE]);
    expect(report.stack.find((f) => f.qualname === 'größe_函数')?.name).toBe('größe_函数');

    // Memory at the capture: current_frame is set, and the frame chain names exactly the
    // reported frames (innermost first), checkpoint on top.
    expect(value.currentFrame).not.toBe(0n);
    expect(value.chain.qualnames).toEqual(report.stack.map((f) => f.qualname).reverse());
    if (value.baseFrame !== null) expect(value.chain.last.address).toBe(value.baseFrame);
  });
});

// ---------------------------------------------------------------------------------------------
// known_stack.py natively: two threads parked at the checkpoint, then READY

interface NativeRun {
  lines: string[];
  stderr: string;
}

/** Run known_stack.py until it prints READY (then kill it), or fail after `timeoutMs`. */
function runNative(command: string, timeoutMs = 30_000): Promise<NativeRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, [KNOWN_STACK_PATH], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    let settled = false;
    const finish = (f: () => void): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      // The program never exits by itself: it blocks at the checkpoint until killed.
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      f();
    };
    const timer = setTimeout(
      () => finish(() => reject(new Error(`${command} known_stack.py: no READY after ${timeoutMs} ms; stdout ${JSON.stringify(out)} stderr ${err}`))),
      timeoutMs,
    );
    child.stdout.setEncoding('utf8');
    child.stderr.setEncoding('utf8');
    child.stdout.on('data', (d: string) => {
      out += d;
      const lines = out.split('\n');
      if (lines.includes('READY')) finish(() => resolve({ lines: lines.filter((l) => l !== ''), stderr: err }));
    });
    child.stderr.on('data', (d: string) => (err += d));
    child.on('error', (e) => finish(() => reject(e)));
    child.on('exit', (code, signal) =>
      finish(() => reject(new Error(`${command} known_stack.py exited (${code ?? signal}) before READY: ${err}`))),
    );
  });
}

describe('known_stack.py natively', () => {
  for (const interp of nativeInterpreters()) {
    it(`${interp.label}: two JSON lines (worker first), then READY`, async (ctx) => {
      if (interp.missing) return skipTest(ctx, 'known-stack-native', interp.label, interp.missing);
      const { lines, stderr } = await runNative(interp.command);
      expect(stderr).toBe('');
      expect(lines).toHaveLength(3);
      expect(lines[2]).toBe('READY');
      const [worker, main] = lines.slice(0, 2).map((l) => JSON.parse(l) as Report) as [Report, Report];

      expect(worker.name).toBe('known-worker');
      expect(worker.stack.map((f) => f.qualname)).toEqual(WORKER_STACK);
      expect(main.name).toBe('MainThread');
      expect(main.stack.map((f) => f.qualname)).toEqual(MAIN_STACK);
      expect(ownOnly(main.stack, KNOWN_STACK_PATH)).toEqual(MAIN_STACK);
      for (const r of [worker, main]) {
        expect(r.stack.at(-1)).toMatchObject({ qualname: 'checkpoint', filename: KNOWN_STACK_PATH, line: CHECKPOINT_LINE });
        expect(Number.isInteger(r.thread) && r.thread > 0).toBe(true);
      }
      expect(worker.thread).not.toBe(main.thread);
      expect(worker.ident).not.toBe(main.ident);
      recordCoverage('known-stack-native', interp.label, true);
    });
  }
});
