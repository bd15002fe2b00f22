// The heatmap page's script: reads a HeatmapData (../heatmap-data.ts) and shows it in the markup
// of heatmapBody() (../heatmap-script.ts). Bundled into one classic script by
// scripts/build-html.mjs and inlined in every heatmap export.
//
// The page: a view selector (`#thread`: all threads, or one), the files with samples (`#files`,
// by total), the hottest lines (`#hot-lines`, by self), and the selected file's source
// (`#source`) with, per line, its self and total samples: self as the line's heat (the code's
// background), total as a bar. "sampled lines only" (`#only-sampled`) folds the cold stretches.
//
// For tests and tools (stable):
//   - `#files tbody tr`: data-file (the path), data-self, data-total; the selected one has class `selected`;
//   - `#hot-lines tbody tr`: data-file, data-line, data-self, data-total (self descending);
//   - `#file-name`: the selected file's path; `#source-note`: why its source is not shown
//     ("source not available here: FILE"), empty otherwise;
//   - `#source tbody tr[data-line]`: data-line, data-self, data-total, and `td.code` with the
//     line's text (exactly as in the file);
//   - window.__pyunwind: { data, state, showFile(path, line?), ready }; <body data-ready="1">.

import type { HeatmapData, HeatmapFileCounts, HeatmapLine, HeatmapView } from '../heatmap-data.js';
import { basename, byId, closestTo, el, fmt, one, pageData, pct, publish } from './page.js';

interface State {
  view: number;
  /** the shown file (index into data.files; −1: none) */
  file: number;
  /** the line scrolled to and marked (null: none) */
  line: number | null;
  /** "sampled lines only" */
  only: boolean;
}

/** A sampled line over all files of a view (the hottest lines). */
interface HotLine {
  file: number;
  line: number;
  self: number;
  total: number;
}

const data = pageData<HeatmapData>();
const unit = data.unit || 'samples';
const select = byId('thread', HTMLSelectElement);
const onlySampled = byId('only-sampled', HTMLInputElement);
const state: State = { view: data.initialView || 0, file: -1, line: null, only: false };
/** lines of context kept around each sampled line by "sampled lines only" */
const CONTEXT = 3;
const MAX_HOT = 30;

function viewOf(): HeatmapView {
  return data.views[state.view]!;
}
function countsOf(file: number): HeatmapFileCounts | null {
  return viewOf().files.find((f) => f.file === file) ?? null;
}
function maxSelf(view: HeatmapView): number {
  let m = 0;
  for (const f of view.files) for (const l of f.lines) if (l[1] > m) m = l[1];
  return m;
}
/** The code's background for a line: stronger with its self weight (square root: a line with a quarter of the hottest's still shows). */
function heat(self: number, max: number): string {
  if (!(self > 0) || !(max > 0)) return '';
  const t = Math.sqrt(self / max);
  return 'hsla(8, 85%, 60%, ' + (0.1 + 0.62 * t).toFixed(3) + ')';
}
/** [directory with its trailing separator, file name] */
function splitPath(p: string): [string, string] {
  const i = Math.max(p.lastIndexOf('/'), p.lastIndexOf('\\'));
  return i >= 0 ? [p.slice(0, i + 1), p.slice(i + 1)] : ['', p];
}

function hotLines(view: HeatmapView): HotLine[] {
  const all: HotLine[] = [];
  for (const f of view.files) {
    for (const l of f.lines) if (l[1] > 0) all.push({ file: f.file, line: l[0], self: l[1], total: l[2] });
  }
  all.sort((a, b) => {
    const na = data.files[a.file]!.name;
    const nb = data.files[b.file]!.name;
    return b.self - a.self || b.total - a.total || (na < nb ? -1 : na > nb ? 1 : 0) || a.line - b.line;
  });
  return all;
}

function renderLists(): HotLine[] {
  const view = viewOf();
  const tbody = one('#files tbody');
  tbody.textContent = '';
  for (const f of view.files) {
    const name = data.files[f.file]!.name;
    const [dir, base] = splitPath(name);
    const tr = el('tr', {
      'data-file': name,
      'data-index': f.file,
      'data-self': f.self,
      'data-total': f.total,
      title: name + '\n' + pct(f.total, view.base) + ' of ' + view.label + ' (self ' + pct(f.self, view.base) + ')',
    });
    tr.appendChild(el('td', null, fmt(f.total)));
    tr.appendChild(el('td', null, fmt(f.self)));
    const td = el('td', { class: 'name' });
    td.appendChild(el('span', { class: 'base' }, base));
    td.appendChild(el('span', { class: 'dir' }, dir.length > 34 ? '\u2026' + dir.slice(-33) : dir));
    tr.appendChild(td);
    tbody.appendChild(tr);
  }
  byId('files-sub').textContent = view.files.length + ' with samples, by total';
  const hot = hotLines(view).slice(0, MAX_HOT);
  const hb = one('#hot-lines tbody');
  hb.textContent = '';
  for (const h of hot) {
    const file = data.files[h.file]!;
    const tr = el('tr', { 'data-file': file.name, 'data-index': h.file, 'data-line': h.line, 'data-self': h.self, 'data-total': h.total, title: file.name + ':' + h.line });
    tr.appendChild(el('td', null, fmt(h.self)));
    tr.appendChild(el('td', null, fmt(h.total)));
    const td = el('td', { class: 'name' }, basename(file.name) + ':' + h.line);
    const text = file.source && file.source[h.line - 1];
    if (text) td.appendChild(el('span', { class: 'snip' }, text.trim()));
    tr.appendChild(td);
    hb.appendChild(tr);
  }
  return hot;
}

function markSelected(): void {
  for (const tr of document.querySelectorAll('#files tbody tr')) tr.classList.toggle('selected', Number(tr.getAttribute('data-index')) === state.file);
  for (const tr of document.querySelectorAll('#hot-lines tbody tr')) {
    tr.classList.toggle('selected', Number(tr.getAttribute('data-index')) === state.file && Number(tr.getAttribute('data-line')) === state.line);
  }
}

function renderSource(): void {
  const view = viewOf();
  const file = data.files[state.file];
  const counts = countsOf(state.file) ?? { self: 0, total: 0, lines: [], noLine: [0, 0] };
  const byLine = new Map<number, HeatmapLine>();
  for (const l of counts.lines) byLine.set(l[0], l);
  byId('file-name').textContent = file ? file.name : '';
  byId('file-counts').textContent = file
    ? 'total ' + fmt(counts.total) + ' ' + unit + ' (' + pct(counts.total, view.base) + '), self ' + fmt(counts.self) + ' (' + pct(counts.self, view.base) + ')' +
      (counts.noLine[1] > 0 ? '; ' + fmt(counts.noLine[1]) + ' without a line number' : '')
    : '';
  const note = byId('source-note');
  const lastSampled = counts.lines.length ? counts.lines[counts.lines.length - 1]![0] : 0;
  let noteText = '';
  if (file && file.source === null) noteText = file.note || 'source not available here: ' + file.name;
  else if (file && file.source && lastSampled > file.source.length) {
    noteText = 'the file has ' + file.source.length + ' lines but line ' + lastSampled + ' was sampled: it may have changed since the recording';
  }
  note.textContent = noteText;
  note.hidden = !noteText;

  const max = maxSelf(view);
  const tbody = one('#source tbody');
  tbody.textContent = '';
  if (!file) return;
  const source = file.source;
  const n = source ? Math.max(source.length, lastSampled) : 0;
  const show: number[] = [];
  if (source === null) {
    for (const l of counts.lines) show.push(l[0]);
  } else if (state.only) {
    const keep = new Uint8Array(n + 2);
    for (const l of counts.lines) for (let k = Math.max(1, l[0] - CONTEXT); k <= Math.min(n, l[0] + CONTEXT); k++) keep[k] = 1;
    for (let k = 1; k <= n; k++) if (keep[k]) show.push(k);
  } else {
    for (let k = 1; k <= n; k++) show.push(k);
  }
  const frag = document.createDocumentFragment();
  let prev = 0;
  for (const line of show) {
    if (line > prev + 1 && (state.only || source === null)) {
      const fold = el('tr', { class: 'fold' });
      const skipped = line - prev - 1;
      fold.appendChild(el('td', { colspan: 4 }, '\u22ef ' + (prev === 0 ? 'lines 1\u2013' + (line - 1) : skipped + ' line' + (skipped === 1 ? '' : 's')) + ' without samples'));
      frag.appendChild(fold);
    }
    prev = line;
    const l = byLine.get(line);
    const self = l ? l[1] : 0;
    const total = l ? l[2] : 0;
    const text = source ? source[line - 1] : undefined;
    const tr = el('tr', { 'data-line': line, 'data-self': self, 'data-total': total, class: (total > 0 ? 'sampled' : '') + (text === undefined ? ' missing' : '') });
    if (total > 0) tr.title = 'line ' + line + ': self ' + fmt(self) + ' (' + pct(self, view.base) + '), total ' + fmt(total) + ' (' + pct(total, view.base) + ') of ' + view.label;
    tr.appendChild(el('td', { class: 'ln' }, line));
    tr.appendChild(el('td', { class: 'n self' }, self > 0 ? fmt(self) : ''));
    const tt = el('td', { class: 'n total' });
    if (total > 0) {
      const bar = el('span', { class: 'bar' });
      bar.style.width = Math.max(2, Math.round(76 * Math.min(1, total / Math.max(1, view.base)))) + 'px';
      tt.appendChild(bar);
      tt.appendChild(el('span', { class: 'v' }, fmt(total)));
    }
    tr.appendChild(tt);
    const code = el('td', { class: 'code' }, text !== undefined ? text : source ? '(past the end of the file)' : '');
    const bg = heat(self, max);
    if (bg) code.style.background = bg;
    tr.appendChild(code);
    frag.appendChild(tr);
  }
  tbody.appendChild(frag);
}

function scrollToLine(line: number | null): void {
  const box = byId('source-scroll');
  document.querySelector('#source tr.focus')?.classList.remove('focus');
  if (line === null) {
    box.scrollTop = 0;
    return;
  }
  const row = document.querySelector<HTMLElement>('#source tbody tr[data-line="' + line + '"]');
  if (!row) return;
  row.classList.add('focus');
  box.scrollTop = Math.max(0, row.offsetTop - box.clientHeight / 3);
}

function showFile(index: number, line?: number): void {
  state.file = index;
  state.line = line === undefined ? null : line;
  if (state.line === null) {
    // the file's hottest line (by self, then total)
    let best: HeatmapLine | null = null;
    for (const l of countsOf(index)?.lines ?? []) if (!best || l[1] > best[1] || (l[1] === best[1] && l[2] > best[2])) best = l;
    state.line = best ? best[0] : null;
  }
  renderSource();
  markSelected();
  scrollToLine(state.line);
}

function setView(i: number): void {
  state.view = i;
  const hot = renderLists();
  const view = viewOf();
  if (hot.length) showFile(hot[0]!.file, hot[0]!.line);
  else if (view.files.length) showFile(view.files[0]!.file);
  else {
    state.file = -1;
    renderSource();
  }
}

data.views.forEach((v, i) => select.appendChild(el('option', { value: i }, v.label + ' \u2014 ' + fmt(v.base) + ' ' + unit)));
select.value = String(state.view);
select.addEventListener('change', () => setView(Number(select.value)));
onlySampled.addEventListener('change', () => {
  state.only = onlySampled.checked;
  renderSource();
  scrollToLine(state.line);
});
one('#files tbody').addEventListener('click', (ev) => {
  const tr = closestTo(ev, 'tr');
  if (tr) showFile(Number(tr.getAttribute('data-index')));
});
one('#hot-lines tbody').addEventListener('click', (ev) => {
  const tr = closestTo(ev, 'tr');
  if (tr) showFile(Number(tr.getAttribute('data-index')), Number(tr.getAttribute('data-line')));
});

const api = publish({
  data,
  state,
  ready: false,
  /** shows the file named `path` (at `line`, else its hottest line); false: no such file */
  showFile(path: string, line?: number): boolean {
    const i = data.files.findIndex((f) => f.name === path);
    if (i < 0) return false;
    showFile(i, line);
    return true;
  },
});
setView(state.view);
api.ready = true;
document.body.setAttribute('data-ready', '1');
