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
  return new TextDecoder().decode(exportCollapsedBytes(profile, options));
}

/** The same text as UTF-8 bytes (what a file gets: no string of the whole output is made). */
export function exportCollapsedBytes(profile: Profile, options: CollapsedOptions = {}): Uint8Array {
  return collapsedByTree(profile, options) ?? new TextEncoder().encode(collapsedByString(profile, options));
}

const SEMICOLON = 0x3b;

/**
 * @internal The lines in sorted order straight from each thread's stack tree, as UTF-8, or null
 * where that would not give the order a sort of the lines gives. Deep stacks make lines of
 * thousands of characters that share most of their length: making a string per stack and
 * sorting them was most of the export. A walk of the tree, siblings in their labels' order and
 * a stack's own line before those of the stacks below it, copying the open path's bytes per
 * line, gives the sorted order when: no label is the start of another (a line then differs
 * from another first inside a label, never at a separator — and the ' ' before a count sorts
 * before the ';' that goes deeper); no thread's prefix is the start of another's; no two
 * stacks make the same line (siblings of one label, lines without their numbers, threads in
 * one). (UTF-8's byte order is not UTF-16's: the order is decided on the strings.)
 */
export function collapsedByTree(profile: Profile, options: CollapsedOptions): Uint8Array | null {
  const plan = treePlan(profile, options);
  if (!plan) return null;
  // made in one piece, its size known (copies of tens of megabytes as it grew were most of the
  // time of deep recursion's)
  const out = new Uint8Array(plan.size);
  let o = 0;
  emitLines(plan, {
    put(bytes, from, to) {
      out.set(to - from === bytes.length ? bytes : bytes.subarray(from, to), o);
      o += to - from;
    },
  });
  if (o !== plan.size) throw new Error(`collapsed export: ${o} bytes made where ${plan.size} were counted (a bug)`);
  return out;
}

/**
 * The collapsed text written piece by piece to `write` (which must take each piece before it
 * returns: the buffer is reused), in pieces of about `chunk` bytes, so that a profile of deep
 * stacks — gigabytes of lines — is never held whole. Returns false, having written nothing,
 * where the tree's order is not the lines' (collapsedByTree): then write exportCollapsedBytes.
 */
export function writeCollapsed(profile: Profile, options: CollapsedOptions, write: (piece: Uint8Array) => void, chunk = 1 << 20): boolean {
  const plan = treePlan(profile, options);
  if (!plan) return false;
  const buf = new Uint8Array(chunk);
  let o = 0;
  emitLines(plan, {
    put(bytes, from, to) {
      const n = to - from;
      if (o + n > buf.length) {
        if (o > 0) write(buf.subarray(0, o));
        o = 0;
        if (n > buf.length) {
          write(bytes.subarray(from, to));
          return;
        }
      }
      buf.set(n === bytes.length ? bytes : bytes.subarray(from, to), o);
      o += n;
    },
  });
  if (o > 0) write(buf.subarray(0, o));
  return true;
}

interface TreePlan {
  all: ReturnType<Profile['threads']> extends Iterable<infer T> ? T[] : never;
  byPrefix: number[];
  prefixBytes: Uint8Array[];
  encoded: Uint8Array[];
  ranksOf: number[][];
  endsOf: Int32Array[];
  /** each thread's children index, every sibling list sorted by label */
  childrenOf: { first: Int32Array; kids: Int32Array }[];
  idle: boolean;
  idleRank: number;
  /** bytes of the whole output */
  size: number;
}

interface ByteSink {
  put(bytes: Uint8Array, from: number, to: number): void;
}

/** What emitLines needs, checked whole first (every sibling list sorted and distinct): null where the tree's order is not the lines'. */
function treePlan(profile: Profile, options: CollapsedOptions): TreePlan | null {
  const { idle = false, lines = true, threads = true } = options;
  if (!lines || !threads) return null;
  const all = [...profile.threads()];
  const prefixes = all.map((t) => `${t.process ? `${escapeCollapsed(t.process.label)};` : ''}${escapeCollapsed(threadLabel(t, false))};`);
  const byPrefix = all.map((_, i) => i).sort((a, b) => (prefixes[a]! < prefixes[b]! ? -1 : prefixes[a]! > prefixes[b]! ? 1 : 0));
  for (let k = 1; k < byPrefix.length; k++) if (prefixes[byPrefix[k]!]!.startsWith(prefixes[byPrefix[k - 1]!]!)) return null;
  // every label, ranked in string order, and its bytes
  const labelsOf = all.map((t) => t.frames.map((f) => escapeCollapsed(frameLabel(f, lines))));
  const distinct = new Set<string>(idle ? [IDLE_FRAME] : []);
  for (const ls of labelsOf) for (const l of ls) distinct.add(l);
  const sorted = [...distinct].sort();
  const encoder = new TextEncoder();
  const rank = new Map<string, number>();
  const encoded: Uint8Array[] = [];
  for (let k = 0; k < sorted.length; k++) {
    if (k > 0 && sorted[k]!.startsWith(sorted[k - 1]!)) return null;
    rank.set(sorted[k]!, k);
    encoded.push(encoder.encode(sorted[k]!));
  }
  const idleRank = idle ? rank.get(IDLE_FRAME)! : -1;
  // where each stack's path ends in its line, and the output's size
  const prefixBytes = prefixes.map((p) => encoder.encode(p));
  const ranksOf = labelsOf.map((ls) => ls.map((l) => rank.get(l)!));
  const endsOf: Int32Array[] = [];
  const childrenOf: { first: Int32Array; kids: Int32Array }[] = [];
  let size = 0;
  for (let i = 0; i < all.length; i++) {
    const t = all[i]!;
    const weights = t.stackWeight;
    const frameOf = t.stackFrame;
    const parentOf = t.stackParent;
    const frameRank = ranksOf[i]!;
    const ends = new Int32Array(weights.length);
    const p = prefixBytes[i]!.length;
    // (a caller's index is below its callee's)
    for (let s = 0; s < weights.length; s++) {
      const parent = parentOf[s]!;
      ends[s] = (parent < 0 ? p : ends[parent]! + 1) + encoded[frameRank[frameOf[s]!]!]!.length;
      if (weights[s]! > 0) size += ends[s]! + ` ${weights[s]!}\n`.length;
    }
    if (idle && t.idleWeight > 0) size += p + encoded[idleRank]!.length + ` ${t.idleWeight}\n`.length;
    endsOf[i] = ends;
    // every sibling list in label order (sorted in place: the walk below takes them so), no two
    // of one label; and the idle line's place among the roots free
    const { first, kids } = (childrenOf[i] = t.childIndex());
    const bySibling = (a: number, b: number): number => frameRank[frameOf[a]!]! - frameRank[frameOf[b]!]!;
    for (let q = -1; q < weights.length; q++) {
      const from = first[q + 1]!;
      const to = first[q + 2]!;
      if (to - from < 2) continue;
      const list = kids.subarray(from, to).sort(bySibling);
      for (let k = 1; k < list.length; k++) if (frameRank[frameOf[list[k]!]!] === frameRank[frameOf[list[k - 1]!]!]) return null;
    }
    if (idle && t.idleWeight > 0 && kids.subarray(first[0]!, first[1]!).some((r) => frameRank[frameOf[r]!] === idleRank)) return null;
  }
  return { all, byPrefix, prefixBytes, encoded, ranksOf, endsOf, childrenOf, idle, idleRank, size };
}

/** The lines, in order, depth first through each thread's tree (its sibling lists sorted by treePlan). */
function emitLines(plan: TreePlan, out: ByteSink): void {
  const { all, byPrefix, prefixBytes, encoded, ranksOf, endsOf, childrenOf, idle, idleRank } = plan;
  const digits = new Uint8Array(32);
  const count = (w: number): void => {
    const text = ` ${w}\n`;
    for (let k = 0; k < text.length; k++) digits[k] = text.charCodeAt(k);
    out.put(digits, 0, text.length);
  };
  let path = new Uint8Array(1 << 12);
  for (const i of byPrefix) {
    const t = all[i]!;
    const prefix = prefixBytes[i]!;
    const frameRank = ranksOf[i]!;
    const weights = t.stackWeight;
    const frameOf = t.stackFrame;
    const parentOf = t.stackParent;
    const ends = endsOf[i]!;
    const { first, kids } = childrenOf[i]!;
    const idleWeight = idle ? t.idleWeight : 0;
    const top = kids.subarray(first[0]!, first[1]!);
    // the idle line stands among the roots where `prefix<idle>` sorts
    let idleAt = -1;
    if (idleWeight > 0) {
      idleAt = top.findIndex((r) => frameRank[frameOf[r]!]! >= idleRank);
      if (idleAt < 0) idleAt = top.length;
    }
    const emitIdle = (): void => {
      out.put(prefix, 0, prefix.length);
      out.put(encoded[idleRank]!, 0, encoded[idleRank]!.length);
      count(idleWeight);
    };
    // depth first; the open path's bytes in `path`
    if (path.length < prefix.length + 1) path = new Uint8Array(Math.max(path.length * 2, prefix.length + 1));
    path.set(prefix);
    const todo: number[] = [];
    for (let k = top.length - 1; k >= 0; k--) todo.push(top[k]!);
    let rootsSeen = 0;
    while (todo.length > 0) {
      const s = todo.pop()!;
      const parent = parentOf[s]!;
      let at: number;
      if (parent < 0) {
        if (rootsSeen === idleAt) emitIdle();
        rootsSeen++;
        at = prefix.length;
      } else {
        at = ends[parent]! + 1;
      }
      const label = encoded[frameRank[frameOf[s]!]!]!;
      const end = ends[s]!;
      if (end > path.length) {
        const grown = new Uint8Array(Math.max(end, path.length * 2));
        grown.set(path.subarray(0, at));
        path = grown;
      }
      if (parent >= 0) path[at - 1] = SEMICOLON;
      if (label.length > 16) path.set(label, at);
      else for (let k = 0; k < label.length; k++) path[at + k] = label[k]!;
      if (weights[s]! > 0) {
        out.put(path, 0, end);
        count(weights[s]!);
      }
      for (let k = first[s + 2]! - 1; k >= first[s + 1]!; k--) todo.push(kids[k]!);
    }
    if (rootsSeen === idleAt) emitIdle();
  }
}

/** @internal The lines made and sorted as strings (every case; what collapsedByTree must equal). */
export function collapsedByString(profile: Profile, options: CollapsedOptions): string {
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
