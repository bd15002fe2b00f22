// Python's profile statistics: the file `cProfile`'s dump_stats writes and `pstats.Stats(FILE)`,
// `python -m pstats FILE` and snakeviz read — a marshal'd dict (src/export/marshal.ts)
//
//   {(filename, line, funcname): (cc, nc, tt, ct, callers)}
//   callers = {(filename, line, funcname): (nc, cc, tt, ct)}   (the caller's key: that edge)
//
// cc: primitive calls, nc: all calls, tt: seconds in the function itself, ct: seconds with what
// it called (Lib/cProfile.py snapshot_stats; Lib/pstats.py reads them).
//
// A sampling profile has no calls, so the numbers are samples:
// - A function is (qualname, filename) — all its lines together, as the other exports' function
//   tables — keyed (filename, line, qualname) with line the smallest line any sample saw in it
//   (the profile has only the executing line of each frame, not the code's first line; 0 when
//   no sample had a line). The funcname is the qualname (`Class.method`), not the bare name.
// - nc = cc = the samples with the function on the stack, counted once per sample even when it
//   recurses (so pstats shows no "nc/cc" split, and nc is the function's share of samples);
//   tt = its self samples × the interval, ct = its on-stack samples × the interval. The
//   interval is 1/rate (1 ms when the rate is unknown). Counts are the summed sample weights,
//   rounded to integers (weights are 1 unless a producer said otherwise); times use the exact
//   weights.
// - callers[g] of f: the samples where g directly calls f somewhere on the stack (once per
//   sample), as nc = cc, ct = those samples × the interval; tt = the samples whose innermost
//   frame is f called directly by g × the interval (so f's callers' tt add up to f's tt, less
//   the samples where f is the outermost frame).
// - Threads are merged: pstats has no threads, so every thread's samples are added together.
// - Only trusted samples with a Python frame are in it (idle samples have no function). pstats
//   has no place for the validation numbers or the recording's metadata: the other formats
//   carry them.
//
// CPython 3.15's own sampler (profiling.sampling, pstats_collector.py) writes cc = self
// samples and plain-int callers, and marks its file with a ('__sampled__',) key so that 3.15's
// pstats shows "nsamples" columns. That marker makes every older pstats (and snakeviz) fail to
// load the file, so it is not written: this file is the classic shape, which every pstats reads.
//
// The output is canonical: functions and callers sorted by (filename, line, funcname).

import type { Profile } from '../profile/profile.js';
import { canonicalThread } from '../profile/profile.js';
import { cmpStr } from '../profile/thread.js';
import { mergedFunctions } from './functions.js';
import type { ExportMeta } from './meta.js';
import { PyDict, PyFloat, marshalDumps, type MarshalValue } from './marshal.js';

/** One function's numbers (weights: summed sample weights). */
export interface PstatsFunction {
  filename: string;
  line: number;
  qualname: string;
  /** weight of samples with the function on the stack (once per sample) */
  total: number;
  /** weight of samples with the function innermost */
  self: number;
  /** by caller (index into the function list): [total, self] weights of the edge */
  callers: Map<number, [total: number, self: number]>;
}

/** The functions of every thread merged, sorted by (filename, line, qualname), as pstats gets them. */
export function pstatsFunctions(profile: Profile): PstatsFunction[] {
  const threads = profile.threads().map(canonicalThread);
  const merged = mergedFunctions(threads);
  const fnOf = merged.frameFunction;
  const fns: PstatsFunction[] = merged.functions.map((f) => ({ filename: f.filename, line: f.line, qualname: f.qualname, total: 0, self: 0, callers: new Map() }));
  // per stack with weight, its path (root first) in functions
  const seenFn = new Int32Array(fns.length).fill(-1);
  const seenEdge = new Map<number, number>();
  let mark = 0;
  threads.forEach((t, ti) => {
    const fnOfFrame = fnOf[ti]!;
    const { stackParent, stackFrame, stackWeight } = t;
    const stackFn = new Int32Array(stackFrame.length);
    for (let s = 0; s < stackFn.length; s++) stackFn[s] = fnOfFrame[stackFrame[s]!]!;
    for (let s = 0; s < stackWeight.length; s++) {
      const w = stackWeight[s]!;
      if (!(w > 0)) continue;
      mark++;
      seenEdge.clear();
      const leaf = stackFn[s]!;
      fns[leaf]!.self += w;
      const leafParent = stackParent[s]!;
      if (leafParent >= 0) edge(fns[leaf]!, stackFn[leafParent]!)[1] += w;
      for (let x = s; x >= 0; x = stackParent[x]!) {
        const f = stackFn[x]!;
        if (seenFn[f] !== mark) {
          seenFn[f] = mark;
          fns[f]!.total += w;
        }
        const p = stackParent[x]!;
        if (p >= 0) {
          const caller = stackFn[p]!;
          const key = f * fns.length + caller;
          if (seenEdge.get(key) !== mark) {
            seenEdge.set(key, mark);
            edge(fns[f]!, caller)[0] += w;
          }
        }
      }
    }
  });
  // sorted, callers re-indexed
  const order = fns.map((_, i) => i).sort((a, b) => compareKeys(fns[a]!, fns[b]!));
  const newIndex = new Int32Array(fns.length);
  order.forEach((old, i) => (newIndex[old] = i));
  return order.map((old) => {
    const fn = fns[old]!;
    const callers = new Map([...fn.callers].map(([c, v]) => [newIndex[c]!, v] as [number, [number, number]]).sort((a, b) => a[0] - b[0]));
    return { ...fn, callers };
  });
}

function edge(callee: PstatsFunction, caller: number): [number, number] {
  let e = callee.callers.get(caller);
  if (e === undefined) callee.callers.set(caller, (e = [0, 0]));
  return e;
}

function compareKeys(a: PstatsFunction, b: PstatsFunction): number {
  return cmpStr(a.filename, b.filename) || a.line - b.line || cmpStr(a.qualname, b.qualname);
}

/** Seconds a sample stands for: 1/rate, or 1 ms when the rate is unknown. */
export function pstatsInterval(meta: Pick<ExportMeta, 'rateHz'>): number {
  return meta.rateHz > 0 ? 1 / meta.rateHz : 0.001;
}

/**
 * The pstats file of a profile (see the file comment). Throws when no trusted sample has a
 * Python frame: pstats.Stats refuses an empty file ("Cannot create or construct …").
 */
export function exportPstats(profile: Profile, meta: ExportMeta): Uint8Array {
  const fns = pstatsFunctions(profile);
  if (fns.length === 0) throw new RangeError('pstats: the profile has no trusted sample with a Python frame, and pstats cannot load an empty file');
  const interval = pstatsInterval(meta);
  const keys: MarshalValue[] = fns.map((f) => [f.filename, f.line, f.qualname]);
  const count = (w: number): number => Math.round(w);
  return marshalDumps(
    new PyDict(
      fns.map((f, i) => {
        const n = count(f.total);
        const callers = new PyDict(
          [...f.callers].map(([c, [total, self]]) => {
            const m = count(total);
            return [keys[c]!, [m, m, new PyFloat(self * interval), new PyFloat(total * interval)]] as const;
          }),
        );
        return [keys[i]!, [n, n, new PyFloat(f.self * interval), new PyFloat(f.total * interval), callers]] as const;
      }),
    ),
  );
}
