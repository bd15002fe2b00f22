// A thread's stack table (ThreadProfile.internStack) against a map of (caller, frame) → stack:
// callers with few children keep them in a list, callers with more move them to a hash, and the
// links and the hash grow — long random runs cross every one of those steps, where a short one
// (the merge properties' few stacks) crosses none.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ThreadProfile } from '../src/profile/thread.js';

/** One interning: the caller picked among the stacks so far (or a root), and a frame. */
const stepArb = fc.record({
  root: fc.integer({ min: 0, max: 15 }),
  pick: fc.nat(),
  newest: fc.boolean(),
  frame: fc.integer({ min: 0, max: 40 }),
});

describe('stack table', () => {
  it('finds every child of a caller whose children move to the hash just as the links grow', () => {
    // the links start at 256 stacks and double: the caller's ninth child (one more than a
    // list keeps) made as stack 256, 512, 1024, … — for a root caller and a root's children
    for (const boundary of [256, 512, 1024, 2048]) {
      for (const rootCaller of [false, true]) {
        const t = new ThreadProfile({ interpreterId: 0n, threadId: 1n, nativeThreadId: 1n });
        const caller = rootCaller ? -1 : t.internStack(-1, 0);
        const children = Array.from({ length: 8 }, (_, k) => t.internStack(caller, 100 + k));
        // a chain under the first child up to the boundary
        for (let s = children[0]!; t.stackParent.length < boundary; ) s = t.internStack(s, 1);
        const ninth = t.internStack(caller, 200);
        expect(ninth).toBe(boundary);
        for (let k = 0; k < 8; k++) expect(t.internStack(caller, 100 + k), `child ${k} at the ${boundary} boundary`).toBe(children[k]);
        expect(t.internStack(caller, 200)).toBe(ninth);
        expect(t.stackParent.length).toBe(boundary + 1);
      }
    }
  });

  it('gives each (caller, frame) one stack, in the order they first came, across its growth', () => {
    fc.assert(
      fc.property(fc.array(stepArb, { minLength: 300, maxLength: 4000, size: 'max' }), (steps) => {
        const t = new ThreadProfile({ interpreterId: 0n, threadId: 1n, nativeThreadId: 1n });
        const model = new Map<string, number>();
        const parents: number[] = [];
        for (const s of steps) {
          // a root now and then; else a deep chain (the newest stack) or any caller, so that
          // some callers get many children
          const parent = parents.length === 0 || s.root === 0 ? -1 : s.newest ? parents.length - 1 : s.pick % parents.length;
          const key = `${parent},${s.frame}`;
          let want = model.get(key);
          if (want === undefined) {
            want = parents.length;
            model.set(key, want);
            parents.push(parent);
          }
          expect(t.internStack(parent, s.frame)).toBe(want);
        }
        expect([...t.stackParent]).toEqual(parents);
        // and every stack is found again
        for (const [key, want] of model) {
          const [parent, frame] = key.split(',').map(Number) as [number, number];
          expect(t.internStack(parent, frame)).toBe(want);
        }
        expect(t.stackParent.length).toBe(parents.length);
      }),
      { numRuns: 60 },
    );
  });
});
