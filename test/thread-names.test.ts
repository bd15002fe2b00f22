// Thread names from Python's `threading` module, on every native interpreter. The program
// (test/fixtures/named_threads.py) starts threads with names of its choosing — ASCII, latin-1,
// UCS-2 and UCS-4 — renames one while it runs, and prints each thread's ident, native id and
// name. Recorded, its capture holds the names (the renamed thread's old name, then its new one);
// `report --format json` and `--format collapsed` show every thread under the name the program
// gave it last; the block engine, the reference path and processing workers give the same
// profile; and `dump --format json` (and text) of the running program names every thread as
// the program does. The recorder's reading policy (read at the start, on a new thread, every
// second — not every tick) and the cost of one read are measured here too.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CaptureWriter, fileSink, openCapture, readCaptureBytes } from '../src/capture/index.js';
import { BLOCK_TYPE, ByteWriter, RECORD_TYPE, encodeBlock, encodeHeader, encodeTrailer } from '../src/capture/format.js';
import { SEC_RECORDS } from '../src/capture/codes.js';
import { blockOf, withSection } from './helpers/blocks.js';
import { unpack } from '../src/capture/reader.js';
import type { ThreadNameRecord } from '../src/capture/types.js';
import { openLinuxProcess } from '../src/record/linux/process.js';
import { readThreadNames, ThreadNamer, NAMES_MIN_GAP_MS, NAMES_REFRESH_MS } from '../src/record/copy/thread-names.js';
import { reportCapture } from '../src/pipeline/report-file.js';
import { nativeInterpreters } from '../harness/interpreters.js';
import { recordCoverage, cannotRun } from './helpers/coverage.js';

const BIN = path.resolve('bin/pyunwind.js');
const PROGRAM = path.resolve('test/fixtures/named_threads.py');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pyunwind-names-'));
const children: ChildProcess[] = [];
afterAll(() => {
  children.forEach((c) => c.kill('SIGKILL'));
  fs.rmSync(dir, { recursive: true, force: true });
});

interface ProgramThread {
  ident: number;
  native_id: number;
  name: string;
}
interface ProgramState {
  state: 'started' | 'renamed';
  threads: ProgramThread[];
}

function pyunwind(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', timeout: 120_000, maxBuffer: 64 << 20, env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' } });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** Polls `ok` every 50 ms, for up to a minute. */
async function until(ok: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 1200; i++) {
    if (ok()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting until ${what}`);
}

/** The thread names in the capture written so far (a file being written reads as cut short); read again only when it grew. */
const seenNames = new Map<string, { size: number; names: string[] }>();
function namesIn(file: string): string[] {
  const size = fs.existsSync(file) ? fs.statSync(file).size : 0;
  const known = seenNames.get(file);
  if (size === 0 || known?.size === size) return known?.names ?? [];
  let names: string[] = [];
  try {
    names = [...readCaptureBytes(fs.readFileSync(file)).blocks()].flatMap((b) => b.names.map((n) => n.name));
  } catch {
    // (a header not written whole yet)
  }
  seenNames.set(file, { size, names });
  return names;
}

/** The program's states printed so far (whole lines only). */
const states = (stdout: string): ProgramState[] =>
  stdout.slice(0, stdout.lastIndexOf('\n') + 1).split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as ProgramState);
const profileJson = (r: Awaited<ReturnType<typeof reportCapture>>): string => JSON.stringify(r.profile.toJSON(), (_, v) => (typeof v === 'bigint' ? v.toString() : v));

// A real capture (several threads, pyenv 3.12) written again with thread-name records: one name
// per thread, one thread renamed halfway, the main thread renamed too (its record wins over the
// main-thread flag), one name read only after the thread's last sample, and one record for a
// thread that has no samples (it names nothing).
describe('thread-name records in processing', () => {
  const FIXTURE = path.resolve('test/fixtures/captures/threadpool-3.12.pyuw');

  async function named(withNames = true): Promise<{ file: string; want: Map<string, string> }> {
    const reader = await openCapture(FIXTURE);
    const blocks = [...reader.blocks()];
    reader.close();
    // (recorded before 3.11-3.13 flagged the main thread: its first thread's samples get the flag)
    const mainTid = blocks[0]!.samples[0]!.nativeThreadId;
    for (const b of blocks) b.samples = b.samples.map((x) => (x.nativeThreadId === mainTid ? { ...x, flags: x.flags | 2 } : x));
    const samples = blocks.flatMap((b) => b.samples);
    const threads = new Map<string, { ids: Pick<ThreadNameRecord, 'interpreterId' | 'threadId' | 'nativeThreadId'>; first: number; last: number; main: boolean }>();
    for (const x of samples) {
      const k = String(x.nativeThreadId);
      const t = threads.get(k) ?? { ids: { interpreterId: x.interpreterId, threadId: x.threadId, nativeThreadId: x.nativeThreadId }, first: x.time, last: x.time, main: false };
      t.last = x.time;
      t.main ||= (x.flags & 2) !== 0;
      threads.set(k, t);
    }
    expect(threads.size).toBeGreaterThan(2);
    const list = [...threads.values()];
    const mid = (t: (typeof list)[number]): number => Math.floor((t.first + t.last) / 2);
    const records: ThreadNameRecord[] = [];
    const want = new Map<string, string>();
    list.forEach((t, i) => {
      const k = String(t.ids.nativeThreadId);
      if (t.main) {
        records.push({ ...t.ids, time: t.first, name: 'MainThread' }, { ...t.ids, time: mid(t), name: 'the main one' });
        want.set(k, 'the main one');
      } else if (i % 3 === 0) {
        records.push({ ...t.ids, time: t.first, name: `before-${i}` }, { ...t.ids, time: mid(t), name: `after-${i} ñ 线程 🧵` });
        want.set(k, `after-${i} ñ 线程 🧵`);
      } else if (i % 3 === 1) {
        // read only after its last sample
        records.push({ ...t.ids, time: t.last + 1000, name: `late-${i}` });
        want.set(k, `late-${i}`);
      } else {
        records.push({ ...t.ids, time: t.first, name: `worker-${i}` }, { ...t.ids, time: t.last + 5000, name: `renamed-after-its-end-${i}` });
        want.set(k, `worker-${i}`);
      }
    });
    records.push({ time: 10, interpreterId: 0n, threadId: 42n, nativeThreadId: 4242n, name: 'no samples' });
    records.sort((a, b) => a.time - b.time);
    if (!withNames) records.length = 0;
    const file = path.join(dir, `named-fixture-${withNames}.pyuw`);
    const writer = new CaptureWriter(fileSink(file), (await openCapture(FIXTURE)).header, { blockBytes: 16 << 10 });
    let r = 0;
    for (const b of blocks) {
      for (const c of b.codes) writer.addCode(c);
      for (const x of b.samples) {
        while (r < records.length && records[r]!.time <= x.time) writer.addThreadName(records[r++]!);
        writer.addSample(x);
      }
      writer.addMissed(b.missed);
    }
    while (r < records.length) writer.addThreadName(records[r++]!);
    writer.close();
    return { file, want };
  }

  it('names each thread by the name in force at its last sample: engine = reference = workers = timeline', async () => {
    const { file, want } = await named();
    const engine = await reportCapture(file, { workers: 0 });
    expect(engine.fallbackBlocks).toBe(0);
    expect(engine.blocks).toBeGreaterThan(3);
    expect(new Map(engine.profile.threads().map((t) => [String(t.nativeThreadId), t.name]))).toEqual(want);
    const reference = profileJson(await reportCapture(file, { reference: true }));
    expect(profileJson(engine)).toBe(reference);
    expect(profileJson(await reportCapture(file, { workers: 2 }))).toBe(reference);
    const timeline = (await reportCapture(file, { timeline: true })).timeline!;
    expect(new Map(timeline.threads().map((t) => [String(t.nativeThreadId), t.name]))).toEqual(want);
    expect(want.get([...want.keys()][0]!)).toBe('the main one');
    // without the records: the main thread by its flag, the others unnamed
    const plain = await reportCapture((await named(false)).file, { workers: 0 });
    expect(plain.profile.threads().filter((t) => t.name !== undefined).map((t) => t.name)).toEqual(['MainThread']);
  });

  it('a thread-name record that does not decode: the block goes the reference way, which says so; the rest stays', async () => {
    const { file } = await named();
    const reader = await openCapture(file);
    const parts: Uint8Array[] = [encodeHeader(reader.header)];
    let blocks = 0;
    // (a name record cut inside a varint, after the block's records)
    const broken = (records: Uint8Array): Uint8Array => {
      const w = new ByteWriter(records.length + 8);
      w.bytes(records);
      w.u8(RECORD_TYPE.THREAD_NAME), w.uint(2), w.u8(5), w.u8(0x80);
      return w.view().slice();
    };
    for (const raw of reader.rawBlocks()) {
      const payload = unpack(raw) as Uint8Array;
      const edited = blocks !== 1 ? payload : raw.type === BLOCK_TYPE.SECTIONS ? withSection(payload, SEC_RECORDS, broken) : broken(payload);
      parts.push(blockOf(raw.type, blocks++, edited));
    }
    parts.push(encodeBlock(BLOCK_TYPE.END, blocks, encodeTrailer(reader.trailer!), 0));
    reader.close();
    const file2 = path.join(dir, 'named-broken.pyuw');
    fs.writeFileSync(file2, Buffer.concat(parts));
    const engine = await reportCapture(file2, { workers: 0 });
    expect(engine.fallbackBlocks).toBe(1);
    expect(engine.warnings.map((x) => x.message)).toEqual([expect.stringMatching(/^block 1 at byte \d+: thread name record at (records section|payload) byte \d+: .*$/)]);
    const reference = await reportCapture(file2, { reference: true });
    expect(profileJson(engine)).toBe(profileJson(reference));
    expect(engine.warnings).toEqual(reference.warnings);
    expect(profileJson(engine)).toBe(profileJson(await reportCapture((await named()).file, { workers: 0 })));
  });
});

describe.each(nativeInterpreters())('thread names from threading, $label', (py) => {
  if (py.missing) {
    cannotRun('thread-names', py.label, py.missing);
    return;
  }

  it('record, then report (json, collapsed) names every thread as the program does; engine = reference = workers', async () => {
    // the program renames its thread once the capture holds the first name (so the recording
    // sees both, however late the recorder starts on a busy machine)
    const file = path.join(dir, `${py.label}.pyuw`);
    const program = spawn(py.command, [PROGRAM, 'stdin', '1.5'], { stdio: ['pipe', 'pipe', 'inherit'] });
    children.push(program);
    let out = '';
    program.stdout!.on('data', (d) => (out += String(d)));
    const exited = new Promise<void>((resolve) => program.once('exit', () => resolve()));
    await until(() => states(out).length >= 1, 'the program started');
    // (-d: a bound, should the program not end)
    const recorder = spawn(process.execPath, [BIN, 'record', '-q', '-r', '500', '-d', '90', '-o', file, '--pid', String(program.pid)], { stdio: ['ignore', 'ignore', 'pipe'] });
    children.push(recorder);
    let recorderErr = '';
    recorder.stderr!.on('data', (d) => (recorderErr += String(d)));
    const recorded = new Promise<number | null>((resolve) => recorder.once('exit', (c) => resolve(c)));
    await until(() => namesIn(file).includes('before-rename'), 'the capture holds the first name');
    program.stdin!.end('rename\n');
    await exited;
    const code = await Promise.race([recorded, new Promise<string>((r) => setTimeout(() => r('still recording 30 s after the program exited'), 30_000))]);
    expect(code, recorderErr).toBe(0);
    const [started, renamed] = states(out);
    expect(started?.state).toBe('started');
    expect(renamed?.state).toBe('renamed');
    expect(renamed!.threads).toHaveLength(7);
    const want = new Map(renamed!.threads.map((t) => [String(t.native_id), t.name]));
    const renamedThread = renamed!.threads.find((t) => t.name === 'after-rename')!;

    // the capture holds the names: the renamed thread's first name, then its later one
    const reader = await openCapture(file);
    const records: ThreadNameRecord[] = [];
    for (const b of reader.blocks()) records.push(...b.names);
    reader.close();
    // per thread, the names in the order read (a name read again unchanged is not written again)
    const byThread = (native: number): string[] => records.filter((r) => r.nativeThreadId === BigInt(native)).map((r) => r.name).filter((n, i, a) => i === 0 || a[i - 1] !== n);
    for (const t of renamed!.threads) {
      expect(byThread(t.native_id), t.name).toEqual(t === renamedThread ? ['before-rename', 'after-rename'] : [t.name]);
      expect(records.find((x) => x.nativeThreadId === BigInt(t.native_id))!.threadId).toBe(BigInt(t.ident));
    }
    // written when first read and when changed: a few records, not one per tick
    expect(records.length).toBeLessThan(20);

    // report --format json: every thread, named as the program named it last
    const json = pyunwind(['report', '-q', file, '--format', 'json']);
    expect(json.status, json.stderr).toBe(0);
    const threads = (JSON.parse(json.stdout) as { threads: { nativeThreadId: string; name: string | null; label: string }[] }).threads;
    const got = new Map(threads.map((t) => [t.nativeThreadId, t.name]));
    expect(got).toEqual(want);
    for (const t of threads) expect(t.label).toBe(`${want.get(t.nativeThreadId)} (tid ${t.nativeThreadId})`);

    // collapsed: each line's thread element is the thread's name and tid
    const collapsed = pyunwind(['report', '-q', file, '--format', 'collapsed']);
    expect(collapsed.status, collapsed.stderr).toBe(0);
    const labels = new Set(collapsed.stdout.trim().split('\n').map((l) => l.slice(0, l.indexOf(';'))));
    expect(labels).toEqual(new Set(renamed!.threads.map((t) => `${t.name} (tid ${t.native_id})`)));

    // the same profile, names included, from the engine, the reference path and workers
    const engine = await reportCapture(file, { workers: 0 });
    expect(engine.fallbackBlocks).toBe(0);
    expect(new Map(engine.profile.threads().map((t) => [String(t.nativeThreadId), t.name]))).toEqual(want);
    const reference = profileJson(await reportCapture(file, { reference: true }));
    expect(profileJson(engine)).toBe(reference);
    expect(profileJson(await reportCapture(file, { workers: 2 }))).toBe(reference);
    // and the timeline (the formats that show time) names them alike
    const timeline = (await reportCapture(file, { timeline: true })).timeline!;
    expect(new Map(timeline.threads().map((t) => [String(t.nativeThreadId), t.name]))).toEqual(want);
    recordCoverage('thread-names record/report', py.label, true);
  }, 180_000);

  it('dump (json, text) names every thread as the program does; the reading policy and its cost', async () => {
    const child = spawn(py.command, [PROGRAM, '0.1', '60'], { stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(child);
    const renamed = await new Promise<ProgramState>((resolve, reject) => {
      let out = '';
      child.stdout!.on('data', (d) => {
        out += String(d);
        const s = states(out).find((x) => x.state === 'renamed');
        if (s) resolve(s);
      });
      child.once('exit', (c) => reject(new Error(`program exited ${c}`)));
    });
    try {
      const d = pyunwind(['dump', '--pid', String(child.pid), '-f', 'json']);
      expect(d.status, d.stderr).toBe(0);
      const dumped = JSON.parse(d.stdout) as { threads: { nativeThreadId: number; name: string | null }[] };
      expect(new Map(dumped.threads.map((t) => [t.nativeThreadId, t.name]))).toEqual(new Map(renamed.threads.map((t) => [t.native_id, t.name])));
      const text = pyunwind(['dump', '--pid', String(child.pid)]);
      expect(text.status, text.stderr).toBe(0);
      for (const t of renamed.threads) expect(text.stdout).toContain(`Thread ${t.native_id} ${t.name} (interpreter 0,`);

      const source = openLinuxProcess(child.pid!);
      try {
        // one read: every thread's name, by ident
        const names = new Map(readThreadNames(source).map((n) => [n.threadId, n.name]));
        expect(names).toEqual(new Map(renamed.threads.map((t) => [BigInt(t.ident), t.name])));
        // (the recorder's own CPU time: on a busy machine the wall time is mostly waiting for a core)
        const n = 50;
        const t0 = performance.now();
        const cpu0 = process.cpuUsage();
        for (let i = 0; i < n; i++) readThreadNames(source);
        const cpu = process.cpuUsage(cpu0);
        const wall = ((performance.now() - t0) * 1000) / n;
        console.log(`[thread-names] ${py.label}: one read of ${names.size} names: ${((cpu.user + cpu.system) / n).toFixed(0)} µs of CPU, ${wall.toFixed(0)} µs wall (the recorder reads at the start, on new threads, and every ${NAMES_REFRESH_MS} ms)`);

        // the policy: a read at the first tick, none on the ticks after, one for a new thread
        // (not sooner than the minimum gap), one at each refresh
        const ids = renamed.threads.map((t) => ({ interpreterId: 0n, threadId: BigInt(t.ident), nativeThreadId: BigInt(t.native_id) }));
        const namer = new ThreadNamer(source);
        let now = 1000;
        const first = namer.tick(ids, 0, now);
        expect(namer.reads).toBe(1);
        expect(new Map(first.map((r) => [r.nativeThreadId, r.name]))).toEqual(new Map(renamed.threads.map((t) => [BigInt(t.native_id), t.name])));
        for (let i = 1; i < 100; i++) expect(namer.tick(ids, i, (now += 5))).toEqual([]);
        expect(namer.reads).toBe(1);
        // a thread appears that threading does not know: read soon, a few times, then left to the refresh
        const stranger = { interpreterId: 0n, threadId: 1234n, nativeThreadId: 99999n };
        now += NAMES_REFRESH_MS - 500 - 5 * 99;
        let reads = namer.reads;
        for (let i = 0; i < 20; i++) namer.tick([...ids, stranger], 1000 + i, (now += NAMES_MIN_GAP_MS / 2));
        expect(namer.reads - reads).toBeGreaterThanOrEqual(2);
        expect(namer.reads - reads).toBeLessThanOrEqual(4);
        reads = namer.reads;
        for (let i = 0; i < 20; i++) namer.tick([...ids, stranger], 2000 + i, (now += 10));
        expect(namer.reads).toBe(reads);
        // the refresh: a read, and nothing written (no name changed)
        expect(namer.tick(ids, 3000, (now += NAMES_REFRESH_MS))).toEqual([]);
        expect(namer.reads).toBe(reads + 1);
      } finally {
        source.close();
      }
      recordCoverage('thread-names dump', py.label, true);
    } finally {
      child.kill('SIGKILL');
    }
  }, 120_000);
});
