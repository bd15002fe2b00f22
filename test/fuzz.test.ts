// A fixed-seed share of `npm run fuzz` (fuzz/): the same targets — capture files and block
// payloads mutated from real captures, hostile debug offsets, code objects and location
// tables, parameter blocks, the kernel against the reference walker, CFI sections, the native
// unwinder's kernel against its reference, the locals decoder over hostile heaps — a few thousand cases
// with one seed, so that every run of the suite replays the same inputs. 0 failures.
import { describe, expect, it } from 'vitest';
import { fuzz } from '../fuzz/fuzz.js';

const SEED = 20261130;

describe('fuzzing, a fixed-seed share', () => {
  it('finds nothing in 4,000 cases', async () => {
    const result = await fuzz({ seed: SEED, cases: 4000, seconds: 600 });
    console.log(`fuzz (seed ${SEED}): ${result.cases} cases in ${result.seconds.toFixed(1)} s`, result.byTarget);
    for (const f of result.failures) console.log(`FAILURE in ${f.target}: ${f.error}\n  input: ${f.counterexample}\n  replay: npm run fuzz -- --replay '${f.replay}'`);
    expect(result.failures).toEqual([]);
    expect(result.cases).toBeGreaterThanOrEqual(3900);
    // every target ran
    expect(Object.keys(result.byTarget).length).toBe(9);
  }, 900_000);
});
