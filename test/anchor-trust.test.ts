// Whose profiler anchor the copier trusts (CPython 3.15+; consistency.ts, AnchorTrust). The
// interpreter only moves the anchor from a frame being popped to its caller: from the frame
// pyunwind wrote down the chain it wrote it from. A value anywhere else was written by someone
// else — another profiler of the same process, whose write may name a frame that returned
// before it landed — and proves nothing, even where it names the current frame.
//
// On real memory (test/fixtures/two_waits.py: the main thread waits in inner(), then in
// outer(), then in inner() called from outer()): the copier anchors inner(); inner() returns,
// the interpreter moves the anchor to the module's frame, below the copier's own: trusted, the
// copies of outer() proven. Then, at inner() again, another writer sets the anchor to its frame
// — current and alive, but nothing the copier knows says it was when that write landed: the
// copy is unproven (it was proven before the rule), until the copier has written its own. Both
// with the general copy and with steady copies (which then make that copy).
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openLinuxProcess } from '../src/record/linux/process.js';
import { MemoryCopier } from '../src/record/copy/copier.js';
import { readPointer } from '../src/walk/region-memory.js';
import { recordCoverage, cannotRun } from './helpers/coverage.js';
import { chainOf, word } from './helpers/patched-source.js';
import { waitUntil } from './helpers/wait.js';
import { nativeInterpreters } from '../harness/interpreters.js';
import { spawnInteractive, type Interactive } from '../harness/spawn.js';

const PROGRAM = path.resolve('test/fixtures/two_waits.py');
const running: Interactive[] = [];
afterAll(() => running.forEach((p) => p.kill()));

/** The process's one thread is asleep (waiting on stdin). */
const asleep = (pid: number): boolean => {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'latin1');
  return stat[stat.lastIndexOf(')') + 2] === 'S';
};

const targets = nativeInterpreters().filter((p) => /^debian-3\.(1[5-9])$/.test(p.label));

describe.each(targets)('whose anchor the copier trusts, $label', (py) => {
  if (py.missing) {
    cannotRun('anchor-trust', py.label, py.missing!);
    return;
  }

  it.each([
    { name: 'general copy', steady: false },
    { name: 'steady copies', steady: true },
  ])('the interpreter\'s move, not another writer\'s value ($name)', async ({ name, steady }) => {
    const p = spawnInteractive(py.command, [PROGRAM]);
    running.push(p);
    await p.waitFor('FIRST');
    await waitUntil(() => asleep(p.pid), 'the program waiting in first()');
    const source = openLinuxProcess(p.pid);
    const L = source.layout;
    const P = L.pointerSize;
    const copier = new MemoryCopier(source, { consistency: 'anchor', steady, bytecode: false, retries: 0 });
    const tstate = copier.copyAll()[0]!.threadStateAddress; // leaves the anchor on first()
    const copy = () => copier.copyAll().find((s) => s.threadStateAddress === tstate)!;
    const anchorNow = () => readPointer(source.read(tstate + BigInt(L.tstate.lastProfiledFrame!), P), 0, P);
    try {
      const [first] = chainOf(source, L, tstate);
      expect(anchorNow(), 'the copier anchored inner()').toBe(first!.address);
      expect(copy().unproven, 'its own anchor, seen alive, proves the copy').toBe(false);

      p.send('');
      await p.waitFor('OUTER');
      await waitUntil(() => asleep(p.pid), 'the program waiting in outer()');
      const [outer, module] = chainOf(source, L, tstate);
      expect(anchorNow(), 'the interpreter moved the anchor to the caller of inner()').toBe(module!.address);
      // (a few copies: the steady copy gives way once where the stack changed, then holds)
      for (let i = 0; i < 4; i++) expect(copy().unproven, 'the interpreter\'s move, down the chain the copier anchored, proves the copy').toBe(false);

      p.send('');
      await p.waitFor('DEEPER');
      await waitUntil(() => asleep(p.pid), 'the program waiting in inner(), called from outer()');
      const [deeper, caller] = chainOf(source, L, tstate);
      expect(caller!.address).toBe(outer!.address);
      expect(deeper!.address, 'inner() lies elsewhere now').not.toBe(first!.address);
      // another profiler writes its own value: the current frame
      source.write!(tstate + BigInt(L.tstate.lastProfiledFrame!), word(deeper!.address, P));
      const made = copier.steadyCopies;
      expect(copy().unproven, 'a value the copier did not write, nor the interpreter move there').toBe(true);
      expect(copier.steadyCopies - made, 'that copy made by a steady copy').toBe(steady ? 1 : 0);
      // (the copier then anchors inner() itself)
      expect(anchorNow()).toBe(deeper!.address);
      expect(copy().unproven, 'the copier\'s own anchor on inner()').toBe(false);
    } finally {
      copier.clearAnchors();
      source.close();
      p.send('');
    }
    recordCoverage('anchor-trust', `${py.label} ${name}`, true);
  });
});
