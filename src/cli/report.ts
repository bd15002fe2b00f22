// pyunwind report FILE: walk, validate, symbolize and aggregate a capture, then write it as
// text, json, collapsed stacks or speedscope.

import fs from 'node:fs';
import { parseArgs } from 'node:util';
import { exportCollapsed, exportJson, exportSpeedscope, exportText } from '../export/index.js';
import { reportCapture } from '../report.js';
import { UsageError } from './errors.js';
import { percent } from './format.js';

export const REPORT_HELP = `Usage: pyunwind report FILE [--format text|json|collapsed|speedscope] [-o OUT] [--thread ID]

Turn a capture (pyunwind record) into a profile. Every sample is walked and validated;
rejected samples never enter the profile — they are counted, by reason, in the summary.

Options:
  -f, --format FORMAT   text (default): top functions per thread and the validation summary
                        json: the summary and the aggregated profile (docs/json-format.md)
                        collapsed: "thread;root;...;leaf count" lines (flamegraph.pl, speedscope)
                        speedscope: a file for https://www.speedscope.app
  -o, --output OUT      write to OUT instead of standard output
  -t, --thread ID       only this thread (native thread id or thread_id)
  -n, --top N           functions listed per thread in text (default 15)
  -j, --workers N       worker threads that process blocks (default: one per core for a
                        capture of 4 MB or more, else 0: all in this thread); the profile
                        is the same whatever N
  -q, --quiet           no progress line
  -h, --help            this help
`;

const FORMATS = ['text', 'json', 'collapsed', 'speedscope'] as const;
type Format = (typeof FORMATS)[number];

export async function report(argv: string[], out: (s: string) => void, err: (s: string) => void): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    options: {
      format: { type: 'string', short: 'f', default: 'text' },
      output: { type: 'string', short: 'o' },
      thread: { type: 'string', short: 't' },
      top: { type: 'string', short: 'n', default: '15' },
      workers: { type: 'string', short: 'j' },
      quiet: { type: 'boolean', short: 'q' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
    allowPositionals: true,
  });
  if (values.help) {
    out(REPORT_HELP);
    return 0;
  }
  if (positionals.length !== 1) throw new UsageError(positionals.length ? 'report takes one capture file' : 'report needs a capture FILE');
  const file = positionals[0]!;
  const format = values.format as Format;
  if (!FORMATS.includes(format)) throw new UsageError(`unknown format "${values.format}" (${FORMATS.join(', ')})`);
  if (!/^\d+$/.test(values.top!)) throw new UsageError(`--top: "${values.top}" is not a number`);
  if (values.workers !== undefined && !/^\d{1,3}$/.test(values.workers)) throw new UsageError(`--workers: "${values.workers}" is not a number of threads`);
  let thread: bigint | undefined;
  if (values.thread !== undefined) {
    if (!/^(\d+|0x[0-9a-f]+)$/i.test(values.thread)) throw new UsageError(`--thread: "${values.thread}" is not a thread id`);
    thread = BigInt(values.thread);
  }

  const tty = !values.quiet && process.stderr.isTTY === true;
  const result = await reportCapture(file, {
    ...(thread !== undefined ? { thread } : {}),
    ...(values.workers !== undefined ? { workers: Number(values.workers) } : {}),
    ...(tty ? { onProgress: (n: number, b: number) => err(`\rreport: ${n} samples, ${b} blocks\x1b[K`) } : {}),
  });
  if (tty) err('\r\x1b[K');
  for (const w of result.warnings) err(`pyunwind report: warning: ${file}: byte ${w.offset}: ${w.message}\n`);

  const { profile, header, recording } = result;
  const pct = (n: number): string => percent(n, recording.samples);
  let text: string;
  switch (format) {
    case 'text':
      text =
        exportText(profile, { top: Number(values.top), title: `${header.target}, recorded at ${header.rateHz} Hz by ${header.recorder}` }) +
        `\nRecording: mode ${header.mode ?? 'unknown'}; copy window ${recording.copyMicros.mean} µs mean, ` +
        `${recording.copyMicros.p50} µs median, ${recording.copyMicros.p99} µs p99, ${recording.copyMicros.max} µs max; ` +
        `copied again after moving ${pct(recording.retried)}, copied with the target stopped ${pct(recording.stopped)}\n`;
      break;
    case 'json':
      text = exportJson(profile, {
        metadata: {
          target: header.target,
          pythonVersion: header.pythonVersion,
          rateHz: header.rateHz,
          recorder: header.recorder,
          startTime: header.startTime,
          mode: header.mode ?? null,
          recording: { samples: recording.samples, copyMicros: { ...recording.copyMicros }, stopped: recording.stopped, retried: recording.retried },
        },
      });
      break;
    case 'collapsed':
      text = exportCollapsed(profile);
      break;
    case 'speedscope':
      text = exportSpeedscope(profile, { name: `${header.target} (pyunwind)`, exporter: header.recorder, sampleIntervalMicros: Math.round(1e6 / header.rateHz) });
      break;
  }
  if (values.output) fs.writeFileSync(values.output, text);
  else out(text);
  return 0;
}
