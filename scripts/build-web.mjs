// Builds the viewer (web/) into dist/web/: a static app that needs no server of its own.
//
//   index.html             web/index.html
//   viewer.js              web/viewer.ts, bundled (the page)
//   worker.js              web/worker.ts, bundled (a module Web Worker: reportCaptureBytes and every export format)
//   block-worker.js        web/block-worker.ts, bundled (a processing worker: a large capture's blocks are spread over several)
//   kernel-unshared.wasm   build/kernel-unshared.wasm (npm run build:wasm makes both builds)
//   kernel.wasm            build/kernel.wasm, the shared-memory build (run where the page is cross-origin isolated)
//   viewer.css             BASE_CSS (the HTML exports' shared styles) + web/viewer.css
//   flamegraph.js          FLAMEGRAPH_SCRIPT: the HTML exports' flame graph renderer, unchanged
//                          (src/export/html/browser/flamegraph.ts, bundled by build-html.mjs)
//   flamegraph.css         BASE_CSS + FLAMEGRAPH_CSS + web/embed.css
//   profile.html           web/profile.html, its textarea filled with workloads/hotcold.py
//   profile.js             web/profile.ts, bundled (the in-browser profiler's page)
//   profile-worker.js      web/profile-worker.ts, bundled (a module Web Worker: Pyodide and the sampler)
//   pyodide-ticker-worker.js  src/record/pyodide/ticker-worker.ts, bundled (the sampler's ticks)
//   profile.css            web/profile.css
//   pyodide/               what loadPyodide fetches with no packages, from the npm package pyodide
//                          (3.15): pyodide.mjs, pyodide.asm.mjs, pyodide.asm.wasm,
//                          python_stdlib.zip, pyodide-lock.json
//
// The renderer's script and styles are built from src/export/html/browser/ by the same code as
// the HTML exports' (build-html.mjs), so the viewer and `pyunwind report --format flamegraph`
// draw with the same code, even when this script runs on its own. Modules that only run under
// Node (node:*: reached by paths the browser never takes, e.g. reading the kernel from disk,
// worker threads) are bundled as empty modules.
//
// Run: node scripts/build-web.mjs (npm run build:web).

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';
import { buildHtml } from './build-html.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const web = path.join(root, 'web');
const out = path.join(root, 'dist', 'web');
const kernels = ['kernel-unshared.wasm', 'kernel.wasm'].map((f) => path.join(root, 'build', f));

for (const kernel of kernels) {
  if (!fs.existsSync(kernel)) {
    console.error(`build-web: ${path.relative(root, kernel)} is missing: run npm run build:wasm first`);
    process.exit(1);
  }
}

/** node:* imports become an empty CommonJS module (any named import of it is undefined). */
const nodeStub = {
  name: 'node-stub',
  setup(build) {
    build.onResolve({ filter: /^node:/ }, (args) => ({ path: args.path, namespace: 'node-stub' }));
    build.onLoad({ filter: /.*/, namespace: 'node-stub' }, () => ({ contents: 'module.exports = {};', loader: 'js' }));
  },
};

// the renderer's pieces, built from their sources now (build-html.mjs), which also brings up to
// date the generated modules the bundles below take in (the worker's HTML exports inline them)
const { FLAMEGRAPH_SCRIPT, FLAMEGRAPH_CSS, BASE_CSS } = (await buildHtml()).pieces;

fs.rmSync(out, { recursive: true, force: true });
fs.mkdirSync(out, { recursive: true });

const result = await esbuild.build({
  entryPoints: {
    viewer: path.join(web, 'viewer.ts'),
    worker: path.join(web, 'worker.ts'),
    'block-worker': path.join(web, 'block-worker.ts'),
    profile: path.join(web, 'profile.ts'),
    'profile-worker': path.join(web, 'profile-worker.ts'),
    'pyodide-ticker-worker': path.join(root, 'src', 'record', 'pyodide', 'ticker-worker.ts'),
  },
  outdir: out,
  bundle: true,
  format: 'esm',
  platform: 'browser',
  target: ['es2022', 'chrome100', 'firefox115', 'safari16'],
  minify: true,
  legalComments: 'none',
  plugins: [nodeStub],
  metafile: true,
  logLevel: 'warning',
});

fs.copyFileSync(path.join(web, 'index.html'), path.join(out, 'index.html'));
for (const kernel of kernels) fs.copyFileSync(kernel, path.join(out, path.basename(kernel)));
const read = (f) => fs.readFileSync(path.join(web, f), 'utf8');
fs.writeFileSync(path.join(out, 'viewer.css'), BASE_CSS + read('viewer.css'));
fs.writeFileSync(path.join(out, 'flamegraph.css'), BASE_CSS + FLAMEGRAPH_CSS + read('embed.css'));
fs.writeFileSync(path.join(out, 'flamegraph.js'), FLAMEGRAPH_SCRIPT);

// the in-browser profiler: its page, prefilled with a program whose profile is known
const escapeHtml = (t) => t.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
const program = fs.readFileSync(path.join(root, 'workloads', 'hotcold.py'), 'utf8');
const profilePage = read('profile.html');
if (!profilePage.includes('{{PROGRAM}}') || !profilePage.includes('{{FILENAME}}')) throw new Error('build-web: web/profile.html lost its {{PROGRAM}} or {{FILENAME}}');
fs.writeFileSync(path.join(out, 'profile.html'), profilePage.replace('{{PROGRAM}}', () => escapeHtml(program)).replace('{{FILENAME}}', 'hotcold.py'));
fs.copyFileSync(path.join(web, 'profile.css'), path.join(out, 'profile.css'));
// Pyodide, as loadPyodide({ indexURL: './pyodide/' }) fetches it with no packages
const pyodideDir = path.join(root, 'node_modules', 'pyodide');
const PYODIDE_FILES = ['pyodide.mjs', 'pyodide.asm.mjs', 'pyodide.asm.wasm', 'python_stdlib.zip', 'pyodide-lock.json'];
fs.mkdirSync(path.join(out, 'pyodide'));
for (const f of PYODIDE_FILES) {
  const from = path.join(pyodideDir, f);
  if (!fs.existsSync(from)) {
    console.error(`build-web: ${path.relative(root, from)} is missing (the npm package pyodide): the in-browser profiler needs it`);
    process.exit(1);
  }
  fs.copyFileSync(from, path.join(out, 'pyodide', f));
}

const stubbed = Object.keys(result.metafile.inputs).filter((p) => p.startsWith('node-stub:'));
const sizes = fs
  .readdirSync(out)
  .sort()
  .filter((f) => fs.statSync(path.join(out, f)).isFile())
  .map((f) => `${f} ${(fs.statSync(path.join(out, f)).size / 1024).toFixed(0)} kB`);
console.log(`build-web: dist/web: ${sizes.join(', ')}; pyodide/: ${PYODIDE_FILES.join(', ')}${stubbed.length ? ` (empty in the browser: ${stubbed.map((s) => s.slice('node-stub:'.length)).join(', ')})` : ''}`);
