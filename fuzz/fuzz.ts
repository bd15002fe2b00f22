// The fuzzing loop: the targets (fuzz/targets.ts) in turns, each turn a fast-check run of a
// share of the cases with its own seed, until the cases or the time are used up. A failure
// is reported with what reproduces it: the target, the turn's seed and the counterexample's
// path (`npm run fuzz -- --replay 'TARGET|SEED|PATH'`).

import fc from 'fast-check';
import { targets, type Target } from './targets.js';

export interface FuzzOptions {
  /** cases in all (default 100,000) */
  cases?: number;
  /** stop starting new turns after this long (default 900 s) */
  seconds?: number;
  /** the first turn's seed; turn k uses seed + k (default: from the clock) */
  seed?: number;
  /** only the targets whose name contains this */
  only?: string;
  /** a single case again: `TARGET|SEED|PATH` as a failure printed it */
  replay?: string;
  /** before each turn (the runner's watchdog names it if it hangs) */
  onTurn?: (turn: { target: string; seed: number; cases: number }) => void;
  /** after each case */
  onCase?: () => void;
}

export interface FuzzFailureReport {
  target: string;
  seed: number;
  path: string;
  counterexample: string;
  error: string;
  replay: string;
}

export interface FuzzResult {
  cases: number;
  byTarget: Record<string, number>;
  failures: FuzzFailureReport[];
  seconds: number;
}

/** Cases per turn of a target of weight 1 (turns are short so that time bounds hold). */
const TURN_CASES = 25;

export async function fuzz(options: FuzzOptions = {}): Promise<FuzzResult> {
  const all = await targets(() => options.onCase?.());
  const started = performance.now();
  const result: FuzzResult = { cases: 0, byTarget: {}, failures: [], seconds: 0 };
  const run = async (t: Target, seed: number, numRuns: number, path?: string): Promise<void> => {
    options.onTurn?.({ target: t.name, seed, cases: numRuns });
    const details = await fc.check(t.property, { seed, numRuns, ...(path ? { path } : {}), endOnFailure: true });
    const ran = details.numRuns;
    result.cases += ran;
    result.byTarget[t.name] = (result.byTarget[t.name] ?? 0) + ran;
    if (details.failed) {
      const counterexample = fc.stringify(details.counterexample);
      const error = details.errorInstance instanceof Error ? `${details.errorInstance.name}: ${details.errorInstance.message}` : String(details.errorInstance);
      result.failures.push({ target: t.name, seed: details.seed, path: details.counterexamplePath ?? '', counterexample: counterexample.slice(0, 2000), error: error.slice(0, 2000), replay: `${t.name}|${details.seed}|${details.counterexamplePath ?? ''}` });
    }
  };

  if (options.replay) {
    const [name, seed, path] = options.replay.split('|');
    const t = all.find((x) => x.name === name);
    if (!t || seed === undefined) throw new Error(`--replay: no target "${name}" (targets: ${all.map((x) => x.name).join('; ')})`);
    await run(t, Number(seed), 1, path);
    result.seconds = (performance.now() - started) / 1000;
    return result;
  }

  const chosen = all.filter((t) => !options.only || t.name.includes(options.only));
  if (chosen.length === 0) throw new Error(`no target matches "${options.only}" (targets: ${all.map((x) => x.name).join('; ')})`);
  const cases = options.cases ?? 100_000;
  const deadline = started + (options.seconds ?? 900) * 1000;
  const total = chosen.reduce((n, t) => n + t.weight, 0);
  let seed = options.seed ?? Date.now() % 2 ** 31;
  // each target gets its weight's share of the cases, in turns taken in rotation
  const left = new Map(chosen.map((t) => [t, Math.max(1, Math.round((cases * t.weight) / total))]));
  while ([...left.values()].some((n) => n > 0) && performance.now() < deadline) {
    for (const t of chosen) {
      const n = Math.min(left.get(t)!, TURN_CASES * t.weight);
      if (n <= 0) continue;
      await run(t, seed++, n);
      left.set(t, left.get(t)! - n);
      if (performance.now() >= deadline) break;
    }
  }
  result.seconds = (performance.now() - started) / 1000;
  return result;
}
