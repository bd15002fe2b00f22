// A copy that uses what the pass read for it (src/record/copy/thread-copy.ts, copyThread's
// `prefetched`) takes each range's bytes by its place in the plan. When the thread's plan
// changed after the pass read it — another copy of the thread in the same pass learned other
// frames outside its chunks, as many as before — those places name other addresses: the copy
// must read again, not give one frame's bytes to another address. (Found on 3.13 with --copy
// interrupt: a generator's frame with the bytes of the thread's bottom entry frame, a stack
// cut to its innermost function, accepted as complete.)
//
// On a real program, frozen: its main thread sleeps inside a generator driven from C inside
// another (frames outside the data stack: the generators', and from 3.12 entry frames on the C
// stack). A first copy
// learns the plan; the pass's read of that plan is kept; the plan's frames outside are then
// put in another order (the same count: the read still fits by length). The copy made with
// the kept read must hold, at every address, the program's bytes there.
import { spawn, type ChildProcess } from 'node:child_process';
import { afterAll, describe, expect, it } from 'vitest';
import { nativeInterpreters } from '../harness/interpreters.js';
import { openLinuxProcess } from '../src/record/linux/process.js';
import { liveThreadStates } from '../src/record/copy/thread-list.js';
import { CodeCache } from '../src/record/copy/code-cache.js';
import { newThreadCache } from '../src/record/copy/thread-cache.js';
import { copyThread, planOf, type CopyContext } from '../src/record/copy/thread-copy.js';
import { readMany } from '../src/record/copy/source.js';
import { readPointer } from '../src/walk/region-memory.js';
import { cannotRun } from './helpers/coverage.js';
import { freeze, waitUntil } from './helpers/wait.js';

const running: ChildProcess[] = [];
afterAll(() => running.forEach((p) => p.kill('SIGKILL')));

const PROGRAM = `
import sys, time
def inner():
    print("in", flush=True)
    yield time.sleep(600)
def outer():
    yield sum(inner())
sum(outer())
`;

describe.each(nativeInterpreters())('a copy with the pass\'s read of a plan that changed since, $label', (py) => {
  if (py.missing) {
    cannotRun('copy-plan', py.label, py.missing!);
    return;
  }
  it('reads again: every region holds the program\'s bytes at its address', async () => {
    const child = spawn(py.command, ['-c', PROGRAM], { stdio: ['ignore', 'pipe', 'inherit'] });
    running.push(child);
    let out = '';
    child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    await waitUntil(() => out.includes('in'), 'the program in its generator');
    const pid = child.pid!;
    await freeze(pid);
    const source = openLinuxProcess(pid);
    try {
      const L = source.layout;
      const [tstate] = liveThreadStates(source, L);
      const interp = readPointer(source.read(tstate!, L.tstate.size), L.tstate.interp, L.pointerSize);
      const ctx: CopyContext = {
        source,
        layout: L,
        codes: new CodeCache(source, L, false),
        maxFrames: 8192,
        tstateMin: L.tstate.size,
        tstateCheck: [],
        consistency: 'reread',
        frozen: false,
        canStop: false,
        trustAgreement: false,
        gilRange: () => null,
        reached: () => {},
        writeAnchor: () => {},
      };
      const cache = newThreadCache(L.tstate.size);
      // (the first copies learn the plan: the chunks, the frames outside them)
      copyThread(ctx, cache, interp, 0n, tstate!, true);
      copyThread(ctx, cache, interp, 0n, tstate!, true);
      expect(cache.outside.length, 'frames outside the data stack: the generators\', entry frames').toBeGreaterThanOrEqual(2);
      const plan = planOf(ctx, tstate!, interp, cache, false);
      const kept = { plan, got: readMany(source, plan), tstateAt: plan.findIndex((r) => r.address === tstate) };
      // another copy learned the same number of frames outside, at other places in the list
      cache.outside = [...cache.outside].reverse();
      const copy = copyThread(ctx, cache, interp, 0n, tstate!, true, kept);
      expect(copy.snap.errors).toEqual([]);
      // (a copy keeps frame headers: the rest of a frame's region is zeros)
      let compared = 0;
      for (const f of cache.outside) {
        const r = copy.snap.regions.find((x) => x.address === f);
        expect(r, `frame 0x${f.toString(16)} copied on its own`).toBeDefined();
        const header = L.frame.localsplus;
        expect(Buffer.from(r!.bytes.subarray(0, header)).equals(Buffer.from(source.read(f, header))), `frame 0x${f.toString(16)}: its copy holds the program's bytes there`).toBe(true);
        compared++;
      }
      expect(compared).toBeGreaterThanOrEqual(2);
    } finally {
      source.close();
      process.kill(pid, 'SIGCONT');
      child.kill('SIGKILL');
    }
  });
});
