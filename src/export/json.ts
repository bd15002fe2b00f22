// The machine-readable report: the profile's own JSON (Profile.toJSON, canonical and
// lossless) with derived fields added — the validation summary, per-thread summaries and
// function tables, and a label per thread. Schema: docs/json-format.md. Profile.fromJSON reads
// it back (ignoring the derived fields), so a report is also a shard that can be merged.

import type { ProfileJSON, ThreadJSON } from '../profile/profile.js';
import type { Profile } from '../profile/profile.js';
import type { FunctionStat, ProfileStats, ValidationStats } from '../profile/types.js';
import { threadLabel } from './common.js';

export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

export interface ThreadSummary extends Omit<ValidationStats, 'statuses'> {
  /** weight of trusted samples with a stack */
  stackedWeight: number;
  /** weight of all trusted samples (stacked + idle): the base for percentages */
  trustedWeight: number;
}

export interface ThreadDocument extends ThreadJSON {
  /** derived: how the other exports name the thread */
  label: string;
  /** derived */
  summary: ThreadSummary;
  /** derived: functions (qualname, filename) by total weight, descending */
  functions: FunctionStat[];
}

export interface ProfileDocument extends Omit<ProfileJSON, 'threads'> {
  /** free-form, given by the caller (target, rate, recorder, …) */
  metadata?: { [key: string]: JsonValue };
  /** derived: over all threads */
  summary: ProfileStats & { firstTime: number | null; lastTime: number | null };
  threads: ThreadDocument[];
}

export interface JsonOptions {
  metadata?: { [key: string]: JsonValue };
  /** keep at most this many functions per thread (default: all) */
  maxFunctions?: number;
  /** JSON.stringify indentation (default none) */
  indent?: number;
}

export function jsonDocument(profile: Profile, options: JsonOptions = {}): ProfileDocument {
  const core = profile.toJSON();
  const threads = profile.threads(); // same order as core.threads
  const span = profile.timeSpan();
  const doc: ProfileDocument = {
    format: core.format,
    version: core.version,
    ...(options.metadata === undefined ? {} : { metadata: options.metadata }),
    summary: { ...profile.stats(), firstTime: span?.first ?? null, lastTime: span?.last ?? null },
    ticks: core.ticks,
    missed: core.missed,
    threads: core.threads.map((tj, i) => {
      const t = threads[i]!;
      const { attempted, trusted, rejected } = t.stats();
      const functions = t.functions();
      // spelled out so the small fields come before the big tables when read by a person
      return {
        interpreterId: tj.interpreterId,
        threadId: tj.threadId,
        nativeThreadId: tj.nativeThreadId,
        name: tj.name,
        nameTime: tj.nameTime,
        label: threadLabel(t),
        firstTime: tj.firstTime,
        lastTime: tj.lastTime,
        statuses: tj.statuses,
        summary: { attempted, trusted, rejected, stackedWeight: t.stackedWeight, trustedWeight: t.trustedWeight },
        idleWeight: tj.idleWeight,
        functions: options.maxFunctions === undefined ? functions : functions.slice(0, options.maxFunctions),
        frames: tj.frames,
        stacks: tj.stacks,
      };
    }),
  };
  return doc;
}

export function exportJson(profile: Profile, options: JsonOptions = {}): string {
  return JSON.stringify(jsonDocument(profile, options), null, options.indent) + '\n';
}
