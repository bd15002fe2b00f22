// The ticking side of Pyodide's signal sampling (src/record/pyodide/ticks.ts), driven by hand:
// a signal is written only once the handler has begun for the one before (CONTROL.ANSWERED),
// and one that CPython's check erased from the buffer (it reads, then writes 0) is written
// again after LOST_AFTER_MS; every slot is counted once. The real signal path is proven in
// test/pyodide-record.test.ts, on Pyodide's CPython.
import { describe, expect, it } from 'vitest';
import { CONTROL, SIGUSR1 } from '../src/record/pyodide/protocol.js';
import { LOST_AFTER_MS, newTickResult, signalTick } from '../src/record/pyodide/ticks.js';

describe('signalTick', () => {
  const setup = () => ({ counts: newTickResult(), interrupt: new Int32Array(new SharedArrayBuffer(4)), control: new Int32Array(new SharedArrayBuffer(4 * CONTROL.length)) });
  const taken = (interrupt: Int32Array): void => void Atomics.store(interrupt, 0, 0);
  const answered = (control: Int32Array): void => void Atomics.add(control, CONTROL.ANSWERED, 1);

  it('writes the next signal only once the handler has begun for the one before', () => {
    const { counts, interrupt, control } = setup();
    let next = signalTick(counts, 0, 0, 1, interrupt, control);
    expect(Atomics.load(interrupt, 0)).toBe(SIGUSR1);
    expect(counts.written).toBe(1);
    // taken from the buffer, its handler not yet begun (Pyodide converts its arguments): held back
    taken(interrupt);
    next = signalTick(counts, 1, next, 1, interrupt, control);
    expect(Atomics.load(interrupt, 0)).toBe(0);
    expect(counts).toMatchObject({ scheduled: 2, written: 1, unanswered: 1, lost: 0 });
    // begun: the next slot writes
    answered(control);
    next = signalTick(counts, 2, next, 1, interrupt, control);
    expect(Atomics.load(interrupt, 0)).toBe(SIGUSR1);
    expect(counts).toMatchObject({ scheduled: 3, written: 2, unanswered: 1, lost: 0 });
    expect(Atomics.load(control, CONTROL.SCHEDULED)).toBe(3);
  });

  it('writes again a signal erased from the buffer that no handler answered in LOST_AFTER_MS', () => {
    const { counts, interrupt, control } = setup();
    const interval = LOST_AFTER_MS / 4;
    let now = 0;
    let next = signalTick(counts, now, 0, interval, interrupt, control);
    taken(interrupt);
    // slots before LOST_AFTER_MS: held back
    for (now += interval; now < LOST_AFTER_MS; now += interval) next = signalTick(counts, now, next, interval, interrupt, control);
    expect(counts).toMatchObject({ written: 1, unanswered: 3, lost: 0 });
    next = signalTick(counts, now, next, interval, interrupt, control);
    expect(Atomics.load(interrupt, 0)).toBe(SIGUSR1);
    expect(counts).toMatchObject({ scheduled: 5, written: 1, unanswered: 3, lost: 1 });
    // answered now: the count is in step again
    answered(control);
    taken(interrupt);
    signalTick(counts, now + interval, next, interval, interrupt, control);
    expect(counts).toMatchObject({ scheduled: 6, written: 2, unanswered: 3, lost: 1 });
  });

  it('never writes again a signal still in the buffer, however long it waits', () => {
    const { counts, interrupt, control } = setup();
    let next = signalTick(counts, 0, 0, 1, interrupt, control);
    for (let now = 1; now <= 10 * LOST_AFTER_MS; now++) next = signalTick(counts, now, next, 1, interrupt, control);
    expect(counts.lost).toBe(0);
    expect(counts.written).toBe(1);
    expect(counts.scheduled).toBe(counts.written + counts.unanswered + counts.lateTicks);
  });

  it('counts slots it woke too late for as scheduled and late, never written', () => {
    const { counts, interrupt, control } = setup();
    const next = signalTick(counts, 3.5, 0, 1, interrupt, control);
    expect(next).toBe(4);
    expect(counts).toMatchObject({ scheduled: 4, lateTicks: 3, written: 1 });
  });
});
