// Brendan Gregg's collapsed stacks: one line per distinct stack, `thread;root;…;leaf count`,
// for flamegraph.pl, speedscope, the Firefox Profiler and friends.
//
// - The first element is the thread (see threadLabel: `MainThread (tid 1234)`, `thread 1234`)
//   unless `threads: false`, which drops it and sums equal stacks across threads. In a profile
//   of several processes (report of record --subprocesses captures), the process comes before
//   it (processLabel: `pid 1234 (app.py)`), so that each process is a tree of its own.
// - A frame is `qualname (file:line)`, or `qualname (file)` when CPython had no line for it or
//   with `lines: false` (which sums the lines of a function together).
// - Readers split a line at its last space (the count) and the rest at `;`. So that no name can
//   break that, four characters are percent-escaped in every element: `%` → `%25`, `;` → `%3B`,
//   LF → `%0A`, CR → `%0D`. Because `%` itself is escaped, decodeURIComponent (or
//   unescapeCollapsed) gives the exact name back. Spaces need no escape: the count is
//   whatever follows the last one.
// - Counts are the summed sample weights (integers unless the samples had fractional weights).
// - Idle samples are left out unless `idle: true`, which shows them as `thread;<idle> count`
//   (py-spy and Austin leave idle threads out by default too; the text and json reports
//   always count them).
// - Lines are sorted (code-unit order), so the output depends only on the profile's content.
// - Only trusted samples are in a Profile's stacks, so nothing rejected can appear here.

import type { Profile } from '../profile/profile.js';
import { IDLE_FRAME, frameLabel, threadLabel } from './common.js';

export interface CollapsedOptions {
  /** show idle samples as a `<idle>` frame (default false) */
  idle?: boolean;
  /** keep line numbers in frame names (default true) */
  lines?: boolean;
  /** start each stack with the thread (default true) */
  threads?: boolean;
}

export function escapeCollapsed(s: string): string {
  return s.replace(/[%;\n\r]/g, (c) => (c === '%' ? '%25' : c === ';' ? '%3B' : c === '\n' ? '%0A' : '%0D'));
}

export function unescapeCollapsed(s: string): string {
  return s.replace(/%(25|3B|0A|0D)/g, (_, h: string) => String.fromCharCode(parseInt(h, 16)));
}

export function exportCollapsed(profile: Profile, options: CollapsedOptions = {}): string {
  const { idle = false, lines = true, threads = true } = options;
  const counts = new Map<string, number>();
  const add = (stack: string, w: number): void => {
    if (w > 0) counts.set(stack, (counts.get(stack) ?? 0) + w);
  };
  for (const t of profile.threads()) {
    const prefix = threads ? `${t.process ? `${escapeCollapsed(t.process.label)};` : ''}${escapeCollapsed(threadLabel(t, false))};` : '';
    const labels = t.frames.map((f) => escapeCollapsed(frameLabel(f, lines)));
    const weights = t.stackWeight;
    for (let s = 0; s < weights.length; s++) {
      if (weights[s]! > 0) add(prefix + t.stackPath(s).map((f) => labels[f]!).join(';'), weights[s]!);
    }
    if (idle) add(prefix + IDLE_FRAME, t.idleWeight);
  }
  const out = [...counts.keys()].sort().map((k) => `${k} ${counts.get(k)!}`);
  return out.length === 0 ? '' : out.join('\n') + '\n';
}
