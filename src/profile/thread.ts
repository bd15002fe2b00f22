// One thread's part of a profile: interned frames, a prefix tree of stacks with the weight of
// the samples that ended on each, idle weight, status counts and the time span seen.
//
// Invariant used throughout: a stack's parent always has a smaller index than the stack
// itself (a parent is interned before its child, and merge/fromJSON keep that order), so one
// backward pass over the table accumulates subtrees and one forward pass visits parents first.

import { STATUS_NAMES, TRUSTED, type Status } from '../walk/status.js';
import { emptyStatusCounts, sameFrame, type FunctionStat, type SourceFrame, type StatusCounts, type ValidationStats } from './types.js';

/** A function identity: (qualname, filename). */
export interface FunctionId {
  qualname: string;
  filename: string;
}

/**
 * The process a thread belongs to, in a profile of several processes (Profile.addProcess: the
 * captures of record --subprocesses reported together): its place among them, its pid and how
 * every export names it.
 */
export interface ProcessTag {
  index: number;
  pid: number | null;
  label: string;
}

/** The ids that tell threads apart (and, in a profile of several processes, the process). */
export interface ThreadIds {
  interpreterId: bigint;
  threadId: bigint;
  nativeThreadId: bigint;
  process?: ProcessTag;
}

/** A thread's part of a profile as plain data and typed arrays (ThreadProfile.toTransfer). */
export interface ThreadTransfer {
  ids: ThreadIds;
  name?: string;
  nameTime: number;
  firstTime: number;
  lastTime: number;
  /** in STATUS_NAMES order */
  statuses: number[];
  idleWeight: number;
  frames: readonly SourceFrame[];
  stackParent: Int32Array;
  stackFrame: Int32Array;
  stackWeight: Float64Array;
}

export function threadKey(t: ThreadIds): string {
  return `${t.process ? `p${t.process.index}/` : ''}${t.interpreterId}:${t.nativeThreadId}:${t.threadId}`;
}

/** Orders threads by process (in a profile of several), interpreter, native thread id, then thread id. */
export function compareThreads(a: ThreadIds, b: ThreadIds): number {
  return (
    (a.process?.index ?? -1) - (b.process?.index ?? -1) ||
    cmpBig(a.interpreterId, b.interpreterId) ||
    cmpBig(a.nativeThreadId, b.nativeThreadId) ||
    cmpBig(a.threadId, b.threadId)
  );
}

function cmpBig(a: bigint, b: bigint): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Code-unit order: the same everywhere, unlike localeCompare. */
export function cmpStr(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Frames by qualname, filename, line (null first), opcode (none first), then Python before native. */
export function compareFrames(a: SourceFrame, b: SourceFrame): number {
  return (
    cmpStr(a.qualname, b.qualname) ||
    cmpStr(a.filename, b.filename) ||
    (a.line === b.line ? 0 : a.line === null ? -1 : b.line === null ? 1 : a.line - b.line) ||
    cmpStr(a.opcode ?? '', b.opcode ?? '') ||
    (a.native === b.native ? 0 : a.native ? 1 : -1)
  );
}

// Length-prefixing the qualname makes the key unambiguous whatever the names contain (the
// target's memory is untrusted, a qualname may hold any character).
function functionKey(qualname: string, filename: string): string {
  return `${qualname.length}:${qualname}${filename}`;
}

/** Children a caller keeps in a list before they go to the stack table (ThreadProfile.internStack). */
const FANOUT_LISTED = 8;

/** Where (caller, frame) starts its probe in a stack table (ThreadProfile.internStack). */
function stackHash(parent: number, frame: number): number {
  const h = Math.imul(parent + 1, 0x9e3779b1) ^ Math.imul(frame, 0x85ebca77);
  return (h ^ (h >>> 15)) >>> 0;
}

export class ThreadProfile {
  readonly interpreterId: bigint;
  readonly threadId: bigint;
  readonly nativeThreadId: bigint;
  /** the process it belongs to, in a profile of several (Profile.addProcess) */
  readonly process: ProcessTag | undefined;
  readonly key: string;

  private _name: string | undefined;
  // time of the sample that gave the name: the latest named sample wins (ties: the greater
  // name), which makes the name independent of the order samples and shards arrive in
  private _nameTime = -Infinity;
  private _firstTime = Infinity;
  private _lastTime = -Infinity;
  private readonly _statuses: StatusCounts = emptyStatusCounts();
  private _idleWeight = 0;

  // qualname → filename → line → opcode ('' for none) → frame index: nested maps cost no key
  // strings per frame
  private readonly frameIndex = new Map<string, Map<string, Map<number | null, Map<string, number>>>>();
  private readonly _frames: SourceFrame[] = [];
  private readonly _frameFunction: number[] = [];
  private readonly functionIndex = new Map<string, number>();
  private readonly _functions: FunctionId[] = [];

  // the stacks: caller, frame and weight per stack, in typed arrays that double (arrays of
  // numbers grown a push at a time copied themselves over and over: fresh memory the size of the
  // table many times, which costs more than the interning on a machine slow to give pages)
  private count = 0;
  private parentOf: Int32Array<ArrayBuffer> = new Int32Array(256);
  private frameOf: Int32Array<ArrayBuffer> = new Int32Array(256);
  private weightOf: Float64Array<ArrayBuffer> = new Float64Array(256);
  /** views of the first `count` of each, made again when the count or the arrays change */
  private views: { count: number; parent: Int32Array; frame: Int32Array; weight: Float64Array } | null = null;
  /** bumped whenever a weight changes: what subtreeWeights' cache is checked against */
  private weighed = 0;
  private subtreeCache: { count: number; weighed: number; sub: Float64Array } | null = null;
  private childCache: { count: number; first: Int32Array; kids: Int32Array } | null = null;

  // Each stack found by its caller and frame without a hash where it can be: a caller's children
  // are a list (newest first, so the child just made is tried first), and only a caller with more
  // than FANOUT_LISTED children has them in an open-addressing table (stack + 1, 0: empty). Deep,
  // churning stacks make hundreds of thousands of stacks whose caller has one or two children: a
  // table probe for each was a cache miss or three (and a Map of the children of each stack,
  // before, a garbage collector's feast: 300,000 maps for one recursion). The links are made
  // when a stack is first looked up: stacks appended as known to be new (appendStack: the block
  // engine's, one per node of its tree) cost none until then.
  /** stacks [0, linked) are in the lists and the table */
  private linked = 0;
  private stackTable = new Int32Array(1024);
  /** stacks in stackTable */
  private tabled = 0;
  /** per stack: its newest child + 1 (0: none), its caller's next older child + 1, its children (up to FANOUT_LISTED + 1) */
  private firstChild: Int32Array<ArrayBuffer> = new Int32Array(0);
  private nextSibling: Int32Array<ArrayBuffer> = new Int32Array(0);
  private fanout: Uint8Array<ArrayBuffer> = new Uint8Array(0);
  private rootFirst = 0;
  private rootFanout = 0;
  // the previous sample's stacks, root first: consecutive samples share most of their stack,
  // so a new sample re-interns only below the first frame that differs
  private readonly lastPath: number[] = [];

  constructor(ids: ThreadIds) {
    this.interpreterId = ids.interpreterId;
    this.threadId = ids.threadId;
    this.nativeThreadId = ids.nativeThreadId;
    this.process = ids.process;
    this.key = threadKey(ids);
  }

  // ---- building ----

  /** @internal Records that a sample of this thread was attempted at `time`. */
  observe(time: number, name: string | undefined): void {
    if (time < this._firstTime) this._firstTime = time;
    if (time > this._lastTime) this._lastTime = time;
    if (name !== undefined) this.offerName(name, time);
  }

  /** @internal Keeps `name` if it comes from a later sample than the current name. */
  offerName(name: string, time: number): void {
    if (time > this._nameTime || (time === this._nameTime && this._name !== undefined && name > this._name)) {
      this._name = name;
      this._nameTime = time;
    }
  }

  /** @internal Names the thread whatever name it had (the name recorded for it, src/profile/thread-names.ts). */
  setName(name: string, time: number): void {
    this._name = name;
    this._nameTime = time;
  }

  /** @internal */
  observeSpan(first: number, last: number): void {
    if (first < this._firstTime) this._firstTime = first;
    if (last > this._lastTime) this._lastTime = last;
  }

  /** @internal */
  countStatus(status: Status, n = 1): void {
    this._statuses[status] += n;
  }

  /** @internal */
  addIdle(weight: number): void {
    this._idleWeight += weight;
  }

  /** @internal Interns the frame (qualname, filename, line, opcode) and returns its index. */
  internFrame(frame: SourceFrame): number {
    const { qualname, filename, line, opcode, native } = frame;
    let byFile = this.frameIndex.get(qualname);
    if (byFile === undefined) this.frameIndex.set(qualname, (byFile = new Map()));
    let byLine = byFile.get(filename);
    if (byLine === undefined) byFile.set(filename, (byLine = new Map()));
    let byOpcode = byLine.get(line);
    if (byOpcode === undefined) byLine.set(line, (byOpcode = new Map()));
    // (a native frame has no opcode: its key is one no opcode name can be)
    const last = native ? '\0native' : (opcode ?? '');
    let i = byOpcode.get(last);
    if (i === undefined) {
      i = this._frames.length;
      this._frames.push(native ? { qualname, filename, line, native: true } : opcode === undefined ? { qualname, filename, line } : { qualname, filename, line, opcode });
      byOpcode.set(last, i);
      const fkey = functionKey(qualname, filename);
      let f = this.functionIndex.get(fkey);
      if (f === undefined) {
        f = this._functions.length;
        this._functions.push({ qualname, filename });
        this.functionIndex.set(fkey, f);
      }
      this._frameFunction.push(f);
    }
    return i;
  }

  /** @internal Interns the stack (parent, frame) and returns its index (parent −1: a root). */
  internStack(parent: number, frame: number): number {
    if (this.linked < this.count) this.linkAll();
    const parents = this.parentOf;
    const frames = this.frameOf;
    const children = parent < 0 ? this.rootFanout : this.fanout[parent]!;
    if (children > FANOUT_LISTED) {
      const table = this.stackTable;
      const mask = table.length - 1;
      for (let h = stackHash(parent, frame) & mask, e = table[h]!; e !== 0; h = (h + 1) & mask, e = table[h]!) {
        if (parents[e - 1] === parent && frames[e - 1] === frame) return e - 1;
      }
    } else {
      const next = this.nextSibling;
      for (let c = parent < 0 ? this.rootFirst : this.firstChild[parent]!; c !== 0; c = next[c - 1]!) if (frames[c - 1] === frame) return c - 1;
    }
    const i = this.appendStack(parent, frame);
    this.link(i);
    return i;
  }

  /**
   * @internal Appends the stack (parent, frame), which the caller knows is not there yet (the
   * block engine: one stack per node of its tree), and returns its index.
   */
  appendStack(parent: number, frame: number): number {
    const i = this.count++;
    if (i === this.parentOf.length) this.growStacks(i * 2);
    this.parentOf[i] = parent;
    this.frameOf[i] = frame;
    return i;
  }

  /** @internal Stacks in the table. */
  get stackCount(): number {
    return this.count;
  }

  /** Makes stack i (the next one not linked) its caller's newest child, and tables it where its caller's children are. */
  private link(i: number): void {
    if (i >= this.firstChild.length) this.growLinks(Math.max(256, this.parentOf.length));
    const parent = this.parentOf[i]!;
    const children = parent < 0 ? this.rootFanout : this.fanout[parent]!;
    // room in the table first, while the caller's children still count as listed there
    const tabling = children > FANOUT_LISTED ? 1 : children === FANOUT_LISTED ? FANOUT_LISTED + 1 : 0;
    while (tabling && 2 * (this.tabled + tabling) > this.stackTable.length - 1) this.growStackTable();
    if (parent < 0) {
      this.nextSibling[i] = this.rootFirst;
      this.rootFirst = i + 1;
      if (children <= FANOUT_LISTED) this.rootFanout++;
    } else {
      this.nextSibling[i] = this.firstChild[parent]!;
      this.firstChild[parent] = i + 1;
      if (children <= FANOUT_LISTED) this.fanout[parent] = children + 1;
    }
    this.linked = i + 1;
    // (a caller past the list's size: this stack; one reaching it: all its children)
    if (children > FANOUT_LISTED) this.table(i);
    else if (children === FANOUT_LISTED) for (let c = i + 1; c !== 0; c = this.nextSibling[c - 1]!) this.table(c - 1);
  }

  /** Links every stack appended since the last lookup. */
  private linkAll(): void {
    while (this.linked < this.count) this.link(this.linked);
  }

  /** Puts stack s (whose caller's children are tabled) into the table, which has room. */
  private table(s: number): void {
    const table = this.stackTable;
    const mask = table.length - 1;
    let h = stackHash(this.parentOf[s]!, this.frameOf[s]!) & mask;
    while (table[h] !== 0) h = (h + 1) & mask;
    table[h] = s + 1;
    this.tabled++;
  }

  /** Room for `size` stacks in the callers, frames and weights (their new part untouched: zeros). */
  private growStacks(size: number): void {
    const parents = new Int32Array(size);
    parents.set(this.parentOf);
    this.parentOf = parents;
    const frames = new Int32Array(size);
    frames.set(this.frameOf);
    this.frameOf = frames;
    const weights = new Float64Array(size);
    weights.set(this.weightOf);
    this.weightOf = weights;
  }

  /** Room for `size` stacks in the links (zeros: no child, no sibling). */
  private growLinks(size: number): void {
    const first = new Int32Array(size);
    first.set(this.firstChild);
    this.firstChild = first;
    const next = new Int32Array(size);
    next.set(this.nextSibling);
    this.nextSibling = next;
    const fan = new Uint8Array(size);
    fan.set(this.fanout);
    this.fanout = fan;
  }

  /** @internal Makes room for `more` stacks at once (a bulk of interning to come). */
  reserveStacks(more: number): void {
    const want = this.count + more;
    if (want > this.parentOf.length) {
      let size = this.parentOf.length;
      while (size < want) size *= 2;
      this.growStacks(size);
    }
  }

  /** Twice the table, with every stack whose caller's children are tabled. */
  private growStackTable(): void {
    const table = new Int32Array(this.stackTable.length * 2);
    const mask = table.length - 1;
    const parents = this.parentOf;
    const fanout = this.fanout;
    let tabled = 0;
    for (let i = 0; i < this.linked; i++) {
      const p = parents[i]!;
      if ((p < 0 ? this.rootFanout : fanout[p]!) <= FANOUT_LISTED) continue;
      let h = stackHash(p, this.frameOf[i]!) & mask;
      while (table[h] !== 0) h = (h + 1) & mask;
      table[h] = i + 1;
      tabled++;
    }
    this.stackTable = table;
    this.tabled = tabled;
  }

  /** @internal */
  addStackWeight(stack: number, weight: number): void {
    this.weightOf[stack]! += weight;
    this.weighed++;
  }

  /** @internal Adds a trusted sample's frames (innermost first, at least one). */
  addFrames(frames: readonly SourceFrame[], weight: number): void {
    const path = this.lastPath;
    const n = frames.length;
    let depth = 0;
    let stack = -1;
    for (; depth < n && depth < path.length; depth++) {
      const f = frames[n - 1 - depth]!;
      const known = this._frames[this.frameOf[path[depth]!]!]!;
      if (!sameFrame(f, known)) break;
      stack = path[depth]!;
    }
    path.length = depth;
    for (; depth < n; depth++) {
      const f = frames[n - 1 - depth]!;
      stack = this.internStack(stack, this.internFrame(f));
      path.push(stack);
    }
    this.weightOf[stack]! += weight;
    this.weighed++;
  }

  /** @internal Adds everything `other` holds (another thread with the same ids). */
  mergeFrom(other: ThreadProfile): void {
    if (other.key !== this.key) throw new Error(`cannot merge thread ${other.key} into ${this.key}`);
    this.mergeParts(other._firstTime, other._lastTime, other._name, other._nameTime, STATUS_NAMES.map((s) => other._statuses[s]), other._idleWeight, other._frames, other.stackParent, other.stackFrame, other.stackWeight);
  }

  /** @internal This thread's part as plain data and typed arrays (to cross to another thread: see mergeTransfer). */
  toTransfer(): ThreadTransfer {
    return {
      ids: { interpreterId: this.interpreterId, threadId: this.threadId, nativeThreadId: this.nativeThreadId, ...(this.process ? { process: this.process } : {}) },
      ...(this._name !== undefined ? { name: this._name } : {}),
      nameTime: this._nameTime,
      firstTime: this._firstTime,
      lastTime: this._lastTime,
      statuses: STATUS_NAMES.map((s) => this._statuses[s]),
      idleWeight: this._idleWeight,
      frames: this._frames,
      stackParent: this.parentOf.slice(0, this.count),
      stackFrame: this.frameOf.slice(0, this.count),
      stackWeight: this.weightOf.slice(0, this.count),
    };
  }

  /** @internal Adds what toTransfer() gave of a thread with the same ids: the same as mergeFrom. */
  mergeTransfer(t: ThreadTransfer): void {
    this.mergeParts(t.firstTime, t.lastTime, t.name, t.nameTime, t.statuses, t.idleWeight, t.frames, t.stackParent, t.stackFrame, t.stackWeight);
  }

  private mergeParts(
    firstTime: number,
    lastTime: number,
    name: string | undefined,
    nameTime: number,
    statuses: ArrayLike<number>,
    idleWeight: number,
    frames: readonly SourceFrame[],
    stackParent: ArrayLike<number>,
    stackFrame: ArrayLike<number>,
    stackWeight: ArrayLike<number>,
  ): void {
    if (firstTime <= lastTime) this.observeSpan(firstTime, lastTime);
    if (name !== undefined) this.offerName(name, nameTime);
    STATUS_NAMES.forEach((s, k) => (this._statuses[s] += statuses[k]!));
    this._idleWeight += idleWeight;
    const frameMap = frames.map((f) => this.internFrame(f));
    const stackMap: number[] = new Array(stackParent.length);
    for (let i = 0; i < stackParent.length; i++) {
      const p = stackParent[i]!;
      const s = this.internStack(p < 0 ? -1 : stackMap[p]!, frameMap[stackFrame[i]!]!);
      stackMap[i] = s;
      this.weightOf[s]! += stackWeight[i]!;
    }
    this.weighed++;
  }

  // ---- reading ----

  /** The thread's name, from the latest sample that carried one. */
  get name(): string | undefined {
    return this._name;
  }

  /** @internal Time of the sample that gave the name (−Infinity if none). */
  get nameTime(): number {
    return this._nameTime;
  }

  /** Time (µs) of the first sample attempted on this thread, trusted or not. */
  get firstTime(): number {
    return this._firstTime;
  }

  /** Time (µs) of the last sample attempted on this thread, trusted or not. */
  get lastTime(): number {
    return this._lastTime;
  }

  /** Samples per status (counts, not weights). */
  get statuses(): Readonly<StatusCounts> {
    return this._statuses;
  }

  stats(): ValidationStats {
    let attempted = 0;
    let trusted = 0;
    for (const s of STATUS_NAMES) {
      attempted += this._statuses[s];
      if (TRUSTED.has(s)) trusted += this._statuses[s];
    }
    return { attempted, trusted, rejected: attempted - trusted, statuses: { ...this._statuses } };
  }

  /** Weight of the idle samples (trusted, no Python frame). */
  get idleWeight(): number {
    return this._idleWeight;
  }

  /** Weight of the trusted samples that have a stack. */
  get stackedWeight(): number {
    let w = 0;
    for (let s = 0; s < this.count; s++) w += this.weightOf[s]!;
    return w;
  }

  /** Weight of all trusted samples: with a stack, and idle. The base of the percentages. */
  get trustedWeight(): number {
    return this.stackedWeight + this._idleWeight;
  }

  /** The frame table. */
  get frames(): readonly SourceFrame[] {
    return this._frames;
  }

  /** Per frame, its function's index in `functionIds`. */
  get frameFunction(): readonly number[] {
    return this._frameFunction;
  }

  get functionIds(): readonly FunctionId[] {
    return this._functions;
  }

  private viewsNow(): { count: number; parent: Int32Array; frame: Int32Array; weight: Float64Array } {
    const v = this.views;
    if (v && v.count === this.count && v.parent.buffer === this.parentOf.buffer) return v;
    return (this.views = { count: this.count, parent: this.parentOf.subarray(0, this.count), frame: this.frameOf.subarray(0, this.count), weight: this.weightOf.subarray(0, this.count) });
  }

  /** Per stack, its parent stack (−1 for a root frame). (A view: read it, never write it.) */
  get stackParent(): Int32Array {
    return this.viewsNow().parent;
  }

  /** Per stack, its innermost frame (index into `frames`). (A view: read it, never write it.) */
  get stackFrame(): Int32Array {
    return this.viewsNow().frame;
  }

  /** Per stack, the weight of the samples that ended exactly there. (A view: read it, never write it.) */
  get stackWeight(): Float64Array {
    return this.viewsNow().weight;
  }

  /** The frame indices of a stack, root first. */
  stackPath(stack: number): number[] {
    const path: number[] = [];
    for (let s = stack; s >= 0; s = this.parentOf[s]!) path.push(this.frameOf[s]!);
    return path.reverse();
  }

  /** Weight of each stack's subtree (itself and every stack below it). (Kept: read it, never write it.) */
  subtreeWeights(): Float64Array {
    // kept while nothing changed: each export asks, and on a deep tree a fresh table is mostly
    // the cost of touching new memory
    const c = this.subtreeCache;
    if (c && c.count === this.count && c.weighed === this.weighed) return c.sub;
    const n = this.count;
    const sub = this.weightOf.slice(0, n);
    for (let i = n - 1; i >= 0; i--) {
      const p = this.parentOf[i]!;
      if (p >= 0) sub[p]! += sub[i]!;
    }
    this.subtreeCache = { count: n, weighed: this.weighed, sub };
    return sub;
  }

  /**
   * Children of each stack in one list, in index order: stack s's are kids[first[s + 1] ..
   * first[s + 2]), the roots kids[first[0] .. first[1]). (An array per stack is a garbage
   * collector's feast on deep trees: 300,000 of them for one recursion.) Kept while no stack is
   * added (a stack's parent never changes).
   */
  childIndex(): { first: Int32Array; kids: Int32Array } {
    const c = this.childCache;
    if (c && c.count === this.count) return c;
    const parents = this.parentOf;
    const n = this.count;
    const first = new Int32Array(n + 2);
    for (let k = 0; k < n; k++) first[parents[k]! + 2]!++;
    for (let k = 1; k <= n + 1; k++) first[k]! += first[k - 1]!;
    const kids = new Int32Array(n);
    const fill = first.slice(0, n + 1);
    for (let k = 0; k < n; k++) kids[fill[parents[k]! + 1]!++] = k;
    this.childCache = { count: n, first, kids };
    return this.childCache;
  }

  /** Every function with weight, by total then self (descending), then name. */
  functions(): FunctionStat[] {
    const nf = this._functions.length;
    const self = new Float64Array(nf);
    const total = new Float64Array(nf);
    const sub = this.subtreeWeights();
    const { first, kids } = this.childIndex();
    // A function's total is the subtree weight of its outermost occurrences on each path:
    // a depth-first walk keeps how many times each function is on the current path, and a
    // stack adds its subtree only when its function was not already there (recursion).
    const onPath = new Int32Array(nf);
    const todo: number[] = [];
    for (let r = first[1]! - 1; r >= first[0]!; r--) todo.push(kids[r]!);
    while (todo.length > 0) {
      const x = todo.pop()!;
      if (x < 0) {
        onPath[this._frameFunction[this.frameOf[~x]!]!]!--;
        continue;
      }
      const f = this._frameFunction[this.frameOf[x]!]!;
      self[f]! += this.weightOf[x]!;
      if (onPath[f]!++ === 0) total[f]! += sub[x]!;
      todo.push(~x);
      for (let c = first[x + 2]! - 1; c >= first[x + 1]!; c--) todo.push(kids[c]!);
    }
    const out: FunctionStat[] = [];
    for (let f = 0; f < nf; f++) {
      if (total[f]! > 0) out.push({ ...this._functions[f]!, self: self[f]!, total: total[f]! });
    }
    return out.sort(byTotal);
  }

  /** The `n` heaviest functions by self or by total weight. */
  topFunctions(by: 'self' | 'total', n: number): FunctionStat[] {
    const all = this.functions();
    if (by === 'self') all.sort(bySelf);
    return all.filter((f) => f[by] > 0).slice(0, n);
  }
}

function byName(a: FunctionStat, b: FunctionStat): number {
  return cmpStr(a.qualname, b.qualname) || cmpStr(a.filename, b.filename);
}

function byTotal(a: FunctionStat, b: FunctionStat): number {
  return b.total - a.total || b.self - a.self || byName(a, b);
}

function bySelf(a: FunctionStat, b: FunctionStat): number {
  return b.self - a.self || b.total - a.total || byName(a, b);
}
