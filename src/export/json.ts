// The machine-readable report: the profile's own JSON (Profile.toJSON, canonical and
// lossless) with derived fields added — the validation summary, per-thread summaries and
// function tables, and a label per thread. Schema: docs/json-format.md. Profile.fromJSON reads
// it back (ignoring the derived fields), so a report is also a shard that can be merged.

import type { CanonicalThread, ProfileJSON, StackJSON, ThreadJSON } from '../profile/profile.js';
import { PROFILE_FORMAT, PROFILE_VERSION, canonicalThread, type Profile } from '../profile/profile.js';
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
  return documentOf(profile, options, (c) => {
    const stacks: StackJSON[] = new Array<StackJSON>(c.stackParent.length);
    for (let k = 0; k < stacks.length; k++) stacks[k] = [c.stackParent[k]!, c.stackFrame[k]!, c.stackWeight[k]!];
    return stacks;
  });
}

/** The document with each thread's `stacks` given by `stacksOf` (the real table, or a stand-in). */
function documentOf<S>(profile: Profile, options: JsonOptions, stacksOf: (c: CanonicalThread, index: number) => S): Omit<ProfileDocument, 'threads'> & { threads: (Omit<ThreadDocument, 'stacks'> & { stacks: S })[] } {
  const threads = profile.threads();
  const span = profile.timeSpan();
  return {
    format: PROFILE_FORMAT,
    version: PROFILE_VERSION,
    ...(options.metadata === undefined ? {} : { metadata: options.metadata }),
    summary: { ...profile.stats(), firstTime: span?.first ?? null, lastTime: span?.last ?? null },
    ticks: profile.ticks,
    missed: profile.missed,
    threads: threads.map((t, i) => {
      const tj = canonicalThread(t);
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
        stacks: stacksOf(tj, i),
      };
    }),
  };
}

/**
 * The json export. Without indentation (the default) the stacks — most of the bytes on deep
 * programs — are written as text straight from the typed arrays into a stand-in's place,
 * the same bytes JSON.stringify gives for the arrays of arrays (numbers as Number#toString,
 * a non-finite one as null), without making an array per stack.
 */
export function exportJson(profile: Profile, options: JsonOptions = {}): string {
  if (options.indent) return JSON.stringify(jsonDocument(profile, options), null, options.indent) + '\n';
  const tables: CanonicalThread[] = [];
  const mark = `\u0000stacks-${Math.random().toString(36).slice(2)}:`;
  const doc = documentOf(profile, options, (c, i) => {
    tables.push(c);
    return `${mark}${i}`;
  });
  // the stand-ins carry a NUL and a random suffix: a name read from the target's memory cannot
  // spell one by chance, and each is looked for only after the previous one
  const text = JSON.stringify(doc);
  const parts: string[] = [];
  let at = 0;
  tables.forEach((c, i) => {
    const quoted = JSON.stringify(`${mark}${i}`);
    const where = text.indexOf(quoted, at);
    if (where < 0) throw new Error('json export: a stacks stand-in went missing');
    parts.push(text.slice(at, where), stacksText(c));
    at = where + quoted.length;
  });
  parts.push(text.slice(at), '\n');
  return parts.join('');
}

/** `[[parent,frame,weight],…]` of one thread, written as ASCII bytes and decoded once. */
function stacksText(c: CanonicalThread): string {
  const { stackParent, stackFrame, stackWeight } = c;
  const n = stackParent.length;
  if (n === 0) return '[]';
  const out = new AsciiOut(n * 16 + 16);
  for (let k = 0; k < n; k++) {
    out.byte(k === 0 ? 0x5b : 0x2c); // [ or ,
    out.byte(0x5b);
    out.int(stackParent[k]!);
    out.byte(0x2c);
    out.int(stackFrame[k]!);
    out.byte(0x2c);
    out.number(stackWeight[k]!);
    out.byte(0x5d);
  }
  out.byte(0x5d);
  return out.text();
}

/** A growable buffer of ASCII text. */
class AsciiOut {
  private buf: Uint8Array;
  private at = 0;
  private readonly digits = new Uint8Array(24);

  constructor(size: number) {
    this.buf = new Uint8Array(size);
  }

  private room(n: number): void {
    if (this.at + n <= this.buf.length) return;
    const bigger = new Uint8Array(Math.max(this.buf.length * 2, this.at + n));
    bigger.set(this.buf.subarray(0, this.at));
    this.buf = bigger;
  }

  byte(b: number): void {
    this.room(1);
    this.buf[this.at++] = b;
  }

  /** An integer as JSON writes it (any safe integer). */
  int(v: number): void {
    this.room(24);
    if (v < 0) {
      this.buf[this.at++] = 0x2d;
      v = -v;
    }
    let d = 0;
    // above 2^31 the division stays in doubles; below it, in integers (most numbers here)
    while (v >= 0x80000000) {
      const q = Math.floor(v / 10);
      this.digits[d++] = 0x30 + (v - q * 10);
      v = q;
    }
    let i = v | 0;
    do {
      const q = (i / 10) | 0;
      this.digits[d++] = 0x30 + (i - q * 10);
      i = q;
    } while (i > 0);
    while (d > 0) this.buf[this.at++] = this.digits[--d]!;
  }

  /** A number as JSON.stringify writes it: Number#toString, null when not finite, 0 for −0. */
  number(v: number): void {
    if (Number.isSafeInteger(v)) return this.int(v === 0 ? 0 : v);
    const s = Number.isFinite(v) ? String(v) : 'null';
    this.room(s.length);
    for (let i = 0; i < s.length; i++) this.buf[this.at++] = s.charCodeAt(i);
  }

  text(): string {
    return new TextDecoder().decode(this.buf.subarray(0, this.at));
  }
}
