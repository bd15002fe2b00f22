// A differential profile: how a `current` profile differs from a `base` one, stack by stack
// and function by function, in shares of samples so that recordings of different lengths (or
// rates) compare.
//
// - Shares: every share on a side is a percentage of that side's *samples with frames*: the
//   summed weight of its trusted samples that have a Python stack, over all threads (idle and
//   rejected samples are left out, as in the collapsed export). One base per side for every
//   number, so a stack's shares over the threads add up to its "all threads" share, and each
//   side's stacks add up to 100 (a side with no sample with frames has every share 0).
// - Change: current share − base share, in percentage points (positive: the current profile
//   spends a larger part of its samples there).
// - Stacks: root → leaf frame labels (frameLabel: `qualname (file:line)`, or `qualname (file)`
//   with `lines: false`): the stacks `--format collapsed` prints, the thread apart; with the
//   frames themselves (`sources`: qualname, file, line) for exports that need more than labels.
// - Functions: (qualname, filename) with self (the innermost frame) and total (anywhere on the
//   stack, once per sample even when it recurses) shares, as in the text and json reports.
// - Threads: each side's threads are named with threadLabel (`MainThread (tid 1234)`). A thread
//   is matched with the other side's thread of the same label; the threads left are matched by
//   name and interpreter, the first of a name (in native thread id order) with the first of
//   that name on the other side, and so on — two runs of a program have the same thread names
//   but other thread ids. An unnamed thread left has no partner (it is in one side only).
//   A pair is shown under the current side's label (the base's label when only the base has
//   it). `all` merges every thread: stacks without the thread, functions summed over threads.
// - Order: threads as the current profile orders them (interpreter, native thread id), then
//   the base-only ones; stacks by their frame labels (code-unit order); functions by the size
//   of the change in total share (largest first), then current total share, then name. The
//   model depends only on the two profiles' contents.

import type { Profile } from '../profile/profile.js';
import type { ThreadProfile } from '../profile/thread.js';
import { cmpStr } from '../profile/thread.js';
import type { ProfileStats, SourceFrame } from '../profile/types.js';
import { frameLabel, threadLabel } from './common.js';

export interface DiffOptions {
  /** keep line numbers in frame labels (default true, as the collapsed export) */
  lines?: boolean;
}

/** One side (base or current) as a whole. */
export interface DiffSide {
  /** weight of the trusted samples with frames: 100 % of this side's shares */
  samples: number;
  /** threads with samples with frames */
  threads: number;
  /** the validation numbers of the whole profile */
  stats: ProfileStats;
}

export interface DiffStack {
  /** frame labels, root first */
  frames: string[];
  /** the frames themselves, root first (of the side that has the stack; the current's when both do) */
  sources: SourceFrame[];
  /** summed weight of the samples that ended on this stack, per side */
  base: number;
  current: number;
  /** percent of the side's samples with frames */
  baseShare: number;
  currentShare: number;
  /** currentShare − baseShare (percentage points) */
  change: number;
}

export interface DiffFunction {
  qualname: string;
  filename: string;
  /** weights per side: self (innermost frame) and total (on the stack) */
  baseSelf: number;
  baseTotal: number;
  currentSelf: number;
  currentTotal: number;
  /** percent of the side's samples with frames */
  baseSelfShare: number;
  baseTotalShare: number;
  currentSelfShare: number;
  currentTotalShare: number;
  /** current − base share (percentage points) */
  selfChange: number;
  totalChange: number;
}

export interface DiffThread {
  /** how exports name it: the current side's threadLabel, else the base's ("all threads" for the merge) */
  label: string;
  /** the thread's label on each side (null: not on that side) */
  currentLabel: string | null;
  baseLabel: string | null;
  /** weight of the thread's samples with frames, per side, and as shares of the side */
  base: number;
  current: number;
  baseShare: number;
  currentShare: number;
  change: number;
  stacks: DiffStack[];
  functions: DiffFunction[];
}

export interface DiffProfile {
  base: DiffSide;
  current: DiffSide;
  /** were line numbers kept in frame labels */
  lines: boolean;
  /** matched threads with samples with frames on either side */
  threads: DiffThread[];
  /** every thread merged */
  all: DiffThread;
}

export const ALL_THREADS = 'all threads';

/** Percent of `total`, 0 when the side has nothing. */
function share(w: number, total: number): number {
  return total > 0 ? (100 * w) / total : 0;
}

/** Pairs the two sides' threads: same label, then same (interpreter, name) in order. */
export function matchThreads(current: ThreadProfile[], base: ThreadProfile[]): { current: ThreadProfile | null; base: ThreadProfile | null }[] {
  const pairs: { current: ThreadProfile | null; base: ThreadProfile | null }[] = current.map((c) => ({ current: c, base: null }));
  const left = new Set(base);
  const take = (key: (t: ThreadProfile) => string | null): void => {
    const byKey = new Map<string, ThreadProfile[]>();
    for (const b of base) {
      if (!left.has(b)) continue;
      const k = key(b);
      if (k === null) continue;
      let list = byKey.get(k);
      if (list === undefined) byKey.set(k, (list = []));
      list.push(b);
    }
    for (const p of pairs) {
      if (p.base !== null) continue;
      const k = key(p.current!);
      const b = k === null ? undefined : byKey.get(k)?.shift();
      if (b !== undefined) {
        p.base = b;
        left.delete(b);
      }
    }
  };
  take((t) => threadLabel(t));
  take((t) => (t.name === undefined ? null : `${t.interpreterId}:${t.name}`));
  for (const b of base) if (left.has(b)) pairs.push({ current: null, base: b });
  return pairs;
}

// Accumulates the weights of stacks and functions of one side.
interface Tally {
  stacks: Map<string, { frames: string[]; sources: SourceFrame[]; w: number }>;
  functions: Map<string, { qualname: string; filename: string; self: number; total: number }>;
  weight: number;
}

function tally(): Tally {
  return { stacks: new Map(), functions: new Map(), weight: 0 };
}

function addThread(into: Tally, t: ThreadProfile, lines: boolean): void {
  const labels = t.frames.map((f) => frameLabel(f, lines));
  const weights = t.stackWeight;
  for (let s = 0; s < weights.length; s++) {
    const w = weights[s]!;
    if (!(w > 0)) continue;
    const path = t.stackPath(s);
    const frames = path.map((f) => labels[f]!);
    const key = JSON.stringify(frames);
    const at = into.stacks.get(key);
    if (at === undefined) into.stacks.set(key, { frames, sources: path.map((f) => t.frames[f]!), w });
    else at.w += w;
    into.weight += w;
  }
  for (const f of t.functions()) {
    const key = JSON.stringify([f.qualname, f.filename]);
    const at = into.functions.get(key);
    if (at === undefined) into.functions.set(key, { qualname: f.qualname, filename: f.filename, self: f.self, total: f.total });
    else {
      at.self += f.self;
      at.total += f.total;
    }
  }
}

function compareLabels(a: readonly string[], b: readonly string[]): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const c = cmpStr(a[i]!, b[i]!);
    if (c !== 0) return c;
  }
  return a.length - b.length;
}

/** Functions by the size of the change in total share, then current total share, then name. */
export function compareFunctionChange(a: DiffFunction, b: DiffFunction): number {
  return (
    Math.abs(b.totalChange) - Math.abs(a.totalChange) ||
    b.currentTotalShare - a.currentTotalShare ||
    b.baseTotalShare - a.baseTotalShare ||
    cmpStr(a.qualname, b.qualname) ||
    cmpStr(a.filename, b.filename)
  );
}

function diffThread(label: string, currentLabel: string | null, baseLabel: string | null, cur: Tally, bas: Tally, curTotal: number, basTotal: number): DiffThread {
  const stacks: DiffStack[] = [];
  const keys = new Set([...bas.stacks.keys(), ...cur.stacks.keys()]);
  for (const k of keys) {
    const c = cur.stacks.get(k);
    const b = bas.stacks.get(k);
    const base = b?.w ?? 0;
    const current = c?.w ?? 0;
    const baseShare = share(base, basTotal);
    const currentShare = share(current, curTotal);
    const { frames, sources } = (c ?? b)!;
    stacks.push({ frames, sources, base, current, baseShare, currentShare, change: currentShare - baseShare });
  }
  stacks.sort((x, y) => compareLabels(x.frames, y.frames));

  const functions: DiffFunction[] = [];
  const fkeys = new Set([...bas.functions.keys(), ...cur.functions.keys()]);
  for (const k of fkeys) {
    const c = cur.functions.get(k);
    const b = bas.functions.get(k);
    const f = (c ?? b)!;
    const baseSelfShare = share(b?.self ?? 0, basTotal);
    const baseTotalShare = share(b?.total ?? 0, basTotal);
    const currentSelfShare = share(c?.self ?? 0, curTotal);
    const currentTotalShare = share(c?.total ?? 0, curTotal);
    functions.push({
      qualname: f.qualname,
      filename: f.filename,
      baseSelf: b?.self ?? 0,
      baseTotal: b?.total ?? 0,
      currentSelf: c?.self ?? 0,
      currentTotal: c?.total ?? 0,
      baseSelfShare,
      baseTotalShare,
      currentSelfShare,
      currentTotalShare,
      selfChange: currentSelfShare - baseSelfShare,
      totalChange: currentTotalShare - baseTotalShare,
    });
  }
  functions.sort(compareFunctionChange);

  const baseShare = share(bas.weight, basTotal);
  const currentShare = share(cur.weight, curTotal);
  return { label, currentLabel, baseLabel, base: bas.weight, current: cur.weight, baseShare, currentShare, change: currentShare - baseShare, stacks, functions };
}

/** How `current` differs from `base` (see the file comment). */
export function diffProfiles(current: Profile, base: Profile, options: DiffOptions = {}): DiffProfile {
  const lines = options.lines ?? true;
  const pairs = matchThreads(current.threads(), base.threads());
  const allCur = tally();
  const allBas = tally();
  const perThread = pairs.map((p) => {
    const cur = tally();
    const bas = tally();
    if (p.current) {
      addThread(cur, p.current, lines);
      addThread(allCur, p.current, lines);
    }
    if (p.base) {
      addThread(bas, p.base, lines);
      addThread(allBas, p.base, lines);
    }
    return { p, cur, bas };
  });
  const curTotal = allCur.weight;
  const basTotal = allBas.weight;
  const threads = perThread
    .filter(({ cur, bas }) => cur.weight > 0 || bas.weight > 0)
    .map(({ p, cur, bas }) => {
      const currentLabel = p.current ? threadLabel(p.current) : null;
      const baseLabel = p.base ? threadLabel(p.base) : null;
      return diffThread((currentLabel ?? baseLabel)!, currentLabel, baseLabel, cur, bas, curTotal, basTotal);
    });
  const side = (profile: Profile, samples: number, n: number): DiffSide => ({ samples, threads: n, stats: profile.stats() });
  return {
    base: side(base, basTotal, threads.filter((t) => t.base > 0).length),
    current: side(current, curTotal, threads.filter((t) => t.current > 0).length),
    lines,
    threads,
    all: diffThread(ALL_THREADS, null, null, allCur, allBas, curTotal, basTotal),
  };
}
