// Merge is exact: random samples split randomly into shards, each shard profiled (and shipped
// as JSON text), merged in a random order, give the profile of all samples. And the profile
// agrees with a naive model of the same samples (stack weights, self and total per function).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { exportCollapsed, exportJson, exportSpeedscope, exportText } from '../src/export/index.js';
import { Profile, type SourceFrame, type SampleInput, type SampleThread } from '../src/profile/index.js';
import { STATUS_NAMES, TRUSTED } from '../src/walk/status.js';

const THREADS: SampleThread[] = [
  { interpreterId: 0n, threadId: 139_872_650_000_000n, nativeThreadId: 100n, name: 'MainThread' },
  { interpreterId: 0n, threadId: 139_872_650_000_001n, nativeThreadId: 101n },
  { interpreterId: 0n, threadId: 139_872_650_000_001n, nativeThreadId: 101n, name: 'renamed' },
  { interpreterId: 2n, threadId: (1n << 64n) - 1n, nativeThreadId: 100n, name: 'sub' },
];

// few names, files and lines, so that stacks share prefixes and functions recurse
const frameArb: fc.Arbitrary<SourceFrame> = fc.record({
  qualname: fc.constantFrom('main', 'f', 'g', 'C.m', 'outer.<locals>.inner', 'a;b'),
  filename: fc.constantFrom('app.py', 'lib/x.py'),
  line: fc.oneof(fc.integer({ min: 1, max: 4 }), fc.constant(null)),
});

const sampleArb: fc.Arbitrary<SampleInput> = fc
  .record({
    time: fc.integer({ min: 0, max: 50 }),
    thread: fc.constantFrom(...THREADS),
    status: fc.constantFrom(...STATUS_NAMES, 'complete', 'complete', 'complete-unverifiable'),
    frames: fc.array(frameArb, { minLength: 1, maxLength: 7 }),
    weight: fc.option(fc.integer({ min: 1, max: 5 }), { nil: undefined }),
  })
  .map((s) => (s.status === 'idle' ? { ...s, frames: [] } : s));

/** The naive model: per thread, "frame|frame|…" root first → weight; functions' self/total. */
function model(samples: SampleInput[]) {
  const stacks = new Map<string, number>();
  const self = new Map<string, number>();
  const total = new Map<string, number>();
  const bump = (m: Map<string, number>, k: string, w: number): void => void m.set(k, (m.get(k) ?? 0) + w);
  for (const s of samples) {
    if (!TRUSTED.has(s.status) || s.status === 'idle') continue;
    const w = s.weight ?? 1;
    const tk = `${s.thread.interpreterId}/${s.thread.nativeThreadId}/${s.thread.threadId}`;
    bump(stacks, `${tk}:${[...s.frames].reverse().map((f) => `${f.qualname}@${f.filename}@${f.line}`).join('|')}`, w);
    bump(self, `${tk}:${s.frames[0]!.qualname}@${s.frames[0]!.filename}`, w);
    for (const fn of new Set(s.frames.map((f) => `${f.qualname}@${f.filename}`))) bump(total, `${tk}:${fn}`, w);
  }
  return { stacks, self, total };
}

function observed(p: Profile) {
  const stacks = new Map<string, number>();
  const self = new Map<string, number>();
  const total = new Map<string, number>();
  for (const t of p.threads()) {
    const tk = `${t.interpreterId}/${t.nativeThreadId}/${t.threadId}`;
    t.stackWeight.forEach((w, s) => {
      if (w > 0) {
        const path = t.stackPath(s).map((i) => `${t.frames[i]!.qualname}@${t.frames[i]!.filename}@${t.frames[i]!.line}`);
        stacks.set(`${tk}:${path.join('|')}`, w);
      }
    });
    for (const fn of t.functions()) {
      if (fn.self > 0) self.set(`${tk}:${fn.qualname}@${fn.filename}`, fn.self);
      total.set(`${tk}:${fn.qualname}@${fn.filename}`, fn.total);
    }
  }
  return { stacks, self, total };
}

const build = (samples: SampleInput[], missed = 0): Profile => {
  const p = new Profile();
  for (const s of samples) p.add(s);
  // shards of a recording hold disjoint ticks: one per sample here
  p.addTicks(samples.length);
  p.addMissed(missed);
  return p;
};

describe('Profile against a naive model', () => {
  it('has exactly the model stacks, self and total weights', () => {
    fc.assert(
      fc.property(fc.array(sampleArb, { maxLength: 60 }), (samples) => {
        const p = build(samples);
        expect(observed(p)).toEqual(model(samples));
        const s = p.stats();
        expect(s.attempted).toBe(samples.length);
        expect(STATUS_NAMES.reduce((a, st) => a + s.statuses[st], 0)).toBe(samples.length);
        for (const st of STATUS_NAMES) expect(s.statuses[st]).toBe(samples.filter((x) => x.status === st).length);
      }),
      { numRuns: 300 },
    );
  });
});

describe('Profile.merge', () => {
  it('merging shard profiles equals building one from all samples', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(sampleArb, fc.nat(4)), { maxLength: 80 }),
        fc.array(fc.nat(3), { minLength: 5, maxLength: 5 }),
        fc.array(fc.nat(), { minLength: 5, maxLength: 5 }),
        fc.boolean(),
        (tagged, missed, order, viaText) => {
          const all = tagged.map(([s]) => s);
          const whole = build(all, missed.reduce((a, b) => a + b, 0));
          const shards = [0, 1, 2, 3, 4].map((k) =>
            build(
              tagged.filter(([, shard]) => shard === k).map(([s]) => s),
              missed[k]!,
            ),
          );
          // shards arrive in any order; shipped as JSON text or handed over as objects
          const arrival = [0, 1, 2, 3, 4].sort((a, b) => order[a]! - order[b]! || a - b);
          const merged = new Profile();
          for (const k of arrival) merged.merge(viaText ? Profile.fromJSON(JSON.parse(JSON.stringify(shards[k]))) : shards[k]!);
          expect(merged.toJSON()).toEqual(whole.toJSON());
          expect(merged.stats()).toEqual(whole.stats());
          expect(observed(merged)).toEqual(observed(whole));
          // every export is a function of the content alone
          expect(exportJson(merged)).toBe(exportJson(whole));
          expect(exportCollapsed(merged, { idle: true })).toBe(exportCollapsed(whole, { idle: true }));
          expect(exportSpeedscope(merged)).toBe(exportSpeedscope(whole));
          expect(exportText(merged)).toBe(exportText(whole));
        },
      ),
      { numRuns: 200 },
    );
  });

  it('merges pairwise in any grouping (associative) and leaves the other profile as it was', () => {
    fc.assert(
      fc.property(fc.array(sampleArb, { maxLength: 30 }), fc.array(sampleArb, { maxLength: 30 }), fc.array(sampleArb, { maxLength: 30 }), (a, b, c) => {
        const left = build(a).merge(build(b)).merge(build(c));
        const bc = build(b).merge(build(c));
        const right = build(a).merge(bc);
        expect(left.toJSON()).toEqual(right.toJSON());
        expect(bc.toJSON()).toEqual(build([...b, ...c]).toJSON());
      }),
      { numRuns: 100 },
    );
  });

  it('merging a profile into itself doubles it', () => {
    const samples = fc.sample(sampleArb, { numRuns: 40, seed: 7 });
    const p = build(samples, 2);
    p.merge(p);
    expect(p.toJSON()).toEqual(build([...samples, ...samples], 4).toJSON());
  });
});
