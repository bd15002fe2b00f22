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
// Flame graph (`--format flamegraph --diff BASE`): one self-contained HTML page (no network)
// drawn by the flame graph page's renderer (html/flamegraph-script.ts), coloured by change; the
// parts below the graph have styles and a script of their own (html/browser/diff.css, diff.ts):
//
// - Views: "all threads" first, then one per thread of the diff (matched pairs under the
//   current side's label, then the base-only threads). Each view is a prefix tree over the
//   frames of the union of both sides' stacks (qualname, file and line: the model's `sources`).
// - Widths: the current side's weights (as flamegraph.pl's differential flame graph), so a
//   stack only the base has is in the tree but has no width: the view's note says how many
//   base samples that leaves undrawn, and their share of the base. A view's base (100 % of the
//   tooltip's percentages) is the current side's samples with frames, all threads, as the
//   model's shares.
// - Colour (`value`): each node's change of its *total* share (current − base share of the
//   samples with that node on their stack, as a fraction: 0.05 is +5 points), red where the
//   current recording spends more of its samples, blue where less, white where equal;
//   saturated at the largest |change| of any node of any view (at least 1 point), one scale
//   for the page so one colour is one change in every view. Nodes merged by "merge lines" add
//   their changes (their samples are disjoint), as the renderer does.
// - Tooltip columns: "base" and "current", the node's total share on each side.
// - The function table of the renderer (`#top-functions`) lists the current side's functions;
//   beside it: the two recordings (`#diff-recordings`, with `#diff-current` and `#diff-base`),
//   the functions with the largest changes of total share over all threads
//   (`#diff-functions`: a row per function with data-qualname, data-filename, data-base,
//   data-current, data-change, data-base-self, data-current-self, data-self-change, shares in
//   percent with 6 decimals; click a row to search for it) and a validation panel per side
//   (`#validation-current`, `#validation-base`).
// - Data: the page's FlameGraphData (`#pyunwind-data`, diffFlamegraphData()) with `diff`: the
//   model's sides, threads and all-threads functions (DiffSummary; the stacks are in the views).

import type { Profile } from '../profile/profile.js';
import { escapeCollapsed } from './collapsed.js';
import { diffProfiles, type DiffFunction, type DiffProfile, type DiffSide, type DiffThread } from './diff-model.js';
import { FlameFrameTable } from './flamegraph.js';
import { DIFF_CSS, DIFF_SCRIPT } from './html/generated/diff.js';
import { FLAMEGRAPH_CSS, FLAMEGRAPH_SCRIPT, flamegraphBody, type FlameFunction, type FlameGraphData, type FlameView } from './html/flamegraph-script.js';
import { BASE_CSS, escapeHtml, formatCount, formatPercent, htmlPage, recordingFacts } from './html/page.js';
import { validationPanel } from './html/validation.js';
import type { ExportMeta } from './meta.js';

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

/** At most this many functions per view in the renderer's table data (as the flame graph). */
const MAX_FUNCTIONS = 1000;
/** Rows of `#diff-functions`. */
const FUNCTION_ROWS = 100;
/** The colour scale's least saturation point: a change of 1 point of total share. */
const MIN_SCALE = 0.01;

/** One view of the differential flame graph (see the file comment). */
function diffView(t: DiffThread, id: string, label: string, diff: DiffProfile, table: FlameFrameTable): FlameView {
  const curTotal = diff.current.samples;
  const baseTotal = diff.base.samples;
  const parent: number[] = [];
  const frame: number[] = [];
  const self: number[] = [];
  const baseWeight: number[] = [];
  const currentWeight: number[] = [];
  const index = new Map<string, number>();
  let baseOnly = 0;
  for (const s of t.stacks) {
    let at = -1;
    for (const f of s.sources) {
      const fi = table.intern(f);
      const key = `${at}:${fi}`;
      let n = index.get(key);
      if (n === undefined) {
        n = parent.length;
        index.set(key, n);
        parent.push(at);
        frame.push(fi);
        self.push(0);
        baseWeight.push(0);
        currentWeight.push(0);
      }
      baseWeight[n]! += s.base;
      currentWeight[n]! += s.current;
      at = n;
    }
    if (at >= 0) self[at]! += s.current;
    if (!(s.current > 0)) baseOnly += s.base;
  }
  const fraction = (w: number, total: number): number => (total > 0 ? w / total : 0);
  const baseShare = baseWeight.map((w) => fraction(w, baseTotal));
  const currentShare = currentWeight.map((w) => fraction(w, curTotal));
  const functions: FlameFunction[] = t.functions
    .filter((f) => f.currentTotal > 0)
    .sort((a, b) => b.currentTotal - a.currentTotal || b.currentSelf - a.currentSelf)
    .slice(0, MAX_FUNCTIONS)
    .map((f) => [f.qualname, f.filename, f.currentSelf, f.currentTotal]);
  const notes = [
    id === 'all' ? null : `${formatPercent(t.base, baseTotal)} of the base, ${formatPercent(t.current, curTotal)} of the current`,
    baseOnly > 0
      ? `not drawn: ${formatCount(baseOnly)} base sample${baseOnly === 1 ? '' : 's'} (${formatPercent(baseOnly, baseTotal)} of the base) on stacks the current recording does not have`
      : 'widths: the current recording',
  ].filter((x) => x !== null);
  return {
    id,
    label,
    base: curTotal,
    idle: 0,
    parent,
    frame,
    self,
    value: currentShare.map((c, i) => c - baseShare[i]!),
    columns: [
      { label: 'base', values: baseShare, format: 'percent' },
      { label: 'current', values: currentShare, format: 'percent' },
    ],
    functions,
    note: notes.join('; '),
  };
}

/**
 * The differential flame graph's data for the shared renderer: "all threads" and a view per
 * thread of the diff, widths by the current side, each node's value its change of total share
 * (a fraction), the base and current total shares as tooltip columns (see the file comment).
 */
export function diffFlamegraphData(diff: DiffProfile): FlameGraphData {
  const table = new FlameFrameTable();
  const views = [
    diffView(diff.all, 'all', `all threads (${diff.threads.length})`, diff, table),
    ...diff.threads.map((t, i) => diffView(t, `thread-${i}`, t.label, diff, table)),
  ];
  let scale = MIN_SCALE;
  for (const v of views) for (const x of v.value!) scale = Math.max(scale, Math.abs(x));
  return {
    version: 1,
    unit: 'samples',
    color: { mode: 'value', scale, legend: { negative: 'less than base', positive: 'more than base' }, label: 'change', format: 'signed-percent' },
    frames: table.frames,
    views,
    initialView: 0,
  };
}

/** The model's numbers the page embeds beside the views (`data.diff`): its stacks are in the views. */
export interface DiffSummary {
  base: DiffSide;
  current: DiffSide;
  lines: boolean;
  threads: Omit<DiffThread, 'stacks' | 'functions'>[];
  /** every function of all threads, largest change first (DiffProfile.all.functions) */
  functions: DiffFunction[];
}

function diffSummary(diff: DiffProfile): DiffSummary {
  return {
    base: diff.base,
    current: diff.current,
    lines: diff.lines,
    threads: diff.threads.map(({ stacks: _s, functions: _f, ...t }) => t),
    functions: diff.all.functions,
  };
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

function basename(p: string): string {
  return p.slice(Math.max(p.lastIndexOf('/'), p.lastIndexOf('\\')) + 1);
}

function describeSide(what: 'current' | 'base', profile: Profile, meta: ExportMeta, side: DiffSide): string {
  return (
    `<div class="recording" id="diff-${what}"><h3>${what === 'current' ? 'Current' : 'Base'}: <span class="title">${escapeHtml(meta.title)}</span></h3>` +
    `<p class="facts">${recordingFacts(profile, meta).map((f) => `<span>${escapeHtml(f)}</span>`).join('')}</p>` +
    `<p><b>${formatCount(side.samples)}</b> samples with frames in ${side.threads} thread${side.threads === 1 ? '' : 's'}: 100 % of this side's shares</p>` +
    `</div>`
  );
}

function functionTable(functions: DiffFunction[]): string {
  const cell = (x: number): string => `<td class="pct">${pct2(x)}</td>`;
  const changeCell = (x: number): string => `<td class="${changeClass(x)}">${change2(x)}</td>`;
  const rows = functions.slice(0, FUNCTION_ROWS).map(
    (f) =>
      `<tr data-qualname="${escapeHtml(f.qualname)}" data-filename="${escapeHtml(f.filename)}" data-base="${formatShare(f.baseTotalShare)}" data-current="${formatShare(f.currentTotalShare)}" data-change="${formatShare(f.totalChange)}" data-base-self="${formatShare(f.baseSelfShare)}" data-current-self="${formatShare(f.currentSelfShare)}" data-self-change="${formatShare(f.selfChange)}" title="${escapeHtml(`${f.qualname}\n${f.filename}`)}">` +
      `<td class="name"><span class="q">${escapeHtml(f.qualname)}</span><span class="file">${escapeHtml(basename(f.filename))}</span></td>` +
      cell(f.baseTotalShare) + cell(f.currentTotalShare) + changeCell(f.totalChange) + changeCell(f.selfChange) +
      `</tr>`,
  );
  return (
    `<section class="panel diff-functions"><h2>Largest changes <span class="sub">total share, all threads, in points</span></h2>\n` +
    `<div class="scroll"><table class="data" id="diff-functions">\n` +
    `<thead><tr><th class="name">function</th><th title="total share in the base">base</th><th title="total share in the current recording">current</th><th title="current − base total share">change</th><th title="current − base self share">self</th></tr></thead>\n` +
    `<tbody>\n${rows.join('\n')}\n</tbody>\n</table></div>` +
    (functions.length > FUNCTION_ROWS ? `\n<p class="hint">${functions.length - FUNCTION_ROWS} more not shown</p>` : '') +
    `</section>`
  );
}

export function exportDiffFlamegraph(current: Profile, base: Profile, meta: ExportMeta, baseMeta: ExportMeta): string {
  const diff = diffProfiles(current, base);
  const data: FlameGraphData & { diff: DiffSummary } = { ...diffFlamegraphData(diff), diff: diffSummary(diff) };
  const samples = (what: string, side: DiffSide): string => `${what}: ${formatCount(side.samples)} samples with frames`;
  const side = [
    `<section class="panel recordings" id="diff-recordings"><h2>Recordings</h2>`,
    describeSide('current', current, meta, diff.current),
    describeSide('base', base, baseMeta, diff.base),
    `<p class="note">Shares are percentages of each recording's trusted samples with frames (all threads), so recordings of different lengths compare; a change is current − base, in points.</p>`,
    `</section>`,
    functionTable(diff.all.functions),
    `<div class="validations">`,
    validationPanel(diff.current.stats, { id: 'validation-current', title: 'Validation: current', subtitle: meta.title, ...(meta.capture ? { capture: meta.capture } : {}) }),
    validationPanel(diff.base.stats, { id: 'validation-base', title: 'Validation: base', subtitle: baseMeta.title, ...(baseMeta.capture ? { capture: baseMeta.capture } : {}) }),
    `</div>`,
  ].join('\n');
  return htmlPage({
    title: `Differential flame graph: ${meta.title} against ${baseMeta.title}`,
    css: BASE_CSS + FLAMEGRAPH_CSS + DIFF_CSS,
    body: flamegraphBody({
      kind: 'Differential flame graph',
      title: `${meta.title} against ${baseMeta.title}`,
      facts: [samples('current', diff.current), samples('base', diff.base), 'widths: current samples', 'colour: change of total share'],
      side,
    }),
    data,
    script: FLAMEGRAPH_SCRIPT + DIFF_SCRIPT,
  });
}
