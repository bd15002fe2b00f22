// The json export writes its stacks as text straight from the typed arrays; these are the same
// bytes JSON.stringify gives for the document, whatever the weights (fractions, large counts)
// and the names (a NUL, text shaped like the export's own stand-ins, non-ASCII).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { exportJson, jsonDocument } from '../src/export/json.js';
import { Profile, type SampleThread, type SourceFrame } from '../src/profile/index.js';

const thread = (n: number): SampleThread => ({ interpreterId: 0n, threadId: BigInt(1000 + n), nativeThreadId: BigInt(n) });
const name = fc.oneof(fc.constantFrom('f', 'g', '\u0000stacks-0:0', 'ünï\u2028', '"\\'), fc.string({ maxLength: 6 }));
const frame = fc.record({ qualname: name, filename: fc.constantFrom('a.py', 'b\u0000.py'), line: fc.option(fc.integer({ min: 0, max: 70000 }), { nil: null }) });
const weight = fc.oneof(fc.integer({ min: 1, max: 5 }), fc.double({ min: 1e-9, max: 1e15, noNaN: true }), fc.constant(2 ** 40 + 1));
const samples = fc.array(fc.record({ thread: fc.integer({ min: 0, max: 2 }), frames: fc.array(frame, { minLength: 1, maxLength: 6 }), weight }), { maxLength: 40 });

function profileOf(list: { thread: number; frames: SourceFrame[]; weight: number }[]): Profile {
  const p = new Profile();
  for (const s of list) p.add({ time: 0, thread: thread(s.thread), status: 'complete', frames: s.frames, weight: s.weight });
  return p;
}

describe('json export text', () => {
  it('equals JSON.stringify of the document, on directed cases', () => {
    const p = profileOf([
      { thread: 0, frames: [{ qualname: 'leaf', filename: 'a.py', line: 3 }, { qualname: 'main', filename: 'a.py', line: 1 }], weight: 0.1 },
      { thread: 0, frames: [{ qualname: '\u0000stacks-x:0', filename: 'a.py', line: 3 }], weight: 2 ** 53 - 1 },
      { thread: 1, frames: [{ qualname: 'x', filename: 'b.py', line: null }], weight: 1e21 },
    ]);
    const options = { metadata: { note: '\u0000stacks-0:0' } };
    const text = exportJson(p, options);
    expect(text).toBe(JSON.stringify(jsonDocument(p, options)) + '\n');
    const weights = (JSON.parse(text).threads[0].stacks as number[][]).map((s) => s[2]).sort((a, b) => a! - b!);
    expect(weights).toEqual([0, 0.1, 2 ** 53 - 1]);
  });

  it('equals JSON.stringify of the document, on any profile', () => {
    fc.assert(
      fc.property(samples, (list) => {
        const p = profileOf(list);
        expect(exportJson(p)).toBe(JSON.stringify(jsonDocument(p)) + '\n');
      }),
      { numRuns: 200 },
    );
  });

  it('indented, is JSON.stringify with that indentation', () => {
    const p = profileOf([{ thread: 0, frames: [{ qualname: 'f', filename: 'a.py', line: 1 }], weight: 1 }]);
    expect(exportJson(p, { indent: 2 })).toBe(JSON.stringify(jsonDocument(p), null, 2) + '\n');
  });
});
