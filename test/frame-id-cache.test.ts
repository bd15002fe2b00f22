// The harvest's frame cache against a Map: colliding and growing keys of four 32-bit halves.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { FrameIdCache } from '../src/kernel/frame-id-cache.js';

const half = fc.oneof(fc.constantFrom(0, 1, 0x7fffffff, 0x80000000, 0xffffffff), fc.integer({ min: 0, max: 0xffffffff }));
const key = fc.tuple(half, half, half, half);

describe('FrameIdCache', () => {
  it('gives back what was stored, and −1 for what was not, as a Map does', () => {
    fc.assert(
      fc.property(fc.array(key, { maxLength: 2000 }), fc.array(key, { maxLength: 50 }), (stored, probes) => {
        const cache = new FrameIdCache();
        const map = new Map<string, number>();
        stored.forEach((k, i) => {
          const name = k.join(':');
          if (map.has(name)) return;
          expect(cache.get(...k)).toBe(-1);
          cache.set(...k, i);
          map.set(name, i);
        });
        for (const k of [...stored, ...probes]) expect(cache.get(...k)).toBe(map.get(k.join(':')) ?? -1);
      }),
      { numRuns: 200 },
    );
  });
});
