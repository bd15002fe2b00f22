// Property test: over random and adversarial memory — random bytes, truncated regions,
// cycles, pointers at and past region edges, misaligned pointers, absurd values — the
// WebAssembly kernel and the reference walker never throw, trap or hang, and agree exactly.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ReferenceWalker } from '../src/walk/index.js';
import { hostileParams, randomMemory, structuredMemory, WALK_PARAMS as PARAMS } from '../fuzz/arbitraries.js';
import { compareResults, loadKernel } from './helpers/walkers.js';

describe('kernel and reference agree on adversarial memory', () => {
  it('never throw, trap or hang, and agree (>= 10k cases)', async () => {
    const kernel = await loadKernel();
    const unshared = await loadKernel(false);
    const ref = new ReferenceWalker();
    const statuses = new Map<string, number>();
    let cases = 0;
    const arb = fc.integer({ min: 0, max: PARAMS.length - 1 }).chain((pi) =>
      fc.record({
        pi: fc.constant(pi),
        batch: fc.array(fc.oneof({ weight: 3, arbitrary: structuredMemory(PARAMS[pi]!) }, { weight: 1, arbitrary: randomMemory }), {
          minLength: 1,
          maxLength: 4,
        }),
      }),
    );
    fc.assert(
      fc.property(arb, ({ pi, batch }) => {
        const p = { ...PARAMS[pi]!, maxDepth: batch[0]!.maxDepth };
        const samples = batch.map((b) => b.sample);
        const codes = batch.flatMap((b) => b.codes);
        const a = kernel.walk(p, codes, samples);
        const b = ref.walk(p, codes, samples);
        compareResults(a, b);
        compareResults(unshared.walk(p, codes, samples), b, 'unshared kernel vs reference');
        for (const r of a) statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
        cases++;
      }),
      { numRuns: 10_000 },
    );
    console.log(`property test: ${cases} batches; statuses seen:`, Object.fromEntries(statuses));
    // the generators must reach every status the kernel can produce, or they test too little
    for (const s of ['complete', 'complete-unverifiable', 'idle', 'incomplete', 'dangling', 'cycle', 'too-deep', 'corrupt', 'no-thread-state']) {
      expect(statuses.get(s) ?? 0, `status ${s} never produced`).toBeGreaterThan(0);
    }
  });
});

// A hostile capture header can make any parameter block (fuzz/arbitraries.ts hostileParams):
// both walkers must refuse the same blocks with the same message, and on the blocks they
// accept give the same results.
describe('kernel and reference agree on any parameter block', () => {
  it('refuse the same blocks and walk the others alike (>= 3k cases)', async () => {
    const kernel = await loadKernel();
    const ref = new ReferenceWalker();
    let refused = 0;
    let walked = 0;
    fc.assert(
      fc.property(hostileParams, ({ params, batch }) => {
        const samples = batch.map((b) => b.sample);
        const codes = batch.flatMap((b) => b.codes);
        const run = (w: { walk: typeof ref.walk }) => {
          try {
            return { results: w.walk(params, codes, samples), error: null };
          } catch (e) {
            return { results: null, error: (e as Error).message };
          }
        };
        const a = run(kernel);
        const b = run(ref);
        expect(a.error).toBe(b.error);
        if (a.error !== null) {
          expect(a.error).toMatch(/^walk parameters: /);
          refused++;
          return;
        }
        compareResults(a.results!, b.results!);
        walked++;
      }),
      { numRuns: 3_000 },
    );
    console.log(`parameter blocks: ${refused} refused, ${walked} walked`);
    expect(refused).toBeGreaterThan(0);
    expect(walked).toBeGreaterThan(0);
  });

  it('the blocks that once disagreed are refused by both', async () => {
    const kernel = await loadKernel();
    const ref = new ReferenceWalker();
    for (const change of [{ bottom: 3 }, { tagMask: -1 }, { maxDepth: -1 }, { frameOwner: 1.5 }]) {
      const params = { ...PARAMS[0]!, ...change };
      expect(() => kernel.walk(params, [], [])).toThrow(/^walk parameters: /);
      expect(() => ref.walk(params, [], [])).toThrow(/^walk parameters: /);
    }
  });
});
