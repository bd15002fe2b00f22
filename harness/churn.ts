// The churn oracle (workloads/churn.py): the program, the stacks it says it can have, and the
// judgement of a recording's accepted stacks against them — shared by the consistency test,
// the consistency benchmark and `npm run churn`.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import path from 'node:path';

/** the shapes of its loop (workloads/churn.py ROUNDS) */
export type ChurnShape = 'rich' | 'short' | 'naps';

export const CHURN = path.resolve('workloads/churn.py');
const BIN = path.resolve('bin/pyunwind.js');

/**
 * What may stand below `main`, outermost first: the module (the main thread), or threading's
 * start of a thread. A sampled stack's part before `main` must be one of these or a prefix of
 * one (a thread starting or ending).
 */
const ROOTS = [['<module>'], ['Thread._bootstrap', 'Thread._bootstrap_inner', 'Thread.run']];

export interface ChurnRun {
  child: ChildProcess;
  /** the stacks the program reported, from `main` on, joined by ";" */
  stacks: Promise<ReadonlySet<string>>;
  /** rounds of its loop the program ran (resolves when it exits; 0 if it printed none) */
  rounds: Promise<number>;
}

/** Start workloads/churn.py for `seconds` with `threads` threads churning. */
export function startChurn(command: string, seconds: number, threads = 1, shape: ChurnShape = "rich"): ChurnRun {
  const child = spawn(command, [CHURN, String(seconds), String(threads), shape], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  let resolveStacks!: (s: ReadonlySet<string>) => void;
  let rejectStacks!: (e: Error) => void;
  const stacks = new Promise<ReadonlySet<string>>((res, rej) => {
    resolveStacks = res;
    rejectStacks = rej;
  });
  child.stdout!.on('data', (d: Buffer) => {
    out += d.toString();
    const nl = out.indexOf('\n');
    if (nl >= 0) resolveStacks(new Set((JSON.parse(out.slice(0, nl)) as { stacks: string[] }).stacks));
  });
  const rounds = new Promise<number>((resolve) =>
    child.once('close', (code) => {
      rejectStacks(new Error(`churn.py exited (${code}) before it told its stacks`));
      const last = out.trim().split('\n').pop() ?? '';
      resolve(last.startsWith('{"rounds"') ? (JSON.parse(last) as { rounds: number }).rounds : 0);
    }),
  );
  return { child, stacks, rounds };
}

/** The names of the program's own functions (every name in its stacks), by its stacks. */
const ownNames = new WeakMap<ReadonlySet<string>, ReadonlySet<string>>();

/**
 * Could the program have this stack (qualnames, outermost first)? From `main` on it must be one
 * the program reported, below `main` one of ROOTS. Without `main`, it is a thread of the
 * program starting or ending: a prefix of a root; or the main thread in threading's start or
 * join of the others (`<module>` → `Thread.start` or `Thread.join` → threading's own frames);
 * or a thread in threading's code before or after its run (`Thread._bootstrap` →
 * `Thread._bootstrap_inner` → threading's frames, `Thread.run` only last). threading's frames
 * vary by version and are not traced: taken as any frame that is not one of the program's own,
 * so that a stack glued from a moment of the churn is still caught.
 */
export function possible(stack: readonly string[], stacks: ReadonlySet<string>): boolean {
  const m = stack.indexOf('main');
  if (m >= 0) {
    const below = stack.slice(0, m);
    return ROOTS.some((root) => below.length === root.length && below.every((q, i) => root[i] === q)) && stacks.has(stack.slice(m).join(';'));
  }
  if (ROOTS.some((root) => stack.length <= root.length && stack.every((q, i) => root[i] === q))) return true;
  let own = ownNames.get(stacks);
  if (!own) ownNames.set(stacks, (own = new Set([...stacks].flatMap((s) => s.split(';')))));
  const threading = (from: number): boolean => stack.slice(from).every((q) => !own.has(q));
  if (stack[0] === '<module>' && (stack[1] === 'Thread.start' || stack[1] === 'Thread.join')) return threading(2);
  if (stack[0] === 'Thread._bootstrap' && stack[1] === 'Thread._bootstrap_inner') {
    const run = stack.indexOf('Thread.run');
    return (run < 0 || run === stack.length - 1) && threading(2);
  }
  return false;
}

/** What a report in json says of a recording, judged against the oracle. */
export interface Judgement {
  attempted: number;
  accepted: number;
  rejected: number;
  statuses: Record<string, number>;
  /** each impossible stack accepted, with its count */
  impossible: { stack: string; count: number }[];
  /** accepted samples that are impossible */
  impossibleSamples: number;
  /** share of the samples copied with the target stopped */
  copiedStopped: number;
  copyMicros: { mean: number; p50: number; p99: number };
}

interface ReportJson {
  summary: { attempted: number; trusted: number; rejected: number; statuses: Record<string, number> };
  metadata: { recording: { copyMicros: { mean: number; p50: number; p99: number }; stopped: number } };
  threads: { frames: { qualname: string }[]; stacks: [number, number, number][] }[];
}

/** Report a capture as json and judge every accepted stack. */
export function judgeCapture(file: string, stacks: ReadonlySet<string>): Judgement {
  const rep = spawnSync(process.execPath, [BIN, 'report', file, '-f', 'json', '-q'], { encoding: 'utf8', timeout: 600_000, maxBuffer: 256 << 20 });
  if (rep.status !== 0) throw new Error(`report ${file}: ${rep.stderr}`);
  const json = JSON.parse(rep.stdout) as ReportJson;
  const impossible: { stack: string; count: number }[] = [];
  let accepted = 0;
  let impossibleSamples = 0;
  for (const t of json.threads) {
    for (let i = 0; i < t.stacks.length; i++) {
      const weight = t.stacks[i]![2];
      if (weight === 0) continue;
      const names: string[] = [];
      for (let k = i; k >= 0; k = t.stacks[k]![0]) names.unshift(t.frames[t.stacks[k]![1]]!.qualname);
      accepted += weight;
      if (!possible(names, stacks)) {
        impossible.push({ stack: names.join(';'), count: weight });
        impossibleSamples += weight;
      }
    }
  }
  const s = json.summary;
  const rec = json.metadata.recording;
  return {
    attempted: s.attempted,
    accepted,
    rejected: s.rejected,
    statuses: s.statuses,
    impossible,
    impossibleSamples,
    copiedStopped: s.attempted > 0 ? rec.stopped / s.attempted : 0,
    copyMicros: rec.copyMicros,
  };
}

/** One recording of workloads/churn.py (recordChurn). */
export interface ChurnRecording {
  /** Python to run it with */
  command: string;
  /** pyunwind's --copy mode */
  copy: 'adaptive' | 'optimistic' | 'blocking' | 'interrupt';
  /** never write into the target (no anchor: --read-only) */
  readOnly?: boolean;
  rateHz: number;
  /** how long to record; the program churns a second longer */
  seconds: number;
  threads?: number;
  shape?: ChurnShape;
  /** where to write the capture */
  file: string;
}

/** A recording judged: what judgeCapture says, the program's rounds and the recorder's own figures. */
export interface ChurnOutcome extends Judgement {
  rounds: number;
  /** the share of the recording's time the recorder kept the target stopped */
  targetStopped: number;
  /** ticks the recorder took per second */
  ticksPerSecond: number;
  /** the share of the samples proven by their thread being off its CPU throughout the copy, without a stop */
  provenAsleep: number;
}

/** Record workloads/churn.py as `r` says, and judge every accepted stack against what the program says it can have. */
export async function recordChurn(r: ChurnRecording): Promise<ChurnOutcome> {
  const { recordProcess } = await import('../src/record/linux/record-process.js');
  const run = startChurn(r.command, r.seconds + 1, r.threads ?? 1, r.shape ?? 'rich');
  try {
    const stacks = await run.stacks;
    const res = await recordProcess({ pid: run.child.pid!, output: r.file, rateHz: r.rateHz, durationMs: r.seconds * 1000, copy: r.copy, readOnly: r.readOnly ?? false });
    const rounds = await run.rounds;
    const elapsed = res.stats.elapsedMs / 1000;
    return { ...judgeCapture(r.file, stacks), rounds, targetStopped: res.stoppedMicros / Math.max(1, res.stats.elapsedMs * 1000), ticksPerSecond: res.stats.ticks / Math.max(elapsed, 1e-9), provenAsleep: res.stats.offCpu / Math.max(1, res.stats.samples) };
  } finally {
    run.child.kill('SIGKILL');
  }
}
