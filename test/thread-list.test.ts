// The thread list is read while threads start and end. CPython links a new thread's state into
// its interpreter's list before the thread runs and fills in its ids (thread_id, then
// native_thread_id) as it starts; it unlinks and frees a thread's state as it ends. A copy of
// the list can therefore meet a thread state with no ids yet, or one freed under it. Neither is
// a thread: the copier passes over the first and walks the list again from its head after the
// second. Shown here on a program that starts and joins threads all the time: every copied
// thread has its ids, and none is a thread state that could not be read.
import { spawn, type ChildProcess } from 'node:child_process';
import { afterAll, describe, expect, it } from 'vitest';
import { openLinuxProcess } from '../src/record/linux/process.js';
import { MemoryCopier } from '../src/record/copy/copier.js';
import { recordCoverage, cannotRun } from './helpers/coverage.js';
import { nativeInterpreters } from '../harness/interpreters.js';

const PROGRAM = `import threading, time
def work():
    x = 0
    for i in range(2000):
        x += i
print("ready", flush=True)
while True:
    ts = [threading.Thread(target=work) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
`;

const children: ChildProcess[] = [];
afterAll(() => children.forEach((c) => c.kill('SIGKILL')));

describe.each(nativeInterpreters())('threads that start and end while the list is read, $label', (py) => {
  if (py.missing) {
    cannotRun('thread-list', py.label, py.missing!);
    return;
  }
  it('copies only threads: each with its ids, none unreadable', async () => {
    const child = spawn(py.command, ['-c', PROGRAM], { stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(child);
    await new Promise<void>((resolve, reject) => {
      child.stdout!.once('data', () => resolve());
      child.once('exit', (c) => reject(new Error(`program exited ${c}`)));
    });
    const source = openLinuxProcess(child.pid!);
    const copier = new MemoryCopier(source, { consistency: 'reread' });
    let copies = 0;
    let threads = 0;
    const bad: string[] = [];
    try {
      const until = performance.now() + 1500;
      while (performance.now() < until) {
        copies++;
        for (const t of copier.copyAll()) {
          threads++;
          if (t.threadId === 0n || t.nativeThreadId === 0n) bad.push(`thread_id ${t.threadId}, native ${t.nativeThreadId}`);
          if (t.errors.some((e) => e.startsWith('thread state'))) bad.push(t.errors.join('; '));
        }
      }
    } finally {
      source.close();
      child.kill('SIGKILL');
    }
    console.log(`${py.label}: ${copies} copies of the thread list, ${threads} threads copied, ${bad.length} not threads`);
    recordCoverage('thread-list', py.label, true);
    // the list changed under the copies many times: the program starts 4 threads at a time
    expect(threads).toBeGreaterThan(copies);
    expect(bad.slice(0, 5)).toEqual([]);
  });
});
