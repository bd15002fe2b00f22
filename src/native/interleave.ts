// One stack of C and Python frames: the Python frames put where the interpreter runs them.
//
// Every run of the eval loop is one native frame (`_PyEval_EvalFrameDefault`), and it runs the
// Python frames from the one it was entered with up to the next frame entered from C: the
// Python walk tells where those entries are (WalkFrame.callsThroughC: an entry frame on 3.12+,
// is_entry on 3.11). So the Python frames split into groups at the entries, one group per eval
// frame; each eval frame of the native chain is replaced by its group, innermost with innermost.
// Where the counts differ (the thread was caught entering or leaving the loop, a frame was
// pushed but the loop not yet run) the stacks cannot be put together: the sample is not shown
// with frames in the wrong place.

/** The functions that run Python frames, one call per entry into the interpreter. */
export const EVAL_FUNCTIONS: ReadonlySet<string> = new Set(['_PyEval_EvalFrameDefault']);

/**
 * The Python frames (innermost first) split into the groups each run of the eval loop holds,
 * innermost group first. `callsThroughC(k)`: frame k called its callee (frame k − 1) through C —
 * on frame 0, the thread is in C code that the innermost frame called (an empty group, the eval
 * loop entered from it has no frame yet). No frames: no group.
 */
export function evalGroups(count: number, callsThroughC: (k: number) => boolean): [start: number, end: number][] {
  if (count === 0) return [];
  const groups: [number, number][] = [];
  let start = 0;
  for (let k = 0; k < count; k++) {
    if (callsThroughC(k)) {
      groups.push([start, k]);
      start = k;
    }
  }
  groups.push([start, count]);
  return groups;
}

/** Native frames innermost first, each named (null: no symbol). */
export interface NamedNative<N> {
  frame: N;
  name: string | null;
}

/**
 * The merged stack, innermost first, or null where the native chain's eval frames are not one
 * per group. The eval frames themselves are left out: their Python frames stand in their place.
 */
export function interleave<N, P>(natives: readonly NamedNative<N>[], python: readonly P[], callsThroughC: (k: number) => boolean): (N | P)[] | null {
  const groups = evalGroups(python.length, callsThroughC);
  let evals = 0;
  for (const n of natives) if (n.name !== null && EVAL_FUNCTIONS.has(n.name)) evals++;
  if (evals !== groups.length) return null;
  const out: (N | P)[] = [];
  let g = 0;
  for (const n of natives) {
    if (n.name !== null && EVAL_FUNCTIONS.has(n.name)) {
      const [start, end] = groups[g++]!;
      for (let k = start; k < end; k++) out.push(python[k]!);
    } else out.push(n.frame);
  }
  return out;
}
