// The two HTML exports, opened offline in headless Chromium: a real capture (threadpool.py
// recorded from native CPython 3.15, test/helpers/format-capture.ts) is exported through the
// command (`report --format flamegraph|heatmap -o FILE`, over the built dist/: run
// `npm run build:ts` first) and through `--format json`, and each page must:
//
// - load from a file: URL with no request blocked (launchOffline aborts anything that is not
//   file:/data:/blob:) and no page error or console error (the page's own CSP forbids any
//   network request: a violation is a console error);
// - show the validation panel with the numbers of the json's `summary`;
// flame graph:
// - list the top functions (all threads: the json threads' functions added up) in the json's
//   order by total, with the same self and total;
// - draw the widest frames under the root with the json's weights (all threads merged, and one thread);
// - highlight frames for a search and give the share of the samples the json says have a match;
// - zoom into a clicked frame (it becomes the full width, its callers stay on top) and reset;
// - switch threads with the selector (function table and graph follow);
// - show a tooltip with the qualname, file and samples on hover;
// heatmap:
// - list first the line with the most self samples (json: innermost frames' lines), with its total;
// - show a standard-library file's source line exactly as the file has it, with its counts;
// - say "source not available here: FILE" when the source cannot be read, and still list the
//   sampled lines with their counts.
// Screenshots: test-output/flamegraph.png and heatmap.png.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import type { Page } from 'playwright-core';
import { afterAll, describe, expect, it } from 'vitest';
import { browserMissing, launchOffline, testOutputDir, type OfflineBrowser } from '../harness/browser.js';
import { exportHeatmap } from '../src/export/heatmap.js';
import { Profile } from '../src/profile/index.js';
import { recordCoverage, skipTest } from './helpers/coverage.js';
import { formatCapture } from './helpers/format-capture.js';
import { expectValidationPanel } from './helpers/validation-panel.js';

const run = promisify(execFile);
const BIN = path.resolve('bin/pyunwind.js');

interface JsonFrame {
  qualname: string;
  filename: string;
  line: number | null;
}
interface JsonFunction {
  qualname: string;
  filename: string;
  self: number;
  total: number;
}
interface JsonThread {
  label: string;
  idleWeight: number;
  frames: JsonFrame[];
  stacks: [number, number, number][];
  functions: JsonFunction[];
}
interface JsonDoc {
  summary: { attempted: number; trusted: number; rejected: number; statuses: Record<string, number>; ticks: number; missed: number; scheduled: number };
  threads: JsonThread[];
}

interface Exported {
  dir: string;
  flamegraph: string;
  heatmap: string;
  json: JsonDoc;
}

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => fs.rmSync(d, { recursive: true, force: true })));

let exported: Promise<Exported | string> | null = null;
/** The capture exported as flamegraph, heatmap and json (once); a string: why the test cannot run. */
function exports(): Promise<Exported | string> {
  exported ??= (async () => {
    const capture = await formatCapture();
    if (typeof capture === 'string') return capture;
    const missing = browserMissing();
    if (missing) return missing;
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pyunwind-export-html-'));
    dirs.push(dir);
    const flamegraph = path.join(dir, 'threadpool-flamegraph.html');
    const heatmap = path.join(dir, 'threadpool-heatmap.html');
    await run(process.execPath, [BIN, 'report', '-q', capture.file, '--format', 'flamegraph', '-o', flamegraph]);
    await run(process.execPath, [BIN, 'report', '-q', capture.file, '--format', 'heatmap', '-o', heatmap]);
    const { stdout } = await run(process.execPath, [BIN, 'report', '-q', capture.file, '--format', 'json'], { maxBuffer: 256 << 20 });
    return { dir, flamegraph, heatmap, json: JSON.parse(stdout) as JsonDoc };
  })();
  return exported;
}

const cmp = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);
const frameKey = (f: { qualname: string; filename: string; line: number | null }): string => `${f.qualname}\n${f.filename}\n${f.line ?? ''}`;

/** Subtree weight of every stack (json stacks list parents first). */
function subtree(t: JsonThread): number[] {
  const sub = t.stacks.map((s) => s[2]);
  for (let i = sub.length - 1; i >= 0; i--) {
    const p = t.stacks[i]![0];
    if (p >= 0) sub[p]! += sub[i]!;
  }
  return sub;
}

/** The frames under the root (outermost frames) by weight, over the given threads merged. */
function rootFrames(threads: JsonThread[]): [string, number][] {
  const w = new Map<string, number>();
  for (const t of threads) {
    const sub = subtree(t);
    t.stacks.forEach(([p, f], i) => {
      if (p < 0 && sub[i]! > 0) w.set(frameKey(t.frames[f]!), (w.get(frameKey(t.frames[f]!)) ?? 0) + sub[i]!);
    });
  }
  return [...w.entries()].sort((a, b) => b[1] - a[1] || cmp(a[0], b[0]));
}

/** Functions by total (then self, qualname, filename), added up over threads. */
function functionsOf(threads: JsonThread[]): [string, string, number, number][] {
  const m = new Map<string, [string, string, number, number]>();
  for (const t of threads) {
    for (const f of t.functions) {
      const k = `${f.qualname}\n${f.filename}`;
      const at = m.get(k) ?? [f.qualname, f.filename, 0, 0];
      at[2] += f.self;
      at[3] += f.total;
      m.set(k, at);
    }
  }
  return [...m.values()].sort((a, b) => b[3] - a[3] || b[2] - a[2] || cmp(a[0], b[0]) || cmp(a[1], b[1]));
}

/** Per stack with weight: the frames on its path (root first). */
function samplePaths(t: JsonThread): { w: number; path: JsonFrame[] }[] {
  const out: { w: number; path: JsonFrame[] }[] = [];
  t.stacks.forEach(([, , w], s) => {
    if (!(w > 0)) return;
    const path: JsonFrame[] = [];
    for (let x = s; x >= 0; x = t.stacks[x]![0]) path.push(t.frames[t.stacks[x]![1]]!);
    out.push({ w, path: path.reverse() });
  });
  return out;
}

async function openPage(browser: OfflineBrowser, file: string, errors: string[]): Promise<Page> {
  const page = await browser.page();
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(`console: ${m.text()}`);
  });
  await page.goto(pathToFileURL(file).href);
  await page.waitForSelector('body[data-ready="1"]');
  return page;
}

/** The validation panel must say what the json's summary says. */
function checkValidation(page: Page, json: JsonDoc): Promise<void> {
  return expectValidationPanel(page, json);
}

async function tableRows(page: Page): Promise<[string, string, number, number][]> {
  return page.$$eval('#top-functions tbody tr', (trs) =>
    trs.map((tr) => [tr.getAttribute('data-qualname')!, tr.getAttribute('data-filename')!, Number(tr.getAttribute('data-self')), Number(tr.getAttribute('data-total'))] as [string, string, number, number]),
  );
}

/** The frames drawn at depth 1 (under the root), heaviest first. */
async function drawnRootFrames(page: Page): Promise<[string, number][]> {
  const frames = await page.$$eval('#flame .frame[data-depth="1"]', (els) =>
    els.map((e) => [`${e.getAttribute('data-name')}\n${e.getAttribute('data-file')}\n${e.getAttribute('data-line')}`, Number(e.getAttribute('data-samples'))] as [string, number]),
  );
  return frames.sort((a, b) => b[1] - a[1] || cmp(a[0], b[0]));
}

describe('HTML exports in Chromium, offline', () => {
  it('flamegraph: validation, top functions, widest frames, search, zoom, threads, tooltip', async (ctx) => {
    const ex = await exports();
    if (typeof ex === 'string') {
      return skipTest(ctx, 'formats', 'flamegraph', ex);
    }
    const { json } = ex;
    const html = fs.readFileSync(ex.flamegraph, 'utf8');
    expect(html).not.toMatch(/<(script|link|img)[^>]+(src|href)=/i); // everything inline
    const browser = await launchOffline();
    const errors: string[] = [];
    try {
      const page = await openPage(browser, ex.flamegraph, errors);
      await checkValidation(page, json);

      // "all threads" first: the functions of every thread added up, in the json's order
      expect(await page.inputValue('#thread')).toBe('0');
      const all = functionsOf(json.threads);
      expect((await tableRows(page)).slice(0, 15)).toEqual(all.slice(0, 15));
      // under the root: the outermost frames of every thread merged, by weight
      // (frames narrower than a pixel are not drawn: the drawn ones are the heaviest, and every
      // frame of 0.5 % or more is drawn)
      const stacked = json.threads.reduce((n, t) => n + t.stacks.reduce((m, s) => m + s[2], 0), 0);
      const checkRoots = (drawn: [string, number][], roots: [string, number][], weight: number): void => {
        expect(drawn.length).toBeGreaterThan(0);
        expect(drawn.length).toBeGreaterThanOrEqual(roots.filter(([, w]) => w >= 0.005 * weight).length);
        expect(drawn).toEqual(roots.slice(0, drawn.length));
      };
      checkRoots(await drawnRootFrames(page), rootFrames(json.threads), stacked);
      expect(Number(await page.getAttribute('#flame .frame.root', 'data-samples'))).toBe(stacked);

      // search: a function of the workload, highlighted, with the share of samples that have it
      const query = 'regex_job_part';
      let matched = 0;
      for (const t of json.threads) for (const s of samplePaths(t)) if (s.path.some((f) => f.qualname.toLowerCase().includes(query) || f.filename.toLowerCase().includes(query))) matched += s.w;
      expect(matched).toBeGreaterThan(0);
      const base = json.threads.reduce((n, t) => n + t.stacks.reduce((m, s) => m + s[2], 0) + t.idleWeight, 0);
      await page.fill('#search', query);
      await page.waitForSelector('#search-result:not([data-count="0"])');
      expect(await page.locator('#flame .frame.match').count()).toBeGreaterThan(0);
      expect(await page.$$eval('#flame .frame.match', (els) => els.every((e) => e.getAttribute('data-name')!.includes('regex_job_part')))).toBe(true);
      expect(Number(await page.getAttribute('#search-result', 'data-samples'))).toBe(matched);
      expect(await page.getAttribute('#search-result', 'data-percent')).toBe(((100 * matched) / base).toFixed(1));
      expect(await page.textContent('#search-result')).toContain(`${((100 * matched) / base).toFixed(1)}%`);
      await page.fill('#search', '');
      await page.waitForSelector('#search-result[data-count="0"]', { state: 'attached' });
      expect(await page.locator('#flame .frame.match').count()).toBe(0);

      // hover: the tooltip names the frame, its file and line, and its samples
      // (the widest frame at depth 2: a frame a few samples wide may be drawn under its neighbour)
      const widest = await page.$$eval('#flame .frame[data-depth="2"]', (els) =>
        els.reduce((a, e) => (Number(e.getAttribute('data-samples')) > Number(a.getAttribute('data-samples')) ? e : a)).getAttribute('data-id'),
      );
      const hovered = page.locator(`#flame .frame[data-id="${widest}"]`);
      const hName = (await hovered.getAttribute('data-name'))!;
      const hFile = (await hovered.getAttribute('data-file'))!;
      const hSamples = Number(await hovered.getAttribute('data-samples'));
      await hovered.hover();
      await page.waitForSelector('#tooltip', { state: 'visible' });
      const tip = (await page.textContent('#tooltip'))!;
      expect(tip).toContain(hName);
      expect(tip).toContain(hFile);
      expect(tip).toContain(hSamples.toLocaleString('en-US'));
      await page.screenshot({ path: path.join(testOutputDir(), 'flamegraph.png') });

      // zoom: click the widest frame at depth 3; it becomes the whole width, its callers stay
      const target = await page.$$eval('#flame .frame[data-depth="3"]', (els) => {
        const e = els.sort((a, b) => Number(b.getAttribute('data-samples')) - Number(a.getAttribute('data-samples')))[0]!;
        return { id: e.getAttribute('data-id')!, name: e.getAttribute('data-name')!, width: (e as HTMLElement).style.width };
      });
      expect(target.width).not.toBe('100%');
      await page.click(`#flame .frame[data-id="${target.id}"]`, { position: { x: 3, y: 5 } });
      await page.waitForSelector(`#flame[data-zoom="${target.id}"]`);
      expect(await page.$eval(`#flame .frame[data-id="${target.id}"]`, (e) => (e as HTMLElement).style.width)).toBe('100%');
      expect(await page.locator('#flame .frame.ancestor').count()).toBe(3); // root and two callers
      expect(await page.textContent('#zoom-info')).toContain(`Zoomed into ${target.name}`);
      expect(await page.isEnabled('#reset')).toBe(true);
      const zoomed = await page.evaluate(() => (window as unknown as { __pyunwind: { frames: { id: number; width: number }[] } }).__pyunwind.frames);
      expect(zoomed.find((f) => String(f.id) === target.id)!.width).toBe(1);
      await page.click('#reset');
      await page.waitForSelector('#flame[data-zoom="0"]');
      expect(await page.locator('#flame .frame.ancestor').count()).toBe(0);

      // the thread selector: the thread with the most samples with a stack
      const weights = json.threads.map((t) => t.stacks.reduce((m, s) => m + s[2], 0));
      const ti = weights.indexOf(Math.max(...weights));
      const thread = json.threads[ti]!;
      expect((await page.textContent(`#thread option[value="${ti + 1}"]`))!.startsWith(thread.label)).toBe(true);
      await page.selectOption('#thread', String(ti + 1));
      await page.waitForFunction((label) => document.querySelector('#flame .frame.root')?.getAttribute('data-name') === label, thread.label);
      const rows = await tableRows(page);
      const expectedRows = thread.functions.map((f) => [f.qualname, f.filename, f.self, f.total]);
      expect(rows.slice(0, 15)).toEqual(expectedRows.slice(0, 15));
      expect(Number(await page.getAttribute('#flame .frame.root', 'data-samples'))).toBe(weights[ti]);
      checkRoots(await drawnRootFrames(page), rootFrames([thread]), weights[ti]!);

      expect(browser.blocked).toEqual([]);
      expect(errors).toEqual([]);
      console.log(
        `flamegraph: ${json.threads.length} threads; top function ${all[0]![0]} total ${all[0]![3]}; ` +
          `search ${query}: ${matched} of ${base} samples; zoomed into ${target.name}; thread ${thread.label}: ${rows[0]![0]}`,
      );
      recordCoverage('formats', 'flamegraph', true);
    } finally {
      await browser.close();
    }
  });

  it('heatmap: validation, the hottest line, a stdlib source line, a missing source', async (ctx) => {
    const ex = await exports();
    if (typeof ex === 'string') {
      return skipTest(ctx, 'formats', 'heatmap', ex);
    }
    const { json } = ex;
    // from the json: per (file, line) the self weight (innermost frame) and the total (once per sample)
    const self = new Map<string, number>();
    const total = new Map<string, number>();
    for (const t of json.threads) {
      for (const s of samplePaths(t)) {
        const inner = s.path[s.path.length - 1]!;
        if (inner.line !== null) self.set(`${inner.filename}:${inner.line}`, (self.get(`${inner.filename}:${inner.line}`) ?? 0) + s.w);
        for (const k of new Set(s.path.filter((f) => f.line !== null).map((f) => `${f.filename}:${f.line}`))) total.set(k, (total.get(k) ?? 0) + s.w);
      }
    }
    const maxSelf = Math.max(...self.values());

    const browser = await launchOffline();
    const errors: string[] = [];
    try {
      const page = await openPage(browser, ex.heatmap, errors);
      await checkValidation(page, json);

      // the hottest line: the most self samples, with its total
      const hot = await page.$eval('#hot-lines tbody tr', (tr) => ({
        file: tr.getAttribute('data-file')!,
        line: Number(tr.getAttribute('data-line')),
        self: Number(tr.getAttribute('data-self')),
        total: Number(tr.getAttribute('data-total')),
      }));
      expect(hot.self).toBe(maxSelf);
      expect(self.get(`${hot.file}:${hot.line}`)).toBe(maxSelf);
      expect(hot.total).toBe(total.get(`${hot.file}:${hot.line}`));
      // it is the line shown first, in its file
      expect(await page.textContent('#file-name')).toBe(hot.file);
      expect(await page.getAttribute(`#source tbody tr[data-line="${hot.line}"]`, 'data-self')).toBe(String(maxSelf));

      // a standard-library file: its hottest line by self, with the file's own text
      const std = [...self.entries()]
        .filter(([k]) => /\/lib\/python3\.\d+\//.test(k) && fs.existsSync(k.slice(0, k.lastIndexOf(':'))))
        .sort((a, b) => b[1] - a[1] || cmp(a[0], b[0]))
        .find(([k]) => !k.startsWith(`${hot.file}:`));
      expect(std, 'a standard-library line with self samples').toBeDefined();
      const stdFile = std![0].slice(0, std![0].lastIndexOf(':'));
      const stdLine = Number(std![0].slice(std![0].lastIndexOf(':') + 1));
      const fileRow = (await page.$$eval('#files tbody tr', (trs) => trs.map((tr) => tr.getAttribute('data-file')))).indexOf(stdFile);
      expect(fileRow).toBeGreaterThanOrEqual(0);
      await page.locator('#files tbody tr').nth(fileRow).click();
      await page.waitForFunction((f) => document.getElementById('file-name')!.textContent === f, stdFile);
      const realText = fs.readFileSync(stdFile, 'utf8').split(/\r\n|\r|\n/)[stdLine - 1]!;
      expect(realText.trim().length).toBeGreaterThan(0);
      const row = page.locator(`#source tbody tr[data-line="${stdLine}"]`);
      expect(await row.locator('td.code').textContent()).toBe(realText);
      expect(Number(await row.getAttribute('data-self'))).toBe(std![1]);
      expect(Number(await row.getAttribute('data-total'))).toBe(total.get(std![0]));
      expect(await page.isHidden('#source-note')).toBe(true);

      // back to the hottest line for the screenshot
      await page.locator('#hot-lines tbody tr').first().click();
      await page.waitForFunction((f) => document.getElementById('file-name')!.textContent === f, hot.file);
      await page.screenshot({ path: path.join(testOutputDir(), 'heatmap.png') });

      // without sources: the page says so, and still lists the sampled lines with their counts
      const bare = path.join(ex.dir, 'heatmap-no-source.html');
      const meta = { title: 'no sources', pythonVersion: null, rateHz: 0, startTime: 0, recorder: 'test', copy: null, mode: 'wall' as const };
      fs.writeFileSync(bare, exportHeatmap(Profile.fromJSON(json), meta, () => null));
      const page2 = await openPage(browser, bare, errors);
      const first = (await page2.textContent('#file-name'))!;
      expect(first).toBe(hot.file);
      expect(await page2.textContent('#source-note')).toBe(`source not available here: ${hot.file}`);
      const listed = await page2.$$eval('#source tbody tr[data-line]', (trs) => trs.map((tr) => [Number(tr.getAttribute('data-line')), Number(tr.getAttribute('data-self')), Number(tr.getAttribute('data-total'))]));
      const expectedLines = [...total.entries()]
        .filter(([k]) => k.slice(0, k.lastIndexOf(':')) === hot.file)
        .map(([k, t]) => [Number(k.slice(k.lastIndexOf(':') + 1)), self.get(k) ?? 0, t])
        .sort((a, b) => a[0]! - b[0]!);
      expect(listed).toEqual(expectedLines);

      expect(browser.blocked).toEqual([]);
      expect(errors).toEqual([]);
      console.log(`heatmap: hottest ${hot.file}:${hot.line} self ${hot.self} total ${hot.total}; ${stdFile}:${stdLine} "${realText.trim()}"`);
      recordCoverage('formats', 'heatmap', true);
    } finally {
      await browser.close();
    }
  });
});
