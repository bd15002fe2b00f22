// What bench/slowdown.bench.ts and bench/interrupt-cost.bench.ts share: the kernel's own
// sampling at the timer's interrupt (perf's cpu-clock events, nothing of a program copied) to
// set beside the recorder's, and the figures of their tables.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';

/** Does `perf` run here (Debian: linux-perf)? */
export function perfAvailable(): boolean {
  return spawnSync('perf', ['--version'], { stdio: 'ignore' }).status === 0;
}

/**
 * Start `perf record -e cpu-clock` at `rateHz` on the CPUs `where` names (`['-a']`: every one,
 * `['-C', '1']`: one) into `file`, for at most `seconds`; stop it with interruptAndWait.
 */
export function startTimer(where: readonly string[], rateHz: number, file: string, seconds: number): ChildProcess {
  // (cpu-clock's period is in nanoseconds)
  return spawn('perf', ['record', '-q', ...where, '-e', 'cpu-clock', '-c', String(Math.round(1e9 / rateHz)), '-o', file, '--', 'sleep', String(seconds)], { stdio: 'ignore' });
}

/** Interrupt a child (SIGINT, as at a terminal: perf writes its file and ends) if it still runs, and wait for it to end. */
export async function interruptAndWait(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const ended = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGINT');
  await ended;
}

/** The median (of an even count, the mean of the middle two). */
export const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

/** A fraction as a percentage, one decimal. */
export const pct = (x: number): string => `${(100 * x).toFixed(1)} %`;
