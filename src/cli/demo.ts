// pyunwind demo: record the bundled workload (workloads/hotcold.py) and print its profile.
// By default it runs in Pyodide 3.15 (CPython compiled to WebAssembly, from npm) so that no
// system Python is needed; --python PATH records a native interpreter with `record` instead.
// The workload measures its own hot/cold split, which is printed under the profile so the two
// can be compared.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { PyodideProgramError, recordPyodide, type PyodideProgress, type PyodideRecordingStats } from '../record/pyodide/recorder.js';
import { EXIT, UsageError } from './errors.js';
import { parsePositive } from './options.js';
import { record } from './record.js';
import { report } from './report.js';
import { percent } from './format.js';

export const DEMO_HELP = `Usage: pyunwind demo [--duration SECS] [--rate HZ] [-o FILE] [--python PATH]

Run a bundled Python program in CPython compiled to WebAssembly (Pyodide 3.15: no system
Python needed), sample it, and print its profile with the validation summary. The program,
workloads/hotcold.py, spends about 70 % of its time in hot() and 30 % in cold() and measures
that itself; its own figures are printed under the profile, to compare.

In Pyodide, samples are taken by signals: the recorder writes SIGUSR1 into Pyodide's interrupt
buffer at the rate, and a JavaScript handler copies the interpreter's memory at the next safe
point. A tick that finds the previous one not yet taken is counted as missed.

Options:
  -d, --duration SECS   how long the program runs (default 3)
  -r, --rate HZ         samples per second (default 1000; "2k" works too)
  -o, --output FILE     keep the capture in FILE (default: a temporary file, removed after)
      --python PATH     run the program in a native Python (3.11-3.15) instead, recorded with
                        \`pyunwind record\`
  -h, --help            this help
`;

/** Above this the handler (tens of µs per sample) and the scheduler's own wake-ups dominate. */
const MAX_PYODIDE_RATE = 10_000;
/** The program stops itself after --duration; this is only a safety net. */
const EXTRA_MS = 15_000;

/** workloads/hotcold.py: two levels above src/cli/ and dist/cli/. */
function workloadPath(): string {
  return fileURLToPath(new URL('../../workloads/hotcold.py', import.meta.url));
}

export async function demo(argv: string[], out: (s: string | Uint8Array) => void, err: (s: string) => void): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    options: {
      duration: { type: 'string', short: 'd', default: '3' },
      rate: { type: 'string', short: 'r', default: '1000' },
      output: { type: 'string', short: 'o' },
      python: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
    allowPositionals: true,
  });
  if (values.help) {
    out(DEMO_HELP);
    return EXIT.ok;
  }
  if (positionals.length) throw new UsageError(`unexpected argument "${positionals[0]}"`);
  const seconds = parsePositive('--duration', values.duration!);
  const rateHz = parsePositive('--rate', values.rate!, { allowK: true });
  if (values.python === undefined && rateHz > MAX_PYODIDE_RATE) throw new UsageError(`--rate ${rateHz} is above ${MAX_PYODIDE_RATE} Hz, more than signal sampling in Pyodide can take`);
  if (values.python !== undefined && rateHz > 100_000) throw new UsageError(`--rate ${rateHz} is above 100000 Hz`);
  if (values.python === '') throw new UsageError('--python needs the path of a Python interpreter');
  const workload = workloadPath();
  if (!fs.existsSync(workload)) throw new Error(`the demo program is missing: ${workload} (is pyunwind installed completely?)`);

  const tempDir = values.output === undefined ? fs.mkdtempSync(path.join(os.tmpdir(), 'pyunwind-demo-')) : null;
  const capture = values.output ?? path.join(tempDir!, 'hotcold.pyuw');
  try {
    if (values.python !== undefined) {
      // the native recorder starts the program; its own JSON line goes straight to stdout
      const code = await record(['-o', capture, '--rate', String(rateHz), '--', values.python, workload, String(seconds)], out, err);
      if (code !== EXIT.ok) return code;
      out('\n');
      return await report([capture], out, err);
    }

    const stats = await recordInPyodide(workload, seconds, rateHz, capture, err);
    if (stats === null) return EXIT.failure;
    const secs = stats.elapsedMs / 1000;
    err(
      `pyunwind: recorded ${stats.samples} samples of ${stats.target} in ${secs.toFixed(1)} s ` +
        `(${Math.round(stats.ticks / Math.max(secs, 1e-9))} samples/s at ${rateHz} Hz; missed ${percent(stats.missed, stats.scheduled)}; ` +
        `${Math.round(stats.handlerMicros.total / Math.max(1, stats.ticks))} µs per sample in the program's thread)` +
        (values.output !== undefined ? ` → ${capture}` : '') +
        '\n\n',
    );
    const code = await report([capture], out, err);
    const truth = measured(stats.stdout);
    if (truth) {
      out(
        `\nThe program measured itself (time.perf_counter around each call): hot() ${percent(truth.hot, truth.total)}, ` +
          `cold() ${percent(truth.cold, truth.total)} of ${truth.total.toFixed(2)} s in main(). ` +
          `Every stack it can have is <module> → main [→ hot | → cold].\n`,
      );
    }
    return code;
  } finally {
    if (tempDir) fs.rmSync(tempDir, { recursive: true, force: true });
  }
}

/** Record the workload in Pyodide 3.15; on a Python error print its traceback and return null. */
async function recordInPyodide(workload: string, seconds: number, rateHz: number, capture: string, err: (s: string) => void): Promise<PyodideRecordingStats | null> {
  const tty = process.stderr.isTTY === true;
  const name = path.basename(workload);
  let target = 'Pyodide';
  if (tty) err(`loading Pyodide (CPython 3.15 compiled to WebAssembly)…\x1b[K`);
  try {
    const stats = await recordPyodide({
      python: fs.readFileSync(workload, 'utf8'),
      filename: workload,
      args: [String(seconds)],
      rateHz,
      durationMs: seconds * 1000 + EXTRA_MS,
      output: capture,
      version: '3.15',
      onStderr: (text) => err(text),
      onStart: (info) => {
        target = info.description;
        if (tty) err(`\rrecording ${name} in ${target}…\x1b[K`);
      },
      ...(tty ? { onProgress: (p: PyodideProgress) => err(`\r${progressLine(name, target, p)}\x1b[K`) } : {}),
    });
    if (tty) err('\r\x1b[K');
    return stats;
  } catch (e) {
    if (tty) err('\r\x1b[K');
    if (!(e instanceof PyodideProgramError)) throw e;
    err(`pyunwind demo: ${name} failed in Pyodide:\n${e.traceback}\n`);
    return null;
  }
}

function progressLine(name: string, target: string, p: PyodideProgress): string {
  const secs = p.elapsedMs / 1000;
  const missed = p.scheduled ? `${((100 * (p.scheduled - p.taken)) / p.scheduled).toFixed(1)}%` : '–';
  return `recording ${name} in ${target}: ${p.taken} samples, ${Math.round(p.taken / Math.max(secs, 1e-9))}/s, missed ${missed}, ${secs.toFixed(1)} s`;
}

/** The workload's last line: {"hot": s, "cold": s, "total": s}. */
function measured(stdout: string): { hot: number; cold: number; total: number } | null {
  const last = stdout.trim().split('\n').pop() ?? '';
  try {
    const v = JSON.parse(last) as { hot?: unknown; cold?: unknown; total?: unknown };
    if (typeof v.hot === 'number' && typeof v.cold === 'number' && typeof v.total === 'number' && v.total > 0) {
      return { hot: v.hot, cold: v.cold, total: v.total };
    }
  } catch {
    // not the workload's line
  }
  return null;
}
