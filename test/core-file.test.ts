// Core files as a memory source (src/record/core/core-file.ts), on real cores: a program parked
// with threads waiting, run with `ulimit -c unlimited`, is held by SIGSTOP and looked at; then
// SIGABRT ends it and the kernel writes its core:
// - the core's threads are the process's (/proc/PID/task), each with the stack pointer its
//   syscall file gave, and its instruction pointer (or 2 bytes before it: the kernel steps back
//   over the `syscall` instruction of a system call it will restart);
// - the bytes at each thread's stack pointer read from the core equal /proc/PID/mem's;
// - its mapped files name the interpreter's executable; its command is the program's name;
// - a damaged core (bytes changed in its headers and notes, or cut short) is refused with a
//   CoreError or read as far as it goes — never another exception.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { nativeInterpreters } from '../harness/interpreters.js';
import { CoreError, parseCore } from '../src/record/core/core-file.js';
import { parseSpPc } from '../src/record/linux/off-cpu.js';
import { readProcMaps } from '../src/record/linux/proc-maps.js';
import { cannotRun, recordCoverage, skipTest } from './helpers/coverage.js';
import { threadState, waitUntil } from './helpers/wait.js';
import { rng } from './helpers/rng.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pyunwind-core-'));
const children: ChildProcess[] = [];
afterAll(() => {
  for (const c of children) c.kill('SIGKILL');
  fs.rmSync(dir, { recursive: true, force: true });
});

const PROGRAM = `
import sys, threading
release = threading.Event()
ts = [threading.Thread(target=release.wait) for _ in range(2)]
for t in ts: t.start()
print("ready", flush=True)
sys.stdin.read()
release.set()
`;

describe.each(nativeInterpreters())('core files, $label', (py) => {
  if (py.missing) {
    cannotRun('core-file', py.label, py.missing!);
    return;
  }
  it('threads, registers, memory and files of a kernel-written core equal the stopped process’s', async (ctx) => {
    const cwd = path.join(dir, py.label);
    fs.mkdirSync(cwd, { recursive: true });
    const child = spawn('sh', ['-c', 'ulimit -c unlimited && exec "$0" -c "$1"', py.command, PROGRAM], { cwd, stdio: ['pipe', 'pipe', 'inherit'] });
    children.push(child);
    let out = '';
    child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    await waitUntil(() => out.includes('ready'), 'the program to start its threads', 60_000);
    const pid = child.pid!;
    const tids = (): number[] => fs.readdirSync(`/proc/${pid}/task`).map(Number).sort((a, b) => a - b);
    await waitUntil(() => tids().every((t) => threadState(pid, t) === 'S'), 'every thread to wait');
    process.kill(pid, 'SIGSTOP');
    try {
      await waitUntil(() => tids().every((t) => threadState(pid, t) === 'T'), 'the program to stop');
      // what the kernel says of each blocked thread, its stack's bytes, and the maps
      const threads = tids();
      const said = new Map(threads.map((t) => [t, parseSpPc(fs.readFileSync(`/proc/${pid}/task/${t}/syscall`, 'latin1'))]));
      const live = new Map<number, Buffer>();
      const mem = fs.openSync(`/proc/${pid}/mem`, 'r');
      for (const [t, k] of said) {
        const b = Buffer.alloc(256);
        if (k) fs.readSync(mem, b, 0, 256, k.sp);
        live.set(t, b);
      }
      fs.closeSync(mem);
      const exe = readProcMaps(pid).find((m) => m.perms[2] === 'x' && /\/python3\.\d+$/.test(m.path))!.path;
      const name = path.basename(fs.realpathSync(`/proc/${pid}/exe`)).slice(0, 15);
      const ended = new Promise((r) => child.once('exit', r));
      process.kill(pid, 'SIGABRT');
      process.kill(pid, 'SIGCONT');
      await ended;
      const file = fs.readdirSync(cwd).find((f) => f === 'core' || f === `core.${pid}`);
      if (!file) skipTest(ctx, 'core-file', py.label, `no core written (/proc/sys/kernel/core_pattern is ${fs.readFileSync('/proc/sys/kernel/core_pattern', 'utf8').trim()})`);
      const bytes = fs.readFileSync(path.join(cwd, file!));
      const core = parseCore(bytes, file);
      expect(core.pid).toBe(pid);
      expect(core.threads.map((t) => t.tid).sort((a, b) => a - b)).toEqual(threads);
      for (const t of core.threads) {
        const k = said.get(t.tid);
        expect(k, `thread ${t.tid}`).toBeTruthy();
        expect(t.registers.rsp, `thread ${t.tid}`).toBe(k!.sp);
        expect([k!.pc, k!.pc - 2n], `thread ${t.tid}`).toContain(t.registers.rip);
        const fromCore = core.read(t.registers.rsp, 256);
        expect(fromCore, `thread ${t.tid}: its stack is in the core`).not.toBeNull();
        expect(Buffer.from(fromCore!).equals(live.get(t.tid)!), `thread ${t.tid}`).toBe(true);
      }
      expect(core.files.some((f) => f.path === exe), core.files.map((f) => f.path).join('\n')).toBe(true);
      expect(core.command?.name).toBe(name);

      // damaged: bytes changed where the headers and notes are, or the file cut short
      const notesEnd = Math.min(bytes.length, 1 << 16);
      const rand = rng(pid);
      for (let i = 0; i < 300; i++) {
        const b = Uint8Array.from(bytes.subarray(0, i % 3 === 0 ? Math.floor(rand() * notesEnd) : notesEnd));
        for (let k = 0; k < 8; k++) b[Math.floor(rand() * b.length)] = Math.floor(rand() * 256);
        try {
          const c = parseCore(b);
          for (const t of c.threads) c.read(t.registers.rsp, 64);
        } catch (e) {
          expect(e, String(e)).toBeInstanceOf(CoreError);
        }
      }
      fs.rmSync(path.join(cwd, file!));
    } finally {
      // (ended already, unless a check above failed first)
      if (child.exitCode === null && child.signalCode === null) {
        process.kill(pid, 'SIGCONT');
        child.stdin!.end();
      }
    }
    recordCoverage('core-file', py.label, true);
  }, 240_000);
});
