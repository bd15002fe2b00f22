// pyunwind report FILE: walk, validate, symbolize and aggregate a capture, then write it in one
// of the formats of report-formats.ts.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { metaFromHeader } from '../export/meta.js';
import { asyncModeOption, samplingModeOption } from './options.js';
import { reportCapture, type CaptureReport } from '../pipeline/report-file.js';
import { UsageError } from './errors.js';
import { openInBrowser } from './open-browser.js';
import { FORMAT_NAMES, FORMATS, formatsHelp, makeSeveral, type Format, type FormatSpec, type ProcessInput } from '../export/formats.js';
import { openCapture } from '../capture/file.js';
import type { CaptureHeader } from '../capture/types.js';

/** Read a source file named in the capture for the heatmap: null when it cannot be read here. */
function readSource(filename: string): string | null {
  try {
    const st = fs.statSync(filename);
    // (a capture names files; only regular files of reasonable size are read)
    return st.isFile() && st.size <= 8 << 20 ? fs.readFileSync(filename, 'utf8') : null;
  } catch {
    return null;
  }
}

export const REPORT_HELP = `Usage: pyunwind report FILE... [--format FORMAT] [-o OUT] [--diff BASE] [--open] [--thread ID] [--mode MODE] [--native] [--opcodes]

Turn a capture (pyunwind record) into a profile. Every sample is walked and validated;
rejected samples never enter the profile — they are counted, by reason, in the summary, and
every format carries those numbers where it has a place for them.

Several captures (record --subprocesses: one per process, e.g. out.pyuw out.*.pyuw) are
reported together, each process apart: text gives each capture's report in turn, json a
document of them ({"format": "pyunwind-processes", "processes": [...]}, docs/json-format.md);
the other formats put each thread under its process ("pid 1234 (app.py)": the first element
of a collapsed line, the thread's name in speedscope, cpuprofile and the flame graph, which
has a view per process, a process of its own in the Firefox Profiler (gecko), a pid label in
pprof, a pid field in jsonl), on one clock. pstats and heatmap take one capture.

Options:
  -f, --format FORMAT   one of:
${formatsHelp('                          ')}
  -o, --output OUT      write to OUT instead of standard output
      --subprocesses    also the captures of FILE's subprocesses (record --subprocesses):
                        those beside it named FILE's name with a pid (out.1234.pyuw) whose
                        recording is FILE's — not those left from another recording
      --diff BASE       compare with the capture BASE (flamegraph, the default with --diff,
                        or collapsed): the change in each stack's share of the samples
      --open            open an HTML format in the browser (written to OUT, or to a
                        temporary file without -o)
  -t, --thread ID       only this thread (native thread id or thread_id)
  -m, --mode MODE       only the samples of threads that, when sampled, were
                          cpu         on a CPU (running or runnable)
                          gil         holding the GIL (CPython 3.13+)
                          exception   handling or raising an exception (3.15+)
                        or wall: every sample (the default: the mode the capture was
                        recorded in). A capture recorded in wall mode tells each of these
                        where its Python had them (record --help).
      --no-gc           no <GC> frames: by default a thread's stack gets one on top while
                        the garbage collector runs in it (CPython 3.13+)
      --native          <native> frames where C code called back into Python: between
                        a function and what it reached through sorted(key=...), map, a
                        C module's callback; on top when the thread is in such C code
                        as it enters Python (every version; any capture)
      --async-aware     asyncio stacks, from a capture recorded with --async-aware (3.14+):
                        a task's stack is its coroutines under the tasks awaiting it, each
                        task a \`<task NAME>\` frame, the root task outermost
      --async-mode MODE running (each thread's running task) or all (also every waiting
                        task, one stack each per sample); default: as recorded
      --opcodes         name each frame's bytecode instruction too, as dis names it in
                        adaptive code — the specialized form where the interpreter had
                        specialized it (BINARY_OP_ADD_INT): a frame is then function, line
                        and instruction (docs/formats.md says how each format shows it)
  -n, --top N           functions listed per thread in text (default 15)
  -j, --workers N       worker threads that process blocks (default: one per core for a
                        capture of 4 MB or more, else 0: all in this thread); the profile
                        is the same whatever N. Formats with a timeline (gecko, cpuprofile,
                        jsonl) process every sample in this thread.
  -q, --quiet           no progress line
  -h, --help            this help
`;

export async function report(argv: string[], out: (s: string | Uint8Array) => void, err: (s: string) => void): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    options: {
      format: { type: 'string', short: 'f' },
      output: { type: 'string', short: 'o' },
      diff: { type: 'string' },
      subprocesses: { type: 'boolean' },
      open: { type: 'boolean' },
      thread: { type: 'string', short: 't' },
      mode: { type: 'string', short: 'm' },
      'no-gc': { type: 'boolean' },
      native: { type: 'boolean' },
      'async-aware': { type: 'boolean' },
      'async-mode': { type: 'string' },
      opcodes: { type: 'boolean' },
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
  if (positionals.length === 0) throw new UsageError('report needs a capture FILE');
  if (values.subprocesses && positionals.length !== 1) throw new UsageError('--subprocesses finds the captures of one FILE\'s subprocesses: give that FILE alone');
  const file = positionals[0]!;
  const format = (values.format ?? (values.diff !== undefined ? 'flamegraph' : 'text')) as Format;
  if (!FORMAT_NAMES.includes(format)) throw new UsageError(`unknown format "${values.format}" (${FORMAT_NAMES.join(', ')})`);
  const spec: FormatSpec = FORMATS[format];
  if (values.diff !== undefined && !spec.diff) throw new UsageError(`--diff works with --format flamegraph or collapsed, not ${format}`);
  if (values.open && !spec.html) throw new UsageError(`--open shows HTML formats (flamegraph, heatmap), not ${format}`);
  if (spec.binary && !values.output && process.stdout.isTTY) throw new UsageError(`${format} is a binary format: write it to a file with -o OUT`);
  if (!/^\d+$/.test(values.top!)) throw new UsageError(`--top: "${values.top}" is not a number`);
  if (values.workers !== undefined && !/^\d{1,3}$/.test(values.workers)) throw new UsageError(`--workers: "${values.workers}" is not a number of threads`);
  let thread: bigint | undefined;
  if (values.thread !== undefined) {
    if (!/^(\d+|0x[0-9a-f]+)$/i.test(values.thread)) throw new UsageError(`--thread: "${values.thread}" is not a thread id`);
    thread = BigInt(values.thread);
  }

  const mode = samplingModeOption(values.mode);
  const asyncAware = values['async-aware'] ? (values['async-mode'] === undefined ? 'recorded' : asyncModeOption(true, values['async-mode'])!) : asyncModeOption(false, values['async-mode']);

  const tty = !values.quiet && process.stderr.isTTY === true;
  const load = async (f: string, what: string): Promise<CaptureReport> => {
    const result = await reportCapture(f, {
      ...(thread !== undefined ? { thread } : {}),
      ...(mode !== undefined ? { mode } : {}),
      ...(values['no-gc'] ? { gc: false } : {}),
      ...(values.native ? { native: true } : {}),
      ...(asyncAware ? { asyncAware } : {}),
      ...(values.opcodes ? { opcodes: true } : {}),
      ...(values.workers !== undefined ? { workers: Number(values.workers) } : {}),
      ...(spec.timeline ? { timeline: true } : {}),
      ...(tty ? { onProgress: (n: number, b: number) => err(`\rreport${what}: ${n} samples, ${b} blocks\x1b[K`) } : {}),
    });
    if (tty) err('\r\x1b[K');
    for (const w of result.warnings) err(`pyunwind report: warning: ${f}: byte ${w.offset}: ${w.message}\n`);
    return result;
  };
  const result = await load(file, '');
  const files = values.subprocesses ? [file, ...(await subprocessCaptures(file, result.header))] : positionals;
  if (files.length > 1) {
    if (values.diff !== undefined) throw new UsageError('--diff compares two captures: give one FILE');
    if (typeof spec.several === 'string') throw new UsageError(`${format} ${spec.several}: report each capture on its own`);
  }
  let made: string | Uint8Array;
  if (files.length > 1) {
    const inputs: ProcessInput[] = [{ file, report: result, meta: metaFromHeader(result.header, result.mode) }];
    for (const f of files.slice(1)) {
      const r = await load(f, ` ${f}`);
      inputs.push({ file: f, report: r, meta: metaFromHeader(r.header, r.mode) });
    }
    made = await makeSeveral(format, inputs, { top: Number(values.top), readSource });
  } else {
    const base = values.diff !== undefined ? await load(values.diff, ' (base)') : undefined;
    made = await spec.make({
      report: result,
      meta: metaFromHeader(result.header, result.mode),
      top: Number(values.top),
      readSource,
      ...(base ? { base: { report: base, meta: metaFromHeader(base.header, base.mode) } } : {}),
    });
  }

  let written = values.output;
  if (!written && values.open) written = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'pyunwind-')), `${path.basename(file).replace(/\.pyuw$/, '')}.${spec.extension}`);
  if (written) {
    try {
      fs.writeFileSync(written, made);
    } catch (e) {
      throw new Error(`cannot write ${written}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
    }
  } else out(made);
  if (values.open) {
    const why = openInBrowser(written!);
    err(why === null ? `pyunwind report: opened ${written} in the browser\n` : `pyunwind report: wrote ${written}; cannot open a browser here: ${why}\n`);
  }
  return 0;
}

/**
 * The captures of `file`'s subprocesses (report --subprocesses): the files beside it named as
 * record --subprocesses names them (its name with a pid before the extension, subprocessOutput)
 * whose header says they were recorded under this capture's target (rootPid), from its start
 * on; in pid order (a pid's later recordings after its first).
 */
async function subprocessCaptures(file: string, header: CaptureHeader): Promise<string[]> {
  if (header.pid === undefined) return [];
  const base = path.basename(file);
  const dir = file.slice(0, file.length - base.length);
  const dot = base.lastIndexOf('.');
  const [stem, ext] = dot > 0 ? [base.slice(0, dot), base.slice(dot)] : [base, ''];
  const escape = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const pattern = new RegExp(`^${escape(stem)}\\.(\\d+)(?:-(\\d+))?${escape(ext)}$`);
  const found: { file: string; pid: number; nth: number }[] = [];
  for (const name of fs.readdirSync(dir || '.')) {
    const m = pattern.exec(name);
    if (!m) continue;
    const candidate = dir + name;
    let h: CaptureHeader;
    try {
      const reader = await openCapture(candidate);
      h = reader.header;
      reader.close();
    } catch {
      continue; // not a capture (or not readable): not one of these
    }
    if (h.rootPid === header.pid && h.startTime >= header.startTime) found.push({ file: candidate, pid: Number(m[1]), nth: Number(m[2] ?? 1) });
  }
  return found.sort((a, b) => a.pid - b.pid || a.nth - b.nth).map((f) => f.file);
}
