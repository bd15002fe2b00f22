// Waiting in tests on what is expected to happen, never for a fixed time: on a busy machine a
// process takes as long as it takes to start.
import fs from 'node:fs';
import { openLinuxProcess } from '../../src/record/linux/process.js';

/** Resolves once `ok()` holds (checked every 10 ms); rejects naming `what` after `timeoutMs`. */
export async function waitUntil(ok: () => boolean, what: string, timeoutMs = 30_000): Promise<void> {
  const until = performance.now() + timeoutMs;
  while (!ok()) {
    if (performance.now() > until) throw new Error(`waited ${timeoutMs} ms for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Resolves once process `pid` is a CPython pyunwind can read (its runtime found). */
export function untilReadable(pid: number, timeoutMs = 30_000): Promise<void> {
  return waitUntil(
    () => {
      try {
        openLinuxProcess(pid).close();
        return true;
      } catch {
        return false;
      }
    },
    `pid ${pid} to be a readable CPython`,
    timeoutMs,
  );
}

/** Resolves once process `pid` runs the program `name` (its exec is done). */
export function untilRunning(pid: number, name: string, timeoutMs = 30_000): Promise<void> {
  return waitUntil(
    () => {
      try {
        return fs.readlinkSync(`/proc/${pid}/exe`).endsWith(`/${name}`);
      } catch {
        return false;
      }
    },
    `pid ${pid} to run ${name}`,
    timeoutMs,
  );
}

/** Thread `tid` of process `pid`: its kernel state letter (R running, S sleeping, t/T stopped…), or ? when it is gone. */
export function threadState(pid: number, tid: number): string {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
  } catch {
    return '?';
  }
}

/** Stop every thread of process `pid` (SIGSTOP) and resolve once each is seen stopped, so that its memory holds still. */
export async function freeze(pid: number): Promise<void> {
  process.kill(pid, 'SIGSTOP');
  // (a thread that ended meanwhile reads '?')
  await waitUntil(() => fs.readdirSync(`/proc/${pid}/task`).every((t) => ['T', '?'].includes(threadState(pid, Number(t)))), `pid ${pid} stopped`);
}
