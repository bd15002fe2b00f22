// Differential profiles end to end: workloads/hotcold.py recorded twice by `pyunwind record`
// from native CPython 3.15 — once with its default split (7:3 units: ≈70 % of main() in hot(),
// ≈30 % in cold()), once turned around (3:7) — and compared with `pyunwind report --diff`.
//
// - A capture against itself: every line of the collapsed diff has equal shares, and every
//   function of the HTML page's table and every node of its flame graph a change of 0.
// - 3:7 against 7:3: hot()'s total share changes by ≈ −40 points and cold()'s by ≈ +40, in
//   the collapsed lines and in the HTML page (its data, and its table and flame graph read in
//   headless Chromium, offline: hot() drawn blue, cold() red). The expected
//   change is each program's own truth (its JSON line: hot/total, cold/total, the time inside
//   main()), scaled by main()'s share of the samples (the recording also sees the start-up
//   before main()); the bound is max(5, 4σ) points, σ from the binomial with the samples taken
//   on each side.
// - UNIT 1000 (calls of a few hundred µs), as test/record-hotcold.test.ts records it: with the
//   default UNIT 100 a call lasts about as long as a copy of the stack, and the samples can lean
//   to one of the calls (the workload's docstring).
// - On a machine loaded beyond its cores the truth and the samples both move with preemptions,
//   more than the binomial σ covers. Measured while writing this test (load 7-10 on two cores,
//   15 pairs of 2 s recordings): the diff's hot() change was 0.1-7.5 points off the truths'
//   with UNIT 100 and 0.3-9.6 with UNIT 1000, beyond the bound (≈ 6.7) in 3 pairs out of 15.
//   A failure under such load says more about the load than about the diff.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { browserMissing, launchOffline, testOutputDir } from '../harness/browser.js';
import { nativeInterpreters } from '../harness/interpreters.js';
import { unescapeCollapsed } from '../src/export/collapsed.js';
import { diffFlamegraphData, exportDiffCollapsed, exportDiffFlamegraph } from '../src/export/diff.js';
import { diffProfiles } from '../src/export/diff-model.js';
import type { FlameGraphData, FlameView } from '../src/export/html/flamegraph-script.js';
import type { ExportMeta } from '../src/export/meta.js';
import { Profile, type SampleThread, type SourceFrame } from '../src/profile/index.js';
import { recordCoverage, skipTest, cannotRun } from './helpers/coverage.js';

const run = promisify(execFile);
const BIN = path.resolve('bin/pyunwind.js');
const WORKLOAD = path.resolve('workloads/hotcold.py');
const SECONDS = '2';
const UNIT = '1000';

interface Truth {
  hot: number;
  cold: number;
  total: number;
}

interface Recorded {
  file: string;
  truth: Truth;
}

/** The page's data: the renderer's views and the diff's summary (the part this test reads). */
interface DiffData extends FlameGraphData {
  diff: {
    base: { samples: number };
    current: { samples: number };
    functions: { qualname: string; baseTotalShare: number; currentTotalShare: number; totalChange: number }[];
  };
}

function pageData(html: string): DiffData {
  return JSON.parse(/<script type="application\/json" id="pyunwind-data">([\s\S]*?)<\/script>/.exec(html)![1]!) as DiffData;
}

/** The nodes of a view as objects: frame, caller (−1: under the root), path of qualnames from the root, and the numbers per node. */
function viewNodes(data: FlameGraphData, v: FlameView): { name: string; file: string | null; line: number | null; parent: number; path: string; self: number; value: number; base: number; current: number }[] {
  const out: ReturnType<typeof viewNodes> = [];
  for (let i = 0; i < v.parent.length; i++) {
    const [name, file, line] = data.frames[v.frame[i]!]!;
    const p = v.parent[i]!;
    out.push({ name, file, line, parent: p, path: p < 0 ? name : `${out[p]!.path};${name}`, self: v.self[i]!, value: v.value![i]!, base: v.columns![0]!.values[i]!, current: v.columns![1]!.values[i]! });
  }
  return out;
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pyunwind-diff-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

async function record(command: string, name: string, args: string[]): Promise<Recorded> {
  const file = path.join(dir, `${name}.pyuw`);
  // the target inherits record's standard output: its JSON line is the last line there
  const { stdout } = await run(process.execPath, [BIN, 'record', '-q', '-r', '1000', '-o', file, '--', command, WORKLOAD, ...args], {
    env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' },
    timeout: 60_000,
  });
  const line = stdout.trim().split('\n').filter((l) => l.startsWith('{"hot"')).pop();
  if (line === undefined) throw new Error(`hotcold printed no truth line: ${JSON.stringify(stdout)}`);
  return { file, truth: JSON.parse(line) as Truth };
}

async function report(...args: string[]): Promise<string> {
  const { stdout } = await run(process.execPath, [BIN, 'report', '-q', ...args], { timeout: 60_000, maxBuffer: 64 << 20 });
  return stdout;
}

/** A collapsed diff line: the stack's elements and its base and current shares. */
function parseLines(text: string): { stack: string[]; base: number; current: number }[] {
  return text
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => {
      const m = /^(.*) (\d+\.\d{6}) (\d+\.\d{6})$/.exec(l);
      if (!m) throw new Error(`not a collapsed diff line: ${JSON.stringify(l)}`);
      return { stack: m[1]!.split(';'), base: Number(m[2]), current: Number(m[3]) };
    });
}

/** Summed shares of the stacks that have `qualname` on them (its total share), per side. */
function totalShare(lines: ReturnType<typeof parseLines>, qualname: string): { base: number; current: number } {
  let base = 0;
  let current = 0;
  for (const l of lines) {
    if (l.stack.slice(1).some((f) => f.startsWith(`${qualname} (`))) {
      base += l.base;
      current += l.current;
    }
  }
  return { base, current };
}

const F = (qualname: string, line: number | null = 1, filename = 'app.py'): SourceFrame => ({ qualname, filename, line });
const thread = (tid: bigint, name?: string, interp = 0n): SampleThread => ({ interpreterId: interp, threadId: tid + 1000n, nativeThreadId: tid, ...(name ? { name } : {}) });
/** `n` samples of a stack given innermost first */
function add(p: Profile, t: SampleThread, n: number, ...frames: SourceFrame[]): void {
  for (let i = 0; i < n; i++) p.add({ time: i, thread: t, status: 'complete', frames });
}
const META = (title: string): ExportMeta => ({ title, pythonVersion: '3.15.2', rateHz: 1000, startTime: 0, recorder: 'pyunwind test', copy: null, mode: 'wall' });

describe('the diff model (made-up profiles)', () => {
  // base: MainThread (tid 100) 6 samples, an unnamed thread 101 2 samples; current: MainThread
  // (tid 200) 3 samples, an unnamed thread 201 1 sample, and a named subinterpreter thread
  const base = new Profile();
  add(base, thread(100n, 'MainThread'), 4, F('hot', 5), F('main', 2), F('<module>', 9));
  add(base, thread(100n, 'MainThread'), 2, F('cold', 7), F('main', 3), F('<module>', 9));
  add(base, thread(101n), 2, F('run', 1, 'w.py'));
  base.add({ time: 9, thread: thread(100n, 'MainThread'), status: 'idle', frames: [] });
  base.add({ time: 9, thread: thread(100n, 'MainThread'), status: 'torn', frames: [F('never')] });
  const current = new Profile();
  add(current, thread(200n, 'MainThread'), 1, F('hot', 5), F('main', 2), F('<module>', 9));
  add(current, thread(200n, 'MainThread'), 2, F('cold', 7), F('main', 3), F('<module>', 9));
  add(current, thread(201n), 1, F('run', 1, 'w.py'));
  add(current, thread(7n, 'odd;name <b>', 1n), 4, F('f;<script>', null, 'x%y.py'));

  it('matches threads by label, then by name, and shares every number with its side', () => {
    const d = diffProfiles(current, base);
    expect(d.base.samples).toBe(8);
    expect(d.current.samples).toBe(8);
    expect(d.threads.map((t) => [t.label, t.baseLabel, t.base, t.current])).toEqual([
      ['MainThread (tid 200)', 'MainThread (tid 100)', 6, 3],
      ['thread 201', null, 0, 1],
      ['odd;name <b> (tid 7, interp 1)', null, 0, 4],
      ['thread 101', 'thread 101', 2, 0],
    ]);
    const hot = d.all.functions.find((f) => f.qualname === 'hot')!;
    expect([hot.baseTotalShare, hot.currentTotalShare, hot.totalChange]).toEqual([50, 12.5, -37.5]);
    const main = d.all.functions.find((f) => f.qualname === 'main')!;
    expect([main.baseTotalShare, main.currentTotalShare, main.selfChange]).toEqual([75, 37.5, 0]);
    // functions by the size of the change: the subinterpreter's f (+50) first
    expect(d.all.functions[0]!.qualname).toBe('f;<script>');
    // the all-threads stacks are the per-thread ones summed
    const stackSum = (ts: typeof d.threads, side: 'baseShare' | 'currentShare'): number => ts.flatMap((t) => t.stacks).reduce((a, s) => a + s[side], 0);
    expect(stackSum(d.threads, 'baseShare')).toBeCloseTo(100, 12);
    expect(stackSum([d.all], 'currentShare')).toBeCloseTo(100, 12);
  });

  it('writes difffolded-style lines: escaped stacks, base share, current share, each column 100', () => {
    const text = exportDiffCollapsed(current, base);
    const lines = text.trimEnd().split('\n');
    expect(lines).toContain('MainThread (tid 200);<module> (app.py:9);main (app.py:2);hot (app.py:5) 50.000000 12.500000');
    expect(lines).toContain('thread 101;run (w.py:1) 25.000000 0.000000');
    expect(lines).toContain('odd%3Bname <b> (tid 7, interp 1);f%3B<script> (x%25y.py) 0.000000 50.000000');
    expect([...lines].sort()).toEqual(lines);
    let b = 0;
    let c = 0;
    for (const l of lines) {
      const m = /^(.*) (\d+\.\d{6}) (\d+\.\d{6})$/.exec(l)!;
      expect(m[1]!.split(';').map(unescapeCollapsed).length).toBeGreaterThanOrEqual(2);
      b += Number(m[2]);
      c += Number(m[3]);
    }
    expect(b).toBeCloseTo(100, 5);
    expect(c).toBeCloseTo(100, 5);
    expect(exportDiffCollapsed(new Profile(), new Profile())).toBe('');
  });

  it('gives no change against itself, and no NaN against nothing', () => {
    const same = diffProfiles(base, base);
    for (const t of [...same.threads, same.all]) {
      for (const s of t.stacks) expect(s.change).toBe(0);
      for (const f of t.functions) expect([f.selfChange, f.totalChange]).toEqual([0, 0]);
    }
    const none = diffProfiles(current, new Profile());
    expect(none.base.samples).toBe(0);
    for (const f of none.all.functions) expect(f.baseTotalShare).toBe(0);
    expect(none.all.functions.every((f) => Number.isFinite(f.totalChange))).toBe(true);
  });

  it('gives the flame views: widths of the current side, each node its change of total share', () => {
    const data = diffFlamegraphData(diffProfiles(current, base));
    expect(data.views.map((v) => [v.id, v.label, v.base])).toEqual([
      ['all', 'all threads (4)', 8],
      ['thread-0', 'MainThread (tid 200)', 8],
      ['thread-1', 'thread 201', 8],
      ['thread-2', 'odd;name <b> (tid 7, interp 1)', 8],
      ['thread-3', 'thread 101', 8],
    ]);
    // one scale for the page: the largest change of a node (f: 0 → 50 %)
    expect(data.color).toMatchObject({ mode: 'value', scale: 0.5, label: 'change', format: 'signed-percent' });
    expect(data.frames).toContainEqual(['f;<script>', 'x%y.py', null]);
    const all = viewNodes(data, data.views[0]!);
    // the nodes under the root are every sample of each side
    const top = all.filter((n) => n.parent < 0);
    expect(top.reduce((a, n) => a + n.base, 0)).toBeCloseTo(1, 12);
    expect(top.reduce((a, n) => a + n.current, 0)).toBeCloseTo(1, 12);
    expect(all.reduce((a, n) => a + n.self, 0)).toBe(8);
    const main = viewNodes(data, data.views[1]!);
    const at = (nodes: typeof main, path: string) => nodes.find((n) => n.path === path)!;
    const mod = at(main, '<module>');
    expect([mod.file, mod.line, mod.base, mod.current, mod.value, mod.self]).toEqual(['app.py', 9, 0.75, 0.375, -0.375, 0]);
    // main() from two lines of <module>: two nodes
    expect(main.filter((n) => n.path === '<module>;main').map((n) => n.line).sort()).toEqual([2, 3]);
    const hot = at(main, '<module>;main;hot');
    expect([hot.line, hot.base, hot.current, hot.value, hot.self]).toEqual([5, 0.5, 0.125, -0.375, 1]);
    const cold = at(main, '<module>;main;cold');
    expect([cold.value, cold.self]).toEqual([0, 2]);
    // a thread only the base has: in the tree, with no width, and the note says so
    const gone = data.views[4]!;
    expect(viewNodes(data, gone).map((n) => [n.path, n.self, n.base, n.value])).toEqual([['run', 0, 0.25, -0.25]]);
    expect(gone.note).toContain('not drawn: 2 base samples (25.0% of the base)');
    expect(data.views[0]!.note).not.toContain('not drawn');
  });

  it('writes a page that escapes names and embeds the model', () => {
    const html = exportDiffFlamegraph(current, base, META('now <1>'), META('then & before'));
    expect(html).not.toContain('f;<script>');
    expect(html).not.toContain('name <b>');
    expect(html).toContain('now &lt;1&gt;');
    expect(html).toContain('then &amp; before');
    expect(html).toMatch(/<tr data-qualname="f;&lt;script&gt;" data-filename="x%y.py" data-base="0.000000" data-current="50.000000" data-change="50.000000"/);
    for (const id of ['validation-current', 'validation-base', 'diff-recordings', 'diff-functions', 'flame']) expect(html.split(`id="${id}"`).length, id).toBe(2);
    const data = pageData(html);
    expect(data.diff.functions[0]!.qualname).toBe('f;<script>');
    expect(data.views.map((v) => v.id)).toEqual(['all', 'thread-0', 'thread-1', 'thread-2', 'thread-3']);
  });
});

const py = nativeInterpreters().find((p) => p.label === 'debian-3.15');
const missing = !py ? 'debian-3.15 is not among the native interpreters' : py.missing;

describe('report --diff (hotcold 7:3 and 3:7 on debian-3.15)', () => {
  if (missing) {
    cannotRun('formats', 'diff', `native CPython 3.15: ${missing}`);
    return;
  }
  let a: Recorded; // 7:3, the base
  let b: Recorded; // 3:7, the current
  beforeAll(async () => {
    // one after the other: two CPU-bound targets at once would share the cores with the recorders
    a = await record(py!.command, 'hot73', [SECONDS, UNIT]);
    b = await record(py!.command, 'hot37', [SECONDS, UNIT, '3:7']);
  });

  it('shows no change between a capture and itself', async () => {
    const lines = parseLines(await report(a.file, '--diff', a.file, '--format', 'collapsed'));
    expect(lines.length).toBeGreaterThanOrEqual(3);
    for (const l of lines) expect(l.current, l.stack.join(';')).toBe(l.base);
    // each column is the whole of its side
    expect(lines.reduce((s, l) => s + l.base, 0)).toBeCloseTo(100, 3);

    const html = path.join(dir, 'same.html');
    await report(a.file, '--diff', a.file, '-o', html);
    const page = fs.readFileSync(html, 'utf8');
    const table = /<table class="data" id="diff-functions">([\s\S]*?)<\/table>/.exec(page)![1]!;
    const unescape = (x: string): string => x.replace(/&(lt|gt|quot|#39|amp);/g, (_, e: string) => ({ lt: '<', gt: '>', quot: '"', '#39': "'", amp: '&' })[e]!);
    const changes = [...table.matchAll(/<tr data-qualname="([^"]*)"[^>]*data-change="([^"]*)"/g)].map((m) => [unescape(m[1]!), m[2]!]);
    expect(changes.map((c) => c[0])).toEqual(expect.arrayContaining(['hot', 'cold', 'main', '<module>']));
    for (const [name, change] of changes) expect(Number(change), name).toBe(0);
    // and every node of the flame graph: no colour anywhere
    const data = pageData(page);
    for (const v of data.views) {
      expect(v.value!.length).toBe(v.parent.length);
      expect(v.value!.every((x) => x === 0), v.label).toBe(true);
    }
  });

  it('shows hot() −40 points and cold() +40 points for 3:7 against 7:3', async () => {
    const text = await report(b.file, '--diff', a.file, '--format', 'collapsed');
    const lines = parseLines(text);
    // every stack is one hotcold can have, under the one thread
    for (const l of lines) expect(l.stack.slice(1).map((f) => f.slice(0, f.indexOf(' ('))).join(';')).toMatch(/^<module>(;main(;hot|;cold)?)?$/);
    expect(new Set(lines.map((l) => l.stack[0])).size).toBe(1);
    expect(lines[0]!.stack[0]).toMatch(/^MainThread \(tid \d+\)$/);

    const html = path.join(dir, 'diff.html');
    await report(b.file, '--diff', a.file, '-o', html);
    const data = pageData(fs.readFileSync(html, 'utf8'));
    const nA = data.diff.base.samples;
    const nB = data.diff.current.samples;
    const main = totalShare(lines, 'main');
    const truthLine = (t: Truth): string => `hot ${((100 * t.hot) / t.total).toFixed(1)}%, cold ${((100 * t.cold) / t.total).toFixed(1)}% of main()`;
    const summary: string[] = [`base 7:3: ${nA} samples with frames (truth ${truthLine(a.truth)}), current 3:7: ${nB} (truth ${truthLine(b.truth)})`];
    for (const [name, sign] of [['hot', -1], ['cold', 1]] as const) {
      const got = totalShare(lines, name);
      const change = got.current - got.base;
      // the program's truth is of the time in main(); the recording also saw the start-up
      const expected = ((100 * b.truth[name]) / b.truth.total) * (main.current / 100) - ((100 * a.truth[name]) / a.truth.total) * (main.base / 100);
      // A change is two recordings' shares: its error is the sum of theirs, and each recording is
      // held elsewhere to its program's truth within 5 points (test/record-hotcold.test.ts; 4σ
      // where that is wider for a short recording). On
      // a loaded machine each is seen 3-4 points off, in opposite directions here (the longer
      // function gains a little in both), so the bound is the sum of the two.
      const pA = got.base / 100;
      const pB = got.current / 100;
      const bound = Math.max(5, 4 * 100 * Math.sqrt((pA * (1 - pA)) / nA)) + Math.max(5, 4 * 100 * Math.sqrt((pB * (1 - pB)) / nB));
      summary.push(`${name}: ${got.base.toFixed(1)}% → ${got.current.toFixed(1)}%, change ${change.toFixed(2)} points (expected ${expected.toFixed(2)}, bound ±${bound.toFixed(2)})`);
      expect(Math.sign(change)).toBe(sign);
      expect(Math.abs(change - expected), summary.join('; ')).toBeLessThanOrEqual(bound);
      // the page's model says the same as the collapsed lines
      const f = data.diff.functions.find((x) => x.qualname === name)!;
      expect(f.totalChange).toBeCloseTo(change, 4);
      // and the flame graph: its nodes of the function (a leaf, never recursive) add up to the change
      const nodes = viewNodes(data, data.views[0]!).filter((n) => n.name === name);
      expect(nodes.length).toBeGreaterThanOrEqual(1);
      expect(100 * nodes.reduce((a, n) => a + n.value, 0)).toBeCloseTo(change, 4);
    }
    console.log(summary.join('\n'));
    // the flame graph: the nodes under the root are every sample on both sides, so together they do not change
    const top = viewNodes(data, data.views[0]!).filter((n) => n.parent < 0);
    expect(top.reduce((a, n) => a + n.value, 0)).toBeCloseTo(0, 9);
    expect(data.views[0]!.self.reduce((a, w) => a + w, 0)).toBe(nB);
    recordCoverage('formats', 'diff', true);
  });

  it('shows the changes in the HTML page in Chromium, offline', async (ctx) => {
    const why = browserMissing();
    if (why) {
      return skipTest(ctx, 'formats', 'diff-html-browser', why);
    }
    const html = path.join(dir, 'diff-browser.html');
    await report(b.file, '--diff', a.file, '--format', 'flamegraph', '-o', html);
    const browser = await launchOffline();
    try {
      const page = await browser.page();
      const errors: string[] = [];
      page.on('pageerror', (e) => errors.push(e.message));
      page.on('console', (m) => {
        if (m.type() === 'error') errors.push(m.text());
      });
      await page.goto(pathToFileURL(html).href);
      await page.waitForSelector('body[data-ready="1"]');
      // the flame graph is drawn, hot() and cold() in it: blue where the current shrank, red where it grew
      const drawn = await page.$$eval('#flame .frame', (els) =>
        els.map((e) => ({ name: (e as HTMLElement).dataset.name!, samples: Number((e as HTMLElement).dataset.samples), color: getComputedStyle(e).backgroundColor })),
      );
      const rgb = (c: string): number[] => (/rgba?\((\d+), (\d+), (\d+)/.exec(c) ?? []).slice(1).map(Number);
      for (const [name, sign] of [['hot', -1], ['cold', 1]] as const) {
        const frames = drawn.filter((d) => d.name === name);
        expect(frames.length, `#flame .frame[data-name=${name}]`).toBeGreaterThanOrEqual(1);
        const widest = frames.sort((x, y) => y.samples - x.samples)[0]!;
        const [r, , b] = rgb(widest.color);
        expect(Math.sign(r! - b!), `${name}: ${widest.color}`).toBe(sign);
      }
      const api = await page.evaluate(() => {
        const p = (window as unknown as { __pyunwind: { ready: boolean; frames: { name: string; width: number }[] } }).__pyunwind;
        return { ready: p.ready, frames: p.frames.map((f) => ({ name: f.name, width: f.width })) };
      });
      expect(api.ready).toBe(true);
      expect(api.frames.some((f) => f.name === 'hot' && f.width > 0)).toBe(true);
      expect(await page.textContent('#legend')).toContain('more than base');
      expect(await page.$$eval('.validation', (els) => els.map((e) => e.id))).toEqual(['validation-current', 'validation-base']);
      const rows = await page.$$eval('#diff-functions tbody tr', (trs) =>
        trs.map((tr) => {
          const d = (tr as HTMLElement).dataset;
          return { qualname: d.qualname!, base: Number(d.base), current: Number(d.current), change: Number(d.change), text: (tr as HTMLElement).innerText };
        }),
      );
      const header = await page.textContent('#diff-recordings');
      await page.screenshot({ path: path.join(testOutputDir(), 'diff.png'), fullPage: true });
      const hot = rows.find((r) => r.qualname === 'hot')!;
      const cold = rows.find((r) => r.qualname === 'cold')!;
      console.log(`page: hot ${hot.base.toFixed(1)}% → ${hot.current.toFixed(1)}% (${hot.change.toFixed(2)}), cold ${cold.base.toFixed(1)}% → ${cold.current.toFixed(1)}% (${cold.change.toFixed(2)})`);
      expect(hot.change).toBeLessThan(-25);
      expect(cold.change).toBeGreaterThan(25);
      expect(hot.change).toBeCloseTo(hot.current - hot.base, 5);
      // the largest changes come first, and the row shows the signed change
      expect(rows.slice(0, 2).map((r) => r.qualname).sort()).toEqual(['cold', 'hot']);
      expect(hot.text).toContain(`${hot.change.toFixed(2)}`);
      expect(cold.text).toContain(`+${cold.change.toFixed(2)}`);
      // both recordings are named (record names a target by its pid)
      const currentPid = /Current: pid (\d+)/.exec(header!)?.[1];
      const basePid = /Base: pid (\d+)/.exec(header!)?.[1];
      expect(currentPid, header!).toBeDefined();
      expect(basePid, header!).toBeDefined();
      expect(currentPid).not.toBe(basePid);
      expect(browser.blocked).toEqual([]);
      expect(errors).toEqual([]);
      recordCoverage('formats', 'diff-html-browser', true);
    } finally {
      await browser.close();
    }
  });
});
