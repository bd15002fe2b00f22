// The flame graph page's renderer: its data shape, styles, markup and browser script. The
// flame graph export (src/export/flamegraph.ts) and the differential flame graph
// (src/export/diff.ts) both make a page with it:
//
//   htmlPage({ title, css: BASE_CSS + FLAMEGRAPH_CSS, body: flamegraphBody({...}), data, script: FLAMEGRAPH_SCRIPT })
//
// with `data` a FlameGraphData. The graph is an icicle (the root on top, callees below), drawn
// with DOM elements (one absolutely positioned <div> per frame wide enough to see), siblings
// widest first.
//
// What the page offers: a view selector (`#thread`: each thread and "all threads", or whatever
// views the data has), click a frame to zoom into it (its callers stay on top, full width;
// click one to zoom out; `#reset` or Esc resets), a search box (`#search`: a case-insensitive
// substring of the qualname or the file, or /regex/; matches are highlighted and `#search-result`
// gives the matched share), a tooltip on hover (qualname, file:line, samples and % of the
// view's base, self, the value and extra columns when given), `#merge-lines` (one frame per
// function instead of per line), `#show-idle` (idle samples as an `<idle>` frame under the root)
// and the function table `#top-functions` (click a header to sort by self/total, a row to search for it).
//
// For tests and tools (stable):
//   - each drawn frame: `#flame .frame` with data-id, data-name (qualname), data-file,
//     data-line ("" when none or merged lines), data-samples (the frame's total weight),
//     data-self, data-depth (root 0); the root has class `root`, ancestors of the zoomed
//     frame `ancestor`, search matches `match`;
//   - `#flame` has data-zoom (the zoomed frame's data-id, "0" for the root) and
//     data-zoom-name; `#zoom-info` says what is zoomed;
//   - `#search-result`: data-count (frames matched), data-samples (weight of the samples with a
//     match on their stack, counted once per sample) and data-percent (of the view's base);
//   - `#top-functions tbody tr`: data-qualname, data-filename, data-self, data-total;
//   - `#thread`: a <select>, option values are view indices;
//   - window.__pyunwind: { data, state, frames, ready } — frames: the laid-out frames
//     ({ id, name, file, line, samples, self, depth, x, width } with x and width as fractions
//     of the graph's width) — and <body data-ready="1"> once the first render is done.

import { BASE_SCRIPT, escapeHtml } from './page.js';

/** One frame of the table every view indexes: [qualname, filename, line]. null filename: a pseudo-frame. */
export type FlameFrame = [qualname: string, filename: string | null, line: number | null];

/** One row of a view's function table: [qualname, filename, self, total] (weights). */
export type FlameFunction = [qualname: string, filename: string, self: number, total: number];

/** An extra number per node, shown in the tooltip (e.g. the baseline's weight in a diff). */
export interface FlameColumn {
  label: string;
  /** one per node (additive: nodes merged by "merge lines" add theirs) */
  values: number[];
  /** count: 1,234; percent: 12.3% (the value is a fraction); signed: +12 / −3; signed-percent: +1.2% (a fraction) */
  format: 'count' | 'percent' | 'signed' | 'signed-percent';
}

/**
 * One view (a thread, or all threads merged): a tree of nodes as columns, parents before
 * children. Node i has a caller `parent[i]` (−1: under the root, which the page adds and labels
 * with `label`), a frame `frame[i]` (index into FlameGraphData.frames) and the weight of the
 * samples that ended exactly there, `self[i]`; its total is computed (self plus its subtree).
 */
export interface FlameView {
  /** stable id: "all", or the thread's key */
  id: string;
  /** shown in the selector and as the root frame */
  label: string;
  /** the base of percentages: the view's trusted weight (samples with a stack + idle) */
  base: number;
  /** weight of idle samples (shown as `<idle>` under the root when asked) */
  idle: number;
  parent: number[];
  frame: number[];
  self: number[];
  /** colouring by value (FlameGraphData.color.mode "value"): one number per node, additive */
  value?: number[];
  /** more numbers per node for the tooltip */
  columns?: FlameColumn[];
  /** the function table, by total descending */
  functions: FlameFunction[];
  /** a line shown above the graph for this view */
  note?: string;
}

export type FlameColor =
  /** warm hues by function name; the hue range tells your code, the standard library and third-party packages apart */
  | { mode: 'name' }
  /**
   * by each node's value: red for > 0, blue for < 0, white at 0, saturated at |value| ≥ scale
   * (a differential flame graph: value = the change of the frame's total, scale = the largest change)
   */
  | { mode: 'value'; scale: number; legend: { negative: string; positive: string }; label: string; format: FlameColumn['format'] };

export interface FlameGraphData {
  /** 1 */
  version: 1;
  /** what one unit of weight is called: "samples" */
  unit: string;
  color: FlameColor;
  frames: FlameFrame[];
  views: FlameView[];
  /** the view shown first (index into views) */
  initialView: number;
}

export interface FlamegraphBodyOptions {
  /** h1: the recording (escaped here) */
  title: string;
  /** h1 prefix, e.g. "Flame graph" (escaped here) */
  kind: string;
  /** facts under the title, plain text */
  facts: string[];
  /** trusted HTML placed beside the function table (validation panels) */
  side: string;
}

/** The page's markup: header, toolbar, graph, function table and `side` (the validation panel). */
export function flamegraphBody(o: FlamegraphBodyOptions): string {
  return `<header class="top">
<h1><span class="kind">${escapeHtml(o.kind)}:</span> <span id="title">${escapeHtml(o.title)}</span></h1>
<p class="facts">${o.facts.map((f) => `<span>${escapeHtml(f)}</span>`).join('')}</p>
</header>
<main>
<div class="toolbar">
<label>View <select id="thread"></select></label>
<label>Search <input id="search" type="search" placeholder="function or file (/regex/)" autocomplete="off" spellcheck="false"></label>
<span id="search-result" data-count="0" data-samples="0" data-percent="0"></span>
<button id="reset" type="button" disabled>Reset zoom</button>
<label><input id="merge-lines" type="checkbox"> merge lines</label>
<label><input id="show-idle" type="checkbox"> show idle</label>
<span class="hint">click a frame to zoom · Esc resets · / searches</span>
</div>
<div class="flame-head"><span id="zoom-info"></span><span id="view-note"></span><span id="legend"></span></div>
<div id="flame-wrap" class="panel"><div id="flame" data-zoom="0" data-zoom-name=""></div><p id="flame-empty" hidden></p></div>
<div class="below">
<section class="panel functions"><h2>Top functions <span class="sub" id="functions-sub"></span></h2>
<div class="scroll"><table class="data" id="top-functions"><thead><tr>
<th class="sortable" data-sort="total">total</th><th>%</th><th class="sortable" data-sort="self">self</th><th>%</th><th class="name">function</th>
</tr></thead><tbody></tbody></table></div>
<p class="hint" id="functions-more"></p></section>
<div class="side">${o.side}</div>
</div>
</main>
<div id="tooltip"></div>`;
}

export const FLAMEGRAPH_CSS = String.raw`
.flame-head { display: flex; gap: 14px; align-items: baseline; margin: 2px 2px 6px; font-size: 13px; }
#zoom-info { font-weight: 500; }
#view-note { color: var(--muted); }
#flame-wrap { padding: 6px; overflow: hidden; }
#flame { position: relative; width: 100%; min-height: 20px; }
#flame-empty { margin: 16px 8px; color: var(--muted); }
#search-result { font-size: 13px; color: var(--muted); min-width: 1px; }
#search-result.active { color: #8a2a9a; font-weight: 500; }
@media (prefers-color-scheme: dark) { #search-result.active { color: #e39cf0; } }
#legend { display: inline-flex; gap: 12px; font-size: 12px; color: var(--muted); margin-left: auto; }
#legend .sw { display: inline-block; width: 11px; height: 11px; border-radius: 2px; vertical-align: -1px; margin-right: 4px; }
#legend .grad { display: inline-block; width: 90px; height: 10px; border-radius: 2px; vertical-align: -1px; margin: 0 5px;
  background: linear-gradient(90deg, hsl(215,80%,58%), #f2f2f2, hsl(2,80%,58%)); }
.frame { position: absolute; height: 19px; line-height: 19px; padding: 0 4px; overflow: hidden; white-space: nowrap;
  text-overflow: ellipsis; font: 12px/19px var(--mono); color: #1b1b1b; cursor: pointer; border-radius: 2px;
  box-shadow: inset -1px 0 0 rgba(255,255,255,.55), inset 0 -1px 0 rgba(255,255,255,.55); }
.frame .loc { color: rgba(0,0,0,.5); margin-left: 6px; }
.frame:hover { filter: brightness(.9) saturate(1.2); }
.frame.root { background: #cfd4da; font-weight: 600; }
.frame.ancestor { opacity: .55; }
.frame.dim { opacity: .33; }
.frame.match { background: #c93fd6 !important; color: #fff; opacity: 1; }
.frame.match .loc { color: rgba(255,255,255,.75); }
.frame.focus { outline: 2px solid #1f2328; outline-offset: -2px; }
.below { display: grid; grid-template-columns: minmax(0, 1fr) 360px; gap: 14px; margin-top: 14px; align-items: start; }
@media (max-width: 1000px) { .below { grid-template-columns: minmax(0, 1fr); } }
.functions .scroll { max-height: 460px; overflow: auto; }
.functions td.name .q { color: var(--fg); }
.functions td.name .file { margin-left: 8px; font-size: 12px; }
.functions td .meter { display: inline-block; height: 8px; background: #e8875a; border-radius: 2px; vertical-align: 0; margin-right: 6px; opacity: .8; }
.side { display: flex; flex-direction: column; gap: 14px; }
`;

/** The flame graph's browser script (plain ES2017; reads a FlameGraphData). */
export const FLAMEGRAPH_SCRIPT =
  BASE_SCRIPT +
  String.raw`
(function () {
  var data = pyunwindData();
  var ROW = 20;
  var MAX_ROWS_IN_TABLE = 300;
  var flame = document.getElementById('flame');
  var tip = document.getElementById('tooltip');
  var select = document.getElementById('thread');
  var search = document.getElementById('search');
  var searchResult = document.getElementById('search-result');
  var resetButton = document.getElementById('reset');
  var mergeBox = document.getElementById('merge-lines');
  var idleBox = document.getElementById('show-idle');
  var state = { view: data.initialView || 0, zoom: 0, query: '', mergeLines: false, idle: false, sort: 'total', tree: null, matches: null };
  var api = window.__pyunwind = { data: data, state: state, frames: [], ready: false };
  var unit = data.unit || 'samples';

  // ---- colours ----
  function hash(s) {
    var h = 2166136261;
    for (var i = 0; i < s.length; i++) { h ^= s.charCodeAt(i); h = Math.imul(h, 16777619); }
    return ((h >>> 0) % 1000) / 1000;
  }
  function category(file) {
    if (file === null) return 'root';
    if (/[\/\\](site|dist)-packages[\/\\]/.test(file)) return 'lib';
    if (/[\/\\]lib[\/\\]python\d[\d.]*t?[\/\\]/i.test(file) || /^<frozen /.test(file) || /^<built-?in/.test(file)) return 'std';
    return 'app';
  }
  function colorOf(n) {
    if (n.kind === 'root') return '#cfd4da';
    if (n.kind === 'idle') return '#dadde0';
    if (data.color.mode === 'value') {
      var t = Math.min(1, Math.abs(n.value) / (data.color.scale || 1));
      if (!(t > 0)) return '#f0f0f0';
      return 'hsl(' + (n.value > 0 ? 2 : 215) + ',' + (25 + 60 * t).toFixed(0) + '%,' + (92 - 32 * t).toFixed(0) + '%)';
    }
    var h = hash(n.name);
    if (n.kind === 'app') return 'hsl(' + (4 + 26 * h).toFixed(0) + ',78%,' + (64 + 8 * h).toFixed(0) + '%)';
    if (n.kind === 'lib') return 'hsl(' + (150 + 40 * h).toFixed(0) + ',42%,' + (62 + 8 * h).toFixed(0) + '%)';
    return 'hsl(' + (38 + 18 * h).toFixed(0) + ',82%,' + (60 + 10 * h).toFixed(0) + '%)';
  }
  function formatValue(v, format) {
    if (format === 'percent') return (100 * v).toFixed(1) + '%';
    if (format === 'signed') return (v > 0 ? '+' : v < 0 ? '\u2212' : '\u00b1') + fmt(Math.abs(v));
    if (format === 'signed-percent') return (v > 0 ? '+' : v < 0 ? '\u2212' : '\u00b1') + (100 * Math.abs(v)).toFixed(1) + '%';
    return fmt(v);
  }

  // ---- the tree of a view ----
  function buildTree() {
    var view = data.views[state.view];
    var ncols = view.columns ? view.columns.length : 0;
    function zeros() { var z = []; for (var c = 0; c < ncols; c++) z.push(0); return z; }
    var root = { id: 0, parent: null, name: view.label, file: null, line: null, self: 0, total: 0, value: 0, extra: zeros(), children: [], depth: 0, kind: 'root' };
    var nodes = [root];
    var map = new Array(view.parent.length);
    var keyed = new Map();
    var maxDepth = 0;
    for (var i = 0; i < view.parent.length; i++) {
      var p = view.parent[i] < 0 ? root : map[view.parent[i]];
      var f = data.frames[view.frame[i]];
      var node = null, key = null;
      if (state.mergeLines) { key = p.id + '\u0000' + f[0] + '\u0000' + f[1]; node = keyed.get(key) || null; }
      if (node === null) {
        node = { id: nodes.length, parent: p, name: f[0], file: f[1], line: f[2], merged: false, self: 0, total: 0, value: 0, extra: zeros(), children: [], depth: p.depth + 1, kind: category(f[1]) };
        nodes.push(node);
        p.children.push(node);
        if (key !== null) keyed.set(key, node);
        if (node.depth > maxDepth) maxDepth = node.depth;
      } else if (node.line !== f[2]) { node.line = null; node.merged = true; }
      node.self += view.self[i];
      if (view.value) node.value += view.value[i];
      for (var c = 0; c < ncols; c++) node.extra[c] += view.columns[c].values[i];
      map[i] = node;
    }
    if (state.idle && view.idle > 0) {
      var idle = { id: nodes.length, parent: root, name: '<idle>', file: null, line: null, self: view.idle, total: 0, value: 0, extra: zeros(), children: [], depth: 1, kind: 'idle' };
      nodes.push(idle);
      root.children.push(idle);
      if (maxDepth < 1) maxDepth = 1;
    }
    for (var k = nodes.length - 1; k >= 0; k--) {
      var n = nodes[k];
      n.total += n.self;
      if (n.parent) n.parent.total += n.total;
    }
    for (var m = 0; m < nodes.length; m++) {
      nodes[m].children.sort(function (a, b) {
        return b.total - a.total || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0) || ((a.line || 0) - (b.line || 0));
      });
    }
    return { view: view, root: root, nodes: nodes, maxDepth: maxDepth };
  }

  // ---- search ----
  function matcher(q) {
    if (!q) return null;
    var m = /^\/(.+)\/([a-z]*)$/.exec(q);
    if (m) {
      try { var re = new RegExp(m[1], m[2].indexOf('i') >= 0 ? m[2] : m[2] + 'i'); return function (s) { return re.test(s); }; } catch (e) { /* not a regex: a substring */ }
    }
    var needle = q.toLowerCase();
    return function (s) { return s.toLowerCase().indexOf(needle) >= 0; };
  }
  function runSearch() {
    var tree = state.tree;
    var test = matcher(state.query.trim());
    state.matches = null;
    if (!test) {
      searchResult.textContent = '';
      searchResult.className = '';
      searchResult.setAttribute('data-count', '0'); searchResult.setAttribute('data-samples', '0'); searchResult.setAttribute('data-percent', '0');
      return;
    }
    var matches = new Uint8Array(tree.nodes.length);
    var count = 0, samples = 0;
    // depth first: a sample is counted once, at its outermost matching frame
    var todo = [[tree.root, false]];
    while (todo.length) {
      var item = todo.pop(), n = item[0], under = item[1];
      var hit = n.kind !== 'root' && (test(n.name) || (n.file !== null && test(n.file)));
      if (hit) { matches[n.id] = 1; count++; if (!under) samples += n.total; }
      for (var i = 0; i < n.children.length; i++) todo.push([n.children[i], under || hit]);
    }
    state.matches = matches;
    var base = tree.view.base;
    var share = base > 0 ? 100 * samples / base : 0;
    searchResult.className = 'active';
    searchResult.textContent = count === 0 ? 'no match' :
      count + ' frame' + (count === 1 ? '' : 's') + ' match: ' + fmt(samples) + ' ' + unit + ', ' + pct(samples, base) + ' of ' + tree.view.label;
    searchResult.setAttribute('data-count', String(count));
    searchResult.setAttribute('data-samples', String(samples));
    searchResult.setAttribute('data-percent', share.toFixed(1));
  }

  // ---- layout and drawing ----
  function layout() {
    var tree = state.tree;
    var z = tree.nodes[state.zoom] || tree.root;
    var width = Math.max(1, flame.clientWidth);
    var minFraction = 1 / width; // narrower than a pixel: not drawn (nor its callees)
    var out = [];
    var chain = [];
    for (var a = z; a; a = a.parent) chain.push(a);
    chain.reverse();
    for (var i = 0; i < chain.length; i++) out.push({ node: chain[i], x: 0, w: 1, ancestor: chain[i] !== z });
    if (z.total > 0) {
      var todo = [[z, 0]];
      while (todo.length) {
        var item = todo.pop(), n = item[0], x = item[1];
        for (var c = 0; c < n.children.length; c++) {
          var ch = n.children[c], w = ch.total / z.total;
          if (w >= minFraction) { out.push({ node: ch, x: x, w: w, ancestor: false }); todo.push([ch, x]); }
          x += w;
        }
      }
    }
    return out;
  }
  function render() {
    var tree = state.tree;
    var placed = layout();
    var width = Math.max(1, flame.clientWidth);
    var frag = document.createDocumentFragment();
    var depth = 0;
    var frames = [];
    var matches = state.matches;
    for (var i = 0; i < placed.length; i++) {
      var p = placed[i], n = p.node;
      if (n.depth > depth) depth = n.depth;
      var cls = 'frame' + (n.kind === 'root' ? ' root' : '') + (p.ancestor ? ' ancestor' : '');
      if (matches) cls += matches[n.id] ? ' match' : ' dim';
      var e = el('div', {
        'class': cls, 'data-id': n.id, 'data-name': n.name, 'data-file': n.file === null ? '' : n.file,
        'data-line': n.line === null ? '' : n.line, 'data-samples': n.total, 'data-self': n.self, 'data-depth': n.depth
      });
      e.style.left = (100 * p.x) + '%';
      e.style.width = (100 * p.w) + '%';
      e.style.top = (n.depth * ROW) + 'px';
      if (n.kind !== 'root') e.style.background = colorOf(n);
      var px = p.w * width;
      if (px >= 22) {
        e.appendChild(document.createTextNode(n.kind === 'root' ? n.name + ' \u2014 ' + fmt(n.total) + ' ' + unit : n.name));
        if (n.file !== null && px >= 140) {
          e.appendChild(el('span', { 'class': 'loc' }, basename(n.file) + (n.line !== null ? ':' + n.line : '')));
        }
      }
      frag.appendChild(e);
      frames.push({ id: n.id, name: n.name, file: n.file, line: n.line, samples: n.total, self: n.self, depth: n.depth, x: p.x, width: p.w });
    }
    flame.textContent = '';
    flame.appendChild(frag);
    flame.style.height = ((depth + 1) * ROW) + 'px';
    var z = tree.nodes[state.zoom] || tree.root;
    flame.setAttribute('data-zoom', String(z.id));
    flame.setAttribute('data-zoom-name', z.kind === 'root' ? '' : z.name);
    resetButton.disabled = z === tree.root;
    var info = document.getElementById('zoom-info');
    var base = tree.view.base;
    if (z === tree.root) {
      info.textContent = tree.view.label + ': ' + fmt(tree.root.total) + ' ' + unit + (tree.view.idle > 0 && !state.idle ? ' with a stack (+ ' + fmt(tree.view.idle) + ' idle)' : '');
    } else {
      info.textContent = 'Zoomed into ' + z.name + ': ' + fmt(z.total) + ' ' + unit + ', ' + pct(z.total, base) + ' of ' + tree.view.label;
    }
    var empty = document.getElementById('flame-empty');
    empty.hidden = tree.root.total > 0;
    empty.textContent = tree.root.total > 0 ? '' : 'No trusted samples with a Python stack in ' + tree.view.label + '.';
    api.frames = frames;
  }

  // ---- the function table ----
  function renderFunctions() {
    var view = data.views[state.view];
    var rows = view.functions.slice();
    var key = state.sort === 'self' ? 2 : 3, other = key === 2 ? 3 : 2;
    rows.sort(function (a, b) {
      return b[key] - a[key] || b[other] - a[other] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0) || (a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0);
    });
    rows = rows.filter(function (r) { return r[key] > 0; });
    var tbody = document.querySelector('#top-functions tbody');
    tbody.textContent = '';
    var base = view.base;
    var max = rows.length ? rows[0][key] : 1;
    var shown = rows.slice(0, MAX_ROWS_IN_TABLE);
    for (var i = 0; i < shown.length; i++) {
      var r = shown[i];
      var tr = el('tr', { 'data-qualname': r[0], 'data-filename': r[1], 'data-self': r[2], 'data-total': r[3], title: r[0] + '\n' + r[1] });
      tr.appendChild(el('td', null, fmt(r[3])));
      tr.appendChild(el('td', { 'class': 'pct' }, pct(r[3], base)));
      tr.appendChild(el('td', null, fmt(r[2])));
      tr.appendChild(el('td', { 'class': 'pct' }, pct(r[2], base)));
      var name = el('td', { 'class': 'name' });
      var meter = el('span', { 'class': 'meter' });
      meter.style.width = Math.max(1, Math.round(60 * r[key] / max)) + 'px';
      name.appendChild(meter);
      name.appendChild(el('span', { 'class': 'q' }, r[0]));
      name.appendChild(el('span', { 'class': 'file' }, basename(r[1])));
      tr.appendChild(name);
      tbody.appendChild(tr);
    }
    var ths = document.querySelectorAll('#top-functions th.sortable');
    for (var t = 0; t < ths.length; t++) ths[t].classList.toggle('sorted', ths[t].getAttribute('data-sort') === state.sort);
    document.getElementById('functions-sub').textContent = 'by ' + state.sort + ', % of ' + fmt(base) + ' trusted ' + unit + ' of ' + view.label;
    document.getElementById('functions-more').textContent = rows.length > shown.length ? (rows.length - shown.length) + ' more not shown' : '';
  }

  // ---- tooltip ----
  function showTip(n, ev) {
    var tree = state.tree, base = tree.view.base;
    tip.textContent = '';
    tip.appendChild(el('div', { 'class': 't-name' }, n.name));
    if (n.file !== null) tip.appendChild(el('div', { 'class': 't-file' }, n.file + (n.line !== null ? ':' + n.line : n.merged ? ' (several lines)' : '')));
    function row(label, value) {
      var r = el('div', { 'class': 't-row' });
      r.appendChild(el('span', null, label));
      r.appendChild(el('span', null, value));
      tip.appendChild(r);
    }
    row(unit, fmt(n.total) + '  (' + pct(n.total, base) + ' of ' + tree.view.label + ')');
    if (n.kind !== 'root') row('self', fmt(n.self) + '  (' + pct(n.self, base) + ')');
    if (n.parent && n.parent.kind !== 'root') row('of its caller', pct(n.total, n.parent.total));
    var z = tree.nodes[state.zoom];
    if (z && z !== tree.root && z !== n && n.depth > z.depth) row('of ' + z.name, pct(n.total, z.total));
    if (data.color.mode === 'value' && n.kind !== 'root') row(data.color.label, formatValue(n.value, data.color.format));
    var cols = tree.view.columns || [];
    for (var c = 0; c < cols.length; c++) row(cols[c].label, formatValue(n.extra[c], cols[c].format));
    tip.style.display = 'block';
    placeTooltip(tip, ev);
  }

  // ---- controls ----
  function legend() {
    var lg = document.getElementById('legend');
    lg.textContent = '';
    function sw(color, label) {
      var s = el('span');
      var box = el('span', { 'class': 'sw' });
      box.style.background = color;
      s.appendChild(box);
      s.appendChild(document.createTextNode(label));
      lg.appendChild(s);
    }
    if (data.color.mode === 'value') {
      var s = el('span');
      s.appendChild(document.createTextNode(data.color.legend.negative));
      s.appendChild(el('span', { 'class': 'grad' }));
      s.appendChild(document.createTextNode(data.color.legend.positive));
      lg.appendChild(s);
    } else {
      sw('hsl(16,78%,67%)', 'program');
      sw('hsl(46,82%,64%)', 'standard library');
      sw('hsl(170,42%,66%)', 'packages');
    }
    sw('#c93fd6', 'search match');
  }
  function setView(i) {
    state.view = i;
    state.zoom = 0;
    rebuild();
    renderFunctions();
    var note = data.views[i].note;
    document.getElementById('view-note').textContent = note || '';
  }
  function rebuild() {
    var zoomed = state.tree && state.tree.nodes[state.zoom];
    var path = [];
    for (var a = zoomed; a && a.parent; a = a.parent) path.push(a);
    state.tree = buildTree();
    // keep the zoom on the same frames where they still exist (after "merge lines", "show idle")
    var n = state.tree.root;
    for (var k = path.length - 1; k >= 0 && n; k--) {
      var want = path[k], next = null;
      for (var c = 0; c < n.children.length && !next; c++) {
        var ch = n.children[c];
        if (ch.name === want.name && ch.file === want.file && (state.mergeLines || want.line === null || ch.line === want.line)) next = ch;
      }
      n = next;
    }
    state.zoom = n ? n.id : 0;
    runSearch();
    render();
  }
  data.views.forEach(function (v, i) {
    var total = 0;
    for (var k = 0; k < v.self.length; k++) total += v.self[k];
    select.appendChild(el('option', { value: i }, v.label + ' \u2014 ' + fmt(total) + ' ' + unit));
  });
  select.value = String(state.view);
  select.addEventListener('change', function () { setView(Number(select.value)); });
  var searchTimer = 0;
  search.addEventListener('input', function () {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(function () { state.query = search.value; runSearch(); render(); }, 80);
  });
  resetButton.addEventListener('click', function () { state.zoom = 0; render(); });
  mergeBox.addEventListener('change', function () { state.mergeLines = mergeBox.checked; rebuild(); });
  idleBox.addEventListener('change', function () { state.idle = idleBox.checked; rebuild(); });
  flame.addEventListener('click', function (ev) {
    var e = ev.target.closest ? ev.target.closest('.frame') : null;
    if (!e) return;
    state.zoom = Number(e.getAttribute('data-id'));
    render();
  });
  flame.addEventListener('mousemove', function (ev) {
    var e = ev.target.closest ? ev.target.closest('.frame') : null;
    if (!e) { tip.style.display = 'none'; return; }
    showTip(state.tree.nodes[Number(e.getAttribute('data-id'))], ev);
  });
  flame.addEventListener('mouseleave', function () { tip.style.display = 'none'; });
  document.querySelector('#top-functions thead').addEventListener('click', function (ev) {
    var th = ev.target.closest ? ev.target.closest('th.sortable') : null;
    if (!th) return;
    state.sort = th.getAttribute('data-sort');
    renderFunctions();
  });
  document.querySelector('#top-functions tbody').addEventListener('click', function (ev) {
    var tr = ev.target.closest ? ev.target.closest('tr') : null;
    if (!tr) return;
    search.value = tr.getAttribute('data-qualname');
    state.query = search.value;
    runSearch();
    render();
    window.scrollTo({ top: 0, behavior: 'smooth' });
  });
  document.addEventListener('keydown', function (ev) {
    if (ev.key === 'Escape') {
      if (document.activeElement === search && search.value) { search.value = ''; state.query = ''; runSearch(); render(); return; }
      state.zoom = 0; render();
    } else if (ev.key === '/' && document.activeElement !== search) { ev.preventDefault(); search.focus(); }
  });
  var resizePending = false;
  window.addEventListener('resize', function () {
    if (resizePending) return;
    resizePending = true;
    requestAnimationFrame(function () { resizePending = false; render(); });
  });

  legend();
  setView(state.view);
  api.ready = true;
  document.body.setAttribute('data-ready', '1');
})();
`;
