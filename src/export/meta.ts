// What every export may say about the recording besides the profile: where it came from, and
// how it was validated. Built once by the caller (the CLI from the capture's header; a library
// user from wherever its samples came).

import type { Profile } from '../profile/profile.js';
import type { ProfileStats } from '../profile/types.js';
import type { SamplingMode } from '../capture/types.js';

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
}

/**
 * The validation numbers every export carries where its format allows: samples attempted,
 * trusted, rejected (by reason), torn, and ticks missed.
 */
export function validationSummary(profile: Profile): ProfileStats {
  return profile.stats();
}

/** The validation numbers as lines of text (for formats with comments or a text field). */
export function validationLines(profile: Profile): string[] {
  const s = profile.stats();
  const rejected = Object.entries(s.statuses)
    .filter(([k, n]) => n > 0 && k !== 'complete' && k !== 'complete-unverifiable' && k !== 'idle')
    .map(([k, n]) => `${k} ${n}`);
  return [
    `samples attempted ${s.attempted}: trusted ${s.trusted} (complete ${s.statuses.complete}, complete-unverifiable ${s.statuses['complete-unverifiable']}, idle ${s.statuses.idle}), rejected ${s.rejected}${rejected.length ? ` (${rejected.join(', ')})` : ''}`,
    `ticks ${s.ticks} taken, ${s.missed} missed of ${s.scheduled} scheduled`,
  ];
}

/** ExportMeta from a capture's header; `mode`: the samples the profile keeps (default: those the recording kept). */
export function metaFromHeader(
  h: { target: string; pythonVersion: string; rateHz: number; startTime: number; recorder: string; copy?: string; sampling?: SamplingMode },
  mode: SamplingMode = h.sampling ?? 'wall',
): ExportMeta {
  return { title: h.target, pythonVersion: h.pythonVersion, rateHz: h.rateHz, startTime: h.startTime, recorder: h.recorder, copy: h.copy ?? null, mode };
}
