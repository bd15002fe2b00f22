// pyunwind report FILE: walk, validate, symbolize and aggregate a capture, then write it in one
// of the formats of src/export/formats.ts.

import { shortFilename } from '../export/filenames.js';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { metaFromReport } from '../export/meta.js';
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

export const REPORT_HELP = `Usage: pyunwind report FILE... [OPTIONS]

Turn a capture (pyunwind record) into a profile. Every sample is walked and validated;
rejected samples never enter the profile: they are counted, by reason. Several captures (those
of record --subprocesses) are reported together, each process apart. Option by option:
docs/reporting.md; the formats: docs/formats.md.

Options:
  -f, --format FORMAT   one of:
${formatsHelp('                          ')}
  -o, --output OUT      write to OUT instead of standard output
      --open            open an HTML format in the browser
      --diff BASE       the change against capture BASE (flamegraph or collapsed)
      --subprocesses    also the captures of FILE's subprocesses (FILE.PID.pyuw beside it)
  -t, --thread ID       only this thread (native thread id or thread_id)
  -m, --mode MODE       only samples of threads on a cpu, holding the gil, handling an exception
      --no-gc           no <GC> frames (a thread's stack while the collector runs in it)
      --native          C frames: on a capture recorded with --native, the C functions in
                        one stack with the Python ones (named with their library); on any
                        other, <native> where C code called back into Python
      --async-aware     asyncio task stacks (a capture recorded with --async-aware)
      --async-mode MODE running (each thread's running task) or all; default: as recorded
      --opcodes         each frame's bytecode instruction too, as dis names it
      --full-filenames  whole file paths in text (default: short, as py-spy shows them)
  -n, --top N           functions listed per thread in text (default 15)
  -j, --workers N       at most N worker threads, as many as pay for the capture's size
                        (default: one per processor; none below 16 MB); 0: this thread only
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
      'full-filenames': { type: 'boolean' },
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
      ...(values.workers !== undefined ? { maxWorkers: Number(values.workers) } : {}),
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
  // (what a person reads: file names short, as py-spy shows them, unless asked otherwise)
  const filename = values['full-filenames'] ? (f: string): string => f : (f: string): string => shortFilename(f, process.cwd());
  let written = values.output;
  if (!written && values.open) written = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'pyunwind-')), `${path.basename(file).replace(/\.pyuw$/, '')}.${spec.extension}`);
  // a format that can be written as it is made goes to its file so: a profile of deep stacks
  // is gigabytes of collapsed lines, never held whole
  if (written && spec.stream && files.length === 1 && values.diff === undefined) {
    const to = written;
    let fd: number | null = null;
    try {
      fd = fs.openSync(to, 'w');
      const handle = fd;
      const streamed = await spec.stream({ report: result, meta: metaFromReport(result), top: Number(values.top), readSource, filename }, (piece) => {
        for (let at = 0; at < piece.length; ) at += fs.writeSync(handle, piece, at, piece.length - at);
      });
      if (streamed) {
        fs.closeSync(fd);
        fd = null;
        return finish(to);
      }
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (typeof code !== 'string') throw e;
      throw new Error(`cannot write ${to}: ${code}`);
    } finally {
      if (fd !== null) fs.closeSync(fd);
    }
  }

  let made: string | Uint8Array;
  if (files.length > 1) {
    const inputs: ProcessInput[] = [{ file, report: result, meta: metaFromReport(result) }];
    for (const f of files.slice(1)) {
      const r = await load(f, ` ${f}`);
      inputs.push({ file: f, report: r, meta: metaFromReport(r) });
    }
    made = await makeSeveral(format, inputs, { top: Number(values.top), readSource, filename });
  } else {
    const base = values.diff !== undefined ? await load(values.diff, ' (base)') : undefined;
    made = await spec.make({
      report: result,
      meta: metaFromReport(result),
      top: Number(values.top),
      readSource,
      filename,
      ...(base ? { base: { report: base, meta: metaFromReport(base) } } : {}),
    });
  }

  if (written) {
    try {
      fs.writeFileSync(written, made);
    } catch (e) {
      throw new Error(`cannot write ${written}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
    }
  } else out(made);
  return finish(written);

  function finish(to: string | undefined): number {
    if (values.open) {
      const why = openInBrowser(to!);
      err(why === null ? `pyunwind report: opened ${to} in the browser\n` : `pyunwind report: wrote ${to}; cannot open a browser here: ${why}\n`);
    }
    return 0;
  }
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
