// pyunwind record: sample a running Python (or a command it starts) into a capture file.

import { parseArgs } from 'node:util';
import type { CodeRecord, SampleRecord, ThreadNameRecord } from '../capture/types.js';
import type { NativeObject } from '../native/objects.js';
import type { Layout } from '../layout/index.js';
import { KERNEL_NATIVE_MAX } from '../record/linux/kernel-copier.js';
import { TICK_FOLLOW } from '../record/copy/task-copy.js';
import { MAX_INTERRUPT_RATE_HZ, MAX_RATE_HZ, recordProcess, type RecordProcessResult } from '../record/linux/record-process.js';
import type { SamplerStats } from '../record/sampling/sampler.js';
import { commandLine } from '../record/linux/subprocesses.js';
import { KernelWalker } from '../kernel/walker.js';
import { UsageError } from './errors.js';
import { percent } from './format.js';

/** A recording shorter than this gives no rates or shares in its summary: too short to measure. */
const MIN_MEASURED_MS = 10;
import { LiveProfile } from './live-profile.js';
import { pseudoFrames } from '../pipeline/process-capture.js';
import { asyncModeOption, copyOption, parsePid, parsePositive, samplingModeOption } from './options.js';

export const RECORD_HELP = `Usage: pyunwind record [OPTIONS] -o FILE (--pid PID | -- COMMAND [ARGS...])

Sample a running Python into a capture file; pyunwind report FILE turns it into a profile.
In the default and blocking modes every sample kept is proven to be of one moment
(docs/validation.md). Option by option: docs/recording.md.

Options:
  -o, --output FILE      the capture file to write (required)
  -p, --pid PID          record a running Python process
  -- COMMAND [ARGS...]   start COMMAND and record it (stopped with SIGTERM if -d ends first)
  -r, --rate HZ          samples per second (default 1000; "2k" works too)
  -d, --duration SECS    stop after this long (default: when the target exits, or Ctrl-C)
  -m, --mode MODE        threads whose samples are kept: wall (default), cpu, gil, exception
      --copy COPY        what a copy nothing proves becomes: adaptive (default: made again
                         with the thread stopped), blocking (stop every running thread),
                         optimistic (never stops: torn — kept if its readings agree where
                         there is no anchor, before 3.15 or --read-only: not exact),
                         interrupt (root or CAP_BPF+CAP_PERFMON, up to 10 kHz: a
                         running thread is copied in the kernel at the timer's interrupt,
                         never stopped)
      --blocking         same as --copy blocking
      --read-only        never write into the target (no profiler anchor on 3.15+)
  -a, --all-threads      every thread of every interpreter (the default; for compatibility)
      --async-aware      also copy each thread's asyncio tasks (CPython 3.14+)
      --async-mode MODE  which tasks: running (default) or all
      --subprocesses     also record the target's Python subprocesses, each to FILE.PID.pyuw
      --native           also copy each thread's registers and native stack, and the unwind
                         tables and symbols of the libraries it runs: report --native then
                         shows C frames (a running thread is stopped with ptrace at each
                         sample; with --copy interrupt, copied in the kernel, never stopped)
      --native-stack KIB most native stack copied per thread and sample (default 256; at most
                         256 with --copy interrupt)
      --live             show the live view (pyunwind top) while recording; q quits
      --no-gc            with --live: no <GC> frames (with --native the live view shows C frames)
      --opcodes          with --live: instructions instead of functions
  -q, --quiet            no progress line
  -h, --help             this help

Ctrl-C (or SIGTERM) ends the recording and closes the file; if the recorder is killed, every
block written so far (one per second) still reads back.
`;

export async function record(argv: string[], out: (s: string) => void, err: (s: string) => void): Promise<number> {
  const dash = argv.indexOf('--');
  const own = dash >= 0 ? argv.slice(0, dash) : argv;
  const command = dash >= 0 ? argv.slice(dash + 1) : [];
  const { values, positionals } = parseArgs({
    args: own,
    options: {
      output: { type: 'string', short: 'o' },
      pid: { type: 'string', short: 'p' },
      rate: { type: 'string', short: 'r', default: '1000' },
      duration: { type: 'string', short: 'd' },
      'all-threads': { type: 'boolean', short: 'a' },
      subprocesses: { type: 'boolean' },
      mode: { type: 'string', short: 'm' },
      copy: { type: 'string' },
      blocking: { type: 'boolean' },
      'read-only': { type: 'boolean' },
      live: { type: 'boolean' },
      native: { type: 'boolean' },
      'native-stack': { type: 'string' },
      'no-gc': { type: 'boolean' },
      'async-aware': { type: 'boolean' },
      'async-mode': { type: 'string' },
      opcodes: { type: 'boolean' },
      quiet: { type: 'boolean', short: 'q' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
    allowPositionals: true,
  });
  if (values.help) {
    out(RECORD_HELP);
    return 0;
  }
  if (positionals.length) throw new UsageError(`unexpected argument "${positionals[0]}" (a command to run goes after --)`);
  if (!values.output) throw new UsageError('record needs -o FILE');
  if ((values.pid === undefined) === (command.length === 0)) throw new UsageError('record needs either --pid PID or -- COMMAND');
  const rateHz = parsePositive('--rate', values.rate!, { allowK: true });
  if (rateHz > MAX_RATE_HZ) throw new UsageError(`--rate ${rateHz} is above ${MAX_RATE_HZ} Hz`);
  const durationMs = values.duration === undefined ? undefined : parsePositive('--duration', values.duration) * 1000;
  const copy = copyOption(values.copy, values.blocking, values.mode);
  const sampling = samplingModeOption(values.mode) ?? 'wall';
  const asyncio = asyncModeOption(values['async-aware'], values['async-mode']);
  const target = values.pid !== undefined ? { pid: parsePid(values.pid) } : { command };
  const subprocesses = values.subprocesses === true;
  if (values['native-stack'] !== undefined && !values.native) throw new UsageError('--native-stack is for --native');
  const stackKib = values['native-stack'] === undefined ? 256 : parsePositive('--native-stack', values['native-stack']);
  if (!Number.isInteger(stackKib) || stackKib < 4 || stackKib > 65536) throw new UsageError(`--native-stack ${values['native-stack']}: a whole number of KiB from 4 to 65536`);
  if (values.native && subprocesses) throw new UsageError('--native records one process: not with --subprocesses');
  if (copy === 'interrupt' && rateHz > MAX_INTERRUPT_RATE_HZ) throw new UsageError(`--rate ${rateHz}: copies at the interrupt go up to ${MAX_INTERRUPT_RATE_HZ} Hz (what the recorder can make samples of)`);
  if (values.native && copy === 'interrupt' && stackKib * 1024 > KERNEL_NATIVE_MAX) throw new UsageError(`--native-stack ${stackKib}: copies at the interrupt take at most ${KERNEL_NATIVE_MAX / 1024} KiB of a thread's native stack`);
  if (values.native && copy === 'optimistic') throw new UsageError('--native stops every thread at each sample: not with --copy optimistic');
  if (subprocesses && values.live) throw new UsageError('--live shows one process: record --subprocesses without it');
  // what is recorded, and how: the same with or without the live view
  const recording = {
    output: values.output,
    rateHz,
    copy,
    sampling,
    ...(values['read-only'] ? { readOnly: true } : {}),
    ...(asyncio ? { asyncio } : {}),
    ...(durationMs !== undefined ? { durationMs } : {}),
    ...(values.native ? { native: { stackBytes: stackKib * 1024 } } : {}),
  };
  const views = values['no-gc'] ? '--no-gc' : null;
  if (views && !values.live) throw new UsageError(`${views} is a view of the samples, which every capture can give: pyunwind report ${views} FILE (or record --live ${views})`);
  if (values.live) {
    const { liveView } = await import('./top.js');
    return liveView({
      target,
      ...recording,
      // (with native stacks recorded, the view shows C frames: no <native> markers)
      pseudo: pseudoFrames({ ...(values['no-gc'] ? { gc: false } : {}) }),
      sort: 'self',
      intervalMs: 1000,
      iterations: 0,
      interactive: process.stdout.isTTY === true && process.stdin.isTTY === true,
      ...(values.opcodes ? { opcodes: true } : {}),
      out: (s) => out(s),
      err,
    });
  }

  const abort = new AbortController();
  const stop = (): void => abort.abort();
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  process.on('SIGHUP', stop);

  // the progress line (on a terminal) walks what was recorded since the last line
  const tty = !values.quiet && process.stderr.isTTY === true;
  const live = tty ? new LiveProfile(await KernelWalker.load()) : null;
  let result: RecordProcessResult;
  try {
    result = await recordProcess({
      ...target,
      ...recording,
      signal: abort.signal,
      ...(subprocesses ? { subprocesses: true } : {}),
      ...(live
        ? {
            onRecord: (r: CodeRecord | SampleRecord | ThreadNameRecord) => live.add(r),
      onObject: (o: NativeObject) => live.add(o),
            onStart: (layout: Layout, _: string, tasks) => live.start(layout, tasks),
            onProgress: (s: SamplerStats, others: readonly SamplerStats[]) => {
              live.drain();
              err(`\r${progressLine(s, live.walked, live.rejected, subprocesses ? others : null)}\x1b[K`);
            },
          }
        : {}),
    });
  } finally {
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
    process.off('SIGHUP', stop);
  }
  const { stats } = result;
  if (tty) err('\n');
  if (stats.anchorWriteFailure) {
    err(`pyunwind: warning: could not write the profiler anchor (${stats.anchorWriteFailure}); copies were checked by comparing two readings alone (as with --read-only)\n`);
  }
  const secs = stats.elapsedMs / 1000;
  // shares of a recording that took no tick, or lasted too little to time, would be of nothing
  const measured = stats.ticks > 0 && stats.elapsedMs >= MIN_MEASURED_MS;
  const shares = measured
    ? `(${Math.round(stats.ticks / secs)} ticks/s; missed ${percent(stats.missed, stats.scheduled)}, ` +
      `torn ${percent(stats.torn, stats.samples)}, copied with the target stopped ${percent(stats.stopped, stats.samples)} ` +
      // (the stopped time is measured around each stop, the recording's time once: never more than it)
      `(stopped ${percent(Math.min(result.stoppedMicros, stats.elapsedMs * 1000), stats.elapsedMs * 1000)} of the time)` +
      (stats.offCpu > 0 ? `, proven asleep ${percent(stats.offCpu, stats.samples)}` : '') +
      (copy === 'interrupt' ? `, copied in the kernel ${percent(stats.kernel.samples, stats.samples)} (${stats.kernel.lost} lost, ${stats.kernel.skipped} dropped with missed ticks)` : '') +
      // (their tasks not all copied at the tick: the report rejects those samples' task view)
      (copy === 'interrupt' && stats.kernel.taskViews > 0 ? `, tasks not of the tick ${percent(stats.kernel.taskViewsShort, stats.kernel.taskViews)}` : '') +
      '; ' +
      `copy ${stats.samples ? Math.round(stats.copyMicros.total / stats.samples) : 0} µs mean)`
    : `(too short to measure: ${stats.ticks} tick${stats.ticks === 1 ? '' : 's'} in ${stats.elapsedMs.toFixed(1)} ms)`;
  err(
    `pyunwind: recorded ${stats.samples} samples of ${result.target} in ${secs.toFixed(1)} s ${shares} → ${values.output}` +
      (result.targetExited ? ' (the target exited)' : '') +
      (sampling !== 'wall' ? `; mode ${sampling}: ${stats.leftOut} samples of threads it leaves out were not written` : '') +
      '\n',
  );
  if (subprocesses) err(subprocessSummary(result, values.output, command.length ? command : commandLine(result.pid), copy === 'interrupt'));
  // (a target stopped for much of its time, where the mode that never stops it could run)
  if (measured && stats.elapsedMs >= HINT_AFTER_MS && result.interruptPossible && result.stoppedMicros >= STOPPED_HINT * stats.elapsedMs * 1000) {
    err(`pyunwind: the target was stopped ${percent(Math.min(result.stoppedMicros, stats.elapsedMs * 1000), stats.elapsedMs * 1000)} of its time; --copy interrupt would copy its running threads in the kernel instead, never stopping it (docs/recording.md)\n`);
  }
  // (task views the kernel could not copy whole: a thread with more tasks, or deeper chains,
  // than its program follows at the tick — the report rejects them, and says where to look)
  if (measured && copy === 'interrupt' && stats.kernel.taskViews > 0 && stats.kernel.taskViewsShort >= SHORT_HINT * stats.kernel.taskViews) {
    err(
      `pyunwind: ${percent(stats.kernel.taskViewsShort, stats.kernel.taskViews)} of the task views were not of the tick (report --async-aware rejects them): ` +
        `the kernel follows ${asyncio === 'all' ? `up to ${TICK_FOLLOW.tasks} tasks a thread, each ${TICK_FOLLOW.awaited} coroutines deep,` : 'the running task'} and the objects the thread's last views read; the default copy mode reads any number (docs/recording.md)\n`,
    );
  }
  return 0;
}

/** Task views not of the tick in at least this share are told why (however few: on a loaded machine most samples of a thread waiting for its CPU are copied off it, by the recorder, and only the rest are views of the tick). */
const SHORT_HINT = 0.1;

/** A target stopped for at least this share of its time is told of --copy interrupt, where it could run. */
const STOPPED_HINT = 0.05;
/** ... and recorded for at least this long, ms (a program that ends at once is stopped mostly while it starts: no hint) */
const HINT_AFTER_MS = 500;

/** record --subprocesses: one line per process recorded (pid, samples, file, command line), one per descendant not followed, and what looking for them cost. */
function subprocessSummary(result: RecordProcessResult, output: string, command: string[], interrupt: boolean): string {
  // (copies at the interrupt: the share of each process's samples copied in the kernel)
  const kernel = (s: RecordProcessResult['stats']): string => (interrupt ? `  ${percent(s.kernel.samples, s.samples).padStart(6)} in the kernel` : '');
  const rows = [
    { pid: result.pid, samples: result.stats.samples, kernel: kernel(result.stats), file: output, command, note: '' },
    ...result.subprocesses.map((s) => ({
      pid: s.pid,
      samples: s.stats.samples,
      kernel: kernel(s.stats),
      file: s.output ?? '',
      command: s.command,
      note: s.ended === 'failed' ? ` (failed: ${s.error})` : s.ended === 'exec' ? ' (ran a new program)' : s.ended === 'exited' ? ' (exited)' : '',
    })),
  ];
  const pw = Math.max(...rows.map((r) => String(r.pid).length));
  const sw = Math.max(...rows.map((r) => String(r.samples).length));
  const fw = Math.max(...rows.map((r) => r.file.length));
  const lines = [`pyunwind: ${rows.length} process${rows.length === 1 ? '' : 'es'} recorded (pid, samples, ${interrupt ? 'share copied in the kernel, ' : ''}capture, command line):`];
  for (const r of rows) {
    lines.push(`  ${String(r.pid).padStart(pw)}  ${String(r.samples).padStart(sw)}${r.kernel}  ${r.file.padEnd(fw)}  ${printableCommand(r.command)}${r.note}`);
  }
  for (const n of result.notFollowed) lines.push(`pyunwind: not followed: pid ${n.pid} (${printableCommand(n.command)}, child of ${n.parentPid}): ${n.why}`);
  if (result.watching) {
    const w = result.watching;
    lines.push(`pyunwind: looked for subprocesses ${w.polls} times (${(w.micros / 1000).toFixed(1)} ms in all, ${w.polls ? Math.round(w.micros / w.polls) : 0} µs each${w.viaChildrenFiles ? '' : ', by scanning /proc: this kernel has no /proc/PID/task/TID/children'})`);
  }
  return lines.join('\n') + '\n';
}

/** A command line on one line: arguments joined by spaces, control characters escaped, long ones cut. */
function printableCommand(args: string[]): string {
  if (args.length === 0) return '?';
  const s = args.join(' ').replace(/[\u0000-\u001f\u007f]/g, (c) => (c === '\n' ? '\\n' : `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`));
  return s.length > 120 ? `${s.slice(0, 119)}…` : s;
}

function progressLine(s: SamplerStats, walked: number, rejected: number, others: readonly SamplerStats[] | null): string {
  const secs = s.elapsedMs / 1000;
  let more = '';
  if (others) {
    const running = others.filter((o) => o.ended === null).length;
    let samples = 0;
    for (const o of others) samples += o.samples;
    more = `; subprocesses: ${running} recording, ${others.length} in all, ${samples} samples`;
  }
  return (
    `recording: ${s.samples} samples, ${Math.round(s.ticks / Math.max(secs, 1e-9))}/s, ` +
    `missed ${percent(s.missed, s.scheduled, '–')}, rejected ${percent(rejected, walked, '–')}, ${secs.toFixed(1)} s${more}`
  );
}
