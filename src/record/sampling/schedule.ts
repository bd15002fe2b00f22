// The sampler's schedule: when the next tick is due, and which slots are missed.
//
// Ticks are on an absolute schedule, dithered around the mean interval: a program that
// repeats itself at a steady period would otherwise be sampled at the same few phases of it
// for seconds on end (aliasing); intervals drawn uniformly from [½, 1½] of the mean spread the
// samples over every phase of any period shorter than the mean interval.
//
// A tick that comes late is still taken, and the ones after it as soon as they can be, until
// the schedule is kept again — but never more than `catchUpMs` behind it: slots further behind
// are skipped and counted as missed. Why make up for late ticks at all: the recorder is late
// either because the machine did not run it (a sleeping thread can wake milliseconds late;
// measured on a shared VM: several times a second) or because copies got slower — and copies
// are slower where the program's stack is deeper, so skipping those slots would sample the deep
// phases of a program less (docs/validation.md, point 4).
//
// The schedule runs on the target's own clock: time the recorder kept the target stopped is
// added to it (`stood`), so each sample stands for the same stretch of the program's own
// running time, wherever the program was.

export class TickSchedule {
  /** the next tick, on the wall clock (ms) */
  private next: number;

  constructor(
    /** the mean interval, ms */
    private readonly interval: number,
    /** the wall clock at the start (ms) */
    private readonly start: number,
    private readonly catchUpMs: number,
    /** [0, 1): draws the dithering */
    private readonly random: () => number = Math.random,
  ) {
    if (!(interval > 0)) throw new RangeError(`interval ${interval} ms`);
    this.next = start;
  }

  /** When the next tick is due (wall clock, ms). */
  get due(): number {
    return this.next;
  }

  /** The time on the target's clock since the start (ms) at which the next tick is due. */
  get elapsed(): number {
    return this.next - this.start;
  }

  /**
   * Take the tick that is due, at wall-clock time `now` (at or after `due`): returns the slots
   * skipped before it (missed: more than catchUpMs behind), from when (µs since the start),
   * and the tick's time on the target's clock (µs since the start), and schedules the next one.
   */
  take(now: number): { missed: number; time: number; skippedFrom: number } {
    const missed = Math.max(0, Math.floor((now - this.next - this.catchUpMs) / this.interval));
    // (the skipped slots span [skippedFrom, time) on the target's clock, µs)
    const skippedFrom = Math.round((this.next - this.start) * 1000);
    this.next += missed * this.interval;
    const time = Math.round((this.next - this.start) * 1000);
    this.next += this.interval * (0.5 + this.random());
    return { missed, time, skippedFrom };
  }

  /** The target stood still (kept stopped) for `ms`: so does the schedule. */
  stood(ms: number): void {
    this.next += ms;
  }
}
