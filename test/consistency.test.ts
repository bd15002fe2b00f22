// Consistent copies of a running stack. The churn oracle (workloads/churn.py) calls and
// returns far faster than a copy takes, through functions whose possible stacks are known;
// it is recorded live at 5 kHz for 4 s, and every accepted stack is checked against the set of
// possible ones: none may be impossible, in any mode. Also: the anchor written into the target
// (3.15+) is back to 0 after every kind of end, and the target runs on unharmed.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { anchors } from './helpers/anchors.js';
import { recordCoverage } from './helpers/coverage.js';
import { CHURN_STACKS } from '../harness/churn.js';
import { nativeInterpreters, type Interpreter } from '../harness/interpreters.js';
import { untilReadable, waitUntil } from './helpers/wait.js';

const BIN = path.resolve('bin/pyunwind.js');
const CHURN = path.resolve('workloads/churn.py');


const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pyunwind-consistency-'));
const children: ChildProcess[] = [];
afterAll(() => {
  children.forEach((c) => c.kill('SIGKILL'));
  fs.rmSync(dir, { recursive: true, force: true });
});

interface Outcome {
  attempted: number;
  accepted: number;
  rejected: number;
  impossible: string[];
  statuses: Record<string, number>;
  copyMicros: { mean: number; p50: number; p99: number };
  stopped: number;
  rounds: number;
}

function startChurn(py: Interpreter, seconds: number): { child: ChildProcess; done: Promise<number> } {
  const child = spawn(py.command, [CHURN, String(seconds)], { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  const done = new Promise<number>((resolve) =>
    child.once('close', () => resolve(out.trim() ? (JSON.parse(out.trim().split('\n').pop()!) as { rounds: number }).rounds : 0)),
  );
  return { child, done };
}

/** Record churn.py in `mode` at `rate` Hz until it exits, and judge every accepted stack. */
async function recordChurn(py: Interpreter, mode: string, rate: number, seconds: number, extra: string[] = []): Promise<Outcome> {
  const { child, done } = startChurn(py, seconds);
  await untilReadable(child.pid!);
  const file = path.join(dir, `${py.label}-${mode}.pyuw`);
  const rec = spawnSync(process.execPath, [BIN, 'record', '--pid', String(child.pid), '-o', file, '-r', String(rate), '--copy', mode, '-q', ...extra], {
    encoding: 'utf8',
    timeout: 120_000,
  });
  expect(rec.status, rec.stderr).toBe(0);
  const rounds = await done;
  const rep = spawnSync(process.execPath, [BIN, 'report', file, '-f', 'json', '-q'], { encoding: 'utf8', timeout: 120_000 });
  expect(rep.status, rep.stderr).toBe(0);
  const json = JSON.parse(rep.stdout) as {
    summary: { attempted: number; trusted: number; rejected: number; statuses: Record<string, number> };
    metadata: { recording: { copyMicros: { mean: number; p50: number; p99: number }; stopped: number } };
    threads: { frames: { qualname: string }[]; stacks: [number, number, number][] }[];
  };
  const impossible: string[] = [];
  let accepted = 0;
  for (const t of json.threads) {
    for (let i = 0; i < t.stacks.length; i++) {
      const names: string[] = [];
      for (let k = i; k >= 0; k = t.stacks[k]![0]) names.unshift(t.frames[t.stacks[k]![1]]!.qualname);
      const weight = t.stacks[i]![2];
      accepted += weight;
      if (weight > 0 && !CHURN_STACKS.has(names.join(';'))) impossible.push(`${names.join(';')} ×${weight}`);
    }
  }
  const s = json.summary;
  return {
    attempted: s.attempted,
    accepted,
    rejected: s.rejected,
    impossible,
    statuses: s.statuses,
    copyMicros: json.metadata.recording.copyMicros,
    stopped: json.metadata.recording.stopped,
    rounds,
  };
}

/**
 * recordChurn again until the recordings together attempted at least `enough` samples (at most
 * four recordings): a loaded machine gives the recorder fewer ticks in a run of fixed length,
 * and the check needs enough stacks to mean something. The outcomes add up (the copy window
 * and the share stopped are the last recording's).
 */
async function recordChurnUntil(py: Interpreter, mode: string, rate: number, seconds: number, enough: number, extra: string[] = []): Promise<Outcome> {
  let sum: Outcome | null = null;
  for (let k = 0; k < 4 && (sum === null || sum.attempted < enough); k++) {
    const o = await recordChurn(py, mode, rate, seconds, extra);
    if (sum === null) sum = o;
    else {
      const statuses: Record<string, number> = { ...sum.statuses };
      for (const [key, n] of Object.entries(o.statuses)) statuses[key] = (statuses[key] ?? 0) + n;
      sum = {
        ...o,
        attempted: sum.attempted + o.attempted,
        accepted: sum.accepted + o.accepted,
        rejected: sum.rejected + o.rejected,
        impossible: [...sum.impossible, ...o.impossible],
        statuses,
        rounds: sum.rounds + o.rounds,
      };
    }
  }
  return sum!;
}

function describeOutcome(label: string, mode: string, o: Outcome): string {
  const pct = (n: number) => `${((100 * n) / Math.max(1, o.attempted)).toFixed(1)}%`;
  return (
    `${label} ${mode}: ${o.attempted} attempted, ${o.accepted} accepted, rejected ${pct(o.rejected)} ` +
    `(torn ${o.statuses['torn'] ?? 0}, incomplete ${o.statuses['incomplete'] ?? 0}, corrupt ${o.statuses['corrupt'] ?? 0}), ` +
    `impossible ${o.impossible.length}, stopped ${pct(o.stopped)}, copy window ${o.copyMicros.mean} µs mean / ${o.copyMicros.p99} µs p99`
  );
}

const churnTargets = nativeInterpreters().filter((p) => /^debian-3\.1[3-9]/.test(p.label));

describe.each(churnTargets)('the churn oracle on $label', (py) => {
  if (py.missing) {
    it(`is skipped: ${py.missing}`, () => recordCoverage('consistency', py.label, false, py.missing!));
    return;
  }
  it('default mode, 5 kHz for 4 s: no impossible stack accepted', async () => {
    const o = await recordChurnUntil(py, 'adaptive', 5000, 4.5, 600);
    console.log(describeOutcome(py.label, 'adaptive (default)', o));
    // how many samples the recorder gets depends on the machine's load (2,000-10,000 on a
    // quiet one, 800 beside two busy loops: most of churn's copies are made stopped, and each
    // stop waits for the kernel); the check needs enough accepted stacks to mean something,
    // and records again while it has too few (recordChurnUntil)
    expect(o.attempted).toBeGreaterThan(500);
    expect(o.accepted).toBeGreaterThan(500);
    expect(o.impossible).toEqual([]);
    // no sample lost to the check (0.0 % measured on a quiet machine, docs/validation.md; a
    // little more while other tests load the machine)
    expect(o.rejected / o.attempted).toBeLessThanOrEqual(0.05);
    recordCoverage('consistency', `${py.label} churn`, true);
  });
  it('blocking: no impossible stack accepted', async () => {
    const o = await recordChurnUntil(py, 'blocking', 1000, 3, 300);
    console.log(describeOutcome(py.label, 'blocking', o));
    expect(o.attempted).toBeGreaterThan(200);
    expect(o.impossible).toEqual([]);
  });
  it('optimistic (never stops the target): none impossible with the anchor; without it, the weaker re-read check', async () => {
    for (const extra of [[], ['--read-only']]) {
      const o = await recordChurnUntil(py, 'optimistic', 5000, 3, 300, extra);
      const mode = `optimistic ${extra.join(' ')}`.trim();
      console.log(describeOutcome(py.label, mode, o));
      expect(o.attempted).toBeGreaterThan(200);
      const anchored = extra.length === 0 && py.label === 'debian-3.15';
      if (anchored) expect(o.impossible).toEqual([]);
      // the re-read check's guarantee is weaker (docs/validation.md): rare, never many
      else expect(o.impossible.reduce((n, s) => n + Number(s.split('×')[1]), 0)).toBeLessThanOrEqual(Math.max(5, o.accepted * 0.01));
    }
  });
});

// ---------------------------------------------------------------------------------------------
// The anchor is put back

const anchored = nativeInterpreters().find((p) => p.label === 'debian-3.15');

/** Resolves once some thread of pid has its anchor set (the recorder is copying it). */
const anchorSet = (pid: number): Promise<void> => waitUntil(() => anchors(pid).some((a) => a !== 0n), `the recorder to set an anchor in pid ${pid}`);

describe('the profiler anchor after recording', () => {
  if (!anchored || anchored.missing) {
    const why = anchored?.missing ?? 'no Debian 3.15 interpreter';
    it(`is skipped: ${why}`, () => recordCoverage('consistency', 'anchor', false, why));
    return;
  }
  const ends: { name: string; run: (pid: number, file: string) => Promise<number | null> }[] = [
    {
      name: 'a normal end (--duration)',
      run: async (pid, file) => spawnSync(process.execPath, [BIN, 'record', '--pid', String(pid), '-o', file, '-d', '1', '-q']).status,
    },
    ...(['SIGINT', 'SIGTERM'] as const).map((signal) => ({
      name: signal,
      run: async (pid: number, file: string) => {
        const r = spawn(process.execPath, [BIN, 'record', '--pid', String(pid), '-o', file, '-q'], { stdio: 'ignore' });
        children.push(r);
        // while it records, the anchor is in use (so "back to 0" below means something)
        await anchorSet(pid);
        r.kill(signal);
        return new Promise<number | null>((res) => r.once('exit', (c) => res(c)));
      },
    })),
    {
      // the capture goes to a named pipe whose reader goes away part-way: the next block
      // cannot be written
      name: 'a recorder error (its output closed while recording)',
      run: async (pid: number, file: string) => {
        expect(spawnSync('mkfifo', [file]).status).toBe(0);
        const r = spawn(process.execPath, [BIN, 'record', '--pid', String(pid), '-o', file, '-q'], { stdio: ['ignore', 'ignore', 'pipe'] });
        children.push(r);
        let stderr = '';
        r.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
        const reader = fs.createReadStream(file);
        await new Promise((res) => reader.once('data', res));
        await anchorSet(pid);
        reader.destroy();
        const code = await new Promise<number | null>((res) => r.once('exit', (c) => res(c)));
        expect(stderr).toMatch(/^pyunwind record: .*EPIPE/);
        return code;
      },
    },
  ];
  for (const end of ends) {
    it(`is 0 after ${end.name}, and the target runs on`, async () => {
      const { child, done } = startChurn(anchored, 4);
      await untilReadable(child.pid!);
      const code = await end.run(child.pid!, path.join(dir, `anchor-${end.name.replace(/\W+/g, '-')}.pyuw`));
      if (end.name.startsWith('a recorder error')) expect(code).not.toBe(0);
      else expect(code).toBe(0);
      expect(child.exitCode).toBe(null);
      expect(anchors(child.pid!).every((a) => a === 0n)).toBe(true);
      // unharmed: it finishes its work and exits normally
      expect(await done).toBeGreaterThan(0);
      expect(child.exitCode).toBe(0);
    });
  }
});

// ---------------------------------------------------------------------------------------------
// Bias: rejecting copies that moved favours long-lived frames. On a steady program the
// per-function totals of the default mode must match the exact ones (--blocking).

const STEADY = path.resolve('workloads/steady.py');

async function functionShares(py: Interpreter, mode: string): Promise<Map<string, number>> {
  const child = spawn(py.command, [STEADY, '6'], { stdio: ['ignore', 'ignore', 'inherit'] });
  children.push(child);
  const closed = new Promise((r) => child.once('close', r));
  await untilReadable(child.pid!);
  const file = path.join(dir, `steady-${py.label}-${mode}.pyuw`);
  const rec = spawnSync(process.execPath, [BIN, 'record', '--pid', String(child.pid), '-o', file, '-r', '2000', '--copy', mode, '-q'], {
    encoding: 'utf8',
    timeout: 120_000,
  });
  expect(rec.status, rec.stderr).toBe(0);
  await closed;
  const rep = spawnSync(process.execPath, [BIN, 'report', file, '-f', 'json', '-q'], { encoding: 'utf8', timeout: 120_000 });
  const json = JSON.parse(rep.stdout) as { threads: { functions: { qualname: string; total: number }[]; summary: { stackedWeight: number } }[] };
  const t = json.threads[0]!;
  // shares of a few hundred samples would differ by sampling noise alone
  expect(t.summary.stackedWeight, `${mode}: samples`).toBeGreaterThan(1000);
  return new Map(t.functions.map((f) => [f.qualname, (100 * f.total) / t.summary.stackedWeight]));
}

describe.each(churnTargets)('bias on a steady program, $label', (py) => {
  if (py.missing) {
    it(`is skipped: ${py.missing}`, () => recordCoverage('consistency', `${py.label} bias`, false, py.missing!));
    return;
  }
  // Two recordings of two runs on a 2-core machine shared with other test files: a run whose
  // target was starved of CPU can land off by itself (seen once in CI: blocking alone 6 points
  // off the program's usual split). Such a comparison is made again, up to twice.
  it('per-function totals of the default mode are within 5 points of --blocking', { retry: 2 }, async () => {
    const adaptive = await functionShares(py, 'adaptive');
    const blocking = await functionShares(py, 'blocking');
    const rows: string[] = [];
    for (const name of ['main', 'step', 'parse', 'render', 'layout']) {
      const a = adaptive.get(name) ?? 0;
      const b = blocking.get(name) ?? 0;
      rows.push(`${name} ${a.toFixed(1)}% vs ${b.toFixed(1)}%`);
      expect(Math.abs(a - b), `${name}: default ${a.toFixed(1)}%, blocking ${b.toFixed(1)}%`).toBeLessThanOrEqual(5);
    }
    expect(blocking.get('parse') ?? 0).toBeGreaterThan(20);
    console.log(`${py.label} steady, default vs blocking: ${rows.join(', ')}`);
  });
});

// ---------------------------------------------------------------------------------------------
// A stopped target is resumed on every path, also when the recorder is killed outright

function stateOf(pid: number): string {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'latin1');
  return stat[stat.lastIndexOf(')') + 2]!;
}

describe('--blocking and a recorder killed with SIGKILL', () => {
  const py = nativeInterpreters().find((p) => !p.missing);
  if (!py) {
    it('is skipped: no native interpreter', () => recordCoverage('consistency', 'blocking kill', false, 'no native interpreter'));
    return;
  }
  it('leaves the target running', async () => {
    // (long enough for the rounds on a busy machine; each round ends with the target running)
    const { child, done } = startChurn(py, 10);
    await untilReadable(child.pid!);
    let rounds = 0;
    for (let round = 0; round < 5 && child.exitCode === null; round++, rounds++) {
      const file = path.join(dir, `blocking-killed-${round}.pyuw`);
      const r = spawn(process.execPath, [BIN, 'record', '--pid', String(child.pid), '-o', file, '--blocking', '-r', '1000', '-q'], { stdio: 'ignore' });
      children.push(r);
      // killed once it records (its file begun); every other round, once the target is seen
      // stopped for a copy, the case where the target must be let go by someone else
      await waitUntil(() => (fs.existsSync(file) && fs.statSync(file).size > 0) || r.exitCode !== null, `round ${round}: the recorder to start`);
      if (round % 2 === 1) await waitUntil(() => 'tT'.includes(stateOf(child.pid!)), `round ${round}: the target stopped for a copy`, 10_000).catch(() => {});
      r.kill('SIGKILL');
      await new Promise((res) => r.once('exit', res));
      // the watchdog sends SIGCONT when the recorder's end of its pipe closes
      await waitUntil(() => stateOf(child.pid!) !== 'T', `round ${round}: the target to run again`, 10_000).catch(() => {});
      expect(stateOf(child.pid!), `round ${round}`).not.toBe('T');
    }
    expect(rounds).toBeGreaterThanOrEqual(2);
    expect(await done).toBeGreaterThan(0);
    expect(child.exitCode).toBe(0);
  });
});
