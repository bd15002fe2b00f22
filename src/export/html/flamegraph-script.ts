// The flame graph page: its markup (flamegraphBody), and the data shape, script and styles it
// is drawn with. The flame graph export (src/export/flamegraph.ts) and the differential flame
// graph (src/export/diff.ts) both make a page with it:
//
//   htmlPage({ title, css: BASE_CSS + FLAMEGRAPH_CSS, body: flamegraphBody({...}), data, script: FLAMEGRAPH_SCRIPT })
//
// with `data` a FlameGraphData (flamegraph-data.ts). The script is browser/flamegraph.ts and
// the styles browser/flamegraph.css, built into strings by scripts/build-html.mjs
// (generated/flamegraph.ts); what the page offers, and its stable hooks for tests and tools
// (element ids, data attributes, window.__pyunwind), are listed at the top of the script.

import { escapeHtml } from './page.js';

export type { FlameColor, FlameColumn, FlameFrame, FlameFunction, FlameGraphData, FlameView } from './flamegraph-data.js';
export { FLAMEGRAPH_CSS, FLAMEGRAPH_SCRIPT } from './generated/flamegraph.js';

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
