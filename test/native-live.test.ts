// Live native interpreters: a program with a known stack (test/fixtures/known_stack.py) stops
// at a checkpoint; pyunwind copies its memory through /proc/PID/mem and the stack of each
// thread, walked by both walkers and symbolized, must equal frame by frame (qualname,
// filename, line) what the program reported about itself with traceback.extract_stack().
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openLinuxProcess } from '../src/record/linux/process.js';
import { takeSnapshot, snapshotSamples } from '../src/record/copy/snapshot.js';
import { unwindSnapshot } from '../src/pipeline/snapshot-stacks.js';
import { recordCoverage, cannotRun } from './helpers/coverage.js';
import { nativeInterpreters } from '../harness/interpreters.js';
import { spawnUntilReady, type ReportedStack, type Spawned } from '../harness/spawn.js';
import { checkedWalker } from './helpers/walkers.js';

const KNOWN_STACK = path.resolve('test/fixtures/known_stack.py');
// A thread that runs a C function (time.sleep) from its start has a thread state and no
// Python frame: it must come out `idle`.
const IDLE_THREAD = `
import _thread, time
_thread.start_new_thread(time.sleep, (1000,))
while _thread._count() < 1:  # the thread counts itself once it runs, bound to its state
    time.sleep(0.001)
print("READY", flush=True)
time.sleep(1000)
`;

const spawned: Spawned[] = [];
afterAll(() => spawned.forEach((s) => s.kill()));

describe.each(nativeInterpreters())('live $label', (py) => {
  if (py.missing) {
    cannotRun('native-live', py.label, py.missing);
    return;
  }

  it('unwinds every thread exactly as the program reports it', async () => {
    const target = await spawnUntilReady(py.command, [KNOWN_STACK]);
    spawned.push(target);
    const reported = target.lines as ReportedStack[];
    expect(reported.map((r) => r.name).sort()).toEqual(['MainThread', 'known-worker']);

    const source = openLinuxProcess(target.pid);
    const snapshot = takeSnapshot(source);
    source.close();
    const stacks = unwindSnapshot(snapshotSamples(snapshot), await checkedWalker());
    const trustedStatus = snapshot.layout.bottom === 'base-frame' ? 'complete' : 'complete-unverifiable';

    for (const r of reported) {
      const t = stacks.find((s) => s.nativeThreadId === BigInt(r.thread));
      expect(t, `thread ${r.name} (native id ${r.thread}) not found in the snapshot`).toBeDefined();
      expect(t!.copyErrors).toEqual([]);
      expect(t!.status, `${r.name}: ${t!.status} at 0x${t!.walk.failAddress.toString(16)}`).toBe(trustedStatus);
      expect(t!.threadId).toBe(BigInt(r.ident));
      const ours = t!.frames.map((f) => ({ qualname: f.qualname, filename: f.filename, line: f.line })).reverse();
      const theirs = r.stack.map((f) => ({ qualname: f.qualname, filename: f.filename, line: f.line }));
      expect(ours).toEqual(theirs);
    }
    const main = reported.find((r) => r.name === 'MainThread')!;
    const names = main.stack.map((f) => f.qualname);
    // the shape the test relies on is really there
    expect(names.filter((n) => n === 'recurse').length).toBeGreaterThanOrEqual(30);
    for (const n of ['gen_for', 'gen_next', 'coro_outer', 'coro_inner', 'Climber.method', 'outer.<locals>.inner', 'größe_函数', '<lambda>']) {
      expect(names).toContain(n);
    }
    recordCoverage('native-live', `${py.label} (${snapshot.description})`, true);
  });

  it('unwinds a stack 2000 frames deep, across many data-stack chunks', async () => {
    const target = await spawnUntilReady(py.command, [KNOWN_STACK, '2000']);
    spawned.push(target);
    const reported = target.lines as ReportedStack[];
    const source = openLinuxProcess(target.pid);
    const snapshot = takeSnapshot(source);
    source.close();
    const stacks = unwindSnapshot(snapshotSamples(snapshot), await checkedWalker());
    const main = reported.find((r) => r.name === 'MainThread')!;
    const t = stacks.find((s) => s.nativeThreadId === BigInt(main.thread))!;
    expect(t.status).toBe(snapshot.layout.bottom === 'base-frame' ? 'complete' : 'complete-unverifiable');
    expect(t.frames.map((f) => ({ qualname: f.qualname, filename: f.filename, line: f.line })).reverse()).toEqual(
      main.stack.map((f) => ({ qualname: f.qualname, filename: f.filename, line: f.line })),
    );
    expect(main.stack.length).toBeGreaterThan(2000);
    // the copy holds several data-stack chunks (16 KiB each on 3.11–3.15)
    const regions = snapshot.threads.find((s) => s.threadStateAddress === t.threadStateAddress)!.regions;
    expect(regions.filter((r) => r.bytes.length > 4096).length).toBeGreaterThan(3);
  });

  it('reports a thread with no Python frame as idle', async () => {
    const target = await spawnUntilReady(py.command, ['-c', IDLE_THREAD]);
    spawned.push(target);
    const source = openLinuxProcess(target.pid);
    const stacks = unwindSnapshot(snapshotSamples(takeSnapshot(source)), await checkedWalker());
    source.close();
    expect(stacks).toHaveLength(2);
    const statuses = stacks.map((s) => s.status).sort();
    const trusted = source.layout.bottom === 'base-frame' ? 'complete' : 'complete-unverifiable';
    expect(statuses).toEqual([trusted, 'idle'].sort());
    const idle = stacks.find((s) => s.status === 'idle')!;
    expect(idle.frames).toEqual([]);
    const main = stacks.find((s) => s.status !== 'idle')!;
    expect(main.frames.map((f) => f.qualname)).toEqual(['<module>']);
  });
});
