// The three exports that keep time order — gecko (Firefox Profiler, processed format 63),
// cpuprofile (Chrome DevTools) and jsonl — each checked against its consumer's documented
// format by a checker written here from the format's documentation, on a small timeline whose
// every sample is known and on a real recording (threadpool.py, native CPython 3.15) whose
// counts must equal what `pyunwind report --format json` says.
//
// Firefox Profiler sources the gecko checker follows (firefox-devtools/profiler at commit
// 0d66fdef2dab): src/types/profile.ts (table shapes and their invariants: a stack's prefix is
// null or an earlier stack; frames carry categories, a non-null category needs a subcategory;
// at least one grey category), src/profile-logic/data-structures.ts (getEmpty*: the exact
// columns of each table at version 63), processed-profile-versioning.ts (markers sorted by
// start time since version 1; pids are strings since 47; shared tables since 56/60).
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import { promisify } from 'node:util';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  cpuprofileDocument,
  exportCpuprofile,
  exportGecko,
  exportJsonl,
  frameLabel,
  geckoDocument,
  threadLabel,
  GECKO_FORMAT_VERSION,
  GECKO_PROCESSED_VERSION,
  type Cpuprofile,
  type GeckoProfile,
} from '../src/export/index.js';
import type { ExportMeta } from '../src/export/meta.js';
import { metaFromHeader } from '../src/export/meta.js';
import { Profile, Timeline, type SampleInput, type SampleThread, type SourceFrame } from '../src/profile/index.js';
import { reportCapture } from '../src/pipeline/report-file.js';
import { recordCoverage, cannotRun } from './helpers/coverage.js';
import { formatCapture } from './helpers/format-capture.js';

const BIN = path.resolve('bin/pyunwind.js');
const TRUSTED = new Set(['complete', 'complete-unverifiable', 'idle']);

// ---------------------------------------------------------------------------------------
// Counts per thread and per stack (root → leaf, each frame as frameLabel), the common ground
// every format is compared on. The idle samples of a thread count under the key '<idle>'.

type Counts = Map<string, Map<string, number>>;

function bump(counts: Counts, thread: string, key: string, n = 1): void {
  let m = counts.get(thread);
  if (!m) counts.set(thread, (m = new Map()));
  m.set(key, (m.get(key) ?? 0) + n);
}

function sorted(counts: Counts): [string, [string, number][]][] {
  return [...counts].map(([t, m]) => [t, [...m].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))] as [string, [string, number][]]).sort(([a], [b]) => (a < b ? -1 : 1));
}

interface JsonDoc {
  summary: { attempted: number; trusted: number; rejected: number; statuses: Record<string, number>; ticks: number; missed: number };
  threads: {
    label: string;
    nativeThreadId: string;
    idleWeight: number;
    statuses: Record<string, number>;
    frames: SourceFrame[];
    stacks: [number, number, number][];
  }[];
}

/**
 * What the json report (docs/json-format.md) says: trusted samples per thread and stack.
 * `zeroLine`: read line 0 as no line (the cpuprofile cannot tell them apart).
 */
function jsonCounts(doc: JsonDoc, zeroLine = false): Counts {
  const counts: Counts = new Map();
  for (const t of doc.threads) {
    const keys: string[] = [];
    t.stacks.forEach(([parent, frame, weight], i) => {
      const f = t.frames[frame]!;
      const label = frameLabel(zeroLine && f.line === 0 ? { ...f, line: null } : f);
      keys[i] = parent < 0 ? label : `${keys[parent]!};${label}`;
      if (weight > 0) bump(counts, t.label, keys[i]!, weight);
    });
    if (t.idleWeight > 0) bump(counts, t.label, '<idle>', t.idleWeight);
  }
  return counts;
}

// ---------------------------------------------------------------------------------------
// gecko: the processed format's documented invariants

/** the exact columns of each table at version 63 (data-structures.ts getEmpty*) */
const GECKO_COLUMNS: Record<string, string[]> = {
  stackTable: ['frame', 'prefix'],
  frameTable: ['address', 'inlineDepth', 'category', 'subcategory', 'func', 'nativeSymbol', 'innerWindowID', 'line', 'column', 'sourceMapInfo'],
  funcTable: ['isJS', 'relevantForJS', 'name', 'resource', 'source', 'lineNumber', 'columnNumber', 'sourceMapInfo'],
  resourceTable: ['lib', 'name', 'host', 'type'],
  nativeSymbols: ['libIndex', 'address', 'name', 'functionSize'],
  sources: ['id', 'filename', 'startLine', 'startColumn', 'sourceMapURL', 'content'],
  sourceMapInfo: ['originalSource', 'originalLine', 'originalColumn'],
  samples: ['stack', 'time', 'weight', 'weightType'],
  markers: ['data', 'name', 'startTime', 'endTime', 'phase', 'category'],
};
const THREAD_FIELDS = ['processType', 'processStartupTime', 'processShutdownTime', 'registerTime', 'unregisterTime', 'pausedRanges', 'name', 'isMainThread', 'pid', 'tid', 'samples', 'markers'];

type Table = { length: number } & Record<string, unknown>;

function checkTable(where: string, table: Table, columns: string[]): void {
  expect(Object.keys(table).filter((k) => k !== 'length').sort(), `${where} columns`).toEqual([...columns].sort());
  expect(Number.isInteger(table.length), `${where}.length`).toBe(true);
  for (const c of columns) {
    const col = table[c];
    if (c === 'weight' || c === 'weightType') continue; // samples: weight null (all 1), weightType a string
    expect(Array.isArray(col), `${where}.${c} is an array`).toBe(true);
    expect((col as unknown[]).length, `${where}.${c}.length = ${where}.length`).toBe(table.length);
  }
}

const inRange = (i: unknown, n: number): boolean => Number.isInteger(i) && (i as number) >= 0 && (i as number) < n;

function checkGecko(p: GeckoProfile): void {
  expect(p.meta.preprocessedProfileVersion).toBe(63);
  expect(p.meta.version).toBe(32);
  expect(p.meta.product).toBe('pyunwind');
  expect(p.meta.interval).toBeGreaterThan(0);
  const cats = p.meta.categories;
  expect(cats.some((c) => c.color === 'grey'), 'a grey (default) category').toBe(true);
  for (const c of cats) expect(c.subcategories[0]).toBe('Other');
  for (const s of p.meta.markerSchema as { name: string; display: string[]; fields: { key: string; format: string }[] }[]) {
    expect(typeof s.name).toBe('string');
    expect(Array.isArray(s.display)).toBe(true);
    for (const f of s.fields) expect([typeof f.key, typeof f.format]).toEqual(['string', 'string']);
  }
  const sh = p.shared;
  expect(Object.keys(sh).sort()).toEqual(['frameTable', 'funcTable', 'nativeSymbols', 'resourceTable', 'sourceMapInfo', 'sources', 'stackTable', 'stringArray']);
  for (const name of ['stackTable', 'frameTable', 'funcTable', 'resourceTable', 'nativeSymbols', 'sources', 'sourceMapInfo'] as const) {
    checkTable(`shared.${name}`, sh[name] as unknown as Table, GECKO_COLUMNS[name]!);
  }
  const strings = sh.stringArray.length;
  expect(sh.stringArray.every((s) => typeof s === 'string')).toBe(true);
  const { stackTable: st, frameTable: fr, funcTable: fu, sources: so } = sh;
  for (let i = 0; i < st.length; i++) {
    const prefix = st.prefix[i];
    expect(prefix === null || inRange(prefix, i), `stack ${i}: prefix ${prefix} null or < ${i}`).toBe(true);
    expect(inRange(st.frame[i], fr.length), `stack ${i}: frame in range`).toBe(true);
  }
  for (let i = 0; i < fr.length; i++) {
    expect(inRange(fr.func[i], fu.length), `frame ${i}: func in range`).toBe(true);
    const cat = fr.category[i];
    if (cat !== null) {
      expect(inRange(cat, cats.length), `frame ${i}: category`).toBe(true);
      expect(inRange(fr.subcategory[i], cats[cat!]!.subcategories.length), `frame ${i}: subcategory`).toBe(true);
    }
    const line = fr.line[i];
    expect(line === null || (Number.isInteger(line) && line! >= 0), `frame ${i}: line`).toBe(true);
  }
  for (let i = 0; i < fu.length; i++) {
    expect(inRange(fu.name[i], strings), `func ${i}: name string`).toBe(true);
    const src = fu.source[i];
    expect(src === null || inRange(src, so.length), `func ${i}: source`).toBe(true);
    expect(fu.resource[i] === -1 || inRange(fu.resource[i], sh.resourceTable.length)).toBe(true);
  }
  for (let i = 0; i < so.length; i++) expect(inRange(so.filename[i], strings), `source ${i}: filename string`).toBe(true);

  for (const t of p.threads) {
    for (const f of THREAD_FIELDS) expect(t, `thread ${t.name}: ${f}`).toHaveProperty(f);
    expect(typeof t.pid).toBe('string');
    expect(['number', 'string']).toContain(typeof t.tid);
    checkTable(`${t.name}.samples`, t.samples as unknown as Table, GECKO_COLUMNS.samples!);
    expect(t.samples.weightType).toBe('samples');
    for (let i = 0; i < t.samples.length; i++) {
      const s = t.samples.stack[i];
      expect(s === null || inRange(s, st.length), `${t.name} sample ${i}: stack`).toBe(true);
      if (i > 0) expect(t.samples.time[i]!, `${t.name}: times non-decreasing`).toBeGreaterThanOrEqual(t.samples.time[i - 1]!);
    }
    const m = t.markers;
    checkTable(`${t.name}.markers`, m as unknown as Table, GECKO_COLUMNS.markers!);
    for (let i = 0; i < m.length; i++) {
      expect(inRange(m.name[i], strings), `marker ${i}: name`).toBe(true);
      expect(inRange(m.category[i], cats.length), `marker ${i}: category`).toBe(true);
      if (m.phase[i] === 0) expect([typeof m.startTime[i], m.endTime[i]]).toEqual(['number', null]);
      else {
        expect(m.phase[i]).toBe(1);
        expect(m.endTime[i]!).toBeGreaterThanOrEqual(m.startTime[i]!);
      }
      if (i > 0) expect(m.startTime[i]!, 'markers sorted by start').toBeGreaterThanOrEqual(m.startTime[i - 1]!);
    }
  }
}

function geckoCounts(p: GeckoProfile): Counts {
  const { stackTable: st, frameTable: fr, funcTable: fu, sources: so, stringArray: str } = p.shared;
  const keys: string[] = [];
  for (let s = 0; s < st.length; s++) {
    const f = st.frame[s]!;
    const func = fr.func[f]!;
    const src = fu.source[func]!;
    const label = src === null ? str[fu.name[func]!]! : frameLabel({ qualname: str[fu.name[func]!]!, filename: str[so.filename[src]!]!, line: fr.line[f]! });
    const prefix = st.prefix[s]!;
    keys[s] = prefix === null ? label : `${keys[prefix]!};${label}`;
  }
  const counts: Counts = new Map();
  for (const t of p.threads) for (const s of t.samples.stack) bump(counts, t.name, s === null ? '(null)' : keys[s]!);
  return counts;
}

function geckoMarkers(p: GeckoProfile, prefix: string): { thread: string; name: string; start: number; end: number | null; text: string }[] {
  return p.threads.flatMap((t) =>
    t.markers.name
      .map((n, i) => ({ thread: t.name, name: p.shared.stringArray[n]!, start: t.markers.startTime[i]!, end: t.markers.endTime[i]!, text: t.markers.data[i]!.name }))
      .filter((m) => m.name.startsWith(prefix)),
  );
}

// ---------------------------------------------------------------------------------------
// cpuprofile: Profiler.Profile's documented shape

function checkCpuprofile(c: Cpuprofile): void {
  const ids = new Map(c.nodes.map((n) => [n.id, n]));
  expect(ids.size, 'node ids unique').toBe(c.nodes.length);
  expect(c.nodes[0]!.callFrame.functionName).toBe('(root)');
  const parents = new Map<number, number>();
  for (const n of c.nodes) {
    expect(Number.isInteger(n.id) && n.id > 0).toBe(true);
    const cf = n.callFrame;
    expect([typeof cf.functionName, typeof cf.scriptId, typeof cf.url, typeof cf.lineNumber, typeof cf.columnNumber]).toEqual(['string', 'string', 'string', 'number', 'number']);
    expect(cf.lineNumber).toBeGreaterThanOrEqual(-1);
    for (const child of n.children) {
      expect(ids.has(child), `node ${n.id}: child ${child} exists`).toBe(true);
      expect(parents.has(child), `node ${child}: one parent`).toBe(false);
      parents.set(child, n.id);
    }
  }
  expect(parents.size, 'every node but the root has a parent').toBe(c.nodes.length - 1);
  expect(c.samples.length).toBe(c.timeDeltas.length);
  const hits = new Map<number, number>();
  for (const s of c.samples) {
    expect(ids.has(s), `sample node ${s} exists`).toBe(true);
    hits.set(s, (hits.get(s) ?? 0) + 1);
  }
  for (const n of c.nodes) expect(n.hitCount, `node ${n.id}: hitCount = its samples`).toBe(hits.get(n.id) ?? 0);
  let at = c.startTime;
  for (const d of c.timeDeltas) {
    expect(Number.isInteger(d) && d >= 0, 'deltas: non-negative integer µs').toBe(true);
    at += d;
  }
  expect(c.endTime).toBeGreaterThanOrEqual(at);
  expect(c.startTime).toBeLessThanOrEqual(c.endTime);
}

/** per thread (the root's child) and stack; the idle node's samples under thread '(idle)' */
function cpuprofileCounts(c: Cpuprofile): Counts {
  const byId = new Map(c.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of c.nodes) for (const ch of n.children) parent.set(ch, n.id);
  const counts: Counts = new Map();
  for (const s of c.samples) {
    const chain: number[] = [];
    for (let id: number | undefined = s; id !== undefined; id = parent.get(id)) chain.push(id);
    chain.reverse(); // root, thread (or "(idle)"), frames…
    const top = byId.get(chain[1]!)!.callFrame.functionName;
    if (top === '(idle)') {
      bump(counts, '(idle)', '<idle>');
      continue;
    }
    const key = chain
      .slice(2)
      .map((id) => {
        const cf = byId.get(id)!.callFrame;
        return frameLabel({ qualname: cf.functionName, filename: cf.url, line: cf.lineNumber < 0 ? null : cf.lineNumber + 1 });
      })
      .join(';');
    bump(counts, top, key);
  }
  return counts;
}

/** json counts with idle moved to one '(idle)' thread, as the cpuprofile keeps them */
function idleTogether(counts: Counts): Counts {
  const out: Counts = new Map();
  for (const [t, m] of counts) for (const [k, n] of m) bump(out, k === '<idle>' ? '(idle)' : t, k, n);
  return out;
}

// ---------------------------------------------------------------------------------------
// jsonl

interface JsonlSample {
  type: 'sample';
  time: number;
  thread: { native_id: number | string; thread_id: number | string; interpreter_id: number | string; name: string | null };
  status: string;
  frames: SourceFrame[];
}

function parseJsonl(text: string): { header: Record<string, unknown>; samples: JsonlSample[]; summary: Record<string, unknown> } {
  expect(text.endsWith('\n')).toBe(true);
  const lines = text.slice(0, -1).split('\n').map((l) => JSON.parse(l) as { type: string });
  expect(lines.length).toBeGreaterThanOrEqual(2);
  expect(lines[0]!.type).toBe('header');
  expect(lines.at(-1)!.type).toBe('summary');
  const samples = lines.slice(1, -1) as JsonlSample[];
  for (const s of samples) {
    expect(s.type).toBe('sample');
    expect(TRUSTED.has(s.status), `status ${s.status} trusted`).toBe(true);
    expect(s.frames.length === 0).toBe(s.status === 'idle');
    for (const id of [s.thread.native_id, s.thread.thread_id, s.thread.interpreter_id]) {
      if (typeof id === 'number') expect(Number.isSafeInteger(id)).toBe(true);
      else expect(id).toMatch(/^-?\d+$/);
    }
  }
  for (let i = 1; i < samples.length; i++) expect(samples[i]!.time, 'time order').toBeGreaterThanOrEqual(samples[i - 1]!.time);
  return { header: lines[0] as Record<string, unknown>, samples, summary: lines.at(-1) as Record<string, unknown> };
}

function jsonlCounts(samples: JsonlSample[]): Counts {
  const counts: Counts = new Map();
  for (const s of samples) {
    const label = threadLabel({ name: s.thread.name ?? undefined, nativeThreadId: BigInt(s.thread.native_id), interpreterId: BigInt(s.thread.interpreter_id) });
    bump(counts, label, s.frames.length === 0 ? '<idle>' : [...s.frames].reverse().map((f) => frameLabel(f)).join(';'));
  }
  return counts;
}

// ---------------------------------------------------------------------------------------
// A small timeline whose every sample is known

const MAIN: SampleThread = { interpreterId: 0n, threadId: 140_000_000_000_001n, nativeThreadId: 1234n, name: 'MainThread' };
const WORKER: SampleThread = { interpreterId: 0n, threadId: 140_000_000_000_002n, nativeThreadId: 1235n };
// a subinterpreter thread whose thread id does not fit a double
const SUB: SampleThread = { interpreterId: 1n, threadId: (1n << 64n) - 1n, nativeThreadId: 1236n, name: 'w;x' };
const F = (qualname: string, line: number | null, filename = 'app.py'): SourceFrame => ({ qualname, filename, line });
const COMPUTE = [F('compute', 10), F('main', 3), F('<module>', 20)];
const FIB = [F('fib', 5), F('fib', 6), F('main', 4), F('<module>', 20)];

/**
 * MainThread, 1 ms apart: compute ×3, idle ×3 (one stretch), torn, idle ×1 (a second
 * stretch), fib ×2, incomplete. Worker: run (unverifiable) at 0.5 ms, dangling at 2.5 ms,
 * run at 4.5 ms. Subinterpreter: one sample without a line at 3.2 ms.
 */
function knownSamples(): SampleInput[] {
  const s: SampleInput[] = [];
  const main = (time: number, status: SampleInput['status'], frames: SourceFrame[] = []) => s.push({ time, thread: MAIN, status, frames });
  [0, 1000, 2000].forEach((t) => main(t, 'complete', COMPUTE));
  [3000, 4000, 5000].forEach((t) => main(t, 'idle'));
  main(6000, 'torn', [F('never-shown', 1)]);
  main(7000, 'idle');
  [8000, 9000].forEach((t) => main(t, 'complete', FIB));
  main(10000, 'incomplete', [F('never-shown', 1)]);
  s.push({ time: 500, thread: WORKER, status: 'complete-unverifiable', frames: [F('run', 1, 'threading.py')] });
  s.push({ time: 2500, thread: WORKER, status: 'dangling', frames: [] });
  s.push({ time: 4500, thread: WORKER, status: 'complete-unverifiable', frames: [F('run', 1, 'threading.py')] });
  s.push({ time: 3200, thread: SUB, status: 'complete', frames: [F('odd;name', null, 'x.py')] });
  return s;
}

const META: ExportMeta = { title: 'pid 1234 (python3.15, 3.15.2)', pythonVersion: '3.15.2', rateHz: 1000, startTime: 1_700_000_000_000, recorder: 'pyunwind test', copy: 'adaptive', mode: 'wall' };

function known(): { profile: Profile; timeline: Timeline } {
  const profile = new Profile();
  const timeline = new Timeline();
  for (const s of knownSamples()) {
    profile.add(s);
    timeline.add(s);
  }
  profile.addTicks(11);
  profile.addMissed(1);
  return { profile, timeline };
}

/** the trusted samples' times, all threads merged */
const TRUSTED_TIMES = [0, 500, 1000, 2000, 3000, 3200, 4000, 4500, 5000, 7000, 8000, 9000];

const KNOWN_COUNTS: [string, [string, number][]][] = [
  [
    'MainThread (tid 1234)',
    [
      ['<idle>', 4],
      ['<module> (app.py:20);main (app.py:3);compute (app.py:10)', 3],
      ['<module> (app.py:20);main (app.py:4);fib (app.py:6);fib (app.py:5)', 2],
    ],
  ],
  ['thread 1235', [['run (threading.py:1)', 2]]],
  ['w;x (tid 1236, interp 1)', [['odd;name (x.py)', 1]]],
];

describe('gecko (Firefox Profiler processed format)', () => {
  const { profile, timeline } = known();
  const doc = geckoDocument(profile, timeline, META);

  it('keeps the documented invariants of version 63', () => {
    expect([GECKO_PROCESSED_VERSION, GECKO_FORMAT_VERSION]).toEqual([63, 32]);
    checkGecko(doc);
    expect(JSON.parse(exportGecko(profile, timeline, META))).toEqual(doc);
  });

  it('has a thread per Python thread with its trusted samples, stacks by frame', () => {
    expect(doc.threads.map((t) => [t.name, t.pid, t.tid, t.isMainThread])).toEqual([
      ['MainThread (tid 1234)', '1234', 1234, true],
      ['thread 1235', '1234', 1235, false],
      ['w;x (tid 1236, interp 1)', '1234', 1236, false],
    ]);
    expect(sorted(geckoCounts(doc))).toEqual(KNOWN_COUNTS);
    expect(doc.meta.startTime).toBe(META.startTime);
    expect(doc.meta.interval).toBe(1);
    expect(doc.threads[0]!.samples.time).toEqual([0, 1, 2, 3, 4, 5, 7, 8, 9]);
    // the idle pseudo-frame is in the Idle category, Python frames in Python
    const { frameTable, funcTable, stringArray } = doc.shared;
    const cat = (name: string): string => {
      const func = funcTable.name.findIndex((n) => stringArray[n] === name);
      return doc.meta.categories[frameTable.category[frameTable.func.indexOf(func)]!]!.name;
    };
    expect([cat('<idle>'), cat('compute')]).toEqual(['Idle', 'Python']);
    // every thread visible, the main thread selected
    expect(doc.meta.initialVisibleThreads).toEqual([0, 1, 2]);
    expect(doc.meta.initialSelectedThreads).toEqual([0]);
  });

  it('marks rejected samples at their time, idle stretches as intervals, and the validation numbers', () => {
    expect(geckoMarkers(doc, 'Rejected sample: ')).toEqual([
      { thread: 'MainThread (tid 1234)', name: 'Rejected sample: torn', start: 6, end: null, text: 'torn' },
      { thread: 'MainThread (tid 1234)', name: 'Rejected sample: incomplete', start: 10, end: null, text: 'incomplete' },
      { thread: 'thread 1235', name: 'Rejected sample: dangling', start: 2.5, end: null, text: 'dangling' },
    ]);
    // a stretch ends when the thread is next seen not idle (here: the torn sample at 6 ms)
    expect(geckoMarkers(doc, 'Idle')).toEqual([
      { thread: 'MainThread (tid 1234)', name: 'Idle', start: 3, end: 6, text: 'idle, 3 samples' },
      { thread: 'MainThread (tid 1234)', name: 'Idle', start: 7, end: 8, text: 'idle, 1 sample' },
    ]);
    const [summary] = geckoMarkers(doc, 'pyunwind validation');
    expect(summary!.text).toContain('samples attempted 15: trusted 12');
    expect(summary!.text).toContain('ticks 11 taken, 1 missed of 12 scheduled');
    const extra = Object.fromEntries(doc.meta.extra[0]!.entries.map((e) => [e.label, e.value]));
    expect(extra.Samples).toMatch(/^samples attempted 15: trusted 12 .*rejected 3 \(incomplete 1, dangling 1, torn 1\)$/);
    expect(extra.Ticks).toBe('ticks 11 taken, 1 missed of 12 scheduled');
  });

  it('writes a valid profile for an empty timeline', () => {
    const empty = geckoDocument(new Profile(), new Timeline(), { ...META, title: 'no pid here', rateHz: 0 });
    checkGecko(empty);
    expect(empty.threads).toEqual([]);
    expect(empty.meta.interval).toBe(1);
  });
});

describe('cpuprofile (Chrome DevTools)', () => {
  const { profile, timeline } = known();
  const doc = cpuprofileDocument(timeline, META, profile);

  it('keeps the documented shape: unique ids, children and samples that exist, hitCounts, deltas', () => {
    checkCpuprofile(doc);
    expect(JSON.parse(exportCpuprofile(timeline, META))).toEqual({ ...doc, pyunwind: { ...doc.pyunwind, ticks: null, missed: null } });
  });

  it('has the trusted samples under thread nodes, idle under the root, merged by time', () => {
    expect(doc.samples.length).toBe(12);
    expect(sorted(cpuprofileCounts(doc))).toEqual(sorted(idleTogether(new Map(KNOWN_COUNTS.map(([t, m]) => [t, new Map(m)])))));
    const root = doc.nodes[0]!;
    const names = root.children.map((id) => doc.nodes.find((n) => n.id === id)!.callFrame.functionName);
    expect(names).toEqual(['MainThread (tid 1234)', 'thread 1235', 'w;x (tid 1236, interp 1)', '(idle)']);
    // times: wall-clock µs, the threads merged; a rejected sample is no sample, its time
    // folds into the next delta (the worker's dangling 2.5 ms, main's torn 6 ms)
    const base = META.startTime * 1000;
    expect(doc.startTime).toBe(base);
    const times: number[] = [];
    let at = doc.startTime;
    for (const d of doc.timeDeltas) times.push((at += d) - base);
    expect(times).toEqual(TRUSTED_TIMES);
    expect(doc.endTime - base).toBe(10000); // the last attempted sample (rejected) ends the profile
    // lines 0-based, −1 unknown
    const odd = doc.nodes.find((n) => n.callFrame.functionName === 'odd;name')!;
    expect([odd.callFrame.url, odd.callFrame.lineNumber]).toEqual(['x.py', -1]);
    expect(doc.nodes.find((n) => n.callFrame.functionName === 'compute')!.callFrame.lineNumber).toBe(9);
    expect(doc.pyunwind).toMatchObject({ attempted: 15, trusted: 12, rejected: 3, ticks: 11, missed: 1 });
  });

  it("reads CPython's line 0 (code made at run time) as unknown, as DevTools has no line 0", () => {
    const t = new Timeline();
    t.add({ time: 0, thread: MAIN, status: 'complete', frames: [F('<module>', 0, '<string>'), F('run', 1)] });
    const c = cpuprofileDocument(t, META);
    checkCpuprofile(c);
    expect(c.nodes.map((n) => [n.callFrame.functionName, n.callFrame.lineNumber])).toEqual([
      ['(root)', -1],
      ['MainThread (tid 1234)', -1],
      ['run', 0],
      ['<module>', -1],
    ]);
  });
});

describe('jsonl', () => {
  const { profile, timeline } = known();

  it('writes a header, one line per trusted sample in time order, and a summary', () => {
    const { header, samples, summary } = parseJsonl(exportJsonl(timeline, META, profile));
    expect(samples.length).toBe(12);
    expect(sorted(jsonlCounts(samples))).toEqual(KNOWN_COUNTS);
    expect(samples.map((s) => s.time)).toEqual(TRUSTED_TIMES);
    expect(header).toMatchObject({ type: 'header', format: 'pyunwind-samples', version: 1, title: META.title, rateHz: 1000, startTime: META.startTime, mode: 'wall', copy: 'adaptive' });
    expect(header.validation).toMatchObject({ attempted: 15, trusted: 12, rejected: 3, ticks: 11, missed: 1, scheduled: 12 });
    expect(summary).toMatchObject({ type: 'summary', attempted: 15, trusted: 12, rejected: 3, ticks: 11, missed: 1 });
    expect(summary.statuses).toEqual({ complete: 6, 'complete-unverifiable': 2, idle: 4, incomplete: 1, dangling: 1, cycle: 0, 'too-deep': 0, corrupt: 0, 'no-thread-state': 0, torn: 1, 'native-incomplete': 0, 'native-unmatched': 0 });
  });

  it('writes ids as numbers when safe, as strings otherwise; frames innermost first', () => {
    const { samples, summary } = parseJsonl(exportJsonl(timeline, META));
    const sub = samples.find((s) => s.thread.interpreter_id === 1)!;
    expect(sub.thread).toEqual({ native_id: 1236, thread_id: '18446744073709551615', interpreter_id: 1, name: 'w;x' });
    expect(samples[0]!.thread).toEqual({ native_id: 1234, thread_id: 140000000000001, interpreter_id: 0, name: 'MainThread' });
    expect(samples.find((s) => s.thread.native_id === 1235)!.thread.name).toBeNull();
    expect(samples[0]!.frames.map((f) => f.qualname)).toEqual(['compute', 'main', '<module>']);
    // without the profile, the schedule is unknown
    expect([summary.ticks, summary.missed]).toEqual([null, null]);
  });
});

// ---------------------------------------------------------------------------------------
// A real recording, through the command line

const capture = await formatCapture();

async function report(file: string, format: string): Promise<string> {
  const { stdout } = await promisify(execFile)(process.execPath, [BIN, 'report', file, '--format', format], { maxBuffer: 1 << 30, encoding: 'utf8' });
  return stdout;
}

describe('on a real recording (threadpool.py, CPython 3.15)', () => {
  if (typeof capture === 'string') {
    for (const f of ['gecko', 'cpuprofile', 'jsonl']) cannotRun('formats', f, capture);
    return;
  }
  afterAll(() => fs.rmSync(path.dirname(capture.file), { recursive: true, force: true }));
  const outputs = Promise.all(['json', 'gecko', 'cpuprofile', 'jsonl'].map((f) => report(capture.file, f)));

  it('gecko: the invariants hold; samples per thread and stack are the json report’s', async () => {
    const [json, gecko] = await outputs;
    const jd = JSON.parse(json!) as JsonDoc;
    const gd = JSON.parse(gecko!) as GeckoProfile;
    checkGecko(gd);
    // threadpool.py: a main thread and four workers (started with the first batch)
    expect(jd.threads.length).toBeGreaterThanOrEqual(2);
    expect(jd.summary.trusted).toBeGreaterThan(0);
    expect(gd.threads.length).toBe(jd.threads.length);
    expect(sorted(geckoCounts(gd))).toEqual(sorted(jsonCounts(jd)));
    expect(geckoMarkers(gd, 'Rejected sample: ').length).toBe(jd.summary.rejected);
    const rejectedBy = new Map<string, number>();
    for (const m of geckoMarkers(gd, 'Rejected sample: ')) rejectedBy.set(m.text, (rejectedBy.get(m.text) ?? 0) + 1);
    for (const [status, n] of Object.entries(jd.summary.statuses)) if (!TRUSTED.has(status)) expect(rejectedBy.get(status) ?? 0, status).toBe(n);
    expect(gd.threads.map((t) => String(t.tid))).toEqual(jd.threads.map((t) => t.nativeThreadId));
    expect(gd.meta.extra[0]!.entries.find((e) => e.label === 'Samples')!.value).toContain(`samples attempted ${jd.summary.attempted}: trusted ${jd.summary.trusted}`);
    recordCoverage('formats', 'gecko', true);
  });

  it('cpuprofile: the shape holds; hitCounts add up to the trusted samples; stacks are the json report’s', async () => {
    const [json, , cpuprofile] = await outputs;
    const jd = JSON.parse(json!) as JsonDoc;
    const cd = JSON.parse(cpuprofile!) as Cpuprofile;
    checkCpuprofile(cd);
    expect(cd.nodes.reduce((a, n) => a + n.hitCount, 0)).toBe(jd.summary.trusted);
    expect(sorted(cpuprofileCounts(cd))).toEqual(sorted(idleTogether(jsonCounts(jd, true))));
    expect(cd.pyunwind).toMatchObject({ attempted: jd.summary.attempted, trusted: jd.summary.trusted, rejected: jd.summary.rejected, statuses: jd.summary.statuses });
    recordCoverage('formats', 'cpuprofile', true);
  });

  it('jsonl: every line parses; the sample lines are the trusted samples, stacks the json report’s', async () => {
    const [json, , , jsonl] = await outputs;
    const jd = JSON.parse(json!) as JsonDoc;
    const { header, samples, summary } = parseJsonl(jsonl!);
    expect(samples.length).toBe(jd.summary.trusted);
    expect(sorted(jsonlCounts(samples))).toEqual(sorted(jsonCounts(jd)));
    for (const k of ['attempted', 'trusted', 'rejected', 'statuses'] as const) {
      expect(summary[k], k).toEqual(jd.summary[k]);
      expect((header.validation as Record<string, unknown>)[k], k).toEqual(jd.summary[k]);
    }
    // given the profile, the library export also carries the schedule
    const r = await reportCapture(capture.file, { timeline: true });
    const lib = parseJsonl(exportJsonl(r.timeline!, metaFromHeader(r.header), r.profile));
    expect([lib.summary.ticks, lib.summary.missed]).toEqual([jd.summary.ticks, jd.summary.missed]);
    expect(lib.samples.length).toBe(samples.length);
    recordCoverage('formats', 'jsonl', true);
  });
});
