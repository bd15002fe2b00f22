// The flame graph in an <iframe srcdoc>, for the viewer (web/viewer.ts) and the in-browser
// profiler (web/profile.ts): the HTML exports' renderer, unchanged — its markup
// (flamegraphBody), data (a `<script type="application/json">` element) and script
// (flamegraph.js, written by the build from FLAMEGRAPH_SCRIPT) — a document of its own for each
// graph, so the script runs once per graph as it was written to.

import { flamegraphBody } from '../src/export/html/flamegraph-script.js';
import { DATA_ELEMENT_ID, escapeHtml, jsonForScript } from '../src/export/html/page.js';
import type { ViewerResult } from './protocol.js';

export function flameSrcdoc(r: Pick<ViewerResult, 'meta' | 'facts' | 'flame'>): string {
  // the renderer's page without its header (the page's header says the same) or side panel
  const body = flamegraphBody({ kind: 'Flame graph', title: r.meta.title, facts: r.facts, side: '' });
  return [
    '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
    `<title>${escapeHtml(`Flame graph: ${r.meta.title}`)}</title>`,
    '<link rel="stylesheet" href="flamegraph.css">',
    '</head><body class="embedded">',
    body,
    `<script type="application/json" id="${DATA_ELEMENT_ID}">${jsonForScript(r.flame)}</script>`,
    '<script src="flamegraph.js"></script>',
    '</body></html>',
  ].join('\n');
}

/** Keep the iframe as tall as the renderer's page (it changes with the view and the zoom). */
export function fitFrame(frame: HTMLIFrameElement): void {
  const doc = frame.contentDocument;
  if (!doc?.body) return;
  const fit = (): void => {
    frame.style.height = `${Math.ceil(doc.body.getBoundingClientRect().height) + 2}px`;
  };
  fit();
  new ResizeObserver(fit).observe(doc.body);
}
