// The flame graph: one self-contained HTML page (no network: everything inline) with an
// interactive icicle graph per thread and of all threads merged, zoom, search, a tooltip, the
// top functions and the validation panel. The renderer (data shape, script, styles) is in
// src/export/html/flamegraph-script.ts, shared with the differential flame graph.
//
// Frames are the profile's frames: qualname, file and line, so a function called from two
// lines of its caller shows as two frames (like the other exports; the page's "merge lines"
// joins them). Idle samples are left out of the graph by default (as in the collapsed and
// speedscope exports) but counted in the base of every percentage, the thread's trusted weight
// (as in the text report); the page's "show idle" draws them as an `<idle>` frame.

import type { Profile } from '../profile/profile.js';
import { ThreadProfile } from '../profile/thread.js';
import type { SourceFrame } from '../profile/types.js';
import { frameName, threadLabel } from './common.js';
import type { ExportMeta } from './meta.js';
import {
  FLAMEGRAPH_CSS,
  FLAMEGRAPH_SCRIPT,
  flamegraphBody,
  type FlameFrame,
  type FlameFunction,
  type FlameGraphData,
  type FlameView,
} from './html/flamegraph-script.js';
import { BASE_CSS, htmlPage, recordingFacts } from './html/page.js';
import { validationPanel } from './html/validation.js';

/** At most this many functions per view in the page's table data. */
const MAX_FUNCTIONS = 1000;

/** A frame table shared by every view of a page: intern() gives a frame's index. */
export class FlameFrameTable {
  readonly frames: FlameFrame[] = [];
  private readonly index = new Map<string, number>();

  intern(f: SourceFrame): number {
    // (with opcodes a frame is named with its instruction: `hot BINARY_OP_ADD_INT`)
    const name = frameName(f);
    const key = `${name.length}:${name}${f.line ?? ''}:${f.filename}`;
    let i = this.index.get(key);
    if (i === undefined) {
      i = this.frames.length;
      this.frames.push([name, f.filename, f.line]);
      this.index.set(key, i);
    }
    return i;
  }
}

/**
 * A thread as a view: its stacks with weight (parents first), its function table and its
 * trusted weight as the base. `map` (when given) receives, per stack of the thread, the view's
 * node index (−1: a stack left out, no weight below it).
 */
export function flameView(t: ThreadProfile, id: string, label: string, table: FlameFrameTable, map?: Int32Array): FlameView {
  const sub = t.subtreeWeights();
  const node = map ?? new Int32Array(sub.length);
  const parent: number[] = [];
  const frame: number[] = [];
  const self: number[] = [];
  const frames = t.frames;
  for (let s = 0; s < sub.length; s++) {
    if (!(sub[s]! > 0)) {
      node[s] = -1;
      continue;
    }
    const p = t.stackParent[s]!;
    node[s] = parent.length;
    parent.push(p < 0 ? -1 : node[p]!);
    frame.push(table.intern(frames[t.stackFrame[s]!]!));
    self.push(t.stackWeight[s]!);
  }
  const functions: FlameFunction[] = t
    .functions()
    .slice(0, MAX_FUNCTIONS)
    .map((f) => [f.qualname, f.filename, f.self, f.total]);
  return { id, label, base: t.trustedWeight, idle: t.idleWeight, parent, frame, self, functions };
}

/** Every thread of the profile (or of the list) merged into one (identical stacks add up): the "all threads" view. */
export function mergedThreads(profile: Profile | readonly ThreadProfile[]): ThreadProfile {
  const all = new ThreadProfile({ interpreterId: -1n, threadId: -1n, nativeThreadId: -1n });
  for (const t of Array.isArray(profile) ? profile : (profile as Profile).threads()) {
    const tt = t.toTransfer();
    delete tt.name; // (the merged thread has no name of its own)
    all.mergeTransfer(tt);
  }
  return all;
}

/**
 * The views of a profile: "all threads" first, then each thread (sharing `table`). In a
 * profile of several processes: all of them, then each process (its threads merged) followed
 * by its threads.
 */
export function flameViews(profile: Profile, table: FlameFrameTable): FlameView[] {
  const threads = profile.threads();
  const processes = new Map<number, ThreadProfile[]>();
  for (const t of threads) if (t.process) processes.set(t.process.index, [...(processes.get(t.process.index) ?? []), t]);
  if (processes.size === 0) {
    return [flameView(mergedThreads(profile), 'all', `all threads (${threads.length})`, table), ...threads.map((t) => flameView(t, t.key, threadLabel(t), table))];
  }
  const views = [flameView(mergedThreads(profile), 'all', `all processes (${processes.size}; ${threads.length} threads)`, table)];
  for (const [index, list] of processes) {
    views.push(flameView(mergedThreads(list), `p${index}`, `${list[0]!.process!.label}: all threads (${list.length})`, table));
    for (const t of list) views.push(flameView(t, t.key, threadLabel(t), table));
  }
  return views;
}

export function flamegraphData(profile: Profile): FlameGraphData {
  const table = new FlameFrameTable();
  const views = flameViews(profile, table);
  return { version: 1, unit: 'samples', color: { mode: 'name' }, frames: table.frames, views, initialView: 0 };
}

export function exportFlamegraph(profile: Profile, meta: ExportMeta): string {
  return htmlPage({
    title: `Flame graph: ${meta.title}`,
    css: BASE_CSS + FLAMEGRAPH_CSS,
    body: flamegraphBody({
      kind: 'Flame graph',
      title: meta.title,
      facts: recordingFacts(profile, meta),
      side: validationPanel(profile.stats(), meta.capture ? { capture: meta.capture } : {}),
    }),
    data: flamegraphData(profile),
    script: FLAMEGRAPH_SCRIPT,
  });
}
