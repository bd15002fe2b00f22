// Chrome DevTools' `.cpuprofile`: the JSON of the DevTools protocol's Profiler.Profile
// (https://chromedevtools.github.io/devtools-protocol/tot/Profiler/#type-Profile), which the
// Performance panel loads ("Load profile…"), as do VS Code, speedscope and other viewers.
//
//   {nodes: [{id, callFrame: {functionName, scriptId, url, lineNumber, columnNumber},
//             hitCount, children: [id…]}…],
//    startTime, endTime (µs), samples: [node id…], timeDeltas: [µs…]}
//
// - node 1 is "(root)"; under it one node per thread (functionName = threadLabel, no url),
//   and under each thread its Python stacks, one node per frame (qualname, filename, line):
//   functionName = qualname, url = filename, lineNumber = line − 1 (DevTools counts lines
//   and columns from 0; −1: unknown — so no line and CPython's line 0, which it gives code
//   made at run time such as exec'd strings, both read −1), columnNumber −1 (CPython gives
//   no column here).
// - idle samples go to one "(idle)" node directly under the root, where DevTools looks for
//   it (like "(program)" and "(garbage collector)"): it then draws them as idle time instead
//   of as a function. So which thread was idle is not in this file (the text, json and gecko
//   reports keep it).
// - samples: every trusted sample of every thread, merged by time (equal times in thread
//   order) — DevTools has one sample stream, so the threads interleave in its flame chart;
//   its call tree and bottom-up views group them by thread node.
// - rejected samples are not samples (DevTools has no place for a sample it should not
//   trust), but time stays right: deltas run between the samples that are kept, so a
//   rejected sample's time falls into the delta of the next kept sample.
// - times: integer µs. startTime is the recording's start as wall-clock µs since the epoch
//   (0 when unknown), each sample at startTime + its time; endTime is the last attempted
//   sample (trusted or not).
// - the validation numbers go in an extra top-level "pyunwind" object (viewers ignore
//   fields they do not know): title, recorder, rate, and samples per status (ticks and
//   missed too when a Profile is given).

import type { Profile } from '../profile/profile.js';
import { IDLE_STACK, REJECTED_STACK, type Timeline } from '../profile/timeline.js';
import { frameName, threadLabel } from './common.js';
import { mergeByTime, timelineStats } from './jsonl.js';
import type { ExportMeta } from './meta.js';

export interface CpuprofileCallFrame {
  functionName: string;
  scriptId: string;
  url: string;
  lineNumber: number;
  columnNumber: number;
}

export interface CpuprofileNode {
  id: number;
  callFrame: CpuprofileCallFrame;
  hitCount: number;
  children: number[];
}

export interface Cpuprofile {
  nodes: CpuprofileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
  pyunwind: {
    title: string;
    pythonVersion: string | null;
    rateHz: number;
    recorder: string;
    mode: string;
    copy: string | null;
    attempted: number;
    trusted: number;
    rejected: number;
    statuses: Record<string, number>;
    ticks: number | null;
    missed: number | null;
  };
}

/** The cpuprofile as an object (see the file header); `profile` (optional) supplies ticks and missed. */
export function cpuprofileDocument(timeline: Timeline, meta: ExportMeta, profile?: Profile): Cpuprofile {
  const threads = timeline.threads();
  const nodes: CpuprofileNode[] = [];
  const scriptIds = new Map<string, string>();
  const node = (parent: CpuprofileNode | null, functionName: string, url: string, line: number | null): CpuprofileNode => {
    let scriptId = '0';
    if (url !== '') {
      scriptId = scriptIds.get(url) ?? String(scriptIds.size + 1);
      scriptIds.set(url, scriptId);
    }
    const n: CpuprofileNode = {
      id: nodes.length + 1,
      callFrame: { functionName, scriptId, url, lineNumber: line === null || line < 1 ? -1 : line - 1, columnNumber: -1 },
      hitCount: 0,
      children: [],
    };
    nodes.push(n);
    parent?.children.push(n.id);
    return n;
  };
  const root = node(null, '(root)', '', null);
  let idle: CpuprofileNode | null = null;
  // per thread: timeline stack → node (a timeline parent has a smaller index: made first)
  const stackNodes = threads.map((t) => {
    const top = node(root, threadLabel(t), '', null);
    const map: CpuprofileNode[] = [];
    for (let s = 0; s < t.stackParent.length; s++) {
      const f = t.frames[t.stackFrame[s]!]!;
      const parent = t.stackParent[s]!;
      map.push(node(parent < 0 ? top : map[parent]!, frameName(f), f.filename, f.line));
    }
    return map;
  });

  const base = meta.startTime > 0 ? Math.round(meta.startTime * 1000) : 0;
  const samples: number[] = [];
  const timeDeltas: number[] = [];
  let previous = base;
  for (const { thread, index } of mergeByTime(threads, (t, i) => t.stack[i] !== REJECTED_STACK)) {
    const t = threads[thread]!;
    const stack = t.stack[index]!;
    const n = stack === IDLE_STACK ? (idle ??= node(root, '(idle)', '', null)) : stackNodes[thread]![stack]!;
    n.hitCount++;
    const at = base + Math.round(t.time[index]!);
    samples.push(n.id);
    timeDeltas.push(at - previous);
    previous = at;
  }
  let end = previous;
  for (const t of threads) for (const us of t.time) end = Math.max(end, base + Math.round(us));

  const v = timelineStats(timeline);
  const s = profile?.stats();
  return {
    nodes,
    startTime: base,
    endTime: end,
    samples,
    timeDeltas,
    pyunwind: {
      title: meta.title,
      pythonVersion: meta.pythonVersion,
      rateHz: meta.rateHz,
      recorder: meta.recorder,
      mode: meta.mode,
      copy: meta.copy,
      attempted: v.attempted,
      trusted: v.trusted,
      rejected: v.rejected,
      statuses: { ...v.statuses },
      ticks: s?.ticks ?? null,
      missed: s?.missed ?? null,
    },
  };
}

/** The `.cpuprofile` JSON text (Chrome DevTools, Performance panel: load profile). */
export function exportCpuprofile(timeline: Timeline, meta: ExportMeta, profile?: Profile): string {
  return JSON.stringify(cpuprofileDocument(timeline, meta, profile));
}
