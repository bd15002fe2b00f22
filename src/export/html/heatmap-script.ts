// The heatmap page's renderer: its data shape, styles, markup and browser script (used by
// src/export/heatmap.ts through htmlPage()).
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

import { BASE_SCRIPT, escapeHtml } from './page.js';

/** A source file: its path, its lines (null: not available) and why not. */
export interface HeatmapFile {
  name: string;
  /** the text split into lines (line 1 first); null when it could not be read here */
  source: string[] | null;
  /** why `source` is null, shown on the page */
  note?: string;
}

/** One sampled line of a file: [line, self, total] (weights). */
export type HeatmapLine = [line: number, self: number, total: number];

export interface HeatmapFileCounts {
  /** index into HeatmapData.files */
  file: number;
  /** weight of samples whose innermost frame is in the file */
  self: number;
  /** weight of samples with a frame in the file, once per sample */
  total: number;
  /** sampled lines, by line number */
  lines: HeatmapLine[];
  /** [self, total] of frames of the file without a line number */
  noLine: [number, number];
}

export interface HeatmapView {
  id: string;
  label: string;
  /** the base of percentages: the view's trusted weight */
  base: number;
  /** files by total, descending */
  files: HeatmapFileCounts[];
}

export interface HeatmapData {
  version: 1;
  unit: string;
  files: HeatmapFile[];
  views: HeatmapView[];
  initialView: number;
}

export interface HeatmapBodyOptions {
  title: string;
  facts: string[];
  /** trusted HTML under the file lists (the validation panel) */
  side: string;
}

export function heatmapBody(o: HeatmapBodyOptions): string {
  return `<header class="top">
<h1><span class="kind">Source heatmap:</span> <span id="title">${escapeHtml(o.title)}</span></h1>
<p class="facts">${o.facts.map((f) => `<span>${escapeHtml(f)}</span>`).join('')}</p>
</header>
<main class="heatmap">
<div class="toolbar">
<label>View <select id="thread"></select></label>
<label><input id="only-sampled" type="checkbox"> sampled lines only</label>
<span class="legend"><span class="sw heat"></span>self: samples whose innermost frame is on the line
<span class="sw bar"></span>total: samples with the line anywhere on their stack</span>
</div>
<div class="grid">
<div class="left">
<section class="panel"><h2>Files <span class="sub" id="files-sub"></span></h2>
<div class="scroll files-scroll"><table class="data" id="files"><thead><tr><th>total</th><th>self</th><th class="name">file</th></tr></thead><tbody></tbody></table></div></section>
<section class="panel"><h2>Hottest lines <span class="sub">by self</span></h2>
<div class="scroll"><table class="data" id="hot-lines"><thead><tr><th>self</th><th>total</th><th class="name">line</th></tr></thead><tbody></tbody></table></div></section>
${o.side}
</div>
<section class="panel source-panel">
<div class="source-head"><h2 id="file-name"></h2><span id="file-counts" class="muted"></span></div>
<p id="source-note" class="source-note" hidden></p>
<div class="source-scroll" id="source-scroll"><table id="source"><thead><tr><th class="ln">line</th><th class="n">self</th><th class="n">total</th><th class="code"></th></tr></thead><tbody></tbody></table></div>
</section>
</div>
</main>`;
}

export const HEATMAP_CSS = String.raw`
main.heatmap { padding-bottom: 14px; }
.heatmap .legend { margin-left: auto; font-size: 12px; color: var(--muted); }
.heatmap .legend .sw { display: inline-block; width: 14px; height: 10px; border-radius: 2px; vertical-align: -1px; margin: 0 4px 0 12px; }
.heatmap .legend .sw.heat { background: hsl(8, 85%, 62%); }
.heatmap .legend .sw.bar { background: #5b8fd0; }
.heatmap .grid { display: grid; grid-template-columns: 400px minmax(0, 1fr); gap: 14px; align-items: start; }
.heatmap .left { display: flex; flex-direction: column; gap: 14px; min-width: 0; }
.heatmap .scroll { max-height: 300px; overflow: auto; }
.heatmap .files-scroll { max-height: 260px; }
#files td.name { white-space: nowrap; }
#files td.name .base { display: block; color: var(--fg); }
#files td.name .dir { display: block; color: var(--faint); font-size: 11px; max-width: 250px; overflow: hidden; text-overflow: ellipsis; }
#files tr.selected, #hot-lines tr.selected { background: var(--accent-bg); }
#hot-lines td.name { white-space: nowrap; }
#hot-lines td.name .snip { display: block; color: var(--muted); max-width: 250px; overflow: hidden; text-overflow: ellipsis; white-space: pre; font-size: 11.5px; }
.source-panel { padding: 0; overflow: hidden; position: sticky; top: 10px; }
.source-head { display: flex; align-items: baseline; gap: 14px; padding: 10px 14px 8px; border-bottom: 1px solid var(--line); }
.source-head h2 { margin: 0; flex: 1 1 auto; min-width: 0; font: 600 13px var(--mono); overflow-wrap: anywhere; }
.source-head #file-counts { flex: none; white-space: nowrap; font-size: 13px; }
.source-note { margin: 0; padding: 8px 14px; background: #fff6e0; color: #7a5000; border-bottom: 1px solid var(--line); font-size: 13px; }
@media (prefers-color-scheme: dark) { .source-note { background: #3a2f16; color: #f0c878; } }
.source-scroll { max-height: calc(100vh - 150px); min-height: 300px; overflow: auto; }
#source { border-collapse: collapse; width: 100%; font: 12.5px/18px var(--mono); }
#source th { position: sticky; top: 0; background: var(--panel); color: var(--muted); font: 500 11.5px var(--sans); text-align: right; padding: 3px 8px; border-bottom: 1px solid var(--line); z-index: 1; }
#source td { padding: 0 8px; vertical-align: top; }
#source td.ln { color: var(--faint); text-align: right; user-select: none; width: 1%; }
#source td.n { text-align: right; width: 1%; white-space: nowrap; font-variant-numeric: tabular-nums; }
#source td.n.self { color: hsl(8, 70%, 42%); font-weight: 600; }
#source td.n.total { color: #3d6fae; position: relative; min-width: 88px; }
#source td.n.total .bar { position: absolute; left: 6px; top: 4px; height: 10px; background: #5b8fd0; opacity: .42; border-radius: 2px; }
#source td.n.total .v { position: relative; }
#source td.code { white-space: pre; tab-size: 4; width: 98%; }
#source tr.sampled td.ln { color: var(--muted); }
#source tr.focus td { box-shadow: inset 0 1px 0 #2f6fb3, inset 0 -1px 0 #2f6fb3; }
#source tr.fold td { color: var(--faint); text-align: left; font-style: italic; background: repeating-linear-gradient(135deg, transparent 0 6px, rgba(128,128,128,.06) 6px 12px); }
#source tr.missing td.code { color: var(--faint); font-style: italic; }
@media (prefers-color-scheme: dark) { #source td.n.self { color: hsl(8, 85%, 68%); } #source td.n.total { color: #8fb6e8; } }
`;

export const HEATMAP_SCRIPT =
  BASE_SCRIPT +
  String.raw`
(function () {
  var data = pyunwindData();
  var unit = data.unit || 'samples';
  var select = document.getElementById('thread');
  var onlySampled = document.getElementById('only-sampled');
  var state = { view: data.initialView || 0, file: -1, line: null, only: false };
  var CONTEXT = 3;
  var MAX_HOT = 30;

  function viewOf() { return data.views[state.view]; }
  function countsOf(file) {
    var fs = viewOf().files;
    for (var i = 0; i < fs.length; i++) if (fs[i].file === file) return fs[i];
    return null;
  }
  function maxSelf(view) {
    var m = 0;
    view.files.forEach(function (f) { f.lines.forEach(function (l) { if (l[1] > m) m = l[1]; }); });
    return m;
  }
  function heat(self, max) {
    if (!(self > 0) || !(max > 0)) return '';
    var t = Math.sqrt(self / max);
    return 'hsla(8, 85%, 60%, ' + (0.1 + 0.62 * t).toFixed(3) + ')';
  }
  function splitPath(p) {
    var i = Math.max(p.lastIndexOf('/'), p.lastIndexOf('\\'));
    return i >= 0 ? [p.slice(0, i + 1), p.slice(i + 1)] : ['', p];
  }

  function hotLines(view) {
    var all = [];
    view.files.forEach(function (f) {
      f.lines.forEach(function (l) { if (l[1] > 0) all.push({ file: f.file, line: l[0], self: l[1], total: l[2] }); });
    });
    all.sort(function (a, b) {
      var na = data.files[a.file].name, nb = data.files[b.file].name;
      return b.self - a.self || b.total - a.total || (na < nb ? -1 : na > nb ? 1 : 0) || a.line - b.line;
    });
    return all;
  }

  function renderLists() {
    var view = viewOf();
    var tbody = document.querySelector('#files tbody');
    tbody.textContent = '';
    view.files.forEach(function (f) {
      var name = data.files[f.file].name, parts = splitPath(name);
      var tr = el('tr', { 'data-file': name, 'data-index': f.file, 'data-self': f.self, 'data-total': f.total, title: name + '\n' + pct(f.total, view.base) + ' of ' + view.label + ' (self ' + pct(f.self, view.base) + ')' });
      tr.appendChild(el('td', null, fmt(f.total)));
      tr.appendChild(el('td', null, fmt(f.self)));
      var td = el('td', { 'class': 'name' });
      td.appendChild(el('span', { 'class': 'base' }, parts[1]));
      td.appendChild(el('span', { 'class': 'dir' }, parts[0].length > 34 ? '\u2026' + parts[0].slice(-33) : parts[0]));
      tr.appendChild(td);
      tbody.appendChild(tr);
    });
    document.getElementById('files-sub').textContent = view.files.length + ' with samples, by total';
    var hot = hotLines(view).slice(0, MAX_HOT);
    var hb = document.querySelector('#hot-lines tbody');
    hb.textContent = '';
    hot.forEach(function (h) {
      var file = data.files[h.file];
      var tr = el('tr', { 'data-file': file.name, 'data-index': h.file, 'data-line': h.line, 'data-self': h.self, 'data-total': h.total, title: file.name + ':' + h.line });
      tr.appendChild(el('td', null, fmt(h.self)));
      tr.appendChild(el('td', null, fmt(h.total)));
      var td = el('td', { 'class': 'name' }, basename(file.name) + ':' + h.line);
      var text = file.source && file.source[h.line - 1];
      if (text) td.appendChild(el('span', { 'class': 'snip' }, text.trim()));
      tr.appendChild(td);
      hb.appendChild(tr);
    });
    return hot;
  }

  function markSelected() {
    var rows = document.querySelectorAll('#files tbody tr');
    for (var i = 0; i < rows.length; i++) rows[i].classList.toggle('selected', Number(rows[i].getAttribute('data-index')) === state.file);
    var hr = document.querySelectorAll('#hot-lines tbody tr');
    for (var j = 0; j < hr.length; j++) {
      hr[j].classList.toggle('selected', Number(hr[j].getAttribute('data-index')) === state.file && Number(hr[j].getAttribute('data-line')) === state.line);
    }
  }

  function renderSource() {
    var view = viewOf();
    var file = data.files[state.file];
    var counts = countsOf(state.file) || { self: 0, total: 0, lines: [], noLine: [0, 0] };
    var byLine = new Map();
    counts.lines.forEach(function (l) { byLine.set(l[0], l); });
    document.getElementById('file-name').textContent = file ? file.name : '';
    var fc = document.getElementById('file-counts');
    fc.textContent = file ? 'total ' + fmt(counts.total) + ' ' + unit + ' (' + pct(counts.total, view.base) + '), self ' + fmt(counts.self) + ' (' + pct(counts.self, view.base) + ')' +
      (counts.noLine[1] > 0 ? '; ' + fmt(counts.noLine[1]) + ' without a line number' : '') : '';
    var note = document.getElementById('source-note');
    var lastSampled = counts.lines.length ? counts.lines[counts.lines.length - 1][0] : 0;
    var noteText = '';
    if (file && file.source === null) noteText = file.note || ('source not available here: ' + file.name);
    else if (file && lastSampled > file.source.length) noteText = 'the file has ' + file.source.length + ' lines but line ' + lastSampled + ' was sampled: it may have changed since the recording';
    note.textContent = noteText;
    note.hidden = !noteText;

    var max = maxSelf(view);
    var tbody = document.querySelector('#source tbody');
    tbody.textContent = '';
    if (!file) return;
    var n = file.source ? Math.max(file.source.length, lastSampled) : 0;
    var show;
    if (file.source === null) {
      show = counts.lines.map(function (l) { return l[0]; });
    } else if (state.only) {
      var keep = new Uint8Array(n + 2);
      counts.lines.forEach(function (l) { for (var k = Math.max(1, l[0] - CONTEXT); k <= Math.min(n, l[0] + CONTEXT); k++) keep[k] = 1; });
      show = [];
      for (var k = 1; k <= n; k++) if (keep[k]) show.push(k);
    } else {
      show = [];
      for (var m = 1; m <= n; m++) show.push(m);
    }
    var frag = document.createDocumentFragment();
    var prev = 0;
    for (var i = 0; i < show.length; i++) {
      var line = show[i];
      if (line > prev + 1 && (state.only || file.source === null)) {
        var fold = el('tr', { 'class': 'fold' });
        fold.appendChild(el('td', { colspan: 4 }, '\u22ef ' + (prev === 0 ? 'lines 1\u2013' + (line - 1) : (line - prev - 1) + ' line' + (line - prev - 1 === 1 ? '' : 's')) + ' without samples'));
        frag.appendChild(fold);
      }
      prev = line;
      var l = byLine.get(line);
      var self = l ? l[1] : 0, total = l ? l[2] : 0;
      var text = file.source ? file.source[line - 1] : undefined;
      var tr = el('tr', { 'data-line': line, 'data-self': self, 'data-total': total, 'class': (total > 0 ? 'sampled' : '') + (text === undefined ? ' missing' : '') });
      if (total > 0) tr.title = 'line ' + line + ': self ' + fmt(self) + ' (' + pct(self, view.base) + '), total ' + fmt(total) + ' (' + pct(total, view.base) + ') of ' + view.label;
      tr.appendChild(el('td', { 'class': 'ln' }, line));
      tr.appendChild(el('td', { 'class': 'n self' }, self > 0 ? fmt(self) : ''));
      var tt = el('td', { 'class': 'n total' });
      if (total > 0) {
        var bar = el('span', { 'class': 'bar' });
        bar.style.width = Math.max(2, Math.round(76 * Math.min(1, total / Math.max(1, view.base)))) + 'px';
        tt.appendChild(bar);
        tt.appendChild(el('span', { 'class': 'v' }, fmt(total)));
      }
      tr.appendChild(tt);
      var code = el('td', { 'class': 'code' }, text !== undefined ? text : file.source ? '(past the end of the file)' : '');
      var bg = heat(self, max);
      if (bg) code.style.background = bg;
      tr.appendChild(code);
      frag.appendChild(tr);
    }
    tbody.appendChild(frag);
  }

  function scrollToLine(line) {
    var box = document.getElementById('source-scroll');
    var prevFocus = document.querySelector('#source tr.focus');
    if (prevFocus) prevFocus.classList.remove('focus');
    if (line === null) { box.scrollTop = 0; return; }
    var row = document.querySelector('#source tbody tr[data-line="' + line + '"]');
    if (!row) return;
    row.classList.add('focus');
    box.scrollTop = Math.max(0, row.offsetTop - box.clientHeight / 3);
  }

  function showFile(index, line) {
    state.file = index;
    state.line = line === undefined ? null : line;
    if (state.line === null) {
      // the file's hottest line (by self, then total)
      var c = countsOf(index);
      var best = null;
      if (c) c.lines.forEach(function (l) { if (!best || l[1] > best[1] || (l[1] === best[1] && l[2] > best[2])) best = l; });
      state.line = best ? best[0] : null;
    }
    renderSource();
    markSelected();
    scrollToLine(state.line);
  }

  function setView(i) {
    state.view = i;
    var hot = renderLists();
    var view = viewOf();
    if (hot.length) showFile(hot[0].file, hot[0].line);
    else if (view.files.length) showFile(view.files[0].file);
    else { state.file = -1; renderSource(); }
  }

  data.views.forEach(function (v, i) { select.appendChild(el('option', { value: i }, v.label + ' \u2014 ' + fmt(v.base) + ' ' + unit)); });
  select.value = String(state.view);
  select.addEventListener('change', function () { setView(Number(select.value)); });
  onlySampled.addEventListener('change', function () { state.only = onlySampled.checked; renderSource(); scrollToLine(state.line); });
  document.querySelector('#files tbody').addEventListener('click', function (ev) {
    var tr = ev.target.closest ? ev.target.closest('tr') : null;
    if (tr) showFile(Number(tr.getAttribute('data-index')));
  });
  document.querySelector('#hot-lines tbody').addEventListener('click', function (ev) {
    var tr = ev.target.closest ? ev.target.closest('tr') : null;
    if (tr) showFile(Number(tr.getAttribute('data-index')), Number(tr.getAttribute('data-line')));
  });

  window.__pyunwind = {
    data: data,
    state: state,
    ready: false,
    showFile: function (path, line) {
      for (var i = 0; i < data.files.length; i++) if (data.files[i].name === path) { showFile(i, line); return true; }
      return false;
    }
  };
  setView(state.view);
  window.__pyunwind.ready = true;
  document.body.setAttribute('data-ready', '1');
})();
`;
