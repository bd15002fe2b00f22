// The kernel's word that a thread did not run while it was copied (src/record/linux/off-cpu.ts):
// a thread blocked in a system call is marked, and stays "still off" while it sleeps; a running
// thread cannot be marked; a thread that woke after its mark is not "still off". On real
// processes (a Python that sleeps, one that spins, one that naps a millisecond at a time).
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { OffCpuWatch, parseSpPc } from '../src/record/linux/off-cpu.js';
import { nativeInterpreters } from '../harness/interpreters.js';
import { waitUntil } from './helpers/wait.js';
import { cannotRun } from './helpers/coverage.js';

const children: ChildProcess[] = [];
afterAll(() => children.forEach((c) => c.kill('SIGKILL')));

const py = nativeInterpreters().find((p) => !p.missing);

/** A Python running `code`, once it has printed its first line. */
async function python(code: string): Promise<number> {
  const child = spawn(py!.command, ['-c', code], { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  await new Promise<void>((resolve, reject) => {
    child.stdout!.once('data', () => resolve());
    child.once('exit', (c) => reject(new Error(`python exited ${c}`)));
  });
  return child.pid!;
}

const state = (pid: number): string => {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'latin1');
  return stat[stat.lastIndexOf(')') + 2]!;
};

if (!py) {
  describe('the off-CPU proof', () => cannotRun('off-cpu', 'any interpreter', 'no native interpreter'));
} else {
  describe('the off-CPU proof', () => {
    it('marks a sleeping thread, which stays off its CPU while it sleeps', async () => {
      const pid = await python('import time; print("up", flush=True); time.sleep(60)');
      await waitUntil(() => state(pid) === 'S', 'the program asleep');
      const watch = OffCpuWatch.open(pid);
      expect(watch, 'this kernel tells run counts and system calls').not.toBeNull();
      const mark = watch!.mark(pid);
      expect(mark).not.toBeNull();
      await new Promise((r) => setTimeout(r, 20));
      expect(watch!.stillOff(pid, mark!)).toBe(true);
      watch!.close();
    });

    it('does not mark a running thread', async () => {
      const pid = await python('print("up", flush=True)\nwhile True: pass');
      const watch = OffCpuWatch.open(pid)!;
      // (a spinning thread is running or runnable: never blocked in a system call)
      for (let i = 0; i < 200; i++) expect(watch.mark(pid)).toBeNull();
      watch.close();
      process.kill(pid, 'SIGKILL');
    });

    it('a thread that woke after its mark is not still off', async () => {
      const pid = await python('import time; print("up", flush=True)\nwhile True: time.sleep(0.001)');
      const watch = OffCpuWatch.open(pid)!;
      let marked = 0;
      // (on a loaded machine a woken thread may wait for a CPU, runnable: then it is not marked)
      const until = Date.now() + 20_000;
      while (marked < 20 && Date.now() < until) {
        const mark = watch.mark(pid);
        if (mark === null) {
          await new Promise((r) => setTimeout(r, 1));
          continue;
        }
        marked++;
        // it naps a millisecond at a time: 10 ms later it has woken several times
        await new Promise((r) => setTimeout(r, 10));
        expect(watch.stillOff(pid, mark)).toBe(false);
      }
      expect(marked).toBe(20);
      watch.close();
    });
  });
}

describe('a syscall file’s stack and instruction pointers (native copies without a stop)', () => {
  it('reads the last two fields of a blocked thread’s line, and nothing else', () => {
    expect(parseSpPc('202 0x7f01 0x80 0x0 0x0 0x0 0x0 0x7ffc5a3e8f10 0x7f3d2c91e3a6\n')).toEqual({ sp: 0x7ffc5a3e8f10n, pc: 0x7f3d2c91e3a6n });
    expect(parseSpPc('-1 0x7ffc5a3e8f10 0x401000\n')).toEqual({ sp: 0x7ffc5a3e8f10n, pc: 0x401000n });
    for (const bad of ['running\n', '', '202 0x1 0x2', '-1 0x7ffc zz', '-1 0x12345678901234567 0x1', '0 0x1 0x2 0x3 0x4 0x5 0x6 0x7 0x8 0x9']) expect(parseSpPc(bad), bad).toBeNull();
  });
});
