// pyunwind top: a live view of a running Python — its functions by self and total samples,
// refreshed, with the validation counts — recorded as `record` records (every sample walked and
// validated; rejected ones counted, never shown as stacks). `record --live` shows the same view
// while it writes its capture.
//
// On a terminal: a full screen redrawn every --interval; q or Ctrl-C quits, s switches the sort,
// p pauses the redraws. Elsewhere (a pipe, a file), or with --iterations N: plain text, one
// frame every --interval, N frames then stop. The recording ends as record's does, so the
// target is left as it was found (its profiler anchor cleared).

import type { NativeObject } from '../native/objects.js';
import { KernelNativeUnwinder } from '../kernel/native-unwinder.js';
import { DEFAULT_STACK_BYTES } from '../record/linux/native-stack.js';
import { shortFilename } from '../export/filenames.js';
import { targetCwd } from './target-cwd.js';
import { parseArgs } from 'node:util';
import type { CodeRecord, SampleRecord, ThreadNameRecord } from '../capture/types.js';
import type { CaptureSink } from '../capture/writer.js';
import type { Layout } from '../layout/index.js';
import { MAX_RATE_HZ, recordProcess } from '../record/linux/record-process.js';
import type { SamplerStats } from '../record/sampling/sampler.js';
import type { CopyMode } from '../record/copy/modes.js';
import type { SamplingMode } from '../capture/types.js';
import { KernelWalker } from '../kernel/walker.js';
import { UsageError } from './errors.js';
import { LiveProfile } from './live-profile.js';
import { pseudoFrames } from '../pipeline/process-capture.js';
import type { PseudoFrames } from '../pipeline/sample-chain.js';
import { asyncModeOption, copyOption, parsePid, parsePositive, samplingModeOption } from './options.js';
import type { AsyncMode } from '../walk/task-graph.js';
import { renderTop, type TopSort } from './top-view.js';

export const TOP_HELP = `Usage: pyunwind top [OPTIONS] (--pid PID | -- COMMAND [ARGS...])

Watch a running Python: its functions by self and total samples across all threads, refreshed,
with the validation counts. Samples are copied, checked and walked as record does
(docs/reporting.md).

Options:
  -p, --pid PID          the Python process to watch
  -- COMMAND [ARGS...]   start COMMAND and watch it (stopped with SIGTERM when top quits first)
  -r, --rate HZ          samples per second (default 1000)
  -m, --mode MODE        wall (default), cpu, gil or exception, as for record
      --copy COPY        adaptive (default), optimistic, blocking or interrupt, as for record
      --native           C frames too, in one stack with the Python ones (a running thread is
                         stopped with ptrace at each sample for its registers and stack; with
                         --copy interrupt copied in the kernel, never stopped)
      --no-gc            no <GC> frames
  -s, --sort KEY         self (default) or total
  -i, --interval SECS    time between two refreshes (default 1)
  -n, --limit N          functions shown (default: the terminal's rows; 20 elsewhere)
      --iterations N     show N refreshes as plain text, then stop (default: until q)
  -o, --output FILE      also keep the capture in FILE
      --opcodes          instructions (function, line, bytecode instruction) instead of functions
      --async-aware      asyncio task stacks (CPython 3.14+), as report --async-aware shows them
      --async-mode MODE  running (default) or all
      --full-filenames   whole file paths (default: short, as py-spy shows them)
  -h, --help             this help

Keys (on a terminal): q or Ctrl-C quit, s switches the sort, p pauses the redraws.
`;

export interface LiveViewOptions {
  target: { pid: number } | { command: string[] };
  output: string | CaptureSink;
  rateHz: number;
  copy: CopyMode;
  sampling: SamplingMode;
  /** the pseudo-frames shown (default: <GC>, no <native>) */
  pseudo?: PseudoFrames;
  readOnly?: boolean;
  durationMs?: number;
  sort: TopSort;
  intervalMs: number;
  /** rows of functions (undefined: the terminal's height) */
  limit?: number;
  /** plain frames, this many (0: until stopped) */
  iterations: number;
  /** rows are instructions (function, line, instruction), not functions */
  opcodes?: boolean;
  /** asyncio task stacks (record --async-aware's tasks, shown as report --async-aware shows them) */
  asyncio?: AsyncMode;
  /** record native stacks too, and show C frames (top --native, record --live --native) */
  native?: { stackBytes: number };
  /** whole file paths (default: short, as py-spy shows them) */
  fullFilenames?: boolean;
  /** full-screen and keys: stdout and stdin are terminals and no iteration count is asked for */
  interactive: boolean;
  out: (s: string) => void;
  err: (s: string) => void;
}

/** A null capture: the records go to the view only. */
const DISCARD: CaptureSink = { write() {} };

export async function top(argv: string[], out: (s: string | Uint8Array) => void, err: (s: string) => void): Promise<number> {
  const dash = argv.indexOf('--');
  const own = dash >= 0 ? argv.slice(0, dash) : argv;
  const command = dash >= 0 ? argv.slice(dash + 1) : [];
  const { values, positionals } = parseArgs({
    args: own,
    options: {
      pid: { type: 'string', short: 'p' },
      rate: { type: 'string', short: 'r', default: '1000' },
      mode: { type: 'string', short: 'm' },
      copy: { type: 'string' },
      native: { type: 'boolean' },
      'no-gc': { type: 'boolean' },
      sort: { type: 'string', short: 's', default: 'self' },
      interval: { type: 'string', short: 'i', default: '1' },
      limit: { type: 'string', short: 'n' },
      iterations: { type: 'string' },
      output: { type: 'string', short: 'o' },
      opcodes: { type: 'boolean' },
      'full-filenames': { type: 'boolean' },
      'async-aware': { type: 'boolean' },
      'async-mode': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
    allowPositionals: true,
  });
  if (values.help) {
    out(TOP_HELP);
    return 0;
  }
  if (positionals.length) throw new UsageError(`unexpected argument "${positionals[0]}" (a command to run goes after --)`);
  if ((values.pid === undefined) === (command.length === 0)) throw new UsageError('top needs either --pid PID or -- COMMAND');
  const rateHz = parsePositive('--rate', values.rate!, { allowK: true });
  if (rateHz > MAX_RATE_HZ) throw new UsageError(`--rate ${rateHz} is above ${MAX_RATE_HZ} Hz`);
  if (values.sort !== 'self' && values.sort !== 'total') throw new UsageError(`--sort: "${values.sort}" is not self or total`);
  const intervalMs = parsePositive('--interval', values.interval!) * 1000;
  const count = (name: string, v: string | undefined): number | undefined => {
    if (v === undefined) return undefined;
    if (!/^\d{1,6}$/.test(v)) throw new UsageError(`${name}: "${v}" is not a number`);
    return Number(v);
  };
  const limit = count('--limit', values.limit);
  const iterations = count('--iterations', values.iterations) ?? 0;
  const interactive = values.iterations === undefined && process.stdout.isTTY === true && process.stdin.isTTY === true;
  const asyncio = asyncModeOption(values['async-aware'], values['async-mode']);
  return liveView({
    target: values.pid !== undefined ? { pid: parsePid(values.pid) } : { command },
    output: values.output ?? DISCARD,
    rateHz,
    copy: copyOption(values.copy, false),
    sampling: samplingModeOption(values.mode) ?? 'wall',
    pseudo: pseudoFrames({ ...(values['no-gc'] ? { gc: false } : {}) }),
    ...(values.native ? { native: { stackBytes: DEFAULT_STACK_BYTES } } : {}),
    sort: values.sort,
    intervalMs,
    ...(limit !== undefined ? { limit } : {}),
    iterations,
    interactive,
    ...(values.opcodes ? { opcodes: true } : {}),
    ...(values['full-filenames'] ? { fullFilenames: true } : {}),
    ...(asyncio ? { asyncio } : {}),
    out: (s) => out(s),
    err,
  });
}

const ESC = '\x1b[';

/** Record with the live view until it is quit, the iterations are shown, or the target exits. */
export async function liveView(o: LiveViewOptions): Promise<number> {
  const live = new LiveProfile(await KernelWalker.load(), o.pseudo, o.opcodes === true, o.native ? await KernelNativeUnwinder.load() : null);
  const abort = new AbortController();
  const stop = (): void => abort.abort();
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
  for (const s of signals) process.on(s, stop);

  let sort = o.sort;
  let paused = false;
  let shown = 0;
  /** the full screen is in use (a terminal, until the recording ends) */
  let screen = o.interactive;
  let target = 'pid' in o.target ? `pid ${o.target.pid}` : o.target.command.join(' ');
  let last: SamplerStats | null = null;
  const started = performance.now();

  // the program's own files, relative to its working directory
  const cwd = 'pid' in o.target ? targetCwd(o.target.pid) : process.cwd();
  const draw = (): void => {
    live.drain();
    const rows = screen ? (process.stdout.rows || 24) : 0;
    const frame = renderTop({
      target,
      mode: o.sampling,
      rateHz: o.rateHz,
      elapsedMs: last?.elapsedMs ?? performance.now() - started,
      scheduled: last?.scheduled ?? 0,
      missed: last?.missed ?? 0,
      profile: live.profile,
      sort,
      limit: o.limit ?? (screen ? Math.max(1, rows - 6) : 20),
      width: screen ? (process.stdout.columns || 100) : 200,
      ...(o.opcodes ? { opcodes: true } : {}),
      ...(o.asyncio ? { asyncio: o.asyncio } : {}),
      ...(o.fullFilenames ? {} : { filename: (f: string) => shortFilename(f, cwd) }),
      ...(screen ? { note: paused ? 'paused — p resumes, q quits' : 'q quit · s sort by self/total · p pause' } : {}),
    });
    if (screen) o.out(`${ESC}H${ESC}2J${frame.join('\n')}`);
    else o.out(`${frame.join('\n')}\n\n`);
    shown++;
    if (o.iterations > 0 && shown >= o.iterations) abort.abort();
  };

  // keys, on a terminal
  const stdin = process.stdin;
  const onKey = (data: Buffer): void => {
    const k = data.toString();
    if (k === 'q' || k === 'Q' || k === '\u0003') abort.abort();
    else if (k === 's' || k === 'S') {
      sort = sort === 'self' ? 'total' : 'self';
      draw();
    } else if (k === 'p' || k === 'P') {
      paused = !paused;
      if (!paused) draw();
    }
  };
  if (o.interactive) {
    o.out(`${ESC}?1049h${ESC}?25l`); // the alternate screen, no cursor
    stdin.setRawMode(true);
    stdin.on('data', onKey);
    stdin.resume();
  }
  const timer = setInterval(() => {
    if (!paused) draw();
  }, o.intervalMs);
  let result;
  try {
    result = await recordProcess({
      ...o.target,
      output: o.output,
      rateHz: o.rateHz,
      copy: o.copy,
      sampling: o.sampling,
      ...(o.readOnly ? { readOnly: true } : {}),
      ...(o.durationMs !== undefined ? { durationMs: o.durationMs } : {}),
      ...(o.asyncio ? { asyncio: o.asyncio } : {}),
      ...(o.native ? { native: o.native } : {}),
      signal: abort.signal,
      stdio: 'ignore',
      onStart: (layout, description, tasks) => {
        target = description;
        live.start(layout, tasks);
      },
      onRecord: (r: CodeRecord | SampleRecord | ThreadNameRecord) => live.add(r),
      onObject: (o: NativeObject) => live.add(o),
      onProgress: (s: SamplerStats) => {
        last = s;
      },
      progressEveryMs: Math.min(250, o.intervalMs),
    });
  } finally {
    clearInterval(timer);
    for (const s of signals) process.off(s, stop);
    if (o.interactive) {
      stdin.off('data', onKey);
      stdin.setRawMode(false);
      stdin.pause();
      o.out(`${ESC}?25h${ESC}?1049l`);
    }
  }
  target = result.target;
  last = result.stats;
  // the final tally, as plain text (on a terminal: after leaving the alternate screen), unless
  // the frames asked for were all shown
  screen = false;
  if (o.interactive || o.iterations === 0 || shown < o.iterations) draw();
  o.err(`pyunwind top: ${result.stats.samples} samples of ${result.target} in ${(result.stats.elapsedMs / 1000).toFixed(1)} s${result.targetExited ? ' (the target exited)' : ''}\n`);
  return 0;
}
