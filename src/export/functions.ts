// Functions across threads, for the formats that key them without a thread (pprof, pstats): a
// function is (qualname, filename) — all its lines together, as the function tables of the
// other exports — and its line is the smallest line any sample saw in it (a profile has only
// the executing line of each frame, not the code's first line).

import type { SourceFrame } from '../profile/types.js';

export interface MergedFunction {
  qualname: string;
  filename: string;
  /** the smallest line seen in it; 0 when no sample had a line */
  line: number;
}

/**
 * The functions of `threads` in order of first use, and per thread the function of each of its
 * frames (`frameFunction[thread][frame]`, an index into `functions`).
 */
export function mergedFunctions(threads: readonly { frames: readonly SourceFrame[] }[]): { functions: MergedFunction[]; frameFunction: number[][] } {
  const index = new Map<string, number>();
  const functions: MergedFunction[] = [];
  const frameFunction = threads.map((t) =>
    t.frames.map((f) => {
      const key = `${f.qualname.length}:${f.qualname}${f.filename}`;
      let i = index.get(key);
      if (i === undefined) {
        index.set(key, (i = functions.length));
        functions.push({ qualname: f.qualname, filename: f.filename, line: -1 });
      }
      const fn = functions[i]!;
      if (f.line !== null && (fn.line < 0 || f.line < fn.line)) fn.line = f.line;
      return i;
    }),
  );
  for (const fn of functions) if (fn.line < 0) fn.line = 0;
  return { functions, frameFunction };
}
