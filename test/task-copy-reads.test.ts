// The bookkeeping of a task view made from the ranges the kernel copied at the tick
// (src/record/copy/task-copy.ts), on synthetic regions: what overlapping ranges become, and
// which of them a sample keeps (those its view read, and its own). The views themselves are
// proven on real interpreters in test/async-aware.test.ts.
import { describe, expect, it } from 'vitest';
import { disjoint, readOrOwn, RecordingReads } from '../src/record/copy/task-copy.js';
import type { Region } from '../src/walk/types.js';

const region = (address: number, bytes: number[]): Region => ({ address: BigInt(address), bytes: Uint8Array.from(bytes) });
const NOTHING = { tryRead: () => null };

describe('ranges copied at the tick', () => {
  it('overlapping ranges become one, the first listed winning', () => {
    const out = disjoint([region(0x110, [1, 1, 1, 1]), region(0x100, [2, 2, 2, 2]), region(0x112, [3, 3, 3, 3])]);
    expect(out.map((r) => [Number(r.address), [...r.bytes]])).toEqual([
      [0x100, [2, 2, 2, 2]],
      [0x110, [1, 1, 1, 1, 3, 3]],
    ]);
  });

  it('a sample keeps its own regions and the ranges its view read, not the others', () => {
    const own = [region(0x1000, [0, 0, 0, 0, 0, 0, 0, 0])];
    // a tick range overlapping the copy's own region, one read, one not read
    const tick = [region(0x1004, [9, 9, 9, 9, 9, 9, 9, 9]), region(0x2000, [5, 5, 5, 5]), region(0x3000, [7, 7, 7, 7])];
    const reads = new RecordingReads(NOTHING, [...own, ...tick], new Map());
    reads.touched = [];
    expect([...reads.bytes(0x2001n, 2)!]).toEqual([5, 5]);
    expect(reads.bytes(0x4000n, 1)).toBeNull();
    expect(reads.missed).toBe(1);
    const kept = readOrOwn(reads.regions, own, reads.touched);
    // (the own region merged with the range overlapping it, its own bytes winning)
    expect(kept.map((r) => [Number(r.address), r.bytes.length])).toEqual([
      [0x1000, 12],
      [0x2000, 4],
    ]);
    expect([...kept[0]!.bytes]).toEqual([0, 0, 0, 0, 0, 0, 0, 0, 9, 9, 9, 9]);
  });

  it('a read at a region\'s last byte keeps it; one just past it does not', () => {
    const regions = [region(0x10, [1, 2]), region(0x20, [3, 4])];
    expect(readOrOwn(regions, [], [0x11n]).map((r) => Number(r.address))).toEqual([0x10]);
    expect(readOrOwn(regions, [], [0x12n, 0x1fn])).toEqual([]);
    expect(readOrOwn(regions, [region(0x21, [4])], []).map((r) => Number(r.address))).toEqual([0x20]);
  });
});
