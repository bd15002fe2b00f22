// The viewer (web/, built into dist/web/ by npm run build:web) and `pyunwind view` (src/cli/view.ts).
//
// The server: it listens on 127.0.0.1 only; it answers only the viewer's files and the one
// capture under /TOKEN/ — no token, a wrong token, `..` (plain or percent-encoded), an encoded
// slash, a folder, a hidden file, a file added after it started, another Host header: 404 with
// no listing; every answer has COOP/COEP/CORP, a CSP, no-store and the right content type. The
// command prints the URL, serves it, and stops on SIGINT.
//
// The page, in offline Chromium (harness/browser.ts: anything but the server is aborted), opened
// at the URL startViewServer gives with a real capture — native CPython 3.15's threadpool.py
// (test/helpers/format-capture.ts) when 3.15 is provisioned, else the 3.12 fixture (said loudly)
// — must agree with `pyunwind report FILE --format json` (over the built dist/: run `npm run
// build` first): the validation numbers, the thread list (labels and samples), the widest
// frames of the flame graph (all threads, and one thread picked in the list); downloads give the
// very bytes of `report --format F` (json, jsonl: made in time order, pprof: binary). A damaged
// capture (bytes flipped in its middle) shows `#error` with the reader's warnings — those
// `report` prints — and the intact part's numbers (report's json of the same file); a file of
// random bytes shows `#error` with report's message. Screenshots: test-output/viewer.png and
// viewer-damaged.png.

import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type { Page } from 'playwright-core';
import { afterAll, describe, expect, it } from 'vitest';
import { browserMissing, launchOffline, plainServer, testOutputDir, type OfflineBrowser } from '../harness/browser.js';
import { BLOCK_HEADER_SIZE } from '../src/capture/format.js';
import { readCaptureBytes } from '../src/capture/reader.js';
import { CAPTURE_NAME, defaultWebDir, startViewServer, type ViewServer } from '../src/cli/view.js';
import { WORKERS_FROM_BYTES } from '../src/pipeline/process-capture.js';
import type { Processing } from '../web/protocol.js';
import { nativeInterpreters } from '../harness/interpreters.js';
import { recordCoverage, skipTest, cannotRun, UNDER_CI } from './helpers/coverage.js';
import { formatCapture } from './helpers/format-capture.js';
import { reblocked } from './helpers/reblock.js';
import { expectValidationPanel } from './helpers/validation-panel.js';

const run = promisify(execFile);
const BIN = path.resolve('bin/pyunwind.js');
const FIXTURE = path.resolve('test/fixtures/captures/threadpool-3.12.pyuw');
/** a capture of five blocks: a bad block in its middle leaves an intact part on both sides */
const MANY_BLOCKS = path.resolve('test/fixtures/captures/recursion-3.11.pyuw');
const WEB = defaultWebDir();

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => fs.rmSync(d, { recursive: true, force: true })));
function tempDir(): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'pyunwind-viewer-'));
  dirs.push(d);
  return d;
}

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

/** A request with its path exactly as given (nothing normalised, unlike fetch). */
function request(port: number, rawPath: string, options: { method?: string; host?: string } = {}): Promise<Answer> {
  return new Promise((ok, fail) => {
    const req = http.request({ host: '127.0.0.1', port, path: rawPath, method: options.method ?? 'GET', headers: options.host ? { Host: options.host } : {} }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => ok({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', fail);
    });
    req.on('error', fail);
    req.end();
  });
}

function expectIsolated(a: Answer): void {
  expect(a.headers['cross-origin-opener-policy']).toBe('same-origin');
  expect(a.headers['cross-origin-embedder-policy']).toBe('require-corp');
  expect(a.headers['cross-origin-resource-policy']).toBe('same-origin');
  expect(a.headers['cache-control']).toBe('no-store');
  expect(a.headers['x-content-type-options']).toBe('nosniff');
  const csp = String(a.headers['content-security-policy']);
  expect(csp).toContain("default-src 'self'");
  expect(csp).toContain("script-src 'self' 'wasm-unsafe-eval'");
  expect(csp.replace("'wasm-unsafe-eval'", '')).not.toMatch(/\*|https?:|unsafe-eval/);
}

describe('pyunwind view: the server', () => {
  it('listens on 127.0.0.1 only and serves nothing but the viewer and the capture under its token', async () => {
    // the built viewer, plus what must never be served: a folder, a hidden file, a file added later
    const web = tempDir();
    fs.cpSync(WEB, web, { recursive: true });
    // beside the one served sub-folder (pyodide/): what must not be served there either
    fs.mkdirSync(path.join(web, 'pyodide', 'deeper'), { recursive: true });
    fs.writeFileSync(path.join(web, 'pyodide', 'deeper', 'x.js'), 'deeper');
    fs.writeFileSync(path.join(web, 'pyodide', '.hidden'), 'hidden');
    fs.mkdirSync(path.join(web, 'sub'));
    fs.writeFileSync(path.join(web, 'sub', 'inner.txt'), 'inner');
    fs.writeFileSync(path.join(web, '.env'), 'SECRET=1');
    const s = await startViewServer({ file: FIXTURE, webDir: web });
    try {
      expect(s.server.address()).toMatchObject({ address: '127.0.0.1', family: 'IPv4' });
      expect(s.token).toMatch(/^[0-9a-f]{32}$/);
      expect(s.base).toBe(`http://127.0.0.1:${s.port}/${s.token}/`);
      expect(s.url.startsWith(`${s.base}?file=${CAPTURE_NAME}`)).toBe(true);
      fs.writeFileSync(path.join(web, 'later.js'), 'later');
      fs.writeFileSync(path.join(web, 'pyodide', 'later.js'), 'later');

      const t = s.token;
      const wrong = t.slice(0, -1) + (t.endsWith('0') ? '1' : '0');
      const refused = [
        '/',
        '/index.html',
        `/${CAPTURE_NAME}`,
        '/viewer.js',
        `/${wrong}/`,
        `/${wrong}/${CAPTURE_NAME}`,
        `/${t.toUpperCase()}/`,
        `/${t}x/`,
        `/${t}`,
        `/x${t}/`,
        `/${t}/../package.json`,
        `/${t}/%2e%2e/package.json`,
        `/${t}/%2E%2E/%2E%2E/package.json`,
        `/${t}/..%2fpackage.json`,
        `/${t}/%2e%2e%2fpackage.json`,
        `/${t}/viewer.js%2f..%2f..%2fpackage.json`,
        `/${t}/%76iewer.js`,
        `/${t}/package.json`,
        `/${t}/README.md`,
        `/${t}/later.js`,
        `/${t}/.env`,
        `/${t}/sub`,
        `/${t}/sub/`,
        `/${t}/sub/inner.txt`,
        `/${t}//`,
        `/${t}//etc/passwd`,
        `/${t}/index.html/`,
        `/${t}/${CAPTURE_NAME}/`,
        `/${t}/${CAPTURE_NAME}/..`,
        `/${t}/./index.html`,
        `/${t}/viewer.js%00`,
        `/${t}/viewer.js\\..\\package.json`,
        `/../${t}/`,
        `//${t}/`,
        `/${t}/pyodide`,
        `/${t}/pyodide/`,
        `/${t}/pyodide/.hidden`,
        `/${t}/pyodide/deeper`,
        `/${t}/pyodide/deeper/x.js`,
        `/${t}/pyodide/../index.html`,
        `/${t}/pyodide/%2e%2e/index.html`,
        `/${t}/pyodide//pyodide.mjs`,
        `/${t}/pyodide%2fpyodide.mjs`,
        `/${t}/pyodide/later.js`,
        `/${t}/sub/pyodide.mjs`,
        `/${t}/PYODIDE/pyodide.mjs`,
        `/${t}/pyodide/pyodide.mjs/`,
      ];
      for (const p of refused) {
        const a = await request(s.port, p);
        expect({ path: p, status: a.status }).toEqual({ path: p, status: 404 });
        expect(a.body.toString()).toBe('not found\n'); // no listing, nothing about the folder
        expectIsolated(a);
      }
      // the right path under another Host (a DNS-rebinding page): refused too
      expect((await request(s.port, `/${t}/`, { host: `evil.example:${s.port}` })).status).toBe(404);
      expect((await request(s.port, `/${t}/`, { host: '127.0.0.1:1' })).status).toBe(404);
      expect((await request(s.port, `/${t}/`, { method: 'POST' })).status).toBe(405);

      const index = await request(s.port, `/${t}/?file=${CAPTURE_NAME}`);
      expect(index.status).toBe(200);
      expect(index.headers['content-type']).toBe('text/html; charset=utf-8');
      expect(index.body.toString()).toContain('<script type="module" src="viewer.js">');
      expectIsolated(index);
      expect((await request(s.port, `/${t}/index.html`)).body).toEqual(index.body);

      const capture = await request(s.port, `/${t}/${CAPTURE_NAME}`);
      expect(capture.status).toBe(200);
      expect(capture.headers['content-type']).toBe('application/octet-stream');
      expect(capture.body.equals(fs.readFileSync(FIXTURE))).toBe(true);
      expectIsolated(capture);
      expect((await request(s.port, `/${t}/${CAPTURE_NAME}`, { method: 'HEAD' })).headers['content-length']).toBe(String(fs.statSync(FIXTURE).size));

      const types: Record<string, string> = {
        'viewer.js': 'text/javascript; charset=utf-8',
        'worker.js': 'text/javascript; charset=utf-8',
        'flamegraph.js': 'text/javascript; charset=utf-8',
        'viewer.css': 'text/css; charset=utf-8',
        'kernel-unshared.wasm': 'application/wasm',
        'profile.html': 'text/html; charset=utf-8',
        'profile.js': 'text/javascript; charset=utf-8',
        'pyodide-ticker-worker.js': 'text/javascript; charset=utf-8',
        'pyodide/pyodide.mjs': 'text/javascript; charset=utf-8',
        'pyodide/pyodide.asm.mjs': 'text/javascript; charset=utf-8',
        'pyodide/pyodide.asm.wasm': 'application/wasm',
        'pyodide/pyodide-lock.json': 'application/json; charset=utf-8',
        'pyodide/python_stdlib.zip': 'application/octet-stream',
      };
      for (const [name, type] of Object.entries(types)) {
        const a = await request(s.port, `/${t}/${name}`);
        expect({ name, status: a.status, type: a.headers['content-type'] }).toEqual({ name, status: 200, type });
        expect(a.body.equals(fs.readFileSync(path.join(WEB, name)))).toBe(true);
        expectIsolated(a);
        // eval (which Pyodide's loader needs) is allowed to the one script that loads it, nowhere else
        expect(String(a.headers['content-security-policy'])).not.toContain("'unsafe-eval'");
      }
      const runner = await request(s.port, `/${t}/profile-worker.js`);
      expect(runner.status).toBe(200);
      expect(String(runner.headers['content-security-policy'])).toContain("script-src 'self' 'unsafe-eval' 'wasm-unsafe-eval'");
      expect(runner.headers['cross-origin-embedder-policy']).toBe('require-corp');
    } finally {
      await s.close();
    }
    // a second server: another token
    const s2 = await startViewServer({ file: FIXTURE, webDir: web });
    try {
      expect(s2.token).not.toBe(s.token);
    } finally {
      await s2.close();
    }
  });

  it('refuses a missing capture and an unbuilt viewer', async () => {
    await expect(startViewServer({ file: path.join(tempDir(), 'none.pyuw') })).rejects.toThrow(/no such file/);
    await expect(startViewServer({ file: FIXTURE, webDir: tempDir() })).rejects.toThrow(/not built.*build:web/);
  });

  it('pyunwind view FILE --no-open prints the URL, serves it, and stops on SIGINT', async () => {
    // the command from the sources (the built dist/ may predate it)
    const child = spawn(process.execPath, ['--import', 'tsx', '-e', `import('./src/cli/main.ts').then(async (m) => { process.exitCode = await m.main(['view', ${JSON.stringify(FIXTURE)}, '--no-open']); })`], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<number | null>((ok) => child.on('exit', (code) => ok(code)));
    try {
      const url = await new Promise<string>((ok, fail) => {
        child.stdout.on('data', (d: Buffer) => {
          stdout += d.toString();
          const m = /http:\/\/127\.0\.0\.1:\d+\/[0-9a-f]{32}\/\?file=capture\.pyuw&name=threadpool-3\.12\.pyuw/.exec(stdout);
          if (m) ok(m[0]);
        });
        child.on('exit', () => fail(new Error(`view exited: ${stdout}${stderr}`)));
      });
      const u = new URL(url);
      const a = await request(Number(u.port), `${u.pathname}${CAPTURE_NAME}`);
      expect(a.status).toBe(200);
      expect(a.body.equals(fs.readFileSync(FIXTURE))).toBe(true);
      expect((await request(Number(u.port), '/')).status).toBe(404);
      child.kill('SIGINT');
      expect(await exited).toBe(0);
      expect(stderr).toContain('open that URL in a browser');
      expect(stderr).toContain('stopped');
    } finally {
      child.kill('SIGKILL');
    }
  });
});

// ---- the page ----

interface JsonFrame {
  qualname: string;
  filename: string;
  line: number | null;
}
interface JsonThread {
  label: string;
  summary: { attempted: number; trusted: number; rejected: number };
  idleWeight: number;
  frames: JsonFrame[];
  stacks: [number, number, number][];
}
interface JsonDoc {
  summary: { attempted: number; trusted: number; rejected: number; statuses: Record<string, number>; ticks: number; missed: number; scheduled: number };
  threads: JsonThread[];
}
interface Drawn {
  name: string;
  file: string | null;
  line: number | null;
  samples: number;
  depth: number;
}

const cmp = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);
const frameKey = (f: { qualname: string; filename: string | null; line: number | null }): string => `${f.qualname}\n${f.filename ?? ''}\n${f.line ?? ''}`;

/** The frames under the root (outermost frames) by weight, over the given threads merged. */
function rootFrames(threads: JsonThread[]): [string, number][] {
  const w = new Map<string, number>();
  for (const t of threads) {
    const sub = t.stacks.map((s) => s[2]);
    for (let i = sub.length - 1; i >= 0; i--) {
      const p = t.stacks[i]![0];
      if (p >= 0) sub[p]! += sub[i]!;
    }
    t.stacks.forEach(([p, f], i) => {
      if (p < 0 && sub[i]! > 0) w.set(frameKey(t.frames[f]!), (w.get(frameKey(t.frames[f]!)) ?? 0) + sub[i]!);
    });
  }
  return [...w.entries()].sort((a, b) => b[1] - a[1] || cmp(a[0], b[0]));
}

/** `report FILE --format F [options]` over the built command: stdout (bytes) and stderr. */
async function report(file: string, format: string, options: string[] = []): Promise<{ out: Buffer; err: string }> {
  const { stdout, stderr } = await run(process.execPath, [BIN, 'report', '-q', file, '--format', format, ...options], { encoding: 'buffer', maxBuffer: 256 << 20 });
  return { out: stdout, err: stderr.toString() };
}

/** What `report` warns about a file: "byte N: message" each. */
function warningsOf(stderr: string, file: string): string[] {
  const prefix = `pyunwind report: warning: ${file}: `;
  return stderr
    .split('\n')
    .filter((l) => l.startsWith(prefix))
    .map((l) => l.slice(prefix.length));
}

async function openViewer(browser: OfflineBrowser, file: string, errors: string[]): Promise<{ page: Page; server: ViewServer }> {
  const server = await startViewServer({ file });
  const page = await browser.page([new URL(server.base).origin]);
  // every state of #progress the page shows, for the test to read afterwards
  await page.addInitScript(() => {
    const seen: Record<string, string | undefined>[] = ((window as unknown as { __progress: unknown }).__progress = []);
    new MutationObserver((records) => {
      for (const r of records) {
        const e = r.target as HTMLElement;
        if (e.id === 'progress') seen.push({ ...e.dataset });
      }
    }).observe(document, { subtree: true, attributes: true, attributeFilter: ['data-bytes'] });
  });
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error' || m.type() === 'warning') errors.push(`console ${m.type()}: ${m.text()}`);
  });
  await page.goto(server.url);
  return { page, server };
}

/** The validation panel must say what the json's summary says. */
function checkValidation(page: Page, json: JsonDoc): Promise<void> {
  return expectValidationPanel(page, json);
}

async function checkThreads(page: Page, json: JsonDoc): Promise<void> {
  const shown = await page.$$eval('#threads li[data-label]', (els) => els.map((e) => [e.getAttribute('data-label'), Number(e.getAttribute('data-samples')), Number(e.getAttribute('data-rejected'))]));
  expect(shown).toEqual(json.threads.map((t) => [t.label, t.summary.attempted, t.summary.rejected]));
}

/** The renderer's laid-out frames at depth 1 (under the root), heaviest first. */
async function drawnRootFrames(page: Page): Promise<[string, number][]> {
  const frames = await page.evaluate(() => (window as unknown as { __pyunwindViewer: { flame(): { frames: Drawn[] } | null } }).__pyunwindViewer.flame()!.frames);
  return frames
    .filter((f) => f.depth === 1)
    .map((f): [string, number] => [frameKey({ qualname: f.name, filename: f.file, line: f.line }), f.samples])
    .sort((a, b) => b[1] - a[1] || cmp(a[0], b[0]));
}

/** The drawn frames under the root are the heaviest outermost frames, with json's weights; every one of 0.5 % or more is drawn. */
async function checkWidest(page: Page, threads: JsonThread[]): Promise<void> {
  const roots = rootFrames(threads);
  const stacked = roots.reduce((n, [, w]) => n + w, 0);
  const drawn = await drawnRootFrames(page);
  expect(drawn.length).toBeGreaterThan(0);
  expect(drawn.length).toBeGreaterThanOrEqual(roots.filter(([, w]) => w >= 0.005 * stacked).length);
  expect(drawn).toEqual(roots.slice(0, drawn.length));
  const root = await page.evaluate(() => (window as unknown as { __pyunwindViewer: { flame(): { frames: Drawn[] } | null } }).__pyunwindViewer.flame()!.frames.find((f) => f.depth === 0)!.samples);
  expect(root).toBe(stacked);
}

async function download(page: Page, format: string): Promise<{ name: string; bytes: Buffer }> {
  const [d] = await Promise.all([page.waitForEvent('download'), page.click(`#downloads a[data-format="${format}"]`)]);
  const file = await d.path();
  return { name: d.suggestedFilename(), bytes: fs.readFileSync(file) };
}

describe('the viewer in Chromium, offline', () => {
  const missing = browserMissing();
  if (missing) {
    cannotRun('viewer', 'chromium', missing);
    return;
  }

  it('shows a real capture as report --format json does; downloads are report --format F', async () => {
    let file = FIXTURE;
    const made = await formatCapture();
    if (typeof made === 'string') {
      // the 3.12 fixture still checks the viewer here; CI provides the 3.15 capture
      if (UNDER_CI) throw new Error(`viewer: no native 3.15 capture under CI: ${made}`);
      recordCoverage('viewer', 'native 3.15 capture', false, `${made}: the viewer is checked with the 3.12 fixture instead`);
    } else file = made.file;
    const json = JSON.parse((await report(file, 'json')).out.toString()) as JsonDoc;
    expect(json.threads.length).toBeGreaterThan(1);

    const browser = await launchOffline();
    const errors: string[] = [];
    let server: ViewServer | null = null;
    try {
      const opened = await openViewer(browser, file, errors);
      server = opened.server;
      const { page } = opened;
      await page.waitForSelector('body[data-state="ready"]');
      expect(await page.isHidden('#error')).toBe(true);
      expect(await page.isHidden('#progress')).toBe(true);
      expect(await page.textContent('#title')).toBe(path.basename(file));

      await checkValidation(page, json);
      await checkThreads(page, json);
      await checkWidest(page, json.threads);
      // progress: samples, blocks and bytes processed; the last one says all of them
      const seen = await page.evaluate(() => (window as unknown as { __progress: Record<string, string>[] }).__progress);
      const last = seen.filter((p) => Number(p.samples) > 0).pop()!;
      expect(Number(last.samples)).toBe(json.summary.attempted);
      const blocks = [...readCaptureBytes(fs.readFileSync(file)).rawBlocks()];
      expect(Number(last.blocks)).toBe(blocks.length);
      const end = blocks[blocks.length - 1]!;
      expect(Number(last.bytes)).toBe(end.offset + BLOCK_HEADER_SIZE + end.stored.length);
      expect(Number(last.total)).toBe(fs.statSync(file).size);
      // the renderer's own function table is there, in the frame
      expect(await page.frameLocator('#flame-frame').locator('#top-functions tbody tr').count()).toBeGreaterThan(0);
      await page.screenshot({ path: path.join(testOutputDir(), 'viewer.png'), fullPage: true });

      // a thread picked in the list: the graph shows that thread
      const busiest = json.threads.reduce((best, t, i) => (t.summary.attempted > json.threads[best]!.summary.attempted ? i : best), 0);
      const label = json.threads[busiest]!.label;
      await page.click(`#threads li[data-label="${label}"] button`);
      await page.waitForFunction(
        (l) => (window as unknown as { __pyunwindViewer: { flame(): { frames: Drawn[] } | null } }).__pyunwindViewer.flame()!.frames[0]?.name === l,
        label,
      );
      expect(await page.getAttribute(`#threads li[data-label="${label}"]`, 'class')).toContain('selected');
      await checkWidest(page, [json.threads[busiest]!]);

      // downloads: the bytes report writes (json; jsonl, made in time order; pprof, binary)
      const base = path.basename(file, '.pyuw');
      const got = await download(page, 'json');
      expect(got.name).toBe(`${base}.json`);
      expect(got.bytes.toString()).toBe((await report(file, 'json')).out.toString());
      for (const format of ['jsonl', 'pprof', 'collapsed']) {
        const d = await download(page, format);
        expect({ format, same: d.bytes.equals((await report(file, format)).out) }).toEqual({ format, same: true });
      }
      expect(await page.getAttribute('#downloads a[data-format="collapsed"]', 'download')).toBe(`${base}.collapsed.txt`);
      expect(await page.$$eval('#downloads a[data-format]', (as) => as.map((a) => a.getAttribute('data-format')))).toEqual([
        'text', 'json', 'collapsed', 'speedscope', 'pprof', 'gecko', 'cpuprofile', 'pstats', 'flamegraph', 'heatmap', 'jsonl',
      ]);

      expect(browser.blocked).toEqual([]);
      expect(errors).toEqual([]);
      recordCoverage('viewer', 'chromium', true);
    } finally {
      await browser.close();
      await server?.close();
    }
  });

  it('spreads a capture over processing workers: in an isolated page through shared memory and the shared-memory build, elsewhere by copies; the numbers are the same', async () => {
    let source = FIXTURE;
    const made = await formatCapture();
    if (typeof made !== 'string') source = made.file;
    const dir = tempDir();
    // many blocks, code records in several of them: workers must get each other's
    const small = await reblocked(source, 8 << 10, path.join(dir, 'reblocked.pyuw'));
    expect([...readCaptureBytes(fs.readFileSync(small)).rawBlocks()].length).toBeGreaterThan(8);
    const json = JSON.parse((await report(small, 'json')).out.toString()) as JsonDoc;
    // a capture past the size from which the viewer uses workers by default
    const big = path.join(dir, 'big.pyuw');
    await run(process.execPath, ['--import', 'tsx', 'bench/big-capture.ts', small, big, String((WORKERS_FROM_BYTES >> 20) + 1)], { maxBuffer: 64 << 20 });
    const bigJson = JSON.parse((await report(big, 'json')).out.toString()) as JsonDoc;

    const browser = await launchOffline();
    const errors: string[] = [];
    const servers: { close(): Promise<void> }[] = [];
    /** the page at `url`, processed; what it says about where */
    const opened = async (url: string, origin: string): Promise<{ page: Page; isolated: boolean; cores: number; processing: Processing; shown: string }> => {
      const page = await browser.page([origin]);
      page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
      page.on('console', (m) => {
        if (m.type() === 'error' || m.type() === 'warning') errors.push(`console ${m.type()}: ${m.text()}`);
      });
      await page.goto(url);
      await page.waitForSelector('body[data-state="ready"]');
      const seen = await page.evaluate(() => ({
        isolated: crossOriginIsolated,
        cores: navigator.hardwareConcurrency,
        processing: (window as unknown as { __pyunwindViewer: { result: { processing: Processing } } }).__pyunwindViewer.result.processing,
        shown: Array.from(document.querySelectorAll('#recording dt')).find((dt) => dt.textContent === 'processed')!.nextElementSibling!.textContent!,
      }));
      return { page, ...seen };
    };
    try {
      // pyunwind view: cross-origin isolated
      const view = await startViewServer({ file: small });
      servers.push(view);
      const a = await opened(`${view.url}&workers=2`, new URL(view.base).origin);
      expect({ isolated: a.isolated, ...a.processing }).toEqual({ isolated: true, workers: 2, sharedCapture: true, sharedKernel: true });
      expect(a.shown).toMatch(/by 2 workers \(the capture in shared memory, read where it lies; the kernel's shared-memory build\)$/);
      await checkValidation(a.page, json);
      await checkThreads(a.page, json);
      await checkWidest(a.page, json.threads);

      // the same viewer from a server without COOP/COEP: no SharedArrayBuffer, blocks copied, the plain build
      const plain = await plainServer(WEB, small);
      servers.push(plain);
      const b = await opened(`${plain.origin}/index.html?file=${CAPTURE_NAME}&name=reblocked.pyuw&workers=2`, plain.origin);
      expect({ isolated: b.isolated, ...b.processing }).toEqual({ isolated: false, workers: 2, sharedCapture: false, sharedKernel: false });
      expect(b.shown).toMatch(/by 2 workers \(each block copied to its worker; the kernel's plain build\)$/);
      await checkValidation(b.page, json);
      await checkThreads(b.page, json);
      await checkWidest(b.page, json.threads);

      // a large capture with no ?workers=: one worker per core (none on one core), up to 8
      const bigView = await startViewServer({ file: big });
      servers.push(bigView);
      const c = await opened(bigView.url, new URL(bigView.base).origin);
      expect(c.processing).toEqual({ workers: c.cores > 1 ? Math.min(c.cores, 8) : 0, sharedCapture: c.cores > 1, sharedKernel: true });
      await checkValidation(c.page, bigJson);
      await checkThreads(c.page, bigJson);

      expect(browser.blocked).toEqual([]);
      expect(errors).toEqual([]);
    } finally {
      await browser.close();
      for (const s of servers) await s.close();
    }
  });

  it('shows a capture as report --mode, --no-gc and --native do, chosen in the page; downloads follow', async (ctx) => {
    // a wall capture of Python called back from C, with the facts of its version (cpu on every one)
    const py = [...nativeInterpreters()].reverse().find((p) => !p.missing);
    if (!py) {
      return skipTest(ctx, 'viewer', 'views', 'no native interpreter available');
    }
    const file = path.join(tempDir(), 'nativecalls.pyuw');
    await run(process.execPath, [BIN, 'record', '-q', '-o', file, '--', py.command, path.resolve('workloads/nativecalls.py'), '1.5']);
    const header = readCaptureBytes(fs.readFileSync(file)).header;
    const json = async (options: string[]): Promise<JsonDoc> => JSON.parse((await report(file, 'json', options)).out.toString()) as JsonDoc;
    const browser = await launchOffline();
    const errors: string[] = [];
    let server: ViewServer | null = null;
    try {
      const opened = await openViewer(browser, file, errors);
      server = opened.server;
      const { page } = opened;
      await page.waitForSelector('body[data-state="ready"]');
      // what the capture can show: wall and every fact it records
      const modes = await page.$$eval('#view-mode option', (os) => os.map((o) => (o as HTMLOptionElement).value));
      expect(modes).toEqual(['wall', ...['cpu', 'gil', 'exception'].filter((m) => (header.facts as string[]).includes(m))]);
      expect(await page.inputValue('#view-mode')).toBe('wall');
      expect(await page.isChecked('#view-native')).toBe(false);
      expect(await page.isDisabled('#view-gc')).toBe(!(header.facts as string[]).includes('gc'));
      const shown = async (options: string[]): Promise<void> => {
        const doc = await json(options);
        await checkValidation(page, doc);
        await checkThreads(page, doc);
        await checkWidest(page, doc.threads);
        // the json download is report's, with the same options
        expect((await download(page, 'json')).bytes.toString()).toBe((await report(file, 'json', options)).out.toString());
      };
      await shown([]);
      const ready = (): Promise<unknown> => page.waitForSelector('body[data-state="ready"]');

      // <native>: in the page's graph, between the callers and the callbacks C made
      await page.check('#view-native');
      await ready();
      await shown(['--native']);
      const names = await page.evaluate(() => (window as unknown as { __pyunwindViewer: { flame(): { frames: { name: string }[] } | null } }).__pyunwindViewer.flame()!.frames.map((f) => f.name));
      expect(names).toContain('<native>');

      // a mode: fewer samples, as report --mode keeps them
      await page.selectOption('#view-mode', 'cpu');
      await ready();
      await shown(['--mode', 'cpu', '--native']);
      expect(await page.inputValue('#view-mode')).toBe('cpu');
      expect(await page.isChecked('#view-native')).toBe(true);
      await page.screenshot({ path: path.join(testOutputDir(), 'viewer-views.png'), fullPage: true });

      expect(browser.blocked).toEqual([]);
      expect(errors).toEqual([]);
      recordCoverage('viewer', `views (${py.label})`, true);
    } finally {
      await browser.close();
      await server?.close();
    }
  });

  it('opens a file from the file input, and one dropped anywhere on the page', async () => {
    const browser = await launchOffline();
    const errors: string[] = [];
    const server = await startViewServer({ file: FIXTURE });
    try {
      const page = await browser.page([new URL(server.base).origin]);
      page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
      page.on('console', (m) => {
        if (m.type() === 'error' || m.type() === 'warning') errors.push(`console ${m.type()}: ${m.text()}`);
      });
      await page.goto(server.base); // no ?file=: the page waits for one
      await page.waitForSelector('body[data-state="idle"]');
      expect(await page.isVisible('#welcome')).toBe(true);

      const json = JSON.parse((await report(MANY_BLOCKS, 'json')).out.toString()) as JsonDoc;
      await page.setInputFiles('#file', MANY_BLOCKS);
      await page.waitForSelector('body[data-state="ready"]');
      expect(await page.textContent('#title')).toBe('recursion-3.11.pyuw');
      await checkValidation(page, json);
      await checkThreads(page, json);

      // a drop anywhere (here: on the graph's side panel) replaces it
      const fixture = JSON.parse((await report(FIXTURE, 'json')).out.toString()) as JsonDoc;
      const data = await page.evaluateHandle((bytes) => {
        const dt = new DataTransfer();
        dt.items.add(new File([new Uint8Array(bytes)], 'dropped.pyuw'));
        return dt;
      }, [...fs.readFileSync(FIXTURE)]);
      await page.dispatchEvent('#threads-panel', 'dragenter', { dataTransfer: data });
      expect(await page.isVisible('#drop-overlay')).toBe(true);
      await page.dispatchEvent('#threads-panel', 'drop', { dataTransfer: data });
      await page.waitForFunction(() => document.getElementById('title')!.textContent === 'dropped.pyuw' && document.body.dataset.state === 'ready');
      expect(await page.isHidden('#drop-overlay')).toBe(true);
      await checkValidation(page, fixture);
      await checkThreads(page, fixture);
      await checkWidest(page, fixture.threads);
      expect(await page.getAttribute('#downloads a[data-format="json"]', 'download')).toBe('dropped.json');

      expect(browser.blocked).toEqual([]);
      expect(errors).toEqual([]);
    } finally {
      await browser.close();
      await server.close();
    }
  });

  it('shows what the reader found wrong in a damaged capture, and its intact part; refuses a file that is no capture', async () => {
    let source = FIXTURE;
    const made = await formatCapture();
    if (typeof made !== 'string') source = made.file;
    // a capture of one or two blocks would have no intact part left
    if ([...readCaptureBytes(fs.readFileSync(source)).rawBlocks()].length < 3) source = MANY_BLOCKS;
    const dir = tempDir();
    const damaged = path.join(dir, 'damaged.pyuw');
    const bytes = fs.readFileSync(source);
    const mid = bytes.length >> 1;
    for (let i = mid; i < mid + 16; i++) bytes[i] = bytes[i]! ^ 0xa5;
    fs.writeFileSync(damaged, bytes);
    const noise = path.join(dir, 'noise.pyuw');
    fs.writeFileSync(noise, randomBytes(64 << 10));

    const damagedReport = await report(damaged, 'json');
    const json = JSON.parse(damagedReport.out.toString()) as JsonDoc;
    const warnings = warningsOf(damagedReport.err, damaged);
    expect(warnings.length).toBeGreaterThan(0);
    expect(json.summary.attempted).toBeGreaterThan(0); // there is an intact part

    const browser = await launchOffline();
    const errors: string[] = [];
    const servers: ViewServer[] = [];
    try {
      const a = await openViewer(browser, damaged, errors);
      servers.push(a.server);
      await a.page.waitForSelector('body[data-state="ready"]');
      expect(await a.page.isVisible('#error')).toBe(true);
      expect(await a.page.textContent('#error-title')).toContain('damaged.pyuw is damaged');
      expect(await a.page.$$eval('#error-warnings li', (lis) => lis.map((li) => li.textContent))).toEqual(warnings);
      // the intact part, with report's numbers for the same file
      await checkValidation(a.page, json);
      await checkThreads(a.page, json);
      await checkWidest(a.page, json.threads);
      await a.page.screenshot({ path: path.join(testOutputDir(), 'viewer-damaged.png'), fullPage: true });

      // random bytes: nothing to show but why
      let message = '';
      try {
        await report(noise, 'json');
      } catch (e) {
        message = String((e as { stderr: Buffer }).stderr);
      }
      expect(message).toContain('is not a pyunwind capture');
      const b = await openViewer(browser, noise, errors);
      servers.push(b.server);
      await b.page.waitForSelector('body[data-state="error"]');
      expect(await b.page.isVisible('#error')).toBe(true);
      expect(await b.page.isHidden('#result')).toBe(true);
      const shown = (await b.page.textContent('#error-message'))!;
      expect(`pyunwind report: ${shown}\n`).toBe(message.replace(noise, 'noise.pyuw'));

      expect(browser.blocked).toEqual([]);
      expect(errors).toEqual([]);
    } finally {
      await browser.close();
      for (const s of servers) await s.close();
    }
  });
});
