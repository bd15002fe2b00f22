// The formats a capture's report can be written in (`pyunwind report --format`, the viewer's
// downloads): each one's name, help, what it needs and how it is made. The exporters are pure
// functions of a profile; this table loads the one asked for. Nothing here needs Node: what
// only a command has (files on disk, for the heatmap's source) comes in the input.

import type { CaptureReport } from '../pipeline/process-capture.js';
import { Profile, Timeline, type ProcessTag } from '../profile/index.js';
import { processLabel } from './common.js';
import { captureHealth, captureLines, type ExportMeta } from './meta.js';

export interface FormatInput {
  report: CaptureReport;
  /** the capture's file, where there is one (named in reports of several captures) */
  file?: string;
  meta: ExportMeta;
  /** `--top N` */
  top: number;
  /** `--diff BASE`: the baseline's report and meta */
  base?: { report: CaptureReport; meta: ExportMeta };
  /** the text of a source file named in the capture, for the heatmap (null: not readable here; default: none) */
  readSource?: (filename: string) => string | null;
  /** how text shows a file name (default: whole; the command's: short, export/filenames.ts) */
  filename?: (filename: string) => string;
}

export interface FormatSpec {
  /** what the format is for, in `--help` (one line, after its name) */
  help: string;
  /** needs every sample in time order (processed on the reference path) */
  timeline?: boolean;
  /** an HTML page (`--open` can show it) */
  html?: boolean;
  /** can compare against `--diff BASE` */
  diff?: boolean;
  /** bytes that are not text: refused on a terminal */
  binary?: boolean;
  /** a usual file extension, for `--open` without `-o` */
  extension: string;
  make(input: FormatInput): Promise<string | Uint8Array>;
  /**
   * The same bytes as `make`, handed to `write` piece by piece as they are made (each piece taken
   * before `write` returns), for outputs too large to hold whole; false, having written nothing,
   * where it cannot (then call `make`). Formats without it are made whole.
   */
  stream?(input: FormatInput, write: (piece: Uint8Array) => void): Promise<boolean>;
  /**
   * Several captures of one recording (record --subprocesses: a process each): by default the
   * format is made of them combined (combineProcesses: each thread under its process); `each`:
   * made of each capture and put together (makeSeveral); a string: refused, saying why.
   */
  several?: ((inputs: FormatInput[]) => Promise<string>) | string;
}

/** One capture of several reported together: its file and its report. */
export interface ProcessInput {
  file: string;
  report: CaptureReport;
  meta: ExportMeta;
}

/**
 * The captures of several processes as one report: a profile (and a timeline, where each has
 * one) whose threads each belong to their process (ProcessTag: its pid, and its processLabel),
 * in the order given; times on one clock, from the earliest capture's start. The header,
 * mode and recording are the first capture's (the main target's), the title names them all.
 */
export function combineProcesses(inputs: readonly ProcessInput[]): { report: CaptureReport; meta: ExportMeta; tags: ProcessTag[] } {
  if (inputs.length === 0) throw new RangeError('no captures to combine');
  const first = inputs[0]!;
  const start = Math.min(...inputs.map((p) => p.report.header.startTime));
  const profile = new Profile();
  const timeline = inputs.every((p) => p.report.timeline) ? new Timeline() : undefined;
  const tags: ProcessTag[] = inputs.map((p, index) => {
    const h = p.report.header;
    const tag: ProcessTag = { index, pid: h.pid ?? null, label: processLabel(h) };
    profile.addProcess(p.report.profile, tag);
    timeline?.addProcess(p.report.timeline!, tag, Math.round((h.startTime - start) * 1000));
    return tag;
  });
  const others = inputs.length - 1;
  const title = `${first.meta.title} and ${others} subprocess${others === 1 ? '' : 'es'}`;
  const report: CaptureReport = {
    ...first.report,
    header: { ...first.report.header, target: title, startTime: start },
    profile,
    // (offsets are each file's own: the message says which file)
    warnings: inputs.flatMap((p) => p.report.warnings.map((w) => ({ offset: w.offset, message: `${p.file ?? processLabel(p.report.header)}: ${w.message}` }))),
    closedCleanly: inputs.every((p) => p.report.closedCleanly),
    blocks: inputs.reduce((n, p) => n + p.report.blocks, 0),
    skippedBlocks: inputs.reduce((n, p) => n + p.report.skippedBlocks, 0),
    undetermined: inputs.reduce((n, p) => n + p.report.undetermined, 0),
    cutTaskLists: inputs.reduce((n, p) => n + p.report.cutTaskLists, 0),
    lostSamples: inputs.some((p) => p.report.lostSamples === null) ? null : inputs.reduce((n, p) => n + p.report.lostSamples!, 0),
    fallbackBlocks: inputs.reduce((n, p) => n + p.report.fallbackBlocks, 0),
    ...(timeline ? { timeline } : {}),
  };
  return { report, meta: { ...first.meta, title, startTime: start, ...(first.meta.capture ? { capture: captureHealth(report) } : {}) }, tags };
}

/**
 * The format made of several captures (see FormatSpec.several). Throws a RangeError when the
 * format cannot show processes apart.
 */
export async function makeSeveral(format: Format, inputs: readonly ProcessInput[], options: Omit<FormatInput, 'report' | 'meta' | 'base'>): Promise<string | Uint8Array> {
  const spec: FormatSpec = FORMATS[format];
  if (typeof spec.several === 'string') throw new RangeError(`${format} ${spec.several}: report each capture on its own`);
  if (spec.several) return spec.several(inputs.map((p) => ({ ...options, report: p.report, meta: p.meta, file: p.file })));
  const { report, meta } = combineProcesses(inputs);
  return spec.make({ ...options, report, meta });
}

/** text: top functions per thread, the validation summary and how the samples were copied */
async function makeText({ report, meta, top, filename }: FormatInput): Promise<string> {
  const { exportText } = await import('./text.js');
  const { header, recording } = report;
  const pct = (n: number): string => (recording.samples ? `${((100 * n) / recording.samples).toFixed(1)}%` : '0.0%');
  return (
    exportText(report.profile, { top, title: `${header.target}, recorded at ${header.rateHz} Hz by ${header.recorder}`, ...(filename ? { filename } : {}) }) +
    `\nRecording: mode ${meta.mode}; copies ${meta.copy ?? 'unknown'}; copy window ${recording.copyMicros.mean} µs mean, ` +
    `${recording.copyMicros.p50} µs median, ${recording.copyMicros.p99} µs p99, ${recording.copyMicros.max} µs max; ` +
    `copied again (not proven at first) ${pct(recording.retried)}, copied with the target stopped ${pct(recording.stopped)}\n` +
    captureLines(meta)
      .map((l) => `${l[0]!.toUpperCase()}${l.slice(1)}\n`)
      .join('')
  );
}

/** json: the summary and the aggregated profile (docs/json-format.md) */
async function makeJson({ report, meta }: FormatInput): Promise<string> {
  const { exportJson } = await import('./json.js');
  const { header, recording } = report;
  return exportJson(report.profile, {
    metadata: {
      target: header.target,
      pythonVersion: header.pythonVersion,
      rateHz: header.rateHz,
      recorder: header.recorder,
      startTime: header.startTime,
      mode: meta.mode,
      copy: meta.copy,
      recording: { samples: recording.samples, copyMicros: { ...recording.copyMicros }, stopped: recording.stopped, retried: recording.retried },
      ...(meta.capture ? { capture: { ...meta.capture, warnings: meta.capture.warnings.map((w) => ({ offset: w.offset, message: w.message })) } } : {}),
    },
  });
}

export const FORMATS = {
  text: {
    help: 'top functions per thread, the validation summary (default)',
    extension: 'txt',
    make: makeText,
    // one report per process, one after the other
    async several(inputs) {
      const parts = await Promise.all(inputs.map((i) => makeText(i)));
      const head = `${inputs.length} processes: ${inputs.map((i) => processLabel(i.report.header)).join(', ')}\n`;
      return (
        head +
        parts
          .map((p, k) => {
            const i = inputs[k]!;
            return `\n${'='.repeat(100)}\nProcess ${k + 1} of ${inputs.length}: ${processLabel(i.report.header)}${i.file ? ` — ${i.file}` : ''}\n\n${p}`;
          })
          .join('')
      );
    },
  },
  json: {
    help: 'the summary and the profile (docs/json-format.md)',
    extension: 'json',
    make: makeJson,
    // {format: "pyunwind-processes", processes: [{file, pid, parentPid, command, label, report}]}, each report the json of one capture
    async several(inputs) {
      const docs = await Promise.all(inputs.map((i) => makeJson(i)));
      const processes = inputs.map((i, k) => {
        const h = i.report.header;
        return `{"file":${JSON.stringify(i.file ?? null)},"pid":${JSON.stringify(h.pid ?? null)},"parentPid":${JSON.stringify(h.parentPid ?? null)},"command":${JSON.stringify(h.command ?? null)},"label":${JSON.stringify(processLabel(h))},"report":${docs[k]!.trimEnd()}}`;
      });
      return `{"format":"pyunwind-processes","version":1,"processes":[${processes.join(',')}]}\n`;
    },
  },
  collapsed: {
    help: '"thread;root;...;leaf count" lines (flamegraph.pl, --diff)',
    extension: 'txt',
    diff: true,
    async make({ report, base }) {
      if (base) {
        const { exportDiffCollapsed } = await import('./diff.js');
        return exportDiffCollapsed(report.profile, base.report.profile);
      }
      const { exportCollapsedBytes } = await import('./collapsed.js');
      return exportCollapsedBytes(report.profile);
    },
    async stream({ report, base }, write) {
      if (base) return false;
      const { writeCollapsed } = await import('./collapsed.js');
      return writeCollapsed(report.profile, {}, write);
    },
  },
  speedscope: {
    help: 'https://www.speedscope.app',
    extension: 'speedscope.json',
    async make({ report }) {
      const { exportSpeedscope } = await import('./speedscope.js');
      const { header } = report;
      return exportSpeedscope(report.profile, { name: `${header.target} (pyunwind)`, exporter: header.recorder, sampleIntervalMicros: Math.round(1e6 / header.rateHz) });
    },
  },
  pprof: {
    help: "go tool pprof, continuous profilers (gzip'd protobuf)",
    extension: 'pb.gz',
    binary: true,
    async make({ report, meta }) {
      const { exportPprof } = await import('./pprof.js');
      return exportPprof(report.profile, meta);
    },
  },
  gecko: {
    help: 'the Firefox Profiler (https://profiler.firefox.com)',
    extension: 'gecko.json',
    timeline: true,
    async make({ report, meta }) {
      const { exportGecko } = await import('./gecko.js');
      return exportGecko(report.profile, report.timeline!, meta);
    },
  },
  cpuprofile: {
    help: "Chrome DevTools' Performance panel",
    extension: 'cpuprofile',
    timeline: true,
    async make({ report, meta }) {
      const { exportCpuprofile } = await import('./cpuprofile.js');
      return exportCpuprofile(report.timeline!, meta, report.profile);
    },
  },
  pstats: {
    help: "Python's pstats, snakeviz",
    extension: 'pstats',
    binary: true,
    several: 'has no place for processes (its functions would add up across them)',
    async make({ report, meta }) {
      const { exportPstats } = await import('./pstats.js');
      return exportPstats(report.profile, meta);
    },
  },
  flamegraph: {
    help: 'an interactive flame graph, one HTML file (--diff)',
    extension: 'html',
    html: true,
    diff: true,
    async make({ report, meta, base }) {
      if (base) {
        const { exportDiffFlamegraph } = await import('./diff.js');
        return exportDiffFlamegraph(report.profile, base.report.profile, meta, base.meta);
      }
      const { exportFlamegraph } = await import('./flamegraph.js');
      return exportFlamegraph(report.profile, meta);
    },
  },
  heatmap: {
    help: 'samples per source line, over the source text (HTML)',
    extension: 'html',
    html: true,
    several: 'shows source lines, not processes (their samples would add up across them)',
    async make({ report, meta, readSource }) {
      const { exportHeatmap } = await import('./heatmap.js');
      return exportHeatmap(report.profile, meta, readSource ?? (() => null));
    },
  },
  jsonl: {
    help: 'one JSON object per trusted sample',
    extension: 'jsonl',
    timeline: true,
    async make({ report, meta }) {
      const { exportJsonl } = await import('./jsonl.js');
      return exportJsonl(report.timeline!, meta, report.profile);
    },
  },
} satisfies Record<string, FormatSpec>;

export type Format = keyof typeof FORMATS;
export const FORMAT_NAMES = Object.keys(FORMATS) as Format[];

/** The help lines of every format, indented for `--help`. */
export function formatsHelp(indent: string): string {
  return FORMAT_NAMES.map((f) => `${indent}${f.padEnd(11)} ${(FORMATS[f] as FormatSpec).help}`).join('\n');
}
