// What the copy's proof rests on, checked on the interpreter itself (consistency.ts
// anchorProves): CPython 3.15+ moves the profiler anchor (last_profiled_frame), and bumps its
// sequence, whenever the frame it names is popped — by a return, by an exception unwinding
// through it — or suspended by a yield, whether the generator was driven from C (next(): an
// entry frame below it) or from Python (yield from). And the hole the proof steps around: an
// entry frame as the anchor is popped without moving it.
//
// test/fixtures/anchor_moves.py stops at known points (inside a C call made from the frame
// under test); the test writes the anchor there, lets the program go on, and reads it at the
// next point.
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openLinuxProcess, type LinuxProcessSource } from '../src/record/linux/process.js';
import { readPointer } from '../src/walk/region-memory.js';
import { nativeInterpreters } from '../harness/interpreters.js';
import { spawnInteractive, type Interactive } from '../harness/spawn.js';
import { recordCoverage, cannotRun } from './helpers/coverage.js';

const PROGRAM = path.resolve('test/fixtures/anchor_moves.py');
const running: Interactive[] = [];
afterAll(() => running.forEach((p) => p.kill()));

/** The single thread's state address, and readers of its fields and of frames. */
function thread(source: LinuxProcessSource) {
  const L = source.layout;
  const P = L.pointerSize;
  const ptr = (a: bigint): bigint => readPointer(source.read(a, P), 0, P);
  const interp = ptr(source.runtimeAddress + BigInt(L.runtime.interpretersHead));
  const tstate = ptr(interp + BigInt(L.interp.threadsHead));
  return {
    current: () => ptr(tstate + BigInt(L.tstate.currentFrame)),
    anchor: () => ptr(tstate + BigInt(L.tstate.lastProfiledFrame!)),
    seq: () => ptr(tstate + BigInt(L.tstate.lastProfiledFrameSeq!)),
    previous: (frame: bigint) => ptr(frame + BigInt(L.frame.previous)),
    owner: (frame: bigint) => source.read(frame + BigInt(L.frame.owner), 1)[0]!,
    setAnchor: (frame: bigint) => {
      const word = new Uint8Array(8);
      new DataView(word.buffer).setBigUint64(0, frame, true);
      source.write!(tstate + BigInt(L.tstate.lastProfiledFrame!), word.subarray(0, P));
    },
  };
}

const anchored = nativeInterpreters().filter((p) => /^debian-3\.1[5-9]/.test(p.label));

describe.each(anchored)('the profiler anchor moves, $label', (py) => {
  if (py.missing) {
    cannotRun('anchor-invariant', py.label, py.missing!);
    return;
  }
  it('when its frame returns, raises, yields to C or to Python — not when its entry frame is popped', async () => {
    const p = spawnInteractive(py.command, [PROGRAM]);
    running.push(p);
    await p.waitFor('in-returns');
    const source = openLinuxProcess(p.pid);
    const L = source.layout;
    const t = thread(source);
    const python = (f: bigint) => t.owner(f) === L.owners.thread || t.owner(f) === L.owners.generator;
    try {
      /**
       * At a point inside wait(): anchor the frame that called wait(), go on to `next`, and
       * say where the anchor is then (and whether its sequence moved).
       */
      const step = async (next: string, pick: (waiter: bigint) => bigint = (w) => t.previous(w)) => {
        const waiter = t.current();
        expect(python(waiter), 'the current frame is wait()').toBe(true);
        const frame = pick(waiter);
        const caller = t.previous(frame);
        const below = t.previous(caller);
        t.setAnchor(frame);
        const seq = t.seq();
        p.send('');
        await p.waitFor(next);
        return { frame, caller, below, anchor: t.anchor(), bumped: Number(t.seq() - seq) };
      };

      // a return: the anchor moves to the caller (main)
      const returned = await step('after-returns');
      expect(returned).toMatchObject({ anchor: returned.caller, bumped: 1 });
      p.send('');
      await p.waitFor('in-raises');
      // an exception unwinding through the frame: likewise
      const raised = await step('after-raises');
      expect(raised).toMatchObject({ anchor: raised.caller, bumped: 1 });
      p.send('');
      await p.waitFor('in-gen');
      // a yield to C (next()): the anchor moves to the entry frame below the generator
      const yielded = await step('after-yield');
      expect(python(yielded.caller), 'next() entered the generator through an entry frame').toBe(false);
      expect(yielded).toMatchObject({ anchor: yielded.caller, bumped: 1 });
      p.send('');
      await p.waitFor('in-gen-again');
      // the hole: the entry frame below the running generator, anchored, is popped (next()
      // returns) without the anchor moving — which is why an entry frame proves nothing
      const entry = await step('after-entry', (w) => t.previous(t.previous(w)));
      expect(python(entry.frame)).toBe(false);
      expect(entry).toMatchObject({ anchor: entry.frame, bumped: 0 });
      p.send('');
      await p.waitFor('in-inner');
      // a yield to Python (yield from): the anchor moves to delegate()'s frame, which yields
      // in turn (to next(), from C): moved twice, to the entry frame below delegate()
      const delegated = await step('after-yield-from');
      expect(python(delegated.caller), 'inner() is linked to delegate() directly').toBe(true);
      expect(delegated).toMatchObject({ anchor: delegated.below, bumped: 2 });
      t.setAnchor(0n);
      p.send('');
      await p.waitFor('done');
      recordCoverage('anchor-invariant', py.label, true);
    } finally {
      source.close();
    }
  });
});
