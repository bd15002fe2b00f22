// The C stack in the proof of a copy (CPython 3.15+; consistency.ts, CStack). A copy made while
// the thread runs is proven by the profiler anchor only where the anchor names a Python frame;
// an entry frame the anchor was left on, or the entry frame that is current between its Python
// frame's return and its own, lies on the C stack, whose slots the thread re-uses at once: a
// copy of one may show any bytes. Seen: a sample rejected as corrupt once in ~40,000 (a thread
// pool on 3.15 at 2 kHz) — copies proven by an anchor left on a dead entry frame whose slot read
// as a Python frame, or with an entry frame as the current frame whose owner byte read 98.
//
// On real memory (test/fixtures/entry_frames.py: two threads, each inside a function map()
// called): (1) the thread state's C-stack fields, read through the layout, give each thread's
// stack as /proc/PID/maps has it, with every entry frame on it and no Python frame; (2) the
// copier, reading through a source that shows those two torn readings of an entry frame (the
// rest of the memory real), does not call such a copy proven — and does, with the entry frame
// read as what it is.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openLinuxProcess } from '../src/record/linux/process.js';
import { MemoryCopier } from '../src/record/copy/copier.js';
import { cStackOf, onCStack, tstateCopyEnd } from '../src/record/copy/consistency.js';
import { liveThreadStates } from '../src/record/copy/thread-list.js';
import { readPointer } from '../src/walk/region-memory.js';
import { chainOf, patchedSource, word } from './helpers/patched-source.js';
import { recordCoverage, cannotRun } from './helpers/coverage.js';
import { nativeInterpreters } from '../harness/interpreters.js';
import { spawnInteractive, type Interactive } from '../harness/spawn.js';

const PROGRAM = path.resolve('test/fixtures/entry_frames.py');
const running: Interactive[] = [];
afterAll(() => running.forEach((p) => p.kill()));

const targets = nativeInterpreters().filter((p) => /^debian-3\.(1[5-9])$/.test(p.label));

describe.each(targets)('the C stack in the proof of a copy, $label', (py) => {
  if (py.missing) {
    cannotRun('c-stack', py.label, py.missing!);
    return;
  }

  it('the thread state gives each thread its C stack: every entry frame on it, no Python frame', async () => {
    const p = spawnInteractive(py.command, [PROGRAM]);
    running.push(p);
    await p.waitFor('READY');
    const source = openLinuxProcess(p.pid);
    const L = source.layout;
    const P = L.pointerSize;
    expect(L.tstate.cStack, 'the layout places the C stack fields').not.toBeNull();
    const maps = fs
      .readFileSync(`/proc/${p.pid}/maps`, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => {
        const [lo, hi] = l.split(' ')[0]!.split('-').map((h) => Number.parseInt(h, 16));
        return { lo: lo!, hi: hi!, stack: l.endsWith('[stack]') };
      });
    const threads = liveThreadStates(source, L);
    expect(threads.length).toBe(2);
    let entries = 0;
    let pythons = 0;
    for (const tstate of threads) {
      // (the worker may still be on its way into waiter(): wait until both are in place)
      let chain = chainOf(source, L, tstate);
      for (let i = 0; i < 200 && chain.filter((f) => f.owner === L.owners.interpreter).length < 2; i++) {
        await new Promise((r) => setTimeout(r, 10));
        chain = chainOf(source, L, tstate);
      }
      const head = source.read(tstate, L.tstate.baseFrame! + P);
      const base = readPointer(head, L.tstate.baseFrame!, P);
      const ts = source.read(tstate, tstateCopyEnd(L, Number(base - tstate)));
      const c = cStackOf(L, ts, tstate);
      expect(c, `thread state 0x${tstate.toString(16)}: C stack fields`).not.toBeNull();
      // its top is in a mapping of the thread's stack, its limit in the same one (a thread's
      // stack is one mapping; the main thread's [stack] grows down as it is used: only its top)
      const top = maps.find((m) => c!.high - 1 >= m.lo && c!.high - 1 < m.hi);
      expect(top, 'the top of the C stack is mapped').toBeDefined();
      if (!top!.stack) expect(c!.low + (c!.high - c!.low) / 2 >= top!.lo && c!.low >= top!.lo - (1 << 16)).toBe(true);
      for (const f of chain) {
        if (f.address === base) {
          expect(onCStack(c, Number(f.address)), 'the base frame is in the thread state').toBe(false);
        } else if (f.owner === L.owners.interpreter) {
          entries++;
          expect(onCStack(c, Number(f.address)), `entry frame 0x${f.address.toString(16)}`).toBe(true);
        } else {
          pythons++;
          expect(onCStack(c, Number(f.address)), `Python frame 0x${f.address.toString(16)}`).toBe(false);
        }
      }
    }
    // (each thread: <module> or a thread's bootstrap frames, map()'s entry frame, the callee)
    expect(entries).toBeGreaterThanOrEqual(2);
    expect(pythons).toBeGreaterThanOrEqual(4);
    p.send('');
    recordCoverage('c-stack', `${py.label} the C stack of each thread`, true);
  });

  it('an anchor left on an entry frame, or an entry frame current, read torn: never proven', async () => {
    const p = spawnInteractive(py.command, [PROGRAM]);
    running.push(p);
    await p.waitFor('READY');
    const real = openLinuxProcess(p.pid);
    const L = real.layout;
    const P = L.pointerSize;
    const patches = new Map<bigint, Uint8Array>();
    const source = patchedSource(real, patches);
    // the main thread is in reader(), blocked on stdin: its stack stands still (the worker's
    // innermost frames are Event.wait()'s)
    const main = liveThreadStates(real, L).find((t) => chainOf(real, L, t)[1]?.owner === L.owners.interpreter)!;
    expect(main, 'a thread inside the function map() called').toBeDefined();
    const chain = chainOf(real, L, main);
    const [callee, entry, caller] = chain;
    expect(callee!.owner).toBe(L.owners.thread);
    expect(entry!.owner).toBe(L.owners.interpreter);
    expect(caller!.owner).toBe(L.owners.thread);
    const copier = new MemoryCopier(source, { consistency: 'anchor', steady: false, retries: 0 });
    const copyMain = () => copier.copyAll().find((s) => s.threadStateAddress === main)!;
    const setAnchor = (f: bigint) => real.write!(main + BigInt(L.tstate.lastProfiledFrame!), word(f, P));
    try {
      copyMain(); // leaves the anchor on reader()'s frame
      expect(copyMain().unproven, 'the anchor on the current frame proves the copy').toBe(false);

      // reader() returned to map(): the interpreter moved the anchor to the entry frame below
      // it, which was then popped and its slot re-used — read as a frame of a thread, cleared
      setAnchor(entry!.address);
      const dead = new Uint8Array(L.frame.size);
      dead[L.frame.owner] = L.owners.thread;
      patches.set(entry!.address, dead);
      expect(copyMain().unproven, 'an anchor on the C stack read as a Python frame').toBe(true);
      patches.clear();
      // (the copier anchored reader() again from that torn chain, which ended at the entry
      // frame: trusting the interpreter's moves below it takes an anchor written from a whole
      // one — cleared, the copier writes it again)
      setAnchor(0n);
      copyMain();
      expect(copyMain().unproven, 'the copier\'s anchor on reader() again').toBe(false);

      // the entry frame current (between reader()'s return and map()'s), its slot read torn:
      // the caller's anchor unmoved, the entry frame's owner byte of a later moment
      const showCurrent = (owner: number) => {
        patches.set(main + BigInt(L.tstate.currentFrame), word(entry!.address, P));
        patches.set(entry!.address + BigInt(L.frame.owner), Uint8Array.of(owner));
      };
      setAnchor(caller!.address);
      showCurrent(98);
      expect(copyMain().unproven, 'a current entry frame read torn above an anchored caller').toBe(true);
      // ... and read as an entry frame: the walk skips it, the caller's stack is proven
      setAnchor(caller!.address);
      showCurrent(L.owners.interpreter!);
      expect(copyMain().unproven, 'a current entry frame read whole above an anchored caller').toBe(false);
    } finally {
      patches.clear();
      copier.clearAnchors();
      p.send('');
    }
    recordCoverage('c-stack', `${py.label} torn entry frames unproven`, true);
  });
});
