// The flame graph page's script: reads a FlameGraphData (../flamegraph-data.ts) and draws it in
// the markup of flamegraphBody() (../flamegraph-script.ts). Bundled into one classic script by
// scripts/build-html.mjs, inlined in every flame graph export and the differential flame graph,
// and served to the viewer as flamegraph.js.
//
// The graph is an icicle (the root on top, callees below), drawn with DOM elements (one
// absolutely positioned <div> per frame wide enough to see), siblings widest first.
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

import type { FlameColumn, FlameGraphData, FlameView } from '../flamegraph-data.js';
import { basename, byId, closestTo, el, fmt, one, pageData, pct, placeTooltip, publish } from './page.js';

/** What colours a node (by name) and how search and the root treat it: a null file is a pseudo-frame, drawn as the root is. */
type Kind = 'root' | 'idle' | 'app' | 'lib' | 'std';

/** A node of the drawn tree: a view's nodes, merged by line when asked, under a root. */
interface Node {
  /** its index in Tree.nodes (the root: 0) */
  id: number;
  parent: Node | null;
  name: string;
  file: string | null;
  /** null: none, or nodes of several lines merged (then `merged`) */
  line: number | null;
  merged: boolean;
  self: number;
  total: number;
  value: number;
  /** the view's extra columns, summed over merged nodes */
  extra: number[];
  /** widest first */
  children: Node[];
  depth: number;
  kind: Kind;
}

interface Tree {
  view: FlameView;
  root: Node;
  nodes: Node[];
  maxDepth: number;
}

interface State {
  view: number;
  /** the zoomed node's id (0: the root) */
  zoom: number;
  query: string;
  mergeLines: boolean;
  idle: boolean;
  /** the function table's order: "total" or "self" */
  sort: string;
  tree: Tree | null;
  /** per node id, 1 where the search matches; null: no search */
  matches: Uint8Array | null;
}

/** A frame as laid out (window.__pyunwind.frames): x and width are fractions of the graph's width. */
interface LaidOutFrame {
  id: number;
  name: string;
  file: string | null;
  line: number | null;
  samples: number;
  self: number;
  depth: number;
  x: number;
  width: number;
}

interface Placed {
  node: Node;
  x: number;
  w: number;
  ancestor: boolean;
}

const data = pageData<FlameGraphData>();
const ROW = 20;
const MAX_ROWS_IN_TABLE = 300;
const flame = byId('flame');
const tip = byId('tooltip');
const select = byId('thread', HTMLSelectElement);
const search = byId('search', HTMLInputElement);
const searchResult = byId('search-result');
const resetButton = byId('reset', HTMLButtonElement);
const mergeBox = byId('merge-lines', HTMLInputElement);
const idleBox = byId('show-idle', HTMLInputElement);
const state: State = { view: data.initialView || 0, zoom: 0, query: '', mergeLines: false, idle: false, sort: 'total', tree: null, matches: null };
const api = publish({ data, state, frames: [] as LaidOutFrame[], ready: false });
const unit = data.unit || 'samples';

/** The current tree (set by the first setView, before anything reads it). */
function currentTree(): Tree {
  if (!state.tree) throw new Error('pyunwind: no tree yet');
  return state.tree;
}

// ---- colours ----
/** FNV-1a of the name, as a fraction in [0, 1): a stable shade per function. */
function hash(s: string): number {
  let h = 2166136261;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 16777619);
  }
  return ((h >>> 0) % 1000) / 1000;
}
function category(file: string | null): Kind {
  if (file === null) return 'root';
  if (/[/\\](site|dist)-packages[/\\]/.test(file)) return 'lib';
  if (/[/\\]lib[/\\]python\d[\d.]*t?[/\\]/i.test(file) || /^<frozen /.test(file) || /^<built-?in/.test(file)) return 'std';
  return 'app';
}
function colorOf(n: Node): string {
  if (n.kind === 'root') return '#cfd4da';
  if (n.kind === 'idle') return '#dadde0';
  if (data.color.mode === 'value') {
    const t = Math.min(1, Math.abs(n.value) / (data.color.scale || 1));
    if (!(t > 0)) return '#f0f0f0';
    return 'hsl(' + (n.value > 0 ? 2 : 215) + ',' + (25 + 60 * t).toFixed(0) + '%,' + (92 - 32 * t).toFixed(0) + '%)';
  }
  const h = hash(n.name);
  if (n.kind === 'app') return 'hsl(' + (4 + 26 * h).toFixed(0) + ',78%,' + (64 + 8 * h).toFixed(0) + '%)';
  if (n.kind === 'lib') return 'hsl(' + (150 + 40 * h).toFixed(0) + ',42%,' + (62 + 8 * h).toFixed(0) + '%)';
  return 'hsl(' + (38 + 18 * h).toFixed(0) + ',82%,' + (60 + 10 * h).toFixed(0) + '%)';
}
function formatValue(v: number, format: FlameColumn['format']): string {
  if (format === 'percent') return (100 * v).toFixed(1) + '%';
  if (format === 'signed') return (v > 0 ? '+' : v < 0 ? '\u2212' : '\u00b1') + fmt(Math.abs(v));
  if (format === 'signed-percent') return (v > 0 ? '+' : v < 0 ? '\u2212' : '\u00b1') + (100 * Math.abs(v)).toFixed(1) + '%';
  return fmt(v);
}

// ---- the tree of a view ----
function buildTree(): Tree {
  const view = data.views[state.view]!;
  const columns = view.columns ?? [];
  const zeros = (): number[] => columns.map(() => 0);
  const root: Node = { id: 0, parent: null, name: view.label, file: null, line: null, merged: false, self: 0, total: 0, value: 0, extra: zeros(), children: [], depth: 0, kind: 'root' };
  const nodes: Node[] = [root];
  const map: Node[] = new Array<Node>(view.parent.length);
  const keyed = new Map<string, Node>();
  let maxDepth = 0;
  for (let i = 0; i < view.parent.length; i++) {
    const parent = view.parent[i]!;
    const p = parent < 0 ? root : map[parent]!;
    const f = data.frames[view.frame[i]!]!;
    let node: Node | null = null;
    let key: string | null = null;
    if (state.mergeLines) {
      key = p.id + '\u0000' + f[0] + '\u0000' + f[1];
      node = keyed.get(key) ?? null;
    }
    if (node === null) {
      node = { id: nodes.length, parent: p, name: f[0], file: f[1], line: f[2], merged: false, self: 0, total: 0, value: 0, extra: zeros(), children: [], depth: p.depth + 1, kind: category(f[1]) };
      nodes.push(node);
      p.children.push(node);
      if (key !== null) keyed.set(key, node);
      if (node.depth > maxDepth) maxDepth = node.depth;
    } else if (node.line !== f[2]) {
      node.line = null;
      node.merged = true;
    }
    node.self += view.self[i]!;
    if (view.value) node.value += view.value[i]!;
    for (let c = 0; c < columns.length; c++) node.extra[c]! += columns[c]!.values[i]!;
    map[i] = node;
  }
  if (state.idle && view.idle > 0) {
    const idle: Node = { id: nodes.length, parent: root, name: '<idle>', file: null, line: null, merged: false, self: view.idle, total: 0, value: 0, extra: zeros(), children: [], depth: 1, kind: 'idle' };
    nodes.push(idle);
    root.children.push(idle);
    if (maxDepth < 1) maxDepth = 1;
  }
  // parents come before their children: backwards, each node is complete before its parent takes it
  for (let k = nodes.length - 1; k >= 0; k--) {
    const n = nodes[k]!;
    n.total += n.self;
    if (n.parent) n.parent.total += n.total;
  }
  for (const n of nodes) {
    n.children.sort((a, b) => b.total - a.total || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0) || (a.line || 0) - (b.line || 0));
  }
  return { view, root, nodes, maxDepth };
}

// ---- search ----
function matcher(q: string): ((s: string) => boolean) | null {
  if (!q) return null;
  const m = /^\/(.+)\/([a-z]*)$/.exec(q);
  if (m) {
    const flags = m[2]!;
    try {
      const re = new RegExp(m[1]!, flags.indexOf('i') >= 0 ? flags : flags + 'i');
      return (s) => re.test(s);
    } catch {
      // not a regex: a substring
    }
  }
  const needle = q.toLowerCase();
  return (s) => s.toLowerCase().indexOf(needle) >= 0;
}
function runSearch(): void {
  const tree = currentTree();
  const test = matcher(state.query.trim());
  state.matches = null;
  if (!test) {
    searchResult.textContent = '';
    searchResult.className = '';
    searchResult.setAttribute('data-count', '0');
    searchResult.setAttribute('data-samples', '0');
    searchResult.setAttribute('data-percent', '0');
    return;
  }
  const matches = new Uint8Array(tree.nodes.length);
  let count = 0;
  let samples = 0;
  // depth first: a sample is counted once, at its outermost matching frame
  const todo: [Node, boolean][] = [[tree.root, false]];
  for (let item = todo.pop(); item; item = todo.pop()) {
    const [n, under] = item;
    const hit = n.kind !== 'root' && (test(n.name) || (n.file !== null && test(n.file)));
    if (hit) {
      matches[n.id] = 1;
      count++;
      if (!under) samples += n.total;
    }
    for (const child of n.children) todo.push([child, under || hit]);
  }
  state.matches = matches;
  const base = tree.view.base;
  const share = base > 0 ? (100 * samples) / base : 0;
  searchResult.className = 'active';
  searchResult.textContent =
    count === 0 ? 'no match' : count + ' frame' + (count === 1 ? '' : 's') + ' match: ' + fmt(samples) + ' ' + unit + ', ' + pct(samples, base) + ' of ' + tree.view.label;
  searchResult.setAttribute('data-count', String(count));
  searchResult.setAttribute('data-samples', String(samples));
  searchResult.setAttribute('data-percent', share.toFixed(1));
}

// ---- layout and drawing ----
function zoomed(tree: Tree): Node {
  return tree.nodes[state.zoom] ?? tree.root;
}
function layout(): Placed[] {
  const z = zoomed(currentTree());
  const width = Math.max(1, flame.clientWidth);
  const minFraction = 1 / width; // narrower than a pixel: not drawn (nor its callees)
  const out: Placed[] = [];
  const chain: Node[] = [];
  for (let a: Node | null = z; a; a = a.parent) chain.push(a);
  chain.reverse();
  for (const a of chain) out.push({ node: a, x: 0, w: 1, ancestor: a !== z });
  if (z.total > 0) {
    const todo: [Node, number][] = [[z, 0]];
    for (let item = todo.pop(); item; item = todo.pop()) {
      const n = item[0];
      let x = item[1];
      for (const ch of n.children) {
        const w = ch.total / z.total;
        if (w >= minFraction) {
          out.push({ node: ch, x, w, ancestor: false });
          todo.push([ch, x]);
        }
        x += w;
      }
    }
  }
  return out;
}
function render(): void {
  const tree = currentTree();
  const placed = layout();
  const width = Math.max(1, flame.clientWidth);
  const frag = document.createDocumentFragment();
  let depth = 0;
  const frames: LaidOutFrame[] = [];
  const matches = state.matches;
  for (const p of placed) {
    const n = p.node;
    if (n.depth > depth) depth = n.depth;
    let cls = 'frame' + (n.kind === 'root' ? ' root' : '') + (p.ancestor ? ' ancestor' : '');
    if (matches) cls += matches[n.id] ? ' match' : ' dim';
    const e = el('div', {
      class: cls,
      'data-id': n.id,
      'data-name': n.name,
      'data-file': n.file === null ? '' : n.file,
      'data-line': n.line === null ? '' : n.line,
      'data-samples': n.total,
      'data-self': n.self,
      'data-depth': n.depth,
    });
    e.style.left = 100 * p.x + '%';
    e.style.width = 100 * p.w + '%';
    e.style.top = n.depth * ROW + 'px';
    if (n.kind !== 'root') e.style.background = colorOf(n);
    const px = p.w * width;
    if (px >= 22) {
      e.appendChild(document.createTextNode(n.kind === 'root' ? n.name + ' \u2014 ' + fmt(n.total) + ' ' + unit : n.name));
      if (n.file !== null && px >= 140) {
        e.appendChild(el('span', { class: 'loc' }, basename(n.file) + (n.line !== null ? ':' + n.line : '')));
      }
    }
    frag.appendChild(e);
    frames.push({ id: n.id, name: n.name, file: n.file, line: n.line, samples: n.total, self: n.self, depth: n.depth, x: p.x, width: p.w });
  }
  flame.textContent = '';
  flame.appendChild(frag);
  flame.style.height = (depth + 1) * ROW + 'px';
  const z = zoomed(tree);
  flame.setAttribute('data-zoom', String(z.id));
  flame.setAttribute('data-zoom-name', z.kind === 'root' ? '' : z.name);
  resetButton.disabled = z === tree.root;
  const info = byId('zoom-info');
  const base = tree.view.base;
  if (z === tree.root) {
    info.textContent =
      tree.view.label + ': ' + fmt(tree.root.total) + ' ' + unit + (tree.view.idle > 0 && !state.idle ? ' with a stack (+ ' + fmt(tree.view.idle) + ' idle)' : '');
  } else {
    info.textContent = 'Zoomed into ' + z.name + ': ' + fmt(z.total) + ' ' + unit + ', ' + pct(z.total, base) + ' of ' + tree.view.label;
  }
  const empty = byId('flame-empty');
  empty.hidden = tree.root.total > 0;
  empty.textContent = tree.root.total > 0 ? '' : 'No trusted samples with a Python stack in ' + tree.view.label + '.';
  api.frames = frames;
}

// ---- the function table ----
function renderFunctions(): void {
  const view = data.views[state.view]!;
  const key = state.sort === 'self' ? 2 : 3;
  const other = key === 2 ? 3 : 2;
  const rows = view.functions
    .slice()
    .sort((a, b) => b[key] - a[key] || b[other] - a[other] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0) || (a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0))
    .filter((r) => r[key] > 0);
  const tbody = one('#top-functions tbody');
  tbody.textContent = '';
  const base = view.base;
  const max = rows.length ? rows[0]![key] : 1;
  const shown = rows.slice(0, MAX_ROWS_IN_TABLE);
  for (const r of shown) {
    const tr = el('tr', { 'data-qualname': r[0], 'data-filename': r[1], 'data-self': r[2], 'data-total': r[3], title: r[0] + '\n' + r[1] });
    tr.appendChild(el('td', null, fmt(r[3])));
    tr.appendChild(el('td', { class: 'pct' }, pct(r[3], base)));
    tr.appendChild(el('td', null, fmt(r[2])));
    tr.appendChild(el('td', { class: 'pct' }, pct(r[2], base)));
    const name = el('td', { class: 'name' });
    const meter = el('span', { class: 'meter' });
    meter.style.width = Math.max(1, Math.round((60 * r[key]) / max)) + 'px';
    name.appendChild(meter);
    name.appendChild(el('span', { class: 'q' }, r[0]));
    name.appendChild(el('span', { class: 'file' }, basename(r[1])));
    tr.appendChild(name);
    tbody.appendChild(tr);
  }
  for (const th of document.querySelectorAll('#top-functions th.sortable')) th.classList.toggle('sorted', th.getAttribute('data-sort') === state.sort);
  byId('functions-sub').textContent = 'by ' + state.sort + ', % of ' + fmt(base) + ' trusted ' + unit + ' of ' + view.label;
  byId('functions-more').textContent = rows.length > shown.length ? rows.length - shown.length + ' more not shown' : '';
}

// ---- tooltip ----
function showTip(n: Node, ev: MouseEvent): void {
  const tree = currentTree();
  const base = tree.view.base;
  tip.textContent = '';
  tip.appendChild(el('div', { class: 't-name' }, n.name));
  if (n.file !== null) tip.appendChild(el('div', { class: 't-file' }, n.file + (n.line !== null ? ':' + n.line : n.merged ? ' (several lines)' : '')));
  const row = (label: string, value: string): void => {
    const r = el('div', { class: 't-row' });
    r.appendChild(el('span', null, label));
    r.appendChild(el('span', null, value));
    tip.appendChild(r);
  };
  row(unit, fmt(n.total) + '  (' + pct(n.total, base) + ' of ' + tree.view.label + ')');
  if (n.kind !== 'root') row('self', fmt(n.self) + '  (' + pct(n.self, base) + ')');
  if (n.parent && n.parent.kind !== 'root') row('of its caller', pct(n.total, n.parent.total));
  const z = tree.nodes[state.zoom];
  if (z && z !== tree.root && z !== n && n.depth > z.depth) row('of ' + z.name, pct(n.total, z.total));
  if (data.color.mode === 'value' && n.kind !== 'root') row(data.color.label, formatValue(n.value, data.color.format));
  const cols = tree.view.columns ?? [];
  cols.forEach((col, c) => row(col.label, formatValue(n.extra[c]!, col.format)));
  tip.style.display = 'block';
  placeTooltip(tip, ev);
}

// ---- controls ----
function legend(): void {
  const lg = byId('legend');
  lg.textContent = '';
  const sw = (color: string, label: string): void => {
    const s = el('span');
    const box = el('span', { class: 'sw' });
    box.style.background = color;
    s.appendChild(box);
    s.appendChild(document.createTextNode(label));
    lg.appendChild(s);
  };
  if (data.color.mode === 'value') {
    const s = el('span');
    s.appendChild(document.createTextNode(data.color.legend.negative));
    s.appendChild(el('span', { class: 'grad' }));
    s.appendChild(document.createTextNode(data.color.legend.positive));
    lg.appendChild(s);
  } else {
    sw('hsl(16,78%,67%)', 'program');
    sw('hsl(46,82%,64%)', 'standard library');
    sw('hsl(170,42%,66%)', 'packages');
  }
  sw('#c93fd6', 'search match');
}
function setView(i: number): void {
  state.view = i;
  state.zoom = 0;
  rebuild();
  renderFunctions();
  byId('view-note').textContent = data.views[i]!.note || '';
}
function rebuild(): void {
  const path: Node[] = [];
  for (let a = state.tree?.nodes[state.zoom]; a && a.parent; a = a.parent) path.push(a);
  const tree = (state.tree = buildTree());
  // keep the zoom on the same frames where they still exist (after "merge lines", "show idle")
  let n: Node | null = tree.root;
  for (let k = path.length - 1; k >= 0 && n; k--) {
    const want: Node = path[k]!;
    n = n.children.find((ch) => ch.name === want.name && ch.file === want.file && (state.mergeLines || want.line === null || ch.line === want.line)) ?? null;
  }
  state.zoom = n ? n.id : 0;
  runSearch();
  render();
}
data.views.forEach((v, i) => {
  let total = 0;
  for (const w of v.self) total += w;
  select.appendChild(el('option', { value: i }, v.label + ' \u2014 ' + fmt(total) + ' ' + unit));
});
select.value = String(state.view);
select.addEventListener('change', () => setView(Number(select.value)));
let searchTimer = 0;
search.addEventListener('input', () => {
  clearTimeout(searchTimer);
  searchTimer = setTimeout(() => {
    state.query = search.value;
    runSearch();
    render();
  }, 80);
});
resetButton.addEventListener('click', () => {
  state.zoom = 0;
  render();
});
mergeBox.addEventListener('change', () => {
  state.mergeLines = mergeBox.checked;
  rebuild();
});
idleBox.addEventListener('change', () => {
  state.idle = idleBox.checked;
  rebuild();
});
flame.addEventListener('click', (ev) => {
  const e = closestTo(ev, '.frame');
  if (!e) return;
  state.zoom = Number(e.getAttribute('data-id'));
  render();
});
flame.addEventListener('mousemove', (ev) => {
  const e = closestTo(ev, '.frame');
  const n = e && currentTree().nodes[Number(e.getAttribute('data-id'))];
  if (!n) {
    tip.style.display = 'none';
    return;
  }
  showTip(n, ev);
});
flame.addEventListener('mouseleave', () => {
  tip.style.display = 'none';
});
one('#top-functions thead').addEventListener('click', (ev) => {
  const th = closestTo(ev, 'th.sortable');
  if (!th) return;
  state.sort = th.getAttribute('data-sort') ?? state.sort;
  renderFunctions();
});
one('#top-functions tbody').addEventListener('click', (ev) => {
  const tr = closestTo(ev, 'tr');
  if (!tr) return;
  search.value = tr.getAttribute('data-qualname') ?? '';
  state.query = search.value;
  runSearch();
  render();
  window.scrollTo({ top: 0, behavior: 'smooth' });
});
document.addEventListener('keydown', (ev) => {
  if (ev.key === 'Escape') {
    if (document.activeElement === search && search.value) {
      search.value = '';
      state.query = '';
      runSearch();
      render();
      return;
    }
    state.zoom = 0;
    render();
  } else if (ev.key === '/' && document.activeElement !== search) {
    ev.preventDefault();
    search.focus();
  }
});
let resizePending = false;
window.addEventListener('resize', () => {
  if (resizePending) return;
  resizePending = true;
  requestAnimationFrame(() => {
    resizePending = false;
    render();
  });
});

legend();
setView(state.view);
api.ready = true;
document.body.setAttribute('data-ready', '1');
