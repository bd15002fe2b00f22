// The sampler's schedule (src/record/sampling/schedule.ts): dithered ticks on an absolute schedule,
// late ticks made up for within the catch-up window, slots further behind counted as missed.
import { describe, expect, it } from 'vitest';
import { TickSchedule } from '../src/record/sampling/schedule.js';
import { rng } from './helpers/rng.js';

describe('TickSchedule', () => {
  it('keeps the mean rate, each interval within [½, 1½] of the mean', () => {
    const s = new TickSchedule(1, 0, 10, rng(1));
    let prev = s.due;
    const gaps: number[] = [];
    for (let i = 0; i < 10_000; i++) {
      s.take(s.due);
      gaps.push(s.due - prev);
      prev = s.due;
    }
    expect(Math.min(...gaps)).toBeGreaterThanOrEqual(0.5);
    expect(Math.max(...gaps)).toBeLessThan(1.5);
    expect(s.elapsed / 10_000).toBeCloseTo(1, 1);
  });

  it('takes a late tick without missing any slot while it is within the catch-up window', () => {
    const s = new TickSchedule(0.1, 0, 10, () => 0.5); // 10 kHz, no dithering
    // the recorder wakes 8 ms late: 80 slots behind, all within 10 ms
    const first = s.take(8);
    expect(first.missed).toBe(0);
    expect(first.time).toBe(0);
    // and the ticks after it are due at once, one after the other, until it has caught up
    let now = 8;
    let taken = 1;
    while (s.due < now) {
      expect(s.take(now).missed).toBe(0);
      taken++;
      now += 0.02; // each copy takes 20 µs
    }
    expect(taken).toBeGreaterThan(80);
  });

  it('counts as missed the slots more than the catch-up window behind, and goes on from there', () => {
    const s = new TickSchedule(0.1, 0, 10, () => 0.5);
    s.take(0);
    // 30 ms late: 200 slots of it beyond the 10 ms window are missed
    const late = s.take(30.1);
    expect(late.missed).toBe(200);
    expect(late.time).toBe(20_100);
    // what is left is within the window: taken, not missed
    expect(30.1 - s.due).toBeLessThanOrEqual(10);
    expect(s.take(30.1).missed).toBe(0);
  });

  it('stands still while the target is kept stopped', () => {
    const s = new TickSchedule(1, 100, 10, () => 0.5);
    s.take(100);
    s.stood(50);
    expect(s.due).toBe(151);
    // a tick taken right after a 50 ms stop is not late on the target's clock
    expect(s.take(151).missed).toBe(0);
  });

  it('refuses a rate that is not positive', () => {
    expect(() => new TickSchedule(0, 0, 10)).toThrow(RangeError);
    expect(() => new TickSchedule(NaN, 0, 10)).toThrow(RangeError);
  });
});
