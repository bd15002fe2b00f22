// The in-browser profiler (web/profile.html, built into dist/web by npm run build:web; served by
// startViewServer with no capture, as `pyunwind view --profile` does), in offline Chromium
// (harness/browser.ts: anything but the server is aborted): the page's prefilled program,
// workloads/hotcold.py (≈70 % of its time in hot(), ≈30 % in cold()), runs for 3 s in Pyodide
// 3.15 in a Web Worker, sampled at 1 kHz through the interrupt buffer and a signal handler
// (profilePyodide, src/record/pyodide/browser.ts). The page must: draw the profile while the
// program runs (at least one partial profile before the final one); end with >= 200 trusted
// samples, every one trusted, only the program's own stacks, hot() first among functions by
// self time; and give a capture to download that `pyunwind report --format json` reads to the
// same numbers. And Stop: a program that would run 30 s is interrupted (SIGINT through the
// interrupt buffer); the page ends with the profile so far, the capture closed. Screenshot:
// test-output/pyodide-browser.png.

import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { browserMissing, launchOffline, testOutputDir } from '../harness/browser.js';
import { PROFILE_PAGE, defaultWebDir, startViewServer, type ViewServer } from '../src/cli/view.js';
import { recordCoverage, cannotRun } from './helpers/coverage.js';

const run = promisify(execFile);
const BIN = path.resolve('bin/pyunwind.js');
const WEB = defaultWebDir();
const RUN_TIMEOUT_MS = 240_000;

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => fs.rmSync(d, { recursive: true, force: true })));

/** What the page exposes (web/profile.ts: window.__pyunwindProfile), as the test reads it. */
interface PageProfile {
  result: {
    stats: { attempted: number; trusted: number; rejected: number; statuses: Record<string, number> };
    header: { pythonVersion: string; rateHz: number; copy: string | null; target: string };
    flame: { views: { id: string; functions: [string, string, number, number][] }[] };
    closedCleanly: boolean;
  } | null;
  done: { outcome: { kind: string }; totals: { ticks: number; samples: number; failedTicks: number; firstFailure: string | null; missed: number }; scheduled: number; captureBytes: number } | null;
  updates: { samples: number; trusted: number; blocks: number; final: boolean }[];
}

interface JsonDoc {
  summary: { attempted: number; trusted: number; rejected: number; statuses: Record<string, number> };
  threads: { label: string; functions: { qualname: string; filename: string; self: number; total: number }[]; frames: { qualname: string }[]; stacks: [number, number, number][] }[];
}

/** Functions of all threads by self weight (ties: by name), as [qualname, self]. */
function bySelf(rows: [string, number][]): [string, number][] {
  const merged = new Map<string, number>();
  for (const [q, self] of rows) merged.set(q, (merged.get(q) ?? 0) + self);
  return [...merged.entries()].filter(([, s]) => s > 0).sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
}

describe('the in-browser profiler (Pyodide 3.15 in a Web Worker), in Chromium, offline', () => {
  const missing = browserMissing();
  if (missing) {
    cannotRun('pyodide-browser', 'chromium', missing);
    return;
  }

  it(
    'profiles the prefilled hotcold.py at 1 kHz: the graph fills in while it runs; >= 200 trusted samples, hot() first by self; the capture downloads and report reads it alike',
    async () => {
      if (!fs.existsSync(path.join(WEB, PROFILE_PAGE)) || !fs.existsSync(path.join(WEB, 'pyodide', 'pyodide.asm.wasm'))) {
        throw new Error(`the in-browser profiler is not built (${WEB} has no ${PROFILE_PAGE} or pyodide/): run npm run build first`);
      }
      const browser = await launchOffline();
      const errors: string[] = [];
      let server: ViewServer | null = null;
      try {
        server = await startViewServer({});
        expect(server.url).toBe(`${server.base}${PROFILE_PAGE}`);
        const page = await browser.page([new URL(server.base).origin]);
        page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
        page.on('console', (m) => {
          if (m.type() === 'error' || m.type() === 'warning') errors.push(`console ${m.type()}: ${m.text()}`);
        });
        await page.goto(server.url);
        await page.waitForSelector('#status[data-state="idle"]');
        expect(await page.evaluate(() => crossOriginIsolated)).toBe(true);
        // the prefilled program is hotcold.py, run for 3 s, at 1 kHz
        expect(await page.inputValue('#python')).toBe(fs.readFileSync('workloads/hotcold.py', 'utf8'));
        expect(await page.inputValue('#args')).toBe('3');
        expect(await page.inputValue('#rate')).toBe('1000');
        expect(await page.isHidden('#download-capture')).toBe(true);

        await page.click('#run');
        await page.waitForFunction(() => ['done', 'error'].includes(document.getElementById('status')!.dataset.state ?? ''), undefined, { timeout: RUN_TIMEOUT_MS, polling: 200 });
        const status = (await page.textContent('#status'))!;
        const got = await page.evaluate(() => {
          const p = (window as unknown as { __pyunwindProfile: PageProfile }).__pyunwindProfile;
          return { result: p.result, done: p.done, updates: p.updates };
        });
        expect(status, `${status}: ${await page.textContent('#error')}`).toBe('done: the program finished');
        const { result, done, updates } = got;
        expect(result).not.toBeNull();
        expect(done).not.toBeNull();
        const r = result!;
        const d = done!;

        // the header: Pyodide 3.15, signal sampling at 1 kHz
        expect(r.header.pythonVersion.startsWith('3.15.')).toBe(true);
        expect(r.header.copy).toBe('signal');
        expect(r.header.rateHz).toBe(1000);
        expect(r.header.target).toMatch(/pyodide/i);
        expect(r.closedCleanly).toBe(true);
        // the sampler: no failed copy; most ticks taken
        expect(d.totals.failedTicks, d.totals.firstFailure ?? '').toBe(0);
        expect(d.totals.samples).toBe(r.stats.attempted);
        expect(d.scheduled).toBeGreaterThan(0);

        // the graph filled in while the program ran: partial profiles came before the final one
        const partial = updates.filter((u) => !u.final && u.trusted > 0);
        expect(partial.length, JSON.stringify(updates)).toBeGreaterThan(0);
        expect(updates[updates.length - 1]!.final).toBe(true);

        // the numbers: >= 200 trusted, none rejected, hot() first by self
        expect(r.stats.trusted).toBeGreaterThanOrEqual(200);
        expect(r.stats.rejected).toBe(0);
        expect(Number(await page.getAttribute('#samples', 'data-trusted'))).toBe(r.stats.trusted);
        expect(Number(await page.getAttribute('#samples', 'data-attempted'))).toBe(r.stats.attempted);
        const all = r.flame.views[0]!.functions;
        const pageSelf = bySelf(all.map(([q, , self]) => [q, self]));
        expect(pageSelf[0]?.[0], JSON.stringify(pageSelf)).toBe('hot');
        expect(pageSelf.map(([q]) => q).sort()).toEqual(expect.arrayContaining(['cold', 'hot']));
        // only the program's own functions (its documented stacks: <module>, main, hot, cold)
        for (const [q] of pageSelf) expect(['<module>', 'main', 'hot', 'cold']).toContain(q);

        // the flame graph in its frame: the renderer's page, with the program's functions
        await page.frameLocator('#flame-frame').locator('#top-functions tbody tr').first().waitFor();
        const drawn = await page.evaluate(() => {
          const f = (window as unknown as { __pyunwindProfile: { flame(): { frames: { name: string; depth: number; samples: number }[] } | null } }).__pyunwindProfile.flame();
          return f ? f.frames.map((x) => x.name) : [];
        });
        expect(drawn).toContain('hot');
        expect(drawn).toContain('cold');
        await page.screenshot({ path: path.join(testOutputDir(), 'pyodide-browser.png'), fullPage: true });

        // the capture: downloaded, and read by `pyunwind report` to the same numbers
        expect(await page.isVisible('#download-capture')).toBe(true);
        const [download] = await Promise.all([page.waitForEvent('download'), page.click('#download-capture')]);
        expect(download.suggestedFilename()).toBe('hotcold.pyuw');
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pyunwind-pyodide-browser-'));
        dirs.push(dir);
        const file = path.join(dir, 'hotcold.pyuw');
        await download.saveAs(file);
        expect(fs.statSync(file).size).toBe(d.captureBytes);
        const { stdout, stderr } = await run(process.execPath, [BIN, 'report', '-q', file, '--format', 'json'], { maxBuffer: 64 << 20 });
        expect(stderr).not.toMatch(/warning/);
        const json = JSON.parse(stdout) as JsonDoc;
        expect(json.summary.attempted).toBe(r.stats.attempted);
        expect(json.summary.trusted).toBe(r.stats.trusted);
        expect(json.summary.rejected).toBe(r.stats.rejected);
        expect(json.summary.statuses).toEqual(r.stats.statuses);
        const reportSelf = bySelf(json.threads.flatMap((t) => t.functions.map((f): [string, number] => [f.qualname, f.self])));
        expect(reportSelf).toEqual(pageSelf);

        const share = (q: string): string => `${((100 * (pageSelf.find(([n]) => n === q)?.[1] ?? 0)) / r.stats.trusted).toFixed(1)}%`;
        console.log(
          `${r.header.target} in Chromium: ${r.stats.trusted} trusted of ${r.stats.attempted} samples; ${d.scheduled} ticks scheduled, ` +
            `${d.totals.ticks} taken (${((100 * d.totals.ticks) / d.scheduled).toFixed(1)}%), ${d.totals.missed} missed; ` +
            `handler ${d.totals.ticks ? Math.round((d.totals as unknown as { handlerMicros: { total: number } }).handlerMicros.total / d.totals.ticks) : 0} µs mean; ` +
            `hot ${share('hot')}, cold ${share('cold')} by self; ${partial.length} partial profiles drawn while it ran; capture ${d.captureBytes} B`,
        );
        expect(browser.blocked).toEqual([]);
        expect(errors).toEqual([]);
        recordCoverage('pyodide-browser', `chromium, ${r.header.target}: ${r.stats.trusted} trusted of ${d.scheduled} ticks`, true);
      } finally {
        await browser.close();
        await server?.close();
      }
    },
    RUN_TIMEOUT_MS + 60_000,
  );

  it(
    'Stop interrupts a program that would run on (30 s): the profile so far, closed, and a capture',
    async () => {
      const browser = await launchOffline();
      const errors: string[] = [];
      let server: ViewServer | null = null;
      try {
        server = await startViewServer({});
        const page = await browser.page([new URL(server.base).origin]);
        page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
        page.on('console', (m) => {
          if (m.type() === 'error' || m.type() === 'warning') errors.push(`console ${m.type()}: ${m.text()}`);
        });
        await page.goto(server.url);
        await page.fill('#args', '30');
        await page.selectOption('#rate', '250');
        const started = Date.now();
        await page.click('#run');
        // a partial profile is drawn while it runs; then stop it
        await page.waitForFunction(() => Number(document.getElementById('samples')!.dataset.trusted) > 0, undefined, { timeout: RUN_TIMEOUT_MS, polling: 100 });
        await page.click('#stop');
        await page.waitForFunction(() => ['done', 'error'].includes(document.getElementById('status')!.dataset.state ?? ''), undefined, { timeout: RUN_TIMEOUT_MS, polling: 200 });
        expect(await page.textContent('#status')).toBe('done: stopped');
        expect(Date.now() - started).toBeLessThan(30_000 + 60_000); // (it did not run its 30 s and then some)
        const r = await page.evaluate(() => (window as unknown as { __pyunwindProfile: PageProfile }).__pyunwindProfile.result);
        expect(r!.closedCleanly).toBe(true);
        expect(r!.header.rateHz).toBe(250);
        expect(r!.stats.trusted).toBeGreaterThan(0);
        expect(r!.stats.rejected).toBe(0);
        expect(await page.isVisible('#download-capture')).toBe(true);
        expect(browser.blocked).toEqual([]);
        expect(errors).toEqual([]);
      } finally {
        await browser.close();
        await server?.close();
      }
    },
    RUN_TIMEOUT_MS + 60_000,
  );
});
