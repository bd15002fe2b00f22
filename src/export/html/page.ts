// One self-contained HTML page: styles, markup, data and script all inline, nothing fetched.
// The HTML exports (flame graph, heatmap, differential flame graph) are built with htmlPage();
// a Content-Security-Policy in the page itself forbids any network request (default-src 'none'),
// so a page that would load something from outside fails loudly instead of phoning home.
//
// Everything that comes from the profile (qualnames, file names, thread names: read from the
// target's memory, so untrusted) reaches the page either escaped by escapeHtml(), or inside the
// JSON data block (jsonForScript: `<` written as \u003c, so nothing in it can close the
// <script> element), which the page's script reads with JSON.parse and shows with textContent.

import type { ExportMeta } from '../meta.js';
import type { Profile } from '../../profile/profile.js';

/** The id of the `<script type="application/json">` element that holds the page's data. */
export const DATA_ELEMENT_ID = 'pyunwind-data';

export interface PageParts {
  /** the document title (escaped here) */
  title: string;
  /** CSS (inline in a <style>) */
  css: string;
  /** the body's markup (trusted HTML: escape what comes from the profile with escapeHtml) */
  body: string;
  /** data for the script: embedded as JSON in `<script type="application/json" id="pyunwind-data">` */
  data?: unknown;
  /** JavaScript run at the end of the body (reads the data with pyunwindData()) */
  script?: string;
}

/** Text for HTML content and attribute values. */
export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => (c === '&' ? '&amp;' : c === '<' ? '&lt;' : c === '>' ? '&gt;' : c === '"' ? '&quot;' : '&#39;'));
}

/**
 * JSON safe inside a `<script type="application/json">` element: every `<` is written as
 * \u003c (so neither `</script>` nor `<!--` can appear), and U+2028/U+2029 escaped too.
 */
export function jsonForScript(data: unknown): string {
  return JSON.stringify(data)
    .replace(/</g, '\\u003c')
    .replace(/\u2028/g, '\\u2028')
    .replace(/\u2029/g, '\\u2029');
}

// default-src 'none': no fetch, image, font, frame or connection of any kind
const CSP = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:";

export function htmlPage(parts: PageParts): string {
  const script = parts.script ?? '';
  if (/<\/script/i.test(script)) throw new Error('a page script must not contain "</script"');
  if (/<\/style/i.test(parts.css)) throw new Error('page CSS must not contain "</style"');
  return [
    '<!DOCTYPE html>',
    '<html lang="en">',
    '<head>',
    '<meta charset="utf-8">',
    `<meta http-equiv="Content-Security-Policy" content="${CSP}">`,
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    '<meta name="generator" content="pyunwind">',
    `<title>${escapeHtml(parts.title)}</title>`,
    `<style>${parts.css}</style>`,
    '</head>',
    '<body>',
    parts.body,
    parts.data === undefined ? '' : `<script type="application/json" id="${DATA_ELEMENT_ID}">${jsonForScript(parts.data)}</script>`,
    script ? `<script>${script}</script>` : '',
    '</body>',
    '</html>',
    '',
  ].join('\n');
}

/** Integer grouping with commas, fractions to one decimal (the text report's style). */
export function formatCount(n: number): string {
  const [int, frac] = (Number.isInteger(n) ? n.toFixed(0) : n.toFixed(1)).split('.');
  const grouped = int!.replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  return frac === undefined ? grouped : `${grouped}.${frac}`;
}

export function formatPercent(n: number, of: number): string {
  return of > 0 ? `${((100 * n) / of).toFixed(1)}%` : '–';
}

/** The facts about a recording a page shows under its title (plain text, one item each). */
export function recordingFacts(profile: Profile, meta: ExportMeta): string[] {
  const out: string[] = [];
  if (meta.pythonVersion) out.push(`Python ${meta.pythonVersion}`);
  if (meta.rateHz > 0) out.push(`${meta.rateHz} Hz`);
  const threads = profile.threads().length;
  out.push(`${threads} thread${threads === 1 ? '' : 's'}`);
  const span = profile.timeSpan();
  if (span) out.push(`${((span.last - span.first) / 1e6).toFixed(3)} s`);
  out.push(`mode ${meta.mode}`);
  if (meta.copy) out.push(`copies ${meta.copy}`);
  if (meta.startTime > 0) out.push(`started ${new Date(meta.startTime).toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC')}`);
  if (meta.recorder) out.push(`recorded by ${meta.recorder}`);
  return out;
}

/**
 * Styles every page shares: the header, panels, tables, the validation panel, the thread
 * selector and the tooltip. Light and dark follow the system's setting.
 */
export const BASE_CSS = String.raw`
:root {
  --bg: #f7f7f5; --fg: #1f2328; --muted: #626a73; --faint: #9aa1a9; --line: #dcdfe3;
  --panel: #ffffff; --accent: #2f6fb3; --accent-bg: #e8f0fa; --good: #2e7d4f; --bad: #b3372f;
  --warn: #a66a00; --mono: ui-monospace, 'SF Mono', 'Cascadia Mono', 'DejaVu Sans Mono', Menlo, Consolas, monospace;
  --sans: system-ui, -apple-system, 'Segoe UI', Roboto, 'Noto Sans', 'DejaVu Sans', sans-serif;
  color-scheme: light dark;
}
@media (prefers-color-scheme: dark) {
  :root { --bg: #16181b; --fg: #e4e6e8; --muted: #a0a7ae; --faint: #6b737b; --line: #30353b;
    --panel: #1e2125; --accent: #6ea8e8; --accent-bg: #1f2f44; --good: #5cc08a; --bad: #ef7a70; --warn: #e0a84a; }
}
* { box-sizing: border-box; }
html, body { margin: 0; padding: 0; background: var(--bg); color: var(--fg); font: 14px/1.45 var(--sans); }
header.top { padding: 14px 20px 10px; border-bottom: 1px solid var(--line); background: var(--panel); }
header.top h1 { margin: 0; font-size: 19px; font-weight: 600; }
header.top h1 .kind { color: var(--muted); font-weight: 400; }
header.top .facts { margin: 3px 0 0; color: var(--muted); font-size: 13px; }
header.top .facts span + span::before { content: '·'; margin: 0 7px; color: var(--faint); }
main { padding: 14px 20px 28px; }
.panel { background: var(--panel); border: 1px solid var(--line); border-radius: 8px; padding: 12px 14px; }
.panel h2 { margin: 0 0 8px; font-size: 14px; font-weight: 600; }
.panel h2 .sub { color: var(--muted); font-weight: 400; }
.toolbar { display: flex; flex-wrap: wrap; align-items: center; gap: 10px 16px; margin-bottom: 10px; }
.toolbar label { color: var(--muted); font-size: 13px; display: inline-flex; align-items: center; gap: 6px; }
select, input[type=search], button {
  font: inherit; font-size: 13px; color: var(--fg); background: var(--panel); border: 1px solid var(--line);
  border-radius: 6px; padding: 4px 8px; }
input[type=search] { width: 240px; }
button { cursor: pointer; }
button:hover, select:hover { border-color: var(--accent); }
button:disabled { opacity: .45; cursor: default; }
table.data { border-collapse: collapse; width: 100%; font-size: 13px; }
table.data th, table.data td { padding: 3px 8px; text-align: right; white-space: nowrap; border-bottom: 1px solid var(--line); }
table.data th { color: var(--muted); font-weight: 500; position: sticky; top: 0; background: var(--panel); }
table.data td.name, table.data th.name { text-align: left; }
table.data td.name { font-family: var(--mono); font-size: 12.5px; white-space: normal; word-break: break-all; }
table.data td .file { color: var(--muted); }
table.data td.pct { color: var(--muted); }
table.data tbody tr { cursor: pointer; }
table.data tbody tr:hover { background: var(--accent-bg); }
table.data th.sortable { cursor: pointer; user-select: none; }
table.data th.sorted { color: var(--fg); }
table.data th.sorted::after { content: ' ▾'; }
.validation table { border-collapse: collapse; width: 100%; font-size: 13px; }
.validation th { text-align: left; font-weight: 400; padding: 1px 6px 1px 0; white-space: nowrap; }
.validation td { text-align: right; padding: 1px 0 1px 10px; font-variant-numeric: tabular-nums; white-space: nowrap; }
.validation tr.major th { font-weight: 600; }
.validation tr.major td[data-key] { font-weight: 600; }
.validation tr.sub th { padding-left: 14px; color: var(--muted); }
.validation tr.zero th, .validation tr.zero td { color: var(--faint); }
.validation tr.gap th, .validation tr.gap td { padding-top: 8px; }
.validation tr.bad td[data-key] { color: var(--bad); }
.validation td.pct { color: var(--muted); width: 4.5em; }
.validation .bar { display: flex; height: 8px; border-radius: 4px; overflow: hidden; background: var(--line); margin: 2px 0 10px; }
.validation .bar .trusted { background: var(--good); }
.validation .bar .idle { background: #8fc4a6; }
.validation .bar .rejected { background: var(--bad); }
.validation .verdict { margin: 0 0 6px; font-size: 13px; }
.validation .note { margin: 8px 0 0; color: var(--muted); font-size: 12px; max-width: 40em; }
#tooltip { position: fixed; z-index: 10; pointer-events: none; display: none; max-width: 560px;
  background: rgba(24, 26, 29, .96); color: #f1f3f5; border-radius: 6px; padding: 7px 10px; font-size: 12.5px;
  box-shadow: 0 4px 14px rgba(0,0,0,.25); }
#tooltip .t-name { font-weight: 600; font-family: var(--mono); word-break: break-all; }
#tooltip .t-file { color: #b8c0c8; font-family: var(--mono); font-size: 12px; word-break: break-all; margin-bottom: 4px; }
#tooltip .t-row { display: flex; justify-content: space-between; gap: 18px; }
#tooltip .t-row span:last-child { font-variant-numeric: tabular-nums; }
.muted { color: var(--muted); }
.hint { color: var(--faint); font-size: 12px; }
`;

/**
 * Browser-side helpers every page script starts with (plain ES2017, no modules):
 * pyunwindData() reads the embedded data; fmt(n) and pct(n, of) format like the text report;
 * el(tag, attrs, text) makes an element; basename(path).
 */
export const BASE_SCRIPT = String.raw`
'use strict';
function pyunwindData() { return JSON.parse(document.getElementById('${DATA_ELEMENT_ID}').textContent); }
function fmt(n) {
  var s = Number.isInteger(n) ? n.toFixed(0) : n.toFixed(1);
  var parts = s.split('.');
  parts[0] = parts[0].replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  return parts.join('.');
}
function pct(n, of) { return of > 0 ? (100 * n / of).toFixed(1) + '%' : '\u2013'; }
function el(tag, attrs, text) {
  var e = document.createElement(tag);
  if (attrs) for (var k in attrs) if (attrs[k] !== undefined && attrs[k] !== null) e.setAttribute(k, String(attrs[k]));
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}
function basename(p) { var i = Math.max(p.lastIndexOf('/'), p.lastIndexOf('\\')); return i >= 0 ? p.slice(i + 1) : p; }
function placeTooltip(tip, ev) {
  var pad = 14, w = tip.offsetWidth, h = tip.offsetHeight;
  var x = ev.clientX + pad, y = ev.clientY + pad;
  if (x + w > window.innerWidth - 4) x = Math.max(4, ev.clientX - w - pad);
  if (y + h > window.innerHeight - 4) y = Math.max(4, ev.clientY - h - pad);
  tip.style.left = x + 'px'; tip.style.top = y + 'px';
}
`;
