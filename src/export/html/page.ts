// One self-contained HTML page: styles, markup, data and script all inline, nothing fetched.
// The HTML exports (flame graph, heatmap, differential flame graph) are built with htmlPage();
// a Content-Security-Policy in the page itself forbids any network request (default-src 'none'),
// so a page that would load something from outside fails loudly instead of phoning home.
//
// Everything that comes from the profile (qualnames, file names, thread names: read from the
// target's memory, so untrusted) reaches the page either escaped by escapeHtml(), or inside the
// JSON data block (jsonForScript: `<` written as \u003c, so nothing in it can close the
// <script> element), which the page's script reads with JSON.parse and shows with textContent.
//
// The pages' scripts and styles are TypeScript and CSS in browser/ (checked by tsc with the DOM's
// types, browser/tsconfig.json); scripts/build-html.mjs bundles them into the string constants
// of generated/ at build time, which the exports inline here.

import type { ExportMeta } from '../meta.js';
import type { Profile } from '../../profile/profile.js';
import { DATA_ELEMENT_ID } from './data-element.js';

export { DATA_ELEMENT_ID } from './data-element.js';
// Styles every page shares (browser/base.css, built into a string by scripts/build-html.mjs)
export { BASE_CSS } from './generated/base.js';

export interface PageParts {
  /** the document title (escaped here) */
  title: string;
  /** CSS (inline in a <style>) */
  css: string;
  /** the body's markup (trusted HTML: escape what comes from the profile with escapeHtml) */
  body: string;
  /** data for the script: embedded as JSON in `<script type="application/json" id="pyunwind-data">` */
  data?: unknown;
  /** JavaScript run at the end of the body (a page's script from ./generated/: reads the data with browser/page.ts's pageData()) */
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
