// What every export may say about the recording besides the profile: where it came from, and
// how it was validated. Built once by the caller (the CLI from the capture's header; a library
// user from wherever its samples came).

import type { Profile } from '../profile/profile.js';
import type { ProfileStats } from '../profile/types.js';
import type { CaptureWarning, SamplingMode } from '../capture/types.js';
import { MAX_TASKS } from '../walk/task-graph.js';

/**
 * What reading the capture found: how much of it was read and whether the recorder closed it.
 * A damaged capture still gives a profile; this says what it lacks.
 */
export interface CaptureHealth {
  /** record blocks whose samples are in the profile */
  blocks: number;
  /** record blocks skipped as damaged (counted from the end block when the file has one) */
  skippedBlocks: number;
  /** sample records in the skipped blocks; null when the file has no end block to count them by */
  lostSamples: number | null;
  /** the file ends with the recorder's end block (otherwise it was cut short) */
  closedCleanly: boolean;
  /** samples the mode left out because the recorder could not tell whether its fact held (cpu: the thread's state unreadable) */
  undetermined: number;
  /** samples whose thread had more asyncio tasks on its list than a report follows (MAX_TASKS): those past it are not shown */
  cutTaskLists: number;
  /** every problem the reader reported, in file order */
  warnings: CaptureWarning[];
}

export interface ExportMeta {
  /** a title for viewers, e.g. "pid 1234 (python3.15, 3.15.2)" */
  title: string;
  /** e.g. "3.15.2" */
  pythonVersion: string | null;
  /** samples per second asked for (0: unknown) */
  rateHz: number;
  /** wall-clock start of the recording, ms since the epoch (0: unknown) */
  startTime: number;
  /** e.g. "pyunwind 0.1.0" */
  recorder: string;
  /** how copies were made consistent (null: unknown) */
  copy: string | null;
  /** which samples the profile holds: every thread's (wall), or those on a CPU, holding the GIL, handling an exception */
  mode: SamplingMode;
  /** what reading the capture found (absent: the samples did not come from a capture file) */
  capture?: CaptureHealth;
  /**
   * the native objects of a capture with native stacks (report --native): where each was
   * mapped and its build id, for the formats that describe binaries (pprof's mappings)
   */
  objects?: readonly NativeObjectMeta[];
}

/** A mapped object, as an export names it. */
export interface NativeObjectMeta {
  path: string;
  buildId: string | null;
  start: bigint;
  end: bigint;
}

/**
 * The validation numbers every export carries where its format allows: samples attempted,
 * trusted, rejected (by reason), torn, and ticks missed.
 */
export function validationSummary(profile: Profile): ProfileStats {
  return profile.stats();
}

/** Warnings listed one per line in text exports; the rest are counted (all are in the json). */
const WARNING_LINES = 20;

/**
 * The capture's health as lines of text: one line always when known (blocks read, skipped,
 * closed cleanly or cut short), then the reader's warnings.
 */
export function captureLines(meta: Pick<ExportMeta, 'capture'> | undefined): string[] {
  const c = meta?.capture;
  if (!c) return [];
  const s = (n: number, what: string): string => `${n} ${what}${n === 1 ? '' : 's'}`;
  const lost = c.skippedBlocks === 0 ? '' : c.lostSamples === null ? ', their samples uncounted' : ` (${s(c.lostSamples, 'sample')} lost)`;
  const skipped = c.skippedBlocks === 0 ? 'none skipped' : `${c.skippedBlocks} skipped as damaged${lost}`;
  const closed = c.closedCleanly ? 'closed cleanly' : 'NOT closed cleanly (the recording was cut short: the recorder was killed, the disk filled, or the file is still being written)';
  const out = [`capture: ${s(c.blocks, 'block')} read, ${skipped}; ${closed}`];
  if (c.cutTaskLists > 0) out.push(`task lists cut: in ${s(c.cutTaskLists, 'sample')} a thread had more than ${MAX_TASKS} asyncio tasks; those past ${MAX_TASKS} are not shown`);
  if (c.undetermined > 0) out.push(`left out: ${s(c.undetermined, 'sample')} whose thread's CPU state the recorder could not read (neither on nor off a CPU)`);
  for (const w of c.warnings.slice(0, WARNING_LINES)) out.push(`warning: byte ${w.offset}: ${w.message}`);
  if (c.warnings.length > WARNING_LINES) out.push(`… and ${c.warnings.length - WARNING_LINES} more warnings`);
  return out;
}

/**
 * The validation numbers as lines of text (for formats with comments or a text field), and,
 * given the export's meta, the capture's health (captureLines).
 */
export function validationLines(profile: Profile, meta?: Pick<ExportMeta, 'capture'>): string[] {
  const s = profile.stats();
  const rejected = Object.entries(s.statuses)
    .filter(([k, n]) => n > 0 && k !== 'complete' && k !== 'complete-unverifiable' && k !== 'idle')
    .map(([k, n]) => `${k} ${n}`);
  return [
    `samples attempted ${s.attempted}: trusted ${s.trusted} (complete ${s.statuses.complete}, complete-unverifiable ${s.statuses['complete-unverifiable']}, idle ${s.statuses.idle}), rejected ${s.rejected}${rejected.length ? ` (${rejected.join(', ')})` : ''}`,
    `ticks ${s.ticks} taken, ${s.missed} missed of ${s.scheduled} scheduled`,
    ...captureLines(meta),
  ];
}

/** What reading a processed capture found (CaptureReport's fields of the same names). */
export function captureHealth(r: CaptureHealth): CaptureHealth {
  return { blocks: r.blocks, skippedBlocks: r.skippedBlocks, lostSamples: r.lostSamples, closedCleanly: r.closedCleanly, undetermined: r.undetermined, cutTaskLists: r.cutTaskLists, warnings: r.warnings };
}

/** ExportMeta of a processed capture: its header's, and what reading it found. */
export function metaFromReport(r: CaptureHealth & { header: Parameters<typeof metaFromHeader>[0]; mode: SamplingMode; objects?: readonly NativeObjectMeta[] }): ExportMeta {
  const objects = r.objects?.map((o) => ({ path: o.path, buildId: o.buildId, start: o.start, end: o.end }));
  return { ...metaFromHeader(r.header, r.mode), capture: captureHealth(r), ...(objects ? { objects } : {}) };
}

/** ExportMeta from a capture's header; `mode`: the samples the profile keeps (default: those the recording kept). */
export function metaFromHeader(
  h: { target: string; pythonVersion: string; rateHz: number; startTime: number; recorder: string; copy?: string; sampling?: SamplingMode },
  mode: SamplingMode = h.sampling ?? 'wall',
): ExportMeta {
  return { title: h.target, pythonVersion: h.pythonVersion, rateHz: h.rateHz, startTime: h.startTime, recorder: h.recorder, copy: h.copy ?? null, mode };
}
