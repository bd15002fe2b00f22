// `dump --native` on every native interpreter, against gdb and against the program itself.
// workloads/parked_native.py parks threads where C and Python call each other (sorted's key,
// ctypes calling libc's qsort with a Python comparator, time.sleep) and runs two C leaves doing
// long work (zlib.compress, hashlib.sha256); each thread prints its own stack
// (traceback.extract_stack) on the line where it parks or loops. With the program held by
// SIGSTOP, pyunwind dumps it, then gdb prints the backtrace of the same stopped threads:
// - every thread's native chain unwinds to its outermost frame, and equals gdb's, frame by frame
//   (pc, and function name: gdb's inlined and tail-call frames left out, as they are not on the
//   stack; GCC's
//   clone suffixes such as .constprop.0 left out, as gdb names a clone by its DWARF name);
// - every thread's stack is one of C and Python frames (`mixed`), whose Python frames are the
//   program's own stack, outermost first (a parked thread has threading's wait frames inside);
// - C is where the program calls it: deflate under compress_loop, qsort between qsorter and
//   compare, the list sort between sorter and park_key.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { nativeInterpreters } from '../harness/interpreters.js';
import { readProcMaps } from '../src/record/linux/proc-maps.js';
import { parseElf, type FunctionSymbol } from '../src/record/linux/elf.js';
import { debugFileOf } from '../src/record/linux/native-objects.js';
import { readCaptureBytes } from '../src/capture/index.js';
import { SAMPLE_FLAG } from '../src/capture/types.js';
import { cannotRun, recordCoverage, skipTest } from './helpers/coverage.js';
import { threadState, waitUntil } from './helpers/wait.js';
import { jsonLines } from './helpers/json-lines.js';

const BIN = path.resolve('bin/pyunwind.js');
const WORKLOAD = path.resolve('workloads/parked_native.py');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pyunwind-native-dump-'));
const children: ChildProcess[] = [];
afterAll(() => {
  for (const c of children) c.kill('SIGKILL');
  fs.rmSync(dir, { recursive: true, force: true });
});

// gdb's backtrace of every thread as JSON, pc and name of each frame on the stack: without the
// frames gdb adds from debug information — inlined functions, and the callers it infers for a
// tail call (DW_TAG_call_site), which have no frame on the stack either
const GDB_SCRIPT = `
import gdb, json
out = []
for t in gdb.selected_inferior().threads():
    t.switch()
    f = gdb.newest_frame()
    frames = []
    while f is not None and len(frames) < 1000:
        if f.type() not in (gdb.INLINE_FRAME, gdb.TAILCALL_FRAME):
            frames.append({"pc": hex(f.pc()), "name": f.name()})
        f = f.older()
    out.append({"tid": t.ptid[1], "frames": frames})
print("GDB-JSON " + json.dumps(out))
`;

interface Said {
  thread: string;
  native_id: number;
  kind: 'parked' | 'running';
  stack: [string, number][];
}

interface DumpFrame {
  native?: true;
  name?: string | null;
  object?: string | null;
  qualname?: string;
  line?: number | null;
}

interface DumpThread {
  nativeThreadId: number;
  name: string | null;
  status: string;
  nativeStatus: string;
  nativeFrames?: { pc: string; name: string | null; object: string | null; address: string }[];
  stack?: DumpFrame[];
}

/** A function's name without GCC's clone suffixes (.constprop.0, .isra.0, .part.0, .cold, .lto_priv.0). */
const plain = (name: string | null): string | null => (name === null ? null : name.replace(/(\.(constprop|isra|part|cold|lto_priv|localalias)(\.\d+)?)+$/, ''));

/** Every function symbol of an object and of its debug file, aliases too (an object gdb names by another alias). */
const symbolsOf = new Map<string, FunctionSymbol[]>();
function aliases(object: string, address: bigint): Set<string> {
  let list = symbolsOf.get(object);
  if (!list) {
    const elf = parseElf(fs.readFileSync(object), object);
    list = [...elf.functions(true), ...(debugFileOf('', object, elf)?.elf.functions(true) ?? [])];
    symbolsOf.set(object, list);
  }
  return new Set(list.filter((f) => f.value <= address && address < f.value + BigInt(Math.max(f.size, 1))).map((f) => plain(f.name)!));
}

describe.each(nativeInterpreters())('dump --native, $label', (py) => {
  if (py.missing) {
    cannotRun('native-dump', py.label, py.missing!);
    return;
  }
  it('C and Python frames in one stack: gdb’s native frames, the program’s Python frames', async (ctx) => {
    if (spawnSync('gdb', ['--version']).status !== 0) skipTest(ctx, 'native-dump', py.label, 'gdb is not installed (apt install gdb)');
    const child = spawn(py.command, [WORKLOAD], { stdio: ['pipe', 'pipe', 'inherit'], env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' } });
    children.push(child);
    const said = jsonLines<Said>(child);
    const pid = child.pid!;
    // every thread has said its stack, and every parked one waits in the kernel
    await waitUntil(() => said.length === 6, 'every thread of the program to print its stack', 60_000);
    await waitUntil(() => said.every((s) => s.kind === 'running' || threadState(pid, s.native_id) === 'S'), 'the parked threads to wait', 60_000);

    process.kill(pid, 'SIGSTOP');
    let dumped: { threads: DumpThread[] };
    let gdb: { tid: number; frames: { pc: string; name: string | null }[] }[];
    try {
      await waitUntil(() => said.every((s) => threadState(pid, s.native_id) === 'T'), 'the program to stop');
      const r = spawnSync(process.execPath, [BIN, 'dump', '--pid', String(pid), '--native', '--format', 'json'], { encoding: 'utf8', timeout: 120_000, maxBuffer: 64 << 20 });
      expect(r.status, r.stderr).toBe(0);
      dumped = JSON.parse(r.stdout) as typeof dumped;
      // the interpreter's executable, for gdb: a Debian interpreter runs under its own ld.so,
      // which gdb takes for the program (its symbols and unwind tables are added by hand)
      const exe = readProcMaps(pid).find((m) => m.perms[2] === 'x' && /\/python3\.\d+$/.test(m.path))?.path;
      const script = path.join(dir, 'bt.py');
      fs.writeFileSync(script, GDB_SCRIPT);
      const g = spawnSync('gdb', ['-batch', '-nx', '-p', String(pid), ...(exe ? ['-ex', `add-symbol-file ${exe}`] : []), '-x', script], { encoding: 'utf8', timeout: 120_000, maxBuffer: 64 << 20 });
      const line = g.stdout.split('\n').find((l) => l.startsWith('GDB-JSON '));
      expect(line, g.stdout + g.stderr).toBeDefined();
      gdb = JSON.parse(line!.slice('GDB-JSON '.length)) as typeof gdb;
    } finally {
      process.kill(pid, 'SIGCONT');
    }

    // Recorded with --native while the parked threads wait: a thread blocked in the kernel whose
    // stack unwinds from the pointers its syscall file gives (no rbp) is copied without a stop
    // (native-recorder.ts, holdNeeded). The threads parked in threading's waits (a futex) are
    // on every version here; each parked thread's every sample, stopped or not, is its dump.
    const capture = path.join(dir, `${py.label}.pyuw`);
    let recorded: ReturnType<typeof spawnSync>;
    try {
      recorded = spawnSync(process.execPath, [BIN, 'record', '-q', '--native', '-r', '200', '-d', '1', '--pid', String(pid), '-o', capture], { encoding: 'utf8', timeout: 120_000 });
    } finally {
      child.stdin!.end();
    }
    expect(recorded.status, String(recorded.stderr)).toBe(0);
    const quiet = new Map<number, { stopped: number; quiet: number }>();
    for (const b of readCaptureBytes(fs.readFileSync(capture)).blocks()) {
      for (const smp of b.samples) {
        const n = quiet.get(Number(smp.nativeThreadId)) ?? { stopped: 0, quiet: 0 };
        if (smp.flags & SAMPLE_FLAG.STOPPED) n.stopped++;
        else n.quiet++;
        quiet.set(Number(smp.nativeThreadId), n);
      }
    }
    for (const s of said.filter((x) => x.kind === 'parked')) {
      const n = quiet.get(s.native_id);
      expect(n, s.thread).toBeDefined();
      if (s.thread === 'sorter' || s.thread === 'qsorter') expect(n, s.thread).toEqual({ stopped: 0, quiet: n!.quiet });
      expect(n!.quiet + n!.stopped, s.thread).toBeGreaterThan(0);
      const t = dumped.threads.find((x) => x.nativeThreadId === s.native_id)!;
      const rep = spawnSync(process.execPath, [BIN, 'report', '--native', '--format', 'collapsed', '--thread', String(s.native_id), capture], { encoding: 'utf8', timeout: 120_000, maxBuffer: 64 << 20 });
      expect(rep.status, rep.stderr).toBe(0);
      const lines = rep.stdout.trim().split('\n');
      // one stack in every sample: the dump's, frame by frame (C by name or address, Python by name)
      expect(lines.length, rep.stdout).toBe(1);
      const frames = lines[0]!.slice(0, lines[0]!.lastIndexOf(' ')).split(';').slice(1).map((f) => f.replace(/ \(.*\)$/, ''));
      const fromDump = [...t.stack!].reverse().map((f) => (f.native ? (f.name ?? null) : f.qualname!));
      expect(frames.map((f, i) => (fromDump[i] === null ? null : f)), s.thread).toEqual(fromDump);
    }

    for (const s of said) {
      const t = dumped.threads.find((x) => x.nativeThreadId === s.native_id);
      expect(t, `thread ${s.thread}`).toBeDefined();
      expect(t!.status, s.thread).toMatch(/^complete/);
      expect(t!.nativeStatus, `${s.thread}: ${JSON.stringify(t!.nativeFrames)}`).toBe('mixed');
      // the native chain is gdb's
      const g = gdb.find((x) => x.tid === s.native_id)!;
      expect(t!.nativeFrames!.map((f) => f.pc), s.thread).toEqual(g.frames.map((f) => f.pc));
      // (one function, where the two name it by different aliases: __libc_read, __GI___libc_read)
      const ours = t!.nativeFrames!.map((f, i) => {
        const gdbName = plain(g.frames[i]!.name);
        const name = plain(f.name);
        if (name === gdbName || name === null || gdbName === null || f.object === null) return name;
        const both = aliases(f.object, BigInt(f.address) - (i > 0 ? 1n : 0n));
        return both.has(name) && both.has(gdbName) ? gdbName : name;
      });
      expect(ours, s.thread).toEqual(g.frames.map((f) => plain(f.name)));
      // the Python frames are the program's, outermost first; a parked thread waits inside
      const stack = t!.stack!;
      const python = stack.filter((f) => !f.native).reverse();
      const own = s.stack.map(([name, line]) => `${name}:${line}`);
      expect(python.slice(0, own.length).map((f) => `${f.qualname!.split('.').pop()}:${f.line}`), s.thread).toEqual(own);
      if (s.kind === 'running') expect(python.length, s.thread).toBe(own.length);
      // C is where the program calls it (innermost first: callee before caller)
      const order = stack.map((f) => (f.native ? `C ${plain(f.name ?? null)}` : `P ${f.qualname!.split('.').pop()}`));
      const at = (what: RegExp): number => order.findIndex((o) => what.test(o));
      if (s.thread === 'compress_loop') expect(at(/^C deflate$/), order.join(' < ')).toBeLessThan(at(/^P compress_loop$/));
      if (s.thread === 'hash_loop') expect(at(/^C SHA256/), order.join(' < ')).toBeLessThan(at(/^P hash_loop$/));
      if (s.thread === 'qsorter') {
        const q = at(/^C (__)?qsort(_r)?$/);
        expect(q, order.join(' < ')).toBeGreaterThan(at(/^P compare$/));
        expect(q, order.join(' < ')).toBeLessThan(at(/^P qsorter$/));
      }
      if (s.thread === 'sorter') {
        // the sort runs between sorter and its key (named where the interpreter keeps symbols)
        const key = at(/^P park_key$/);
        const caller = at(/^P sorter$/);
        expect(order.slice(key + 1, caller).some((o) => o.startsWith('C ')), order.join(' < ')).toBe(true);
        const sort = order.findIndex((o) => /^C (list_sort_impl|builtin_sorted|PyList_Sort)/.test(o));
        if (sort >= 0) expect(sort > key && sort < caller, order.join(' < ')).toBe(true);
      }
    }
    recordCoverage('native-dump', py.label, true);
  }, 240_000);
});
