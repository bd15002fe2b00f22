// pyunwind record: sample a running Python (or a command it starts) into a capture file.

import { spawn, type ChildProcess } from 'node:child_process';
import { parseArgs } from 'node:util';
import { CaptureWriter, fileSink } from '../capture/index.js';
import type { CodeRecord, SampleRecord } from '../capture/types.js';
import { formatVersion } from '../layout/index.js';
import { openLinuxProcess, processIsRunning, TargetError, type LinuxProcessSource } from '../record/linux-process.js';
import { runSampler, type SamplerStats } from '../record/sampler.js';
import { openStopper } from '../record/stopper.js';
import { SampleProcessor } from '../process.js';
import { KernelWalker } from '../walk/kernel-walker.js';
import { TRUSTED } from '../walk/status.js';
import { UsageError } from './errors.js';
import { percent } from './format.js';
import { modeOption, parsePid, parsePositive } from './options.js';
import { VERSION } from './version.js';

export const RECORD_HELP = `Usage: pyunwind record [OPTIONS] -o FILE (--pid PID | -- COMMAND [ARGS...])

Sample a running Python at a steady rate and keep the raw memory of each sample in a capture
file; \`pyunwind report FILE\` turns it into a profile.

Each copy is read twice in one system call and the two readings compared: a copy that moved
while it was made (the program runs on meanwhile) is never profiled as a stack of one moment.
(Most copies are read five times in the call: the copy is the first reading the next one
agrees with.)
On CPython 3.15+ the thread's profiler anchor (one word pyunwind writes into the target, and
clears at the end) proves the lower part of the stack unchanged besides. The schedule runs on
the program's own clock (time it was kept stopped does not count), with intervals dithered
around the mean.

Options:
  -o, --output FILE      the capture file to write (required)
  -p, --pid PID          attach to a running Python process
  -- COMMAND [ARGS...]   start COMMAND and record it from its first instruction; when the
                         recording ends before it (--duration), it is stopped (SIGTERM)
  -r, --rate HZ          samples per second (default 1000; "2k" works too)
  -d, --duration SECS    stop after this long (default: until the target exits or Ctrl-C)
  -m, --mode MODE        how copies are kept consistent (default adaptive):
                           adaptive    copy while the target runs; a thread whose copy moved
                                       is copied again stopped for a moment, and one whose
                                       copies keep moving (call-heavy code) is stopped first:
                                       no sample is lost, steady code is rarely stopped
                           optimistic  never stop the target; a copy that moved is kept as
                                       'torn' — counted, never profiled
                           blocking    stop every thread that may be running Python for its
                                       copy (exact; costs the target)
      --blocking         same as --mode blocking
      --read-only        never write into the target (no profiler anchor): the comparison
                         of the two readings alone
  -a, --all-threads      sample every thread of every interpreter (the default; kept for
                         compatibility with other profilers' options)
  -q, --quiet            no progress line
  -h, --help             this help

Ctrl-C (or SIGTERM) stops the recording and closes the file properly. If the recorder is
killed outright, every block written so far (one per second) still reads back.
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
      mode: { type: 'string', short: 'm' },
      blocking: { type: 'boolean' },
      'read-only': { type: 'boolean' },
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
  if (rateHz > 100_000) throw new UsageError(`--rate ${rateHz} is above 100000 Hz`);
  const durationMs = values.duration === undefined ? undefined : parsePositive('--duration', values.duration) * 1000;
  const mode = modeOption(values.mode, values.blocking);

  let child: ChildProcess | null = null;
  let source: LinuxProcessSource;
  if (values.pid !== undefined) {
    source = openLinuxProcess(parsePid(values.pid));
  } else {
    child = spawn(command[0]!, command.slice(1), { stdio: 'inherit' });
    source = await attachToChild(child, command[0]!);
  }
  const pid = source.pid;
  const alive = (): boolean => (child ? child.exitCode === null && child.signalCode === null : true) && processIsRunning(pid);

  const writer = new CaptureWriter(fileSink(values.output), {
    layoutSource: source.layout.source,
    pointerSize: source.layout.pointerSize,
    pythonVersion: formatVersion(source.layout.version),
    target: source.description,
    ...(child ? { command } : {}),
    pid,
    runtimeAddress: source.runtimeAddress,
    rateHz,
    startTime: Date.now(),
    recorder: `pyunwind ${VERSION}`,
    mode: `${mode}${values['read-only'] ? ', read-only' : ''}`,
  });
  const stopper = mode === 'optimistic' ? null : openStopper(pid);

  let stopRequested = false;
  const stop = (): void => {
    stopRequested = true;
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  process.on('SIGHUP', stop);

  const tty = !values.quiet && process.stderr.isTTY === true;
  const processor = tty ? new SampleProcessor(source.layout, await KernelWalker.load()) : null;
  let walked = 0;
  let rejected = 0;
  // the progress line walks what was recorded since the last line, in recording order (a code
  // record applies to the samples after it)
  let queued: (CodeRecord | SampleRecord)[] = [];
  const walkQueued = (): void => {
    let samples: SampleRecord[] = [];
    const walk = (): void => {
      for (const p of processor!.process(samples)) {
        walked++;
        if (!TRUSTED.has(p.status)) rejected++;
      }
      samples = [];
    };
    for (const r of queued) {
      if ('time' in r) samples.push(r);
      else {
        walk();
        processor!.addCodes([r]);
      }
    }
    walk();
    queued = [];
  };
  const sink = processor
    ? {
        addCode: (r: CodeRecord) => (writer.addCode(r), queued.push(r)),
        addSample: (r: SampleRecord, immutable?: boolean) => (writer.addSample(r, immutable), queued.push(r)),
        addMissed: (n: number) => writer.addMissed(n),
        flush: () => writer.flush(),
      }
    : writer;
  let stats: SamplerStats;
  try {
    stats = await runSampler(source, sink, {
      rateHz,
      mode,
      ...(values['read-only'] ? { consistency: 'reread' as const } : {}),
      ...(stopper ? { stopper } : {}),
      ...(durationMs !== undefined ? { durationMs } : {}),
      // a target that exits makes the next read fail, and the sampler then asks isAlive
      shouldStop: () => stopRequested || (child !== null && (child.exitCode !== null || child.signalCode !== null)),
      isAlive: alive,
      onProgress: processor
        ? (s) => {
            walkQueued();
            err(`\r${progressLine(s, walked, rejected)}\x1b[K`);
          }
        : undefined,
    });
    if (stats.ended === 'stopped' && !alive()) stats.ended = 'target-exited';
  } finally {
    stopper?.close();
    writer.close();
    source.close();
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
    process.off('SIGHUP', stop);
  }
  if (tty) err('\n');
  if (stats.anchorWriteFailure) {
    err(`pyunwind: warning: could not write the profiler anchor (${stats.anchorWriteFailure}); copies were checked by comparing two readings alone (as with --read-only)\n`);
  }
  if (child && alive()) child.kill('SIGTERM');
  const secs = stats.elapsedMs / 1000;
  err(
    `pyunwind: recorded ${stats.samples} samples of ${source.description} in ${secs.toFixed(1)} s ` +
      `(${Math.round(stats.ticks / Math.max(secs, 1e-9))} ticks/s; missed ${percent(stats.missed, stats.scheduled)}, ` +
      `torn ${percent(stats.torn, stats.samples)}, copied with the target stopped ${percent(stats.stopped, stats.samples)} ` +
      `(stopped ${percent(stopper?.stoppedMicros ?? 0, stats.elapsedMs * 1000)} of the time); ` +
      `copy ${stats.samples ? Math.round(stats.copyMicros.total / stats.samples) : 0} µs mean) → ${values.output}` +
      (stats.ended === 'target-exited' ? ' (the target exited)' : '') +
      '\n',
  );
  return 0;
}

function progressLine(s: SamplerStats, walked: number, rejected: number): string {
  const secs = s.elapsedMs / 1000;
  return (
    `recording: ${s.samples} samples, ${Math.round(s.ticks / Math.max(secs, 1e-9))}/s, ` +
    `missed ${percent(s.missed, s.scheduled, '–')}, rejected ${percent(rejected, walked, '–')}, ${secs.toFixed(1)} s`
  );
}

/**
 * A command just started: wait until it is a Python we can read (its interpreter binary is
 * mapped), polling; fail if it exits first or takes too long.
 */
async function attachToChild(child: ChildProcess, name: string): Promise<LinuxProcessSource> {
  const started = Date.now();
  const spawnError = new Promise<never>((_, reject) => child.once('error', (e) => reject(new TargetError('no-process', `cannot start ${name}: ${e.message}`))));
  spawnError.catch(() => {});
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new TargetError('no-process', `${name} exited (${child.exitCode ?? child.signalCode}) before it could be recorded`);
    }
    if (child.pid !== undefined) {
      try {
        return openLinuxProcess(child.pid);
      } catch (e) {
        if (!(e instanceof TargetError) || Date.now() - started > 10_000) {
          child.kill('SIGTERM');
          throw e;
        }
      }
    }
    await Promise.race([new Promise((r) => setTimeout(r, 5)), spawnError]);
  }
}
