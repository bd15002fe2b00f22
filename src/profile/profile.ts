// A profile: per-thread stack tables built from trusted samples, and the validation statistics
// of every sample attempted. Rejected samples only ever reach the statistics.
//
// Merging is exact: it re-interns the other profile's frames and stacks, so merging the
// profiles of shards of a recording gives the profile of the whole recording (weights are
// summed, so "exact" holds for integer weights below 2^53; fractional weights are summed in
// floating point, in whatever order the shards come).
//
// toJSON() is canonical — frames sorted, stacks in depth-first order with sorted children —
// so two profiles of the same samples serialize to the same JSON however they were built.
// The format is documented in docs/json-format.md (the export adds derived fields to it).

import { STATUS_NAMES, TRUSTED, type Status } from '../walk/status.js';
import { ThreadProfile, compareFrames, compareThreads, threadKey, type ProcessTag, type ThreadIds, type ThreadTransfer } from './thread.js';
import { emptyStatusCounts, type ProfileStats, type SourceFrame, type SampleInput, type SampleThread, type StatusCounts } from './types.js';

export const PROFILE_FORMAT = 'pyunwind-profile';
export const PROFILE_VERSION = 2;

/** [parent stack index or −1, frame index, weight of the samples that ended here] */
export type StackJSON = [parent: number, frame: number, weight: number];

export interface ThreadJSON {
  /** bigints as decimal strings: thread ids do not fit a double */
  interpreterId: string;
  threadId: string;
  nativeThreadId: string;
  name: string | null;
  /** time of the sample that gave the name (null when there is no name) */
  nameTime: number | null;
  /** in a profile of several processes only (Profile.addProcess): the thread's process */
  process?: ProcessTag;
  firstTime: number;
  lastTime: number;
  statuses: StatusCounts;
  idleWeight: number;
  frames: SourceFrame[];
  stacks: StackJSON[];
}

/** A profile as plain data and typed arrays (Profile.toTransfer). */
export interface ProfileTransfer {
  ticks: number;
  missed: number;
  threads: ThreadTransfer[];
}

export interface ProfileJSON {
  format: typeof PROFILE_FORMAT;
  version: typeof PROFILE_VERSION;
  /** sampling moments taken (one tick samples every thread) */
  ticks: number;
  /** ticks the schedule wanted that gave no samples */
  missed: number;
  threads: ThreadJSON[];
}

/** A profile document that does not follow the format; `message` says where and what. */
export class ProfileFormatError extends Error {
  override name = 'ProfileFormatError';
}

export class Profile {
  private readonly byKey = new Map<string, ThreadProfile>();
  private _missed = 0;
  private _ticks = 0;

  /**
   * Adds one attempted sample. Trusted samples with frames enter the thread's stack table,
   * idle samples its idle weight; every sample is counted under its status.
   * Throws a TypeError/RangeError for a sample that breaks the SampleInput contract
   * (unknown status, bad weight, an idle sample with frames, a complete one without).
   */
  add(sample: SampleInput): void {
    const { status, time } = sample;
    if (!Object.hasOwn(emptyCounts, status)) throw new TypeError(`unknown status ${JSON.stringify(status)}`);
    if (!Number.isFinite(time)) throw new RangeError(`sample time must be finite, got ${time}`);
    const weight = sample.weight ?? 1;
    if (!(Number.isFinite(weight) && weight > 0)) throw new RangeError(`sample weight must be finite and > 0, got ${weight}`);
    const trusted = TRUSTED.has(status);
    if (trusted) {
      if (status === 'idle' && sample.frames.length > 0) {
        throw new RangeError(`an idle sample has no Python frame, got ${sample.frames.length}`);
      }
      if (status !== 'idle' && sample.frames.length === 0) {
        throw new RangeError(`a ${status} sample needs at least one frame (no frames is 'idle')`);
      }
      for (const f of sample.frames) checkFrame(f);
    }
    const t = this.threadFor(sample.thread);
    t.observe(time, sample.thread.name);
    t.countStatus(status);
    if (!trusted) return; // rejected: statistics only, never a stack
    if (status === 'idle') t.addIdle(weight);
    else t.addFrames(sample.frames, weight);
  }

  /**
   * Adds many samples of one thread at once — what the block engine counted (src/kernel/block-engine.ts):
   * the time span of the samples, the time of the latest one that carried the thread's name,
   * and the number of samples per status (in STATUS_NAMES order; idle samples weigh 1 each).
   * Returns the thread, in which the engine interns the stacks of the trusted ones once each
   * and adds their weights (internStack, addStackWeight): together, the same as adding each sample.
   */
  addCounted(c: {
    thread: SampleThread;
    firstTime: number;
    lastTime: number;
    name?: string;
    nameTime?: number;
    statuses: readonly number[];
  }): ThreadProfile {
    if (!(Number.isFinite(c.firstTime) && Number.isFinite(c.lastTime))) throw new RangeError('sample times must be finite');
    const t = this.threadFor(c.thread);
    t.observeSpan(c.firstTime, c.lastTime);
    if (c.name !== undefined) t.offerName(c.name, c.nameTime ?? c.lastTime);
    STATUS_NAMES.forEach((s, k) => {
      const n = c.statuses[k] ?? 0;
      if (n > 0) t.countStatus(s, n);
    });
    const idle = c.statuses[STATUS_NAMES.indexOf('idle')] ?? 0;
    if (idle > 0) t.addIdle(idle);
    return t;
  }

  /**
   * Counts `n` sampling moments (ticks) taken. A tick samples every thread, so it gives one
   * sample per thread; ticks and missed ticks are the recording's schedule, samples its threads.
   */
  addTicks(n: number): void {
    if (!(Number.isSafeInteger(n) && n >= 0)) throw new RangeError(`ticks must be a non-negative integer, got ${n}`);
    this._ticks += n;
  }

  /** Counts `n` ticks the schedule wanted that gave no samples (the recorder was late, or the copy failed). */
  addMissed(n: number): void {
    if (!(Number.isSafeInteger(n) && n >= 0)) throw new RangeError(`missed must be a non-negative integer, got ${n}`);
    this._missed += n;
  }

  get ticks(): number {
    return this._ticks;
  }

  get missed(): number {
    return this._missed;
  }

  /** Adds everything `other` holds into this profile (exactly; see the file comment). */
  merge(other: Profile): this {
    if (other === this) return this.merge(Profile.fromJSON(this.toJSON()));
    for (const t of other.byKey.values()) this.threadFor(t).mergeFrom(t);
    this._missed += other._missed;
    this._ticks += other._ticks;
    return this;
  }

  /**
   * Adds `other`, the profile of one process, as that process's threads (`tag`): the profile of
   * several processes, each thread apart even where two processes' thread ids are equal. Its
   * ticks and missed ticks add to this profile's.
   */
  addProcess(other: Profile, tag: ProcessTag): this {
    if (!(Number.isSafeInteger(tag.index) && tag.index >= 0)) throw new RangeError(`process index must be a non-negative integer, got ${tag.index}`);
    for (const t of other.byKey.values()) {
      const tt = t.toTransfer();
      this.threadFor({ ...tt.ids, process: tag }).mergeTransfer(tt);
    }
    this._missed += other._missed;
    this._ticks += other._ticks;
    return this;
  }

  /**
   * The profile as plain data and typed arrays, in its own order (not canonical like toJSON):
   * cheap to make and to send to another thread, where mergeTransfer adds it.
   */
  toTransfer(): ProfileTransfer {
    return { ticks: this._ticks, missed: this._missed, threads: [...this.byKey.values()].map((t) => t.toTransfer()) };
  }

  /** Adds what another profile's toTransfer() gave: the same as merge(). (Trusted input: made by this code.) */
  mergeTransfer(t: ProfileTransfer): this {
    for (const tt of t.threads) this.threadFor(tt.ids).mergeTransfer(tt);
    this._missed += t.missed;
    this._ticks += t.ticks;
    return this;
  }

  /** The threads, ordered by interpreter id, native thread id, thread id. */
  threads(): ThreadProfile[] {
    return [...this.byKey.values()].sort(compareThreads);
  }

  thread(ids: ThreadIds): ThreadProfile | undefined {
    return this.byKey.get(threadKey(ids));
  }

  /** Validation statistics over every thread, plus the schedule: ticks taken and missed. */
  stats(): ProfileStats {
    const statuses = emptyStatusCounts();
    for (const t of this.byKey.values()) for (const s of STATUS_NAMES) statuses[s] += t.statuses[s];
    let attempted = 0;
    let trusted = 0;
    for (const s of STATUS_NAMES) {
      attempted += statuses[s];
      if (TRUSTED.has(s)) trusted += statuses[s];
    }
    return {
      attempted,
      trusted,
      rejected: attempted - trusted,
      statuses,
      ticks: this._ticks,
      missed: this._missed,
      scheduled: this._ticks + this._missed,
    };
  }

  /** First and last sample time (µs) over all threads, or null for an empty profile. */
  timeSpan(): { first: number; last: number } | null {
    let first = Infinity;
    let last = -Infinity;
    for (const t of this.byKey.values()) {
      first = Math.min(first, t.firstTime);
      last = Math.max(last, t.lastTime);
    }
    return first <= last ? { first, last } : null;
  }

  toJSON(): ProfileJSON {
    return {
      format: PROFILE_FORMAT,
      version: PROFILE_VERSION,
      ticks: this._ticks,
      missed: this._missed,
      threads: this.threads().map(threadToJSON),
    };
  }

  /**
   * Reads a profile document (Profile.toJSON(), or the json export, whose extra fields are
   * ignored). The document is untrusted: every field is checked, and a ProfileFormatError
   * names the first one that is wrong.
   */
  static fromJSON(json: unknown): Profile {
    const doc = obj(json, '$');
    if (doc.format !== PROFILE_FORMAT) throw new ProfileFormatError(`$.format: expected "${PROFILE_FORMAT}", got ${show(doc.format)}`);
    if (doc.version !== PROFILE_VERSION) {
      throw new ProfileFormatError(`$.version: this reader knows version ${PROFILE_VERSION}, got ${show(doc.version)}`);
    }
    const p = new Profile();
    p._ticks = count(doc.ticks, '$.ticks');
    p._missed = count(doc.missed, '$.missed');
    arr(doc.threads, '$.threads').forEach((tj, i) => {
      const t = threadFromJSON(tj, `$.threads[${i}]`);
      if (p.byKey.has(t.key)) throw new ProfileFormatError(`$.threads[${i}]: thread ${t.key} appears twice`);
      p.byKey.set(t.key, t);
    });
    return p;
  }

  private threadFor(ids: ThreadIds): ThreadProfile {
    const key = threadKey(ids);
    let t = this.byKey.get(key);
    if (t === undefined) {
      t = new ThreadProfile(ids);
      this.byKey.set(key, t);
    }
    return t;
  }
}

const emptyCounts: StatusCounts = emptyStatusCounts();

function checkFrame(f: SourceFrame): void {
  if (typeof f.qualname !== 'string' || typeof f.filename !== 'string') {
    throw new TypeError(`frame qualname and filename must be strings, got ${show(f.qualname)}, ${show(f.filename)}`);
  }
  if (f.line !== null && !Number.isSafeInteger(f.line)) throw new TypeError(`frame line must be an integer or null, got ${show(f.line)}`);
  if (f.opcode !== undefined && (typeof f.opcode !== 'string' || f.opcode === '')) throw new TypeError(`frame opcode must be a non-empty string when present, got ${show(f.opcode)}`);
  if (f.native !== undefined && (f.native !== true || f.opcode !== undefined || f.line !== null)) throw new TypeError(`a native frame has native true, no opcode and no line, got ${show(f.native)}, ${show(f.opcode)}, ${show(f.line)}`);
}

/**
 * One thread's canonical content (what threadToJSON gives, stacks as typed arrays: no array per
 * stack, which on a deep recursion's 600,000 stacks was most of every export): only stacks with
 * weight in their subtree, frames sorted, stacks depth-first with children ordered by frame, so
 * the result depends on the samples alone and not on the order they were added or merged in.
 * Stack k: its parent's index (−1: a root; always below k), its frame (an index into `frames`)
 * and its own weight.
 */
export interface CanonicalThread extends Omit<ThreadJSON, 'stacks'> {
  stackParent: Int32Array;
  stackFrame: Int32Array;
  stackWeight: Float64Array;
}

export function canonicalThread(t: ThreadProfile): CanonicalThread {
  const sub = t.subtreeWeights();
  const { first, kids } = t.childIndex();
  const frameOf = t.stackFrame;
  const weightOf = t.stackWeight;
  const n = sub.length;
  const usedFrame = new Uint8Array(t.frames.length);
  let kept = 0;
  for (let s = 0; s < n; s++) {
    if (sub[s]! > 0) {
      usedFrame[frameOf[s]!] = 1;
      kept++;
    }
  }
  const order: number[] = [];
  for (let f = 0; f < usedFrame.length; f++) if (usedFrame[f]) order.push(f);
  order.sort((a, b) => compareFrames(t.frames[a]!, t.frames[b]!));
  const newFrame = new Int32Array(t.frames.length);
  order.forEach((f, i) => (newFrame[f] = i));

  const stackParent = new Int32Array(kept);
  const stackFrame = new Int32Array(kept);
  const stackWeight = new Float64Array(kept);
  // depth first, children by frame: what is still to do, as (stack, index of its parent's entry)
  const todoStack = new Int32Array(kept);
  const todoParent = new Int32Array(kept);
  let todo = 0;
  const byRankDown = (a: number, b: number): number => newFrame[frameOf[b]!]! - newFrame[frameOf[a]!]!;
  const pushSorted = (p: number, parent: number): void => {
    const from = first[p + 1]!;
    const to = first[p + 2]!;
    if (to - from === 1) {
      const s = kids[from]!;
      if (sub[s]! > 0) {
        todoStack[todo] = s;
        todoParent[todo++] = parent;
      }
      return;
    }
    const at = todo;
    for (let k = from; k < to; k++) {
      const s = kids[k]!;
      if (sub[s]! > 0) {
        todoStack[todo] = s;
        todoParent[todo++] = parent;
      }
    }
    if (todo - at > 1) todoStack.subarray(at, todo).sort(byRankDown);
  };
  pushSorted(-1, -1);
  let k = 0;
  while (todo > 0) {
    const s = todoStack[--todo]!;
    const parent = todoParent[todo]!;
    stackParent[k] = parent;
    stackFrame[k] = newFrame[frameOf[s]!]!;
    stackWeight[k] = weightOf[s]!;
    pushSorted(s, k++);
  }
  return {
    interpreterId: t.interpreterId.toString(),
    threadId: t.threadId.toString(),
    nativeThreadId: t.nativeThreadId.toString(),
    name: t.name ?? null,
    nameTime: t.name === undefined ? null : t.nameTime,
    ...(t.process ? { process: { ...t.process } } : {}),
    firstTime: t.firstTime,
    lastTime: t.lastTime,
    statuses: { ...t.statuses },
    idleWeight: t.idleWeight,
    frames: order.map((f) => ({ ...t.frames[f]! })),
    stackParent,
    stackFrame,
    stackWeight,
  };
}

/** The canonical JSON of one thread (canonicalThread, its stacks as [parent, frame, weight]). */
export function threadToJSON(t: ThreadProfile): ThreadJSON {
  const { stackParent, stackFrame, stackWeight, ...rest } = canonicalThread(t);
  const stacks: StackJSON[] = new Array<StackJSON>(stackParent.length);
  for (let k = 0; k < stackParent.length; k++) stacks[k] = [stackParent[k]!, stackFrame[k]!, stackWeight[k]!];
  return { ...rest, stacks };
}

function threadFromJSON(json: unknown, at: string): ThreadProfile {
  const o = obj(json, at);
  let process: ProcessTag | undefined;
  if (o.process !== undefined) {
    const p = obj(o.process, `${at}.process`);
    if (typeof p.label !== 'string') throw new ProfileFormatError(`${at}.process.label: expected a string, got ${show(p.label)}`);
    if (p.pid !== null && !Number.isSafeInteger(p.pid)) throw new ProfileFormatError(`${at}.process.pid: expected an integer or null, got ${show(p.pid)}`);
    process = { index: count(p.index, `${at}.process.index`), pid: p.pid as number | null, label: p.label };
  }
  const t = new ThreadProfile({
    interpreterId: big(o.interpreterId, `${at}.interpreterId`),
    threadId: big(o.threadId, `${at}.threadId`),
    nativeThreadId: big(o.nativeThreadId, `${at}.nativeThreadId`),
    ...(process ? { process } : {}),
  });
  const first = num(o.firstTime, `${at}.firstTime`);
  const last = num(o.lastTime, `${at}.lastTime`);
  if (first > last) throw new ProfileFormatError(`${at}: firstTime ${first} is after lastTime ${last}`);
  t.observeSpan(first, last);
  if (o.name !== null) {
    if (typeof o.name !== 'string') throw new ProfileFormatError(`${at}.name: expected a string or null, got ${show(o.name)}`);
    t.offerName(o.name, num(o.nameTime, `${at}.nameTime`));
  } else if (o.nameTime !== null) {
    throw new ProfileFormatError(`${at}.nameTime: must be null when name is null`);
  }
  const st = obj(o.statuses, `${at}.statuses`);
  for (const k of Object.keys(st)) {
    if (!Object.hasOwn(emptyCounts, k)) throw new ProfileFormatError(`${at}.statuses: unknown status ${JSON.stringify(k)}`);
  }
  // (the native statuses came after profiles were first written: absent, none)
  for (const s of STATUS_NAMES) t.countStatus(s as Status, st[s] === undefined && s.startsWith('native-') ? 0 : count(st[s], `${at}.statuses.${s}`));
  t.addIdle(weight(o.idleWeight, `${at}.idleWeight`));

  const frameMap = arr(o.frames, `${at}.frames`).map((fj, i) => {
    const fat = `${at}.frames[${i}]`;
    const f = obj(fj, fat);
    if (typeof f.qualname !== 'string') throw new ProfileFormatError(`${fat}.qualname: expected a string, got ${show(f.qualname)}`);
    if (typeof f.filename !== 'string') throw new ProfileFormatError(`${fat}.filename: expected a string, got ${show(f.filename)}`);
    if (f.line !== null && !Number.isSafeInteger(f.line)) {
      throw new ProfileFormatError(`${fat}.line: expected an integer or null, got ${show(f.line)}`);
    }
    if (f.opcode !== undefined && (typeof f.opcode !== 'string' || f.opcode === '')) {
      throw new ProfileFormatError(`${fat}.opcode: expected a non-empty string when present, got ${show(f.opcode)}`);
    }
    if (f.native !== undefined && (f.native !== true || f.opcode !== undefined || f.line !== null)) {
      throw new ProfileFormatError(`${fat}.native: a native frame has native true, no opcode and no line`);
    }
    if (f.native) return t.internFrame({ qualname: f.qualname, filename: f.filename, line: null, native: true });
    return t.internFrame({ qualname: f.qualname, filename: f.filename, line: f.line as number | null, ...(f.opcode === undefined ? {} : { opcode: f.opcode as string }) });
  });
  const stackMap: number[] = [];
  arr(o.stacks, `${at}.stacks`).forEach((sj, i) => {
    const sat = `${at}.stacks[${i}]`;
    const s = arr(sj, sat);
    if (s.length !== 3) throw new ProfileFormatError(`${sat}: expected [parent, frame, weight], got ${s.length} elements`);
    const parent = s[0];
    // parents come first: this is what keeps the table a tree (no cycles, no forward links)
    if (!(Number.isInteger(parent) && (parent as number) >= -1 && (parent as number) < i)) {
      throw new ProfileFormatError(`${sat}[0]: parent must be −1 or the index of an earlier stack, got ${show(parent)}`);
    }
    const frame = s[1];
    if (!(Number.isInteger(frame) && (frame as number) >= 0 && (frame as number) < frameMap.length)) {
      throw new ProfileFormatError(`${sat}[1]: frame must index ${at}.frames (${frameMap.length}), got ${show(frame)}`);
    }
    const p = parent as number;
    const idx = t.internStack(p < 0 ? -1 : stackMap[p]!, frameMap[frame as number]!);
    stackMap.push(idx);
    t.addStackWeight(idx, weight(s[2], `${sat}[2]`));
  });
  return t;
}

// ---- small checkers for untrusted JSON ----

function show(v: unknown): string {
  const s = typeof v === 'bigint' ? `${v}n` : JSON.stringify(v);
  return s === undefined ? String(v) : s.length > 40 ? `${s.slice(0, 40)}…` : s;
}

function obj(v: unknown, at: string): Record<string, unknown> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new ProfileFormatError(`${at}: expected an object, got ${show(v)}`);
  return v as Record<string, unknown>;
}

function arr(v: unknown, at: string): unknown[] {
  if (!Array.isArray(v)) throw new ProfileFormatError(`${at}: expected an array, got ${show(v)}`);
  return v;
}

function num(v: unknown, at: string): number {
  if (typeof v !== 'number' || !Number.isFinite(v)) throw new ProfileFormatError(`${at}: expected a finite number, got ${show(v)}`);
  return v;
}

function count(v: unknown, at: string): number {
  if (!Number.isSafeInteger(v) || (v as number) < 0) throw new ProfileFormatError(`${at}: expected a non-negative integer, got ${show(v)}`);
  return v as number;
}

function weight(v: unknown, at: string): number {
  const n = num(v, at);
  if (n < 0) throw new ProfileFormatError(`${at}: expected a weight ≥ 0, got ${n}`);
  return n;
}

function big(v: unknown, at: string): bigint {
  if (typeof v !== 'string' || !/^-?(0|[1-9][0-9]{0,19})$/.test(v)) {
    throw new ProfileFormatError(`${at}: expected a decimal integer string, got ${show(v)}`);
  }
  const b = BigInt(v);
  // ids are int64 (interpreter id) or unsigned long (thread ids) in CPython
  if (b < -(1n << 63n) || b >= 1n << 64n) throw new ProfileFormatError(`${at}: ${v} does not fit 64 bits`);
  return b;
}
