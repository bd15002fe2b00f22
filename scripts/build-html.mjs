// Builds the HTML exports' browser code into TypeScript modules the processing code imports:
// src/export/html/browser/*.ts, bundled and minified by esbuild into one classic script per
// page (an IIFE: the page inlines it, no module loading), and src/export/html/browser/*.css,
// without comments and whitespace, become string constants in src/export/html/generated/:
//
//   base.ts         BASE_CSS                          browser/base.css
//   flamegraph.ts   FLAMEGRAPH_SCRIPT, FLAMEGRAPH_CSS browser/flamegraph.ts, flamegraph.css
//   heatmap.ts      HEATMAP_SCRIPT, HEATMAP_CSS       browser/heatmap.ts, heatmap.css
//   diff.ts         DIFF_SCRIPT, DIFF_CSS             browser/diff.ts, diff.css
//
// Why strings in a module, made at build time: the exports make one self-contained HTML file
// in every runtime the processing entry runs in (Node, browsers, Deno, Bun, workerd), where
// there is no file to read the script from at run time.
//
// Why the generated modules are not committed (src/export/html/generated/ is in .gitignore):
// they are a function of the browser sources, and a committed copy can silently disagree with
// them (an edit without a rebuild ships the old script, and every edit is two diffs). Like
// build/*.wasm and assembly/abi-digest.ts, they are made by the build, before anything reads
// them: `npm run build` runs this script first — and so does `prepare`, which `npm ci` and
// `npm install` run, so a fresh clone has them — and `pretest`; `npm run typecheck` runs it
// beforehand (pretypecheck); build-web.mjs, which bundles the processing code (and so these
// modules) into the viewer's worker, runs it too. vitest, which runs the TypeScript sources,
// needs a build first either way (the kernel). Files are only rewritten when their text changes.
//
// Run: node scripts/build-html.mjs (npm run build:html).

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const browser = path.join(root, 'src', 'export', 'html', 'browser');
const generated = path.join(root, 'src', 'export', 'html', 'generated');

/** One classic script: the entry and what it imports, in an IIFE, for the browsers the pages support. */
async function script(entry) {
  const result = await esbuild.build({
    entryPoints: [path.join(browser, entry)],
    tsconfig: path.join(browser, 'tsconfig.json'),
    bundle: true,
    format: 'iife',
    platform: 'browser',
    // the pages' scripts were written as plain ES2017 by hand; the bundle keeps to it
    target: 'es2017',
    minify: true,
    legalComments: 'none',
    write: false,
    logLevel: 'silent',
  });
  const text = result.outputFiles[0].text;
  // htmlPage() refuses a script that would end its <script> element early: fail here, at build time
  if (/<\/script/i.test(text)) throw new Error(`build-html: ${entry} bundles to a script with "</script" in it`);
  return text;
}

/**
 * A stylesheet without its comments (which document the source, not the page) and whitespace.
 * Only that: esbuild's full CSS minifier also writes hsl() colours as hex, rounded, so a colour
 * can come out a level off what the stylesheet says.
 */
async function css(file) {
  const source = fs.readFileSync(path.join(browser, file), 'utf8');
  const { code } = await esbuild.transform(source, { loader: 'css', minifyWhitespace: true, sourcefile: file, logLevel: 'silent' });
  if (/<\/style/i.test(code)) throw new Error(`build-html: ${file} has "</style" in it`);
  return code;
}

/** Every page's pieces, by the name the generated modules export them under. */
async function htmlPieces() {
  const [BASE_CSS, FLAMEGRAPH_SCRIPT, FLAMEGRAPH_CSS, HEATMAP_SCRIPT, HEATMAP_CSS, DIFF_SCRIPT, DIFF_CSS] = await Promise.all([
    css('base.css'),
    script('flamegraph.ts'),
    css('flamegraph.css'),
    script('heatmap.ts'),
    css('heatmap.css'),
    script('diff.ts'),
    css('diff.css'),
  ]);
  return { BASE_CSS, FLAMEGRAPH_SCRIPT, FLAMEGRAPH_CSS, HEATMAP_SCRIPT, HEATMAP_CSS, DIFF_SCRIPT, DIFF_CSS };
}

/** The generated modules: file → [export name, its doc comment, its sources][] */
const MODULES = {
  'base.ts': [['BASE_CSS', 'Styles every page shares: the header, panels, tables, the validation panel, the thread selector and the tooltip.', 'base.css']],
  'flamegraph.ts': [
    ['FLAMEGRAPH_SCRIPT', "The flame graph page's script (a classic script: reads a FlameGraphData).", 'flamegraph.ts'],
    ['FLAMEGRAPH_CSS', "The flame graph page's styles (after BASE_CSS).", 'flamegraph.css'],
  ],
  'heatmap.ts': [
    ['HEATMAP_SCRIPT', "The heatmap page's script (a classic script: reads a HeatmapData).", 'heatmap.ts'],
    ['HEATMAP_CSS', "The heatmap page's styles (after BASE_CSS).", 'heatmap.css'],
  ],
  'diff.ts': [
    ['DIFF_SCRIPT', "The differential flame graph's script, run after FLAMEGRAPH_SCRIPT.", 'diff.ts'],
    ['DIFF_CSS', "The differential flame graph's styles (after BASE_CSS and FLAMEGRAPH_CSS).", 'diff.css'],
  ],
};

/**
 * A string literal for TypeScript (JSON's, with the two line separators JSON leaves raw escaped
 * too). Its constant is declared `: string`, or tsc would copy the whole text into the .d.ts.
 */
const literal = (s) => JSON.stringify(s).replace(/\u2028/g, '\\u2028').replace(/\u2029/g, '\\u2029');

/**
 * Writes the generated modules (those whose text changed: tsc's and vitest's watchers see no
 * change otherwise) and returns the pieces and the files written.
 */
export async function buildHtml() {
  const pieces = await htmlPieces();
  fs.mkdirSync(generated, { recursive: true });
  const written = [];
  for (const [file, exports] of Object.entries(MODULES)) {
    const text = [
      `// Generated by scripts/build-html.mjs (npm run build:html) from src/export/html/browser/: do not edit, and not committed.`,
      '',
      ...exports.flatMap(([name, doc, source]) => [`/** ${doc} From browser/${source}. */`, `export const ${name}: string = ${literal(pieces[name])};`, '']),
    ].join('\n');
    const to = path.join(generated, file);
    if (fs.existsSync(to) && fs.readFileSync(to, 'utf8') === text) continue;
    fs.writeFileSync(to, text);
    written.push(file);
  }
  return { pieces, written };
}

async function main() {
  const { pieces, written } = await buildHtml();
  const sizes = Object.entries(pieces).map(([name, text]) => `${name} ${(text.length / 1024).toFixed(1)} kB`);
  console.log(`build-html: ${sizes.join(', ')}; ${written.length ? `wrote ${written.map((f) => `generated/${f}`).join(', ')}` : 'generated/ unchanged'}`);
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    await main();
  } catch (e) {
    console.error(e.errors?.length ? `build-html: ${e.message}` : e);
    process.exit(1);
  }
}
