// The heatmap page: its markup (heatmapBody), and the data shape, script and styles it is drawn
// with (used by src/export/heatmap.ts through htmlPage()). The data is a HeatmapData
// (heatmap-data.ts); the script is browser/heatmap.ts and the styles browser/heatmap.css, built
// into strings by scripts/build-html.mjs (generated/heatmap.ts); what the page offers, and its
// stable hooks for tests and tools, are listed at the top of the script.

import { escapeHtml } from './page.js';

export type { HeatmapData, HeatmapFile, HeatmapFileCounts, HeatmapLine, HeatmapView } from './heatmap-data.js';
export { HEATMAP_CSS, HEATMAP_SCRIPT } from './generated/heatmap.js';

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
