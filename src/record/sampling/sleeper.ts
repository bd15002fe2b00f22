// Waiting for a sampler's next tick.

/** A word nobody writes: Atomics.wait on it sleeps for its timeout. */
const word = new Int32Array(new SharedArrayBuffer(4));

/**
 * A thread put to sleep wakes up late: by the kernel's timer slack (50 µs unless the recorder
 * could lower it, see native.ts setTimerSlack) and by the wait's own cost (measured here for a
 * 100 µs Atomics.wait: 106 µs late at the median with the default slack, 55 µs with 1 ns).
 * The last stretch before a tick is therefore spun, not slept: as long as waits lately
 * overshot (a moving average, times 1.5), within [MIN_SPIN_MS, MAX_SPIN_MS]. At 10 kHz that is
 * most of every interval; at 1 kHz a fraction.
 */
const MIN_SPIN_MS = 0.05;
const MAX_SPIN_MS = 0.3;

/**
 * Sleeps until a time: timers for the bulk, Atomics.wait, then (`spin`) a spin as long as waits
 * overshoot. Without the spin it wakes up to a wait's overshoot late, and takes no CPU from a
 * program that needs it (the Pyodide recorder: the program runs on another thread of the same
 * process).
 */
export class Sleeper {
  /** how late recent Atomics.waits woke, ms (moving average) */
  private overshoot = 0.1;
  /** when the last wait gave the recorder a CPU again (performance.now(), ms): from there it spun */
  woke = 0;

  constructor(private readonly spin = true) {}

  async until(until: number): Promise<void> {
    this.woke = performance.now();
    let left = until - this.woke;
    if (left > 3) {
      await new Promise((r) => setTimeout(r, left - 2));
      this.woke = performance.now();
      left = until - this.woke;
    }
    const spin = this.spin ? Math.min(MAX_SPIN_MS, Math.max(MIN_SPIN_MS, this.overshoot * 1.5)) : 0;
    if (left > spin) {
      const asked = left - spin;
      const t0 = performance.now();
      Atomics.wait(word, 0, 0, asked);
      this.woke = performance.now();
      this.overshoot += (this.woke - t0 - asked - this.overshoot) * 0.1;
    }
    while (performance.now() < until) {
      // spin: the tick is due within `spin`
    }
  }
}
