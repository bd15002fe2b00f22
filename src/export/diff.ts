// Differential exports: `pyunwind report CURRENT --diff BASE`. Both read the model of
// diff-model.ts (shares of each side's trusted samples with frames, so runs of different
// length compare; the change is current − base in percentage points).
//
// Collapsed (`--format collapsed --diff BASE`), one line per (thread, stack) present on either
// side, in the shape difffolded.pl gives flamegraph.pl:
//
//     thread;root;…;leaf <base share> <current share>
//
// - The thread and frames are as in the collapsed export (collapsed.ts: threadLabel, then
//   `qualname (file:line)`, the same percent-escapes); the thread is the current side's label
//   of a matched pair (diff-model.ts says how threads are matched), the base's for a thread
//   only the base has.
// - The two numbers are the stack's shares, in percent, of the base's and of the current
//   recording's trusted samples with frames (all threads), always with 6 decimals (a sample is
//   visible up to 10^8 samples), `0.000000` on a side that does not have the stack. Each column
//   sums to 100 (up to rounding) — the normalised form of difffolded.pl's
//   `stack count_from_folded1 count_from_folded2` — so `flamegraph.pl` draws it as a
//   differential flame graph as is (widths: the current share; red: grew, blue: shrank), and
//   the change of a line is its last number minus the one before.
// - There is no third column for the change: flamegraph.pl (and its ports) read the last one
//   or two unsigned numbers of a line, so a signed third column would break them. `awk
//   '{print $NF-$(NF-1), $0}' | sort -g` lists the stacks by change.
// - Lines are sorted (code-unit order); no line for idle samples (not in the shares).
//
// Flame graph (`--format flamegraph --diff BASE`): one self-contained HTML page (no network,
// no script needed): a header naming both recordings and their validation numbers, the
// functions with the largest changes in total share (`#diff-functions`), the stacks with the
// largest changes (`#diff-stacks`) and the threads (`#diff-threads`), and the data as JSON in
// `<script type="application/json" id="diff-data">`: `{ diff: DiffProfile, flame:
// DiffFlameNode }`. diffFlameData() gives the tree a flame graph renderer draws: a node per
// frame under its caller, with its shares and change.

import type { Profile } from '../profile/profile.js';
import { escapeCollapsed } from './collapsed.js';
import { ALL_THREADS, diffProfiles, type DiffProfile, type DiffSide } from './diff-model.js';
import { validationLines, type ExportMeta } from './meta.js';

/** A share or change as the diff exports print it: 6 decimals, never `-0.000000`. */
export function formatShare(x: number): string {
  const s = x.toFixed(6);
  return /^-0\.0+$/.test(s) ? s.slice(1) : s;
}

export function exportDiffCollapsed(current: Profile, base: Profile): string {
  const diff = diffProfiles(current, base);
  const out: string[] = [];
  for (const t of diff.threads) {
    const prefix = escapeCollapsed(t.label);
    for (const s of t.stacks) out.push(`${[prefix, ...s.frames.map(escapeCollapsed)].join(';')} ${formatShare(s.baseShare)} ${formatShare(s.currentShare)}`);
  }
  out.sort();
  return out.length === 0 ? '' : out.join('\n') + '\n';
}

/** A node of the differential flame graph: the root (all threads), a thread, or a frame under its caller. */
export interface DiffFlameNode {
  name: string;
  kind: 'root' | 'thread' | 'frame';
  /** percent of the side's samples with frames that have this node on their stack */
  base: number;
  current: number;
  /** current − base (percentage points) */
  change: number;
  /** percent of the side's samples that end exactly here */
  baseSelf: number;
  currentSelf: number;
  /** by name (code-unit order) */
  children: DiffFlameNode[];
}

interface Building {
  name: string;
  kind: DiffFlameNode['kind'];
  base: number;
  current: number;
  baseSelf: number;
  currentSelf: number;
  children: Map<string, Building>;
}

/**
 * The tree a differential flame graph draws: the root (every thread), a node per thread, and
 * under it a node per frame on a path from the root frame, each with its base and current
 * shares (subtree and self) and its change. Widths are meant to follow `current` (as
 * flamegraph.pl's differentials do), colours `change`.
 */
export function diffFlameData(diff: DiffProfile): DiffFlameNode {
  const node = (name: string, kind: DiffFlameNode['kind']): Building => ({ name, kind, base: 0, current: 0, baseSelf: 0, currentSelf: 0, children: new Map() });
  const child = (parent: Building, name: string, kind: DiffFlameNode['kind']): Building => {
    let c = parent.children.get(name);
    if (c === undefined) parent.children.set(name, (c = node(name, kind)));
    return c;
  };
  const root = node(ALL_THREADS, 'root');
  for (const t of diff.threads) {
    const tn = child(root, t.label, 'thread');
    for (const s of t.stacks) {
      const path = [root, tn];
      let at = tn;
      for (const f of s.frames) path.push((at = child(at, f, 'frame')));
      for (const n of path) {
        n.base += s.base;
        n.current += s.current;
      }
      at.baseSelf += s.base;
      at.currentSelf += s.current;
    }
  }
  const pct = (w: number, total: number): number => (total > 0 ? (100 * w) / total : 0);
  const finish = (b: Building): DiffFlameNode => {
    const base = pct(b.base, diff.base.samples);
    const current = pct(b.current, diff.current.samples);
    return {
      name: b.name,
      kind: b.kind,
      base,
      current,
      change: current - base,
      baseSelf: pct(b.baseSelf, diff.base.samples),
      currentSelf: pct(b.currentSelf, diff.current.samples),
      children: [...b.children.keys()].sort().map((k) => finish(b.children.get(k)!)),
    };
  };
  return finish(root);
}

/** Rows in the page's tables. */
const FUNCTION_ROWS = 100;
const STACK_ROWS = 50;

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => (c === '&' ? '&amp;' : c === '<' ? '&lt;' : c === '>' ? '&gt;' : c === '"' ? '&quot;' : '&#39;'));
}

/** JSON that is safe inside a <script> element. */
function scriptJson(value: unknown): string {
  return JSON.stringify(value).replace(/</g, '\\u003c').replace(/\u2028/g, '\\u2028').replace(/\u2029/g, '\\u2029');
}

function pct2(x: number): string {
  return `${x.toFixed(2)}%`;
}

function change2(x: number): string {
  const s = x.toFixed(2);
  if (/^-?0\.00$/.test(s)) return '0.00';
  return x > 0 ? `+${s}` : s;
}

function changeClass(x: number): string {
  return x > 0.005 ? 'up' : x < -0.005 ? 'down' : 'same';
}

function describeSide(what: string, meta: ExportMeta, side: DiffSide, profile: Profile): string {
  const facts = [
    meta.pythonVersion ? `Python ${meta.pythonVersion}` : null,
    meta.startTime > 0 ? `recorded ${new Date(meta.startTime).toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC')}` : null,
    meta.rateHz > 0 ? `at ${meta.rateHz} Hz` : null,
    `by ${meta.recorder}`,
    meta.mode ? `mode ${meta.mode}` : null,
  ].filter((x) => x !== null);
  return (
    `<div class="side" id="diff-${what}"><h2>${what === 'current' ? 'Current' : 'Base'}: <span class="title">${escapeHtml(meta.title)}</span></h2>` +
    `<p>${escapeHtml(facts.join(', '))}</p>` +
    `<p><b>${side.samples}</b> samples with frames in ${side.threads} thread${side.threads === 1 ? '' : 's'} (100 % of this side's shares)</p>` +
    validationLines(profile).map((l) => `<p class="validation">${escapeHtml(l)}</p>`).join('') +
    `</div>`
  );
}

export function exportDiffFlamegraph(current: Profile, base: Profile, meta: ExportMeta, baseMeta: ExportMeta): string {
  const diff = diffProfiles(current, base);
  const flame = diffFlameData(diff);
  const functions = diff.all.functions.slice(0, FUNCTION_ROWS);
  const stacks = diff.threads
    .flatMap((t) => t.stacks.map((s) => ({ thread: t.label, ...s })))
    .sort((a, b) => Math.abs(b.change) - Math.abs(a.change) || b.currentShare - a.currentShare)
    .slice(0, STACK_ROWS);
  const cell = (x: number): string => `<td class="num">${pct2(x)}</td>`;
  const changeCell = (x: number): string => `<td class="num ${changeClass(x)}">${change2(x)}</td>`;

  const functionRows = functions
    .map(
      (f) =>
        `<tr data-qualname="${escapeHtml(f.qualname)}" data-filename="${escapeHtml(f.filename)}" data-base="${formatShare(f.baseTotalShare)}" data-current="${formatShare(f.currentTotalShare)}" data-change="${formatShare(f.totalChange)}" data-base-self="${formatShare(f.baseSelfShare)}" data-current-self="${formatShare(f.currentSelfShare)}" data-self-change="${formatShare(f.selfChange)}">` +
        `<td class="name">${escapeHtml(f.qualname)}</td><td class="file">${escapeHtml(f.filename)}</td>` +
        cell(f.baseTotalShare) + cell(f.currentTotalShare) + changeCell(f.totalChange) +
        cell(f.baseSelfShare) + cell(f.currentSelfShare) + changeCell(f.selfChange) +
        `</tr>`,
    )
    .join('\n');
  const stackRows = stacks
    .map(
      (s) =>
        `<tr data-thread="${escapeHtml(s.thread)}" data-base="${formatShare(s.baseShare)}" data-current="${formatShare(s.currentShare)}" data-change="${formatShare(s.change)}">` +
        `<td class="stack">${escapeHtml(s.thread)}<br>${s.frames.map(escapeHtml).join(' →<br>')}</td>` +
        cell(s.baseShare) + cell(s.currentShare) + changeCell(s.change) +
        `</tr>`,
    )
    .join('\n');
  const threadRows = diff.threads
    .map(
      (t) =>
        `<tr data-label="${escapeHtml(t.label)}" data-base="${formatShare(t.baseShare)}" data-current="${formatShare(t.currentShare)}" data-change="${formatShare(t.change)}">` +
        `<td class="name">${escapeHtml(t.label)}</td><td>${t.baseLabel === null ? '(not in base)' : escapeHtml(t.baseLabel)}</td>` +
        cell(t.baseShare) + cell(t.currentShare) + changeCell(t.change) +
        `</tr>`,
    )
    .join('\n');

  const title = `pyunwind diff: ${meta.title} against ${baseMeta.title}`;
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; background: #fff; }
h1 { font-size: 1.4em; margin: 0 0 .5em; }
h2 { font-size: 1.1em; margin: 1.2em 0 .3em; }
.sides { display: flex; gap: 2em; flex-wrap: wrap; }
.side { flex: 1 1 30em; border: 1px solid #ddd; border-radius: 4px; padding: 0 1em .5em; }
.side p { margin: .3em 0; }
.validation { color: #555; font-size: .9em; }
table { border-collapse: collapse; margin: .5em 0 1.5em; }
th, td { padding: 2px 8px; border-bottom: 1px solid #eee; text-align: left; vertical-align: top; }
th { background: #f4f4f4; position: sticky; top: 0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.file, td.stack { font-family: ui-monospace, monospace; font-size: .85em; word-break: break-all; }
td.name { font-family: ui-monospace, monospace; }
.up { color: #b00; background: #fdecea; }
.down { color: #03c; background: #eaf0fd; }
.note { color: #555; max-width: 60em; }
</style>
</head>
<body>
<header id="diff-header">
<h1>Differential profile</h1>
<p class="note">Shares are percentages of each recording's trusted samples with frames (all threads), so recordings of different lengths compare. <b>Change</b> = current share − base share, in percentage points: <span class="up">red grew</span>, <span class="down">blue shrank</span>.</p>
<div class="sides">
${describeSide('current', meta, diff.current, current)}
${describeSide('base', baseMeta, diff.base, base)}
</div>
</header>
<main>
<h2>Functions with the largest changes (total share, all threads)</h2>
<table id="diff-functions">
<thead><tr><th>Function</th><th>File</th><th>Base total</th><th>Current total</th><th>Change</th><th>Base self</th><th>Current self</th><th>Self change</th></tr></thead>
<tbody>
${functionRows}
</tbody>
</table>
<h2>Stacks with the largest changes</h2>
<table id="diff-stacks">
<thead><tr><th>Thread and stack (root first)</th><th>Base</th><th>Current</th><th>Change</th></tr></thead>
<tbody>
${stackRows}
</tbody>
</table>
<h2>Threads</h2>
<table id="diff-threads">
<thead><tr><th>Thread</th><th>In the base</th><th>Base</th><th>Current</th><th>Change</th></tr></thead>
<tbody>
${threadRows}
</tbody>
</table>
</main>
<script type="application/json" id="diff-data">${scriptJson({ diff, flame })}</script>
</body>
</html>
`;
}
