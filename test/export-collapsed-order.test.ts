// The collapsed export writes its lines in sorted order by walking each thread's stack tree
// (collapsedByTree, as UTF-8) instead of making a string per stack and sorting them. It must give exactly
// what making and sorting the strings gives (collapsedByString), whatever the names: labels that
// start other labels, spaces, the escaped characters, non-ASCII, names that sort around `<idle>`,
// several threads, several processes — and the options that merge lines.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { collapsedByString, collapsedByTree, exportCollapsed, writeCollapsed } from '../src/export/collapsed.js';
import { Profile } from '../src/profile/index.js';
import type { SourceFrame } from '../src/profile/types.js';

// few characters, so that names often start one another and collide
const name = fc.string({ unit: fc.constantFrom('a', 'b', ' ', ';', '%', '(', ')', '<', '>', 'é', '\u{1F600}', '\n', ':'), minLength: 1, maxLength: 4 });
const frame: fc.Arbitrary<SourceFrame> = fc.record({
  qualname: fc.oneof(name, fc.constantFrom('<idle>', 'f', 'f (a', 'main')),
  filename: fc.oneof(fc.constant(''), fc.constantFrom('a.py', 'a.py:1', 'b')),
  line: fc.oneof(fc.constant(null), fc.integer({ min: 1, max: 3 })),
});
const sample = fc.record({
  thread: fc.integer({ min: 0, max: 2 }),
  frames: fc.array(fc.integer({ min: 0, max: 7 }), { minLength: 0, maxLength: 6 }),
  weight: fc.integer({ min: 1, max: 3 }),
});

function build(frames: SourceFrame[], samples: { thread: number; frames: number[]; weight: number }[], names: (string | undefined)[], natives = 3): Profile {
  const p = new Profile();
  samples.forEach((s, i) => {
    const thread = { interpreterId: 0n, threadId: BigInt(s.thread + 1), nativeThreadId: BigInt(100 + (s.thread % natives)), ...(names[s.thread] !== undefined ? { name: names[s.thread]! } : {}) };
    if (s.frames.length === 0) p.add({ time: i, thread, status: 'idle', frames: [], weight: s.weight });
    else p.add({ time: i, thread, status: 'complete', frames: s.frames.map((k) => frames[k % frames.length]!), weight: s.weight });
  });
  return p;
}

describe('collapsed export from the stack tree', () => {
  it('gives the lines sorted as strings, whatever the names and options', () => {
    let byTree = 0;
    let runs = 0;
    fc.assert(
      fc.property(
        fc.array(frame, { minLength: 1, maxLength: 8 }),
        fc.array(sample, { minLength: 1, maxLength: 40 }),
        fc.array(fc.option(name, { nil: undefined }), { minLength: 3, maxLength: 3 }),
        fc.record({ idle: fc.boolean(), lines: fc.boolean(), threads: fc.boolean() }),
        fc.boolean(),
        fc.integer({ min: 1, max: 3 }),
        fc.integer({ min: 1, max: 200 }),
        (some, samples, names, options, collide, natives, chunk) => {
          // two frames of one label, often siblings
          const frames = collide ? [{ qualname: 'f (a.py:1)', filename: '', line: null }, { qualname: 'f', filename: 'a.py', line: 1 }, ...some] : some;
          // (threads of one native id and name have one label: their lines merge)
          const p = build(frames, samples, names, natives);
          runs++;
          const bytes = collapsedByTree(p, options);
          const tree = bytes && new TextDecoder().decode(bytes);
          if (tree !== null) byTree++;
          expect(exportCollapsed(p, options)).toBe(collapsedByString(p, options));
          if (tree !== null) expect(tree).toBe(collapsedByString(p, options));
          // written in pieces (of any size, lines longer than a piece too): the same bytes, or nothing where the tree is not taken
          const pieces: Uint8Array[] = [];
          const streamed = writeCollapsed(p, options, (piece) => pieces.push(piece.slice()), chunk);
          expect(streamed).toBe(tree !== null);
          if (streamed) expect(new TextDecoder().decode(Buffer.concat(pieces))).toBe(tree);
          else expect(pieces).toEqual([]);
        },
      ),
      { numRuns: 3000, seed: 0xc011 },
    );
    // (the random names must leave the tree many cases to take, not only the fallback)
    expect(byTree).toBeGreaterThan(runs / 10);
  });

  it('takes the tree for ordinary names (the shortcut is used, not only the fallback)', () => {
    const frames: SourceFrame[] = ['main', 'parse', 'parse_sum', 'parse_atom'].map((q, k) => ({ qualname: q, filename: 'app.py', line: k + 1 }));
    const p = build(frames, [{ thread: 0, frames: [3, 2, 1, 0], weight: 2 }, { thread: 0, frames: [2, 1, 0], weight: 1 }, { thread: 1, frames: [], weight: 4 }, { thread: 1, frames: [1, 0], weight: 1 }], ['MainThread', undefined, undefined]);
    expect(collapsedByTree(p, { idle: true })).not.toBeNull();
    const text = exportCollapsed(p, { idle: true });
    expect(text).toBe(collapsedByString(p, { idle: true }));
    expect(text.split('\n')).toEqual([
      'MainThread (tid 100);main (app.py:1);parse (app.py:2);parse_sum (app.py:3) 1',
      'MainThread (tid 100);main (app.py:1);parse (app.py:2);parse_sum (app.py:3);parse_atom (app.py:4) 2',
      'thread 101;<idle> 4',
      'thread 101;main (app.py:1);parse (app.py:2) 1',
      '',
    ]);
  });
});
