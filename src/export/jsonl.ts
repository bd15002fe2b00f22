// JSON Lines (https://jsonlines.org): one JSON object per line, for jq, pandas
// (`pd.read_json(f, lines=True)`), DuckDB or a script — every trusted sample, in time order.
//
//   {"type":"header","format":"pyunwind-samples","version":1,"title":…,"pythonVersion":…,
//    "rateHz":…,"startTime":…,"recorder":…,"mode":…,"validation":{…},"capture":{…}}
//   {"type":"sample","time":1234,"thread":{"native_id":…,"thread_id":…,"interpreter_id":0,
//    "name":"MainThread"},"status":"complete","frames":[{"qualname":…,"filename":…,"line":…},…]}
//   (with opcodes, a frame also has "opcode": its instruction, where it is known)
//   …
//   {"type":"summary","attempted":…,"trusted":…,"rejected":…,"statuses":{…},"ticks":…,"missed":…,"scheduled":…}
//
// - sample lines: the trusted samples (complete, complete-unverifiable, idle — an idle one
//   has no frames), merged across threads by time (µs since the recording started; equal
//   times in thread order); frames innermost first. Rejected samples are only counted (their
//   stacks are not trusted), in `statuses` of the header and summary.
// - ids (native_id, thread_id, interpreter_id) are JSON numbers when they are safe integers
//   (≤ 2^53 − 1, exact in a double) and decimal strings otherwise: CPython's thread_id is a
//   64-bit pointer-sized value that often is not. `name` is null when the recorder gave none.
// - validation numbers: `attempted`, `trusted`, `rejected`, `statuses` (all ten statuses)
//   count samples, as in the json report; `ticks`, `missed`, `scheduled` count sampling
//   moments and need the Profile (null when none is given).
// - capture (when the samples came from a capture file): blocks read, skippedBlocks,
//   lostSamples (null: uncounted), closedCleanly, warnings [{offset, message}] (ExportMeta).

import type { Profile } from '../profile/profile.js';
import { REJECTED_STACK, Timeline, type TimelineThread } from '../profile/timeline.js';
import { emptyStatusCounts, type ValidationStats } from '../profile/types.js';
import { TRUSTED } from '../walk/status.js';
import { sourceFrame } from '../symbols/types.js';
import type { ExportMeta } from './meta.js';

export const JSONL_FORMAT = 'pyunwind-samples';
export const JSONL_VERSION = 1;

/** A sample of a timeline: thread (index into timeline.threads()) and sample index in it. */
export interface TimelineSampleRef {
  thread: number;
  index: number;
}

/**
 * The samples of every thread that `keep` accepts, merged in time order; equal times keep
 * thread order, then recording order.
 */
export function mergeByTime(threads: TimelineThread[], keep: (t: TimelineThread, i: number) => boolean): TimelineSampleRef[] {
  const out: TimelineSampleRef[] = [];
  threads.forEach((t, thread) => {
    for (let index = 0; index < t.time.length; index++) if (keep(t, index)) out.push({ thread, index });
  });
  // Array.prototype.sort is stable: ties stay in (thread, index) order
  return out.sort((a, b) => threads[a.thread]!.time[a.index]! - threads[b.thread]!.time[b.index]!);
}

/** Samples per status over a timeline (the numbers a Profile of the same samples gives). */
export function timelineStats(timeline: Timeline): ValidationStats {
  const statuses = emptyStatusCounts();
  for (const t of timeline.threads()) for (const s of t.status) statuses[s]++;
  let attempted = 0;
  let trusted = 0;
  for (const [s, n] of Object.entries(statuses)) {
    attempted += n;
    if (TRUSTED.has(s as keyof typeof statuses)) trusted += n;
  }
  return { attempted, trusted, rejected: attempted - trusted, statuses };
}

/** A 64-bit id as JSON: a number when it is a safe integer, else a decimal string. */
export function jsonId(id: bigint): number | string {
  return id >= BigInt(Number.MIN_SAFE_INTEGER) && id <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(id) : String(id);
}

interface Validation extends ValidationStats {
  ticks: number | null;
  missed: number | null;
  scheduled: number | null;
}

function validation(timeline: Timeline, profile: Profile | undefined): Validation {
  // the statuses come from the timeline: the samples this file holds
  const v = timelineStats(timeline);
  const s = profile?.stats();
  return { ...v, ticks: s?.ticks ?? null, missed: s?.missed ?? null, scheduled: s?.scheduled ?? null };
}

/**
 * The samples as JSON Lines (see the file header). `profile` (optional) supplies the
 * schedule: ticks taken and missed.
 */
export function exportJsonl(timeline: Timeline, meta: ExportMeta, profile?: Profile): string {
  const threads = timeline.threads();
  const v = validation(timeline, profile);
  const lines: string[] = [
    JSON.stringify({
      type: 'header',
      format: JSONL_FORMAT,
      version: JSONL_VERSION,
      title: meta.title,
      pythonVersion: meta.pythonVersion,
      rateHz: meta.rateHz,
      startTime: meta.startTime,
      recorder: meta.recorder,
      mode: meta.mode,
      copy: meta.copy,
      validation: v,
      ...(meta.capture ? { capture: meta.capture } : {}),
    }),
  ];
  const threadJson = threads.map((t) =>
    JSON.stringify({
      native_id: jsonId(t.nativeThreadId),
      thread_id: jsonId(t.threadId),
      interpreter_id: jsonId(t.interpreterId),
      name: t.name ?? null,
      // in a profile of several processes: the thread's process
      ...(t.process ? { pid: t.process.pid, process: t.process.label } : {}),
    }),
  );
  // frames of each (thread, stack), made once; idle samples (stack −1) have none
  const frameCache = threads.map(() => new Map<number, string>());
  const framesJson = (ti: number, stack: number): string => {
    const cache = frameCache[ti]!;
    let s = cache.get(stack);
    if (s === undefined) {
      const path = stack < 0 ? [] : Timeline.path(threads[ti]!, stack).reverse();
      s = JSON.stringify(path.map(sourceFrame));
      cache.set(stack, s);
    }
    return s;
  };
  for (const { thread, index } of mergeByTime(threads, (t, i) => t.stack[i] !== REJECTED_STACK)) {
    const t = threads[thread]!;
    lines.push(
      `{"type":"sample","time":${JSON.stringify(t.time[index]!)},"thread":${threadJson[thread]},"status":${JSON.stringify(t.status[index]!)},"frames":${framesJson(thread, t.stack[index]!)}}`,
    );
  }
  lines.push(JSON.stringify({ type: 'summary', ...v }));
  return lines.join('\n') + '\n';
}
