// Where a page keeps its data: shared by the page's writer (page.ts: htmlPage) and its browser
// scripts (browser/page.ts: pageData), which cannot import page.ts (it reaches the processing
// code's types; the browser code is checked on its own, with no Node in it).

/** The id of the `<script type="application/json">` element that holds the page's data. */
export const DATA_ELEMENT_ID = 'pyunwind-data';
