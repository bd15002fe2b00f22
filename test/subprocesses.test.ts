// record --subprocesses on every native interpreter: workloads/subprocs.py is a parent that
// starts two Python children — one with subprocess.Popen of the interpreter running a script
// (fork and exec), one with multiprocessing's 'fork' start method (fork, no exec) — and each of
// the three spins in a function of its own name. Recorded with --subprocesses, it gives three
// captures: the parent's (-o FILE) and one per child named by its pid (out.PID.pyuw), whose pids
// are those the processes printed, whose headers name the parent, which read back complete
// (each child exits before the recording ends), and in each of which the hottest function by
// self is the one that process was built to spin in. `report --subprocesses` finds the children's
// captures and reports the three apart (json: a document per process; collapsed: the process
// first in each line). Without --subprocesses only the parent is recorded.
import { spawn, spawnSync } from 'node:child_process';
import { createInterface } from 'node:readline';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { nativeInterpreters, type Interpreter } from '../harness/interpreters.js';
import { reportCapture } from '../src/pipeline/report-file.js';
import { subprocessOutput } from '../src/record/linux/record-process.js';
import { Profile, Timeline, type SampleInput } from '../src/profile/index.js';
import { exportCollapsed, processLabel, threadLabel } from '../src/export/index.js';
import { combineProcesses, makeSeveral, type ProcessInput } from '../src/export/formats.js';
import type { CaptureReport } from '../src/pipeline/process-capture.js';
import { loadNative } from '../src/record/linux/native.js';
import { recordCoverage, cannotRun, skipTest } from './helpers/coverage.js';
import { cannotTryKernelCopies, withInterruptCases } from './helpers/bpf.js';
import { readCaptureBytes } from '../src/capture/index.js';
import { SAMPLE_FLAG } from '../src/capture/types.js';

const BIN = path.resolve('bin/pyunwind.js');
const WORKLOAD = path.resolve('workloads/subprocs.py');
const SECONDS = 2;
const SPIN: Record<Role, string> = { parent: 'parent_spin', popen: 'popen_child_spin', forked: 'forked_child_spin' };
type Role = 'parent' | 'popen' | 'forked';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pyunwind-subprocesses-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

function pyunwind(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const started = performance.now();
  const r = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', timeout: 120_000, env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' } });
  // (a run that did not end says how it was stopped, after how long, and what it had printed)
  const why = r.status === null ? `pyunwind ${args.join(' ')}: ${r.error?.message ?? `signal ${r.signal}`} after ${Math.round(performance.now() - started)} ms; stdout ${r.stdout.length} bytes\n` : '';
  return { status: r.status, stdout: r.stdout, stderr: why + r.stderr };
}

/**
 * The interpreter to run: the Debian ones are launchers (a shell script running the binary
 * through the suite's loader), whose sys.executable cannot start on this system's C library,
 * so their patched binary beside them (python3.15p: its own loader) is run instead.
 */
function runnable(py: Interpreter): string {
  return fs.existsSync(`${py.command}p`) ? `${py.command}p` : py.command;
}

interface JsonThread {
  label: string;
  functions: { qualname: string; self: number; total: number }[];
  summary: { trusted: number };
}
interface JsonReport {
  metadata: { target: string };
  threads: JsonThread[];
}

/** The function with the most samples by self over the report's threads, and the trusted samples. */
function hottest(r: JsonReport): { name: string; trusted: number } {
  let best = { name: '', self: -1 };
  let trusted = 0;
  for (const t of r.threads) {
    trusted += t.summary.trusted;
    for (const f of t.functions) if (f.self > best.self) best = { name: f.qualname, self: f.self };
  }
  return { name: best.name, trusted };
}

/** The pids the workload printed, by role. */
function printedPids(stdout: string): Record<Role, number> {
  const out: Partial<Record<Role, number>> = {};
  let done: { popen: number; forked: number } | null = null;
  for (const line of stdout.split('\n')) {
    if (!line.startsWith('{')) continue;
    const o = JSON.parse(line) as { role: string; pid?: number; popen?: number; forked?: number };
    if (o.role === 'done') done = { popen: o.popen!, forked: o.forked! };
    else out[o.role as Role] = o.pid!;
  }
  expect(done, `the workload did not finish: ${stdout}`).toEqual({ popen: 0, forked: 0 });
  return out as Record<Role, number>;
}

describe('subprocesses: names and the profile of several processes', () => {
  it('a subprocess capture is named by its pid before the extension', () => {
    expect(subprocessOutput('out.pyuw', 1234)).toBe('out.1234.pyuw');
    expect(subprocessOutput('/tmp/a.b/out.pyuw', 1234, 2)).toBe('/tmp/a.b/out.1234-2.pyuw');
    expect(subprocessOutput('dir/capture', 7)).toBe('dir/capture.7');
    expect(subprocessOutput('./.hidden', 7)).toBe('./.hidden.7');
  });

  it('a process is named by pid and command line, without the interpreter', () => {
    expect(processLabel({ pid: 12, command: ['/usr/bin/python3.15', '/home/me/app.py', '--worker', '3'], target: 'x' })).toBe('pid 12 (app.py --worker 3)');
    expect(processLabel({ pid: 12, command: ['/opt/tool', 'x'], target: 'x' })).toBe('pid 12 (tool x)');
    expect(processLabel({ pid: 12, target: 'x' })).toBe('pid 12');
    expect(processLabel({ target: 'pid 9 (python3.15, 3.15.2)' })).toBe('pid 9 (python3.15, 3.15.2)');
    expect(processLabel({ pid: 1, command: ['python', '-c', 'a\nb' + 'x'.repeat(80)], target: '' })).toMatch(/^pid 1 \(-c a bx+…\)$/);
  });

  // two processes whose threads have equal ids (a fork child keeps its parent's thread id;
  // here the native ids are equal too): apart in the profile, its JSON, the timeline and exports
  const thread = { interpreterId: 0n, threadId: 77n, nativeThreadId: 100n, name: 'MainThread' };
  const sample = (qualname: string, time: number): SampleInput => ({ time, thread, status: 'complete', frames: [{ qualname, filename: 'app.py', line: 1 }] });
  const one = (qualname: string, start: number): ProcessInput => {
    const profile = new Profile();
    const timeline = new Timeline();
    for (const t of [0, 1000, 2000]) {
      profile.add(sample(qualname, t));
      timeline.add(sample(qualname, t));
    }
    profile.addTicks(3);
    const header = { layoutSource: { kind: 'builtin', id: 'builtin/3.12/x86_64', versionHex: 0x030c01f0 }, pointerSize: 8, pythonVersion: '3.12.1', target: 't', runtimeAddress: 0n, rateHz: 1000, startTime: start, recorder: 'pyunwind', pid: start, command: ['python3', `${qualname}.py`] };
    const report = { header, profile, timeline, recording: { samples: 3, copyMicros: { mean: 1, p50: 1, p99: 1, max: 1 }, stopped: 0, retried: 0 }, warnings: [], closedCleanly: true, blocks: 1, fallbackBlocks: 0, mode: 'wall' } as unknown as CaptureReport;
    return { file: `${qualname}.pyuw`, report, meta: { title: `pid ${start}`, pythonVersion: '3.12.1', rateHz: 1000, startTime: start, recorder: 'pyunwind', copy: 'adaptive', mode: 'wall' } };
  };

  it('combined: each thread under its process, on one clock; the JSON keeps the process', () => {
    const { report, meta, tags } = combineProcesses([one('parent', 5000), one('child', 5002)]);
    expect(tags.map((t) => t.label)).toEqual(['pid 5000 (parent.py)', 'pid 5002 (child.py)']);
    expect(meta.title).toBe('pid 5000 and 1 subprocess');
    const threads = report.profile.threads();
    expect(threads.map((t) => threadLabel(t))).toEqual(['pid 5000 (parent.py): MainThread (tid 100)', 'pid 5002 (child.py): MainThread (tid 100)']);
    expect(report.profile.stats().ticks).toBe(6);
    expect(Profile.fromJSON(JSON.parse(JSON.stringify(report.profile.toJSON()))).threads().map((t) => t.process?.label)).toEqual(tags.map((t) => t.label));
    // the child started 2 ms later: its samples 2000 µs later on the common clock
    expect(report.timeline!.threads().map((t) => t.time)).toEqual([[0, 1000, 2000], [2000, 3000, 4000]]);
    expect(exportCollapsed(report.profile)).toBe('pid 5000 (parent.py);MainThread (tid 100);parent (app.py:1) 3\npid 5002 (child.py);MainThread (tid 100);child (app.py:1) 3\n');
  });

  it('text and json: each process its own report; pstats refused', async () => {
    const inputs = [one('parent', 5000), one('child', 5002)];
    const text = (await makeSeveral('text', inputs, { top: 5 })) as string;
    expect(text.split('\n')[0]).toBe('2 processes: pid 5000 (parent.py), pid 5002 (child.py)');
    expect(text).toContain('Process 2 of 2: pid 5002 (child.py) — child.pyuw');
    const json = JSON.parse((await makeSeveral('json', inputs, { top: 5 })) as string) as { format: string; processes: { file: string; pid: number; report: { ticks: number } }[] };
    expect(json.format).toBe('pyunwind-processes');
    expect(json.processes.map((p) => [p.file, p.pid, p.report.ticks])).toEqual([['parent.pyuw', 5000, 3], ['child.pyuw', 5002, 3]]);
    await expect(makeSeveral('pstats', inputs, { top: 5 })).rejects.toThrow(/pstats has no place for processes/);
  });
});

// A subprocess the recorder holds stopped is the recorder's tracee, not its child: if it ends
// then (killed), its parent sees it end only once the recorder has waited for it. Before that
// was done, a parent that waited for a child ended under the recorder waited for ever — and
// so did a recording that ends with that parent.
describe('a stopped subprocess that ends', () => {
  const native = loadNative();
  if (typeof native === 'string') {
    cannotRun('subprocesses', 'stopped subprocess ends', native);
    return;
  }
  it('is handed back to its parent, which sees it end', async () => {
    const sh = spawn('sh', ['-c', 'sleep 30 & echo $!; wait $!; echo "waited $?"'], { stdio: ['ignore', 'pipe', 'inherit'] });
    const lines = createInterface({ input: sh.stdout! })[Symbol.asyncIterator]();
    const pid = Number((await lines.next()).value);
    try {
      expect(native.stopThreads(pid, [pid], 1000)).toEqual(['stopped']);
      process.kill(pid, 'SIGKILL');
      native.resumeThread(pid, pid);
      // (what the sampling loop does every few ms: the thread may not have ended yet)
      native.releaseLingering(1000);
      const waited = await Promise.race([lines.next().then((r) => r.value as string), new Promise<string>((r) => setTimeout(() => r('no answer in 10 s'), 10_000))]);
      expect(waited).toBe('waited 137');
    } finally {
      sh.kill('SIGKILL');
    }
  });
});

// (with --copy interrupt too, where the kernel copies can be made: each process its own copier)
const cases = withInterruptCases(nativeInterpreters());

describe.each(cases)('record --subprocesses, $py.label, copied at the interrupt: $interrupt', ({ py, interrupt }) => {
  const what = interrupt ? 'subprocesses interrupt' : 'subprocesses';
  if (py.missing) {
    cannotRun(what, py.label, py.missing!);
    return;
  }
  it('a parent and its two Python children (Popen: fork+exec; multiprocessing: fork): three captures, each its own hottest function', async (ctx) => {
    const why = interrupt ? cannotTryKernelCopies() : null;
    if (why) skipTest(ctx, what, py.label, why);
    const sub = path.join(dir, `${py.label}${interrupt ? '-interrupt' : ''}`);
    fs.mkdirSync(sub);
    const out = path.join(sub, 'out.pyuw');
    const rec = pyunwind(['record', '-q', '--subprocesses', ...(interrupt ? ['--copy', 'interrupt'] : []), '-r', '1000', '-o', out, '--', runnable(py), WORKLOAD, String(SECONDS)]);
    expect(rec.status, rec.stderr).toBe(0);
    const pids = printedPids(rec.stdout);
    expect(new Set(Object.values(pids)).size).toBe(3);

    // the parent in -o FILE, each child in FILE with its pid; nothing else
    const file: Record<Role, string> = { parent: out, popen: path.join(sub, `out.${pids.popen}.pyuw`), forked: path.join(sub, `out.${pids.forked}.pyuw`) };
    expect(fs.readdirSync(sub).sort()).toEqual(['out.pyuw', `out.${pids.popen}.pyuw`, `out.${pids.forked}.pyuw`].sort());
    // the summary: a line per process (pid, samples, capture, command line)
    // (copies at the interrupt: and the share of each one's samples copied in the kernel — not
    // none: each has a thread that spins, whose samples while it runs are the kernel's; how
    // many it gets depends on the machine's load — a third on an idle one, 12 % seen under the
    // whole suite — and a process whose copier was not attached has none)
    expect(rec.stderr).toMatch(interrupt ? /3 processes recorded \(pid, samples, share copied in the kernel, capture, command line\):/ : /3 processes recorded \(pid, samples, capture, command line\):/);
    for (const role of ['parent', 'popen', 'forked'] as const) {
      const kernel = interrupt ? '\\s+([\\d.]+)% in the kernel' : '()';
      const row = new RegExp(`\\n\\s+${pids[role]}\\s+\\d+${kernel}\\s+${file[role].replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\s+\\S`).exec(rec.stderr);
      expect(row, rec.stderr).not.toBeNull();
      if (interrupt) expect(Number(row![1]), `${role}: ${rec.stderr}`).toBeGreaterThan(0);
    }
    expect(rec.stderr).toMatch(/looked for subprocesses \d+ times/);

    const lines: string[] = [];
    for (const role of ['parent', 'popen', 'forked'] as const) {
      // complete: closed properly, nothing damaged — the children exited before the recording ended
      const r = await reportCapture(file[role]);
      expect(r.closedCleanly, role).toBe(true);
      if (interrupt) {
        // nothing stopped, in any of the processes
        let stopped = 0;
        for (const b of readCaptureBytes(fs.readFileSync(file[role])).blocks()) for (const smp of b.samples) if (smp.flags & SAMPLE_FLAG.STOPPED) stopped++;
        expect(stopped, role).toBe(0);
      }
      expect(r.warnings, role).toEqual([]);
      expect(r.header.pid, role).toBe(pids[role]);
      if (role === 'parent') {
        expect(r.header.parentPid).toBeUndefined();
      } else {
        expect(r.header.parentPid, role).toBe(pids.parent);
        expect(r.header.rootPid, role).toBe(pids.parent);
      }
      if (role === 'popen') expect(r.header.command).toContain('--popen-child');

      const rep = pyunwind(['report', '-q', file[role], '--format', 'json']);
      expect(rep.status, rep.stderr).toBe(0);
      const doc = JSON.parse(rep.stdout) as JsonReport;
      expect(doc.metadata.target.startsWith(`pid ${pids[role]} `), role).toBe(true);
      const hot = hottest(doc);
      // (few on a busy machine — three processes spinning on the test machine's two cores, beside
      // the recorder and the other tests — but each process spins in its function all its life)
      expect(hot.trusted, role).toBeGreaterThan(20);
      expect(hot.name, `${role}: ${rep.stdout.slice(0, 2000)}`).toBe(SPIN[role]);
      lines.push(`${role} pid ${pids[role]}: ${hot.trusted} trusted samples, hottest ${hot.name}`);
    }

    // report --subprocesses finds the children's captures: three processes, apart
    const all = pyunwind(['report', '-q', '--subprocesses', out, '--format', 'json']);
    expect(all.status, all.stderr).toBe(0);
    const doc = JSON.parse(all.stdout) as { format: string; processes: { pid: number; parentPid: number | null; file: string; report: JsonReport }[] };
    expect(doc.format).toBe('pyunwind-processes');
    expect(doc.processes.map((p) => p.pid)).toEqual([pids.parent, ...[pids.popen, pids.forked].sort((a, b) => a - b)]);
    for (const p of doc.processes) {
      const role = (Object.keys(pids) as Role[]).find((r) => pids[r] === p.pid)!;
      expect(p.file).toBe(file[role]);
      expect(p.parentPid).toBe(role === 'parent' ? null : pids.parent);
      expect(hottest(p.report).name).toBe(SPIN[role]);
    }
    const collapsed = pyunwind(['report', '-q', out, file.popen, file.forked, '--format', 'collapsed']);
    expect(collapsed.status, collapsed.stderr).toBe(0);
    for (const role of ['parent', 'popen', 'forked'] as const) {
      const mine = collapsed.stdout.split('\n').filter((l) => l.startsWith(`pid ${pids[role]} (`));
      expect(mine.length, role).toBeGreaterThan(0);
      expect(mine.some((l) => l.includes(`;${SPIN[role]} (`)), role).toBe(true);
      // a process's stacks hold only its own function
      for (const other of ['parent', 'popen', 'forked'] as const) if (other !== role) expect(mine.some((l) => l.includes(`;${SPIN[other]} (`)), `${role} has ${other}'s`).toBe(false);
    }
    console.log(`[${what}] ${py.label}: ${lines.join('; ')}`);
    recordCoverage(what, py.label, true);
  }, 180_000);
});

describe('record without --subprocesses', () => {
  const py = [...nativeInterpreters()].reverse().find((p) => !p.missing);
  if (!py) {
    cannotRun('subprocesses', 'without --subprocesses', 'no native interpreter');
    return;
  }
  it(`records only the parent (${py.label})`, async () => {
    const sub = path.join(dir, 'parent-only');
    fs.mkdirSync(sub);
    const out = path.join(sub, 'out.pyuw');
    const rec = pyunwind(['record', '-q', '-r', '1000', '-o', out, '--', runnable(py), WORKLOAD, '1']);
    expect(rec.status, rec.stderr).toBe(0);
    const pids = printedPids(rec.stdout);
    expect(fs.readdirSync(sub)).toEqual(['out.pyuw']);
    expect(rec.stderr).not.toMatch(/processes recorded|looked for subprocesses/);
    const r = await reportCapture(out);
    expect(r.header.pid).toBe(pids.parent);
    const rep = pyunwind(['report', '-q', out, '--format', 'json']);
    expect(hottest(JSON.parse(rep.stdout) as JsonReport).name).toBe(SPIN.parent);
    // and report --subprocesses finds none
    const all = pyunwind(['report', '-q', '--subprocesses', out, '--format', 'collapsed']);
    expect(all.status, all.stderr).toBe(0);
    expect(all.stdout.split('\n').filter(Boolean).every((l) => l.startsWith('MainThread ('))).toBe(true);
  }, 120_000);
});
