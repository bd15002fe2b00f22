// speedscope's own app reads our speedscope export: a real capture (threadpool.py recorded from
// native CPython 3.15, test/helpers/format-capture.ts) is exported with `report --format
// speedscope`, and the app that ships in the `speedscope` npm package
// (node_modules/speedscope/dist/release/index.html, a file: URL) is opened in headless
// Chromium with no network. The app must show the file's name, open the heaviest thread (the
// file's activeProfileIndex) and list in its Sandwich table the same functions, with the same
// self and total times, as `report --format json` says.
//
// How the app loads a profile (read in dist/release/speedscope-*.js, 1.25.0):
// - its landing page has a file input (`input[type=file]`, the "Browse" button): this test
//   gives it the file with setInputFiles, as a person picking it would;
// - `#localProfilePath=PATH` (what its own CLI, `speedscope FILE`, opens): PATH is not the
//   profile but a script that calls `speedscope.loadFileFromBase64(name, base64)`, which the
//   app adds as `<script src="file:///PATH">`; checked here too, with such a script;
// - `#profileURL=URL` fetches the profile, but only when the app itself is served over http(s):
//   from a file: URL it refuses (an alert), so it is no way in here;
// - drag and drop, or pasting the file's text.
// `#view=sandwich` opens the Sandwich view (a DOM table: Total, Self, Symbol Name, the cell's
// title being the file); the flame views are WebGL canvases, looked at in the screenshots.
//
// Network: the app requests only files next to index.html (its CSS, JS, the Source Code Pro
// font and a favicon, all file: URLs); nothing may be blocked.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { browserMissing, launchOffline, testOutputDir } from '../harness/browser.js';
import { recordCoverage, skipTest } from './helpers/coverage.js';
import { formatCapture } from './helpers/format-capture.js';

const run = promisify(execFile);
const BIN = path.resolve('bin/pyunwind.js');
const APP = path.resolve('node_modules/speedscope/dist/release/index.html');

interface JsonThread {
  label: string;
  frames: { qualname: string; filename: string; line: number | null }[];
  stacks: [number, number, number][];
  functions: { qualname: string; filename: string; self: number; total: number }[];
}

interface Row {
  total: string;
  self: string;
  name: string;
  file: string;
}

/** A time as speedscope prints it (formatUnsigned of its TimeFormatter), in seconds, and how far it was rounded. */
function parseTime(text: string): { s: number; tol: number } {
  const m = /^([\d.]+)(s|ms|µs|ns)$/.exec(text);
  if (m) {
    const scale = { s: 1, ms: 1e-3, µs: 1e-6, ns: 1e-9 }[m[2] as 's' | 'ms' | 'µs' | 'ns'];
    return { s: Number(m[1]) * scale, tol: 0.005 * scale + 1e-12 };
  }
  const mm = /^(\d+):(\d\d)$/.exec(text);
  if (mm) return { s: Number(mm[1]) * 60 + Number(mm[2]), tol: 1 };
  throw new Error(`not a speedscope time: ${JSON.stringify(text)}`);
}

/** The time part of a Sandwich cell, "210.00ms (86%)". */
function cellTime(cell: string): { s: number; tol: number } {
  return parseTime(cell.replace(/\s*\(.*\)$/, '').trim());
}

/** The rows the Sandwich table has rendered (it renders those in view). */
async function sandwichRows(page: Page): Promise<Row[]> {
  return page.$$eval('tr', (trs) =>
    trs
      .map((tr) => Array.from(tr.querySelectorAll('td')))
      // (the profile picker's rows have three cells too, the Sandwich's name cell has the file as title)
      .filter((tds) => tds.length === 3 && tds[2]!.hasAttribute('title'))
      .map(([total, self, name]) => ({ total: total!.innerText.trim(), self: self!.innerText.trim(), name: name!.innerText.trim(), file: name!.title })),
  );
}

/** Per frame (qualname, filename, line): the weight of the samples with it on the stack, once per sample. */
function frameTotals(t: JsonThread): Map<string, number> {
  const totals = new Map<string, number>();
  t.stacks.forEach(([, , w], s) => {
    if (w <= 0) return;
    const seen = new Set<number>();
    for (let x = s; x >= 0; x = t.stacks[x]![0]) seen.add(t.stacks[x]![1]);
    for (const f of seen) {
      const fr = t.frames[f]!;
      const key = `${fr.qualname}\n${fr.filename}\n${fr.line}`;
      totals.set(key, (totals.get(key) ?? 0) + w);
    }
  });
  return totals;
}

describe('speedscope app (its npm package, offline) loads the speedscope export', () => {
  it('shows the profile name, the heaviest thread and the same functions as the json report', async (ctx) => {
    const capture = await formatCapture();
    if (typeof capture === 'string') {
      return skipTest(ctx, 'formats', 'speedscope-app', capture);
    }
    const noBrowser = browserMissing();
    if (noBrowser) {
      return skipTest(ctx, 'formats', 'speedscope-app', noBrowser);
    }
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pyunwind-speedscope-app-'));
    const file = path.join(dir, 'threadpool.speedscope.json');
    await run(process.execPath, [BIN, 'report', '-q', capture.file, '--format', 'speedscope', '-o', file]);
    const { stdout } = await run(process.execPath, [BIN, 'report', '-q', capture.file, '--format', 'json'], { maxBuffer: 64 << 20 });
    const json = JSON.parse(stdout) as { threads: JsonThread[] };
    const doc = JSON.parse(fs.readFileSync(file, 'utf8')) as { name: string; activeProfileIndex: number; profiles: { name: string; unit: string; endValue: number }[] };
    const active = doc.profiles[doc.activeProfileIndex]!;
    expect(active.unit).toBe('microseconds');
    const thread = json.threads.find((t) => t.label === active.name)!;
    expect(thread, `no json thread named ${active.name}`).toBeDefined();
    // one sample of weight 1 is one sampling interval: 1 ms at 1 kHz
    const SAMPLE_S = 1e-3;

    const browser = await launchOffline();
    try {
      const page = await browser.page();
      const errors: string[] = [];
      const requests: string[] = [];
      page.on('pageerror', (e) => errors.push(e.message));
      page.on('console', (m) => {
        if (m.type() === 'error') errors.push(m.text());
      });
      page.on('request', (r) => requests.push(r.url()));
      // a tall window: the table renders only the rows in view, and every row with self time must be
      await page.setViewportSize({ width: 1400, height: 4000 });
      await page.goto(`${pathToFileURL(APP).href}#view=sandwich`);
      await page.setInputFiles('input[type=file]', file);
      await page.waitForFunction((name) => document.title === `${name} - speedscope` && document.querySelectorAll('td[title]').length > 0, doc.name);

      // the toolbar names the profile shown: the heaviest thread, "(k/n)"
      const toolbar = await page.evaluate(() => document.body.innerText);
      expect(toolbar).toContain(`${active.name} (${doc.activeProfileIndex + 1}/${doc.profiles.length})`);

      // Self (the default order: self, descending), by function: exactly the json's self weights
      const bySelf = await sandwichRows(page);
      const selfs = bySelf.map((r) => cellTime(r.self).s);
      for (let i = 1; i < selfs.length; i++) expect(selfs[i]!).toBeLessThanOrEqual(selfs[i - 1]!);
      expect(selfs[selfs.length - 1], 'every row with self time is rendered').toBe(0);
      const selfSum = new Map<string, { s: number; tol: number }>();
      for (const r of bySelf) {
        const t = cellTime(r.self);
        if (t.s === 0) continue;
        const k = `${r.name}\n${r.file}`;
        const at = selfSum.get(k) ?? { s: 0, tol: 0 };
        selfSum.set(k, { s: at.s + t.s, tol: at.tol + t.tol });
      }
      const withSelf = thread.functions.filter((f) => f.self > 0);
      expect([...selfSum.keys()].sort()).toEqual(withSelf.map((f) => `${f.qualname}\n${f.filename}`).sort());
      for (const f of withSelf) {
        const got = selfSum.get(`${f.qualname}\n${f.filename}`)!;
        expect(Math.abs(got.s - f.self * SAMPLE_S), `${f.qualname} self`).toBeLessThanOrEqual(got.tol);
      }
      // the top function by self, summed over its rows (speedscope keeps a row per line, so the
      // first row can be another function's busiest line), is the json's top one, or one whose
      // self the app's rounding cannot tell from it
      const topSelf = [...thread.functions].sort((a, b) => b.self - a.self)[0]!;
      const [appTop, appTopTime] = [...selfSum.entries()].sort((a, b) => b[1].s - a[1].s)[0]!;
      const inJson = withSelf.find((f) => `${f.qualname}\n${f.filename}` === appTop)!;
      expect((topSelf.self - inJson.self) * SAMPLE_S, `${appTop} against ${topSelf.qualname}`).toBeLessThanOrEqual(appTopTime.tol + selfSum.get(`${topSelf.qualname}\n${topSelf.filename}`)!.tol);

      // Total, by frame (speedscope keeps one frame per line): the top rows are the json's top frames
      // (exactly "Total": the hidden profile picker has a "Total Weight" header)
      await page.locator('th').filter({ hasText: /^Total$/ }).click();
      const sortedByTotal = async (): Promise<boolean> => {
        const t = (await sandwichRows(page)).map((r) => cellTime(r.total).s);
        return t.length > 1 && t.every((x, i) => i === 0 || x <= t[i - 1]!);
      };
      await expect.poll(sortedByTotal, { timeout: 10_000 }).toBe(true);
      const byTotal = (await sandwichRows(page)).slice(0, 10);
      const totals = frameTotals(thread);
      const expected = [...totals.entries()].sort((a, b) => b[1] - a[1]);
      for (const r of byTotal) {
        const t = cellTime(r.total);
        const match = expected.some(([k, w]) => k.startsWith(`${r.name}\n${r.file}\n`) && Math.abs(w * SAMPLE_S - t.s) <= t.tol);
        expect(match, `${r.name} (${r.file}) total ${r.total} is a json frame's total`).toBe(true);
      }
      // the json's heaviest frames (a caller and its only callee tie) are the first rows (the
      // times shown are rounded: rows within that rounding of the heaviest may come first)
      const topW = expected[0]![1];
      const topRows = byTotal.filter((r) => Math.abs(cellTime(r.total).s - topW * SAMPLE_S) <= cellTime(r.total).tol).map((r) => `${r.name}\n${r.file}`);
      expect(topRows.length).toBeGreaterThan(0);
      for (const [k, w] of expected) if (w === topW) expect(topRows, k).toContain(k.slice(0, k.lastIndexOf('\n')));
      // and the json's heaviest function (all its lines together) is among the first rows
      expect(byTotal.map((r) => `${r.name}\n${r.file}`)).toContain(`${thread.functions[0]!.qualname}\n${thread.functions[0]!.filename}`);

      console.log(
        `speedscope ${doc.name}: ${doc.profiles.length} threads, shown ${active.name}; ` +
          `top self ${bySelf[0]!.name} ${bySelf[0]!.self}, top total ${byTotal[0]!.name} ${byTotal[0]!.total}; ` +
          `requests: ${requests.map((u) => path.basename(new URL(u).pathname)).join(', ')}`,
      );
      await page.setViewportSize({ width: 1400, height: 900 });
      await page.screenshot({ path: path.join(testOutputDir(), 'speedscope.png') });
      // the flame graph view (WebGL), for a person to look at
      await page.keyboard.press('2');
      await page.waitForFunction(() => document.querySelectorAll('td[title]').length === 0);
      await page.screenshot({ path: path.join(testOutputDir(), 'speedscope-left-heavy.png') });

      // the way speedscope's own CLI opens a file: a script that hands it over in base64
      const loader = path.join(dir, 'load-profile.js');
      fs.writeFileSync(loader, `speedscope.loadFileFromBase64(${JSON.stringify(path.basename(file))}, ${JSON.stringify(fs.readFileSync(file).toString('base64'))})`);
      const page2 = await browser.page();
      page2.on('pageerror', (e) => errors.push(e.message));
      await page2.goto(`${pathToFileURL(APP).href}#localProfilePath=${loader}&view=sandwich`);
      await page2.waitForFunction((name) => document.title === `${name} - speedscope` && document.querySelectorAll('td[title]').length > 0, doc.name);
      // (the same profile: the same rows, in the same order, as the page that opened the file —
      // as far as its window renders them)
      const again = await sandwichRows(page2);
      expect(again.length).toBeGreaterThan(0);
      expect(again.map((r) => [r.name, r.file, r.self])).toEqual(bySelf.slice(0, again.length).map((r) => [r.name, r.file, r.self]));

      // only the app's own files were asked for
      expect(requests.every((u) => u.startsWith('file:'))).toBe(true);
      expect(browser.blocked).toEqual([]);
      expect(errors).toEqual([]);
      recordCoverage('formats', 'speedscope-app', true);
    } finally {
      await browser.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
