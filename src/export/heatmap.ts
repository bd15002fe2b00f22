// The source heatmap: one self-contained HTML page (no network) with, per source file of the
// profile, its lines and how many samples each had — self (the line of the innermost frame)
// and total (the line anywhere on the stack, counted once per sample even when recursion puts
// it there twice) — over the file's text, the hottest lines, and the validation panel. The
// renderer is in src/export/html/heatmap-script.ts.
//
// The source comes from `readSource(filename)` (the CLI reads the files the capture names, when
// they exist where the report is made): the page embeds what it gets, and says "source not
// available here: FILE" for a file it does not get, listing the sampled lines with their counts
// all the same. The text is the file as it is now, which may differ from what ran.

import type { Profile } from '../profile/profile.js';
import type { ThreadProfile } from '../profile/thread.js';
import { threadLabel } from './common.js';
import { mergedThreads } from './flamegraph.js';
import { HEATMAP_CSS, HEATMAP_SCRIPT, heatmapBody, type HeatmapData, type HeatmapFile, type HeatmapFileCounts, type HeatmapView } from './html/heatmap-script.js';
import { BASE_CSS, htmlPage, recordingFacts } from './html/page.js';
import { validationPanel } from './html/validation.js';
import type { ExportMeta } from './meta.js';

/** Sources larger than this are not embedded (the page says so). */
const MAX_SOURCE_CHARS = 4 << 20;
/** Nor once the page holds this much source. */
const MAX_TOTAL_SOURCE_CHARS = 48 << 20;

/** Per file and per line of one thread (or merged threads): self and total weights. */
export interface LineCounts {
  /** filename → counts */
  files: Map<string, { self: number; total: number; lines: Map<number | null, { self: number; total: number }> }>;
}

/**
 * Line and file counts of a thread. Self: a stack's own weight goes to its innermost frame's
 * line and file. Total: a stack's subtree weight goes to every line (and file) on its path,
 * once — only at the outermost occurrence of that line (or file) on the path.
 */
export function lineCounts(t: ThreadProfile): LineCounts {
  const files: LineCounts['files'] = new Map();
  const fileOf = (name: string): { self: number; total: number; lines: Map<number | null, { self: number; total: number }> } => {
    let f = files.get(name);
    if (f === undefined) files.set(name, (f = { self: 0, total: 0, lines: new Map() }));
    return f;
  };
  const lineOf = (name: string, line: number | null): { self: number; total: number } => {
    const lines = fileOf(name).lines;
    let l = lines.get(line);
    if (l === undefined) lines.set(line, (l = { self: 0, total: 0 }));
    return l;
  };
  const sub = t.subtreeWeights();
  const { first, kids } = t.childIndex();
  const frames = t.frames;
  // ids of (file, line) and of files, per frame, for the on-path counts
  const lineIds = new Map<string, number>();
  const fileIds = new Map<string, number>();
  const frameLine = new Int32Array(frames.length);
  const frameFile = new Int32Array(frames.length);
  frames.forEach((f, i) => {
    let fid = fileIds.get(f.filename);
    if (fid === undefined) fileIds.set(f.filename, (fid = fileIds.size));
    const key = `${fid}:${f.line ?? ''}`;
    let lid = lineIds.get(key);
    if (lid === undefined) lineIds.set(key, (lid = lineIds.size));
    frameLine[i] = lid;
    frameFile[i] = fid;
  });
  const lineOnPath = new Int32Array(lineIds.size);
  const fileOnPath = new Int32Array(fileIds.size);
  const todo: number[] = [];
  for (let r = first[1]! - 1; r >= first[0]!; r--) todo.push(kids[r]!);
  while (todo.length > 0) {
    const x = todo.pop()!;
    if (x < 0) {
      const fr = t.stackFrame[~x]!;
      lineOnPath[frameLine[fr]!]!--;
      fileOnPath[frameFile[fr]!]!--;
      continue;
    }
    const fr = t.stackFrame[x]!;
    const f = frames[fr]!;
    const w = sub[x]!;
    if (w > 0) {
      const self = t.stackWeight[x]!;
      const line = lineOf(f.filename, f.line);
      const file = fileOf(f.filename);
      line.self += self;
      file.self += self;
      if (lineOnPath[frameLine[fr]!]! === 0) line.total += w;
      if (fileOnPath[frameFile[fr]!]! === 0) file.total += w;
    }
    lineOnPath[frameLine[fr]!]!++;
    fileOnPath[frameFile[fr]!]!++;
    todo.push(~x);
    for (let c = first[x + 2]! - 1; c >= first[x + 1]!; c--) todo.push(kids[c]!);
  }
  return { files };
}

function view(t: ThreadProfile, id: string, label: string, fileIndex: (name: string) => number): HeatmapView {
  const counts = lineCounts(t);
  const files: (Omit<HeatmapFileCounts, 'file'> & { name: string })[] = [];
  for (const [name, f] of counts.files) {
    if (!(f.total > 0)) continue;
    const lines: [number, number, number][] = [];
    let noLine: [number, number] = [0, 0];
    for (const [line, c] of f.lines) {
      if (!(c.total > 0)) continue;
      if (line === null) noLine = [c.self, c.total];
      else lines.push([line, c.self, c.total]);
    }
    lines.sort((a, b) => a[0] - b[0]);
    files.push({ name, self: f.self, total: f.total, lines, noLine });
  }
  files.sort((a, b) => b.total - a.total || b.self - a.self || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return { id, label, base: t.trustedWeight, files: files.map(({ name, ...f }) => ({ file: fileIndex(name), ...f })) };
}

export function heatmapData(profile: Profile, readSource: (filename: string) => string | null): HeatmapData {
  const names: string[] = [];
  const index = new Map<string, number>();
  const fileIndex = (name: string): number => {
    let i = index.get(name);
    if (i === undefined) {
      i = names.length;
      names.push(name);
      index.set(name, i);
    }
    return i;
  };
  const threads = profile.threads();
  const views = [
    view(mergedThreads(profile), 'all', `all threads (${threads.length})`, fileIndex),
    ...threads.map((t) => view(t, t.key, threadLabel(t), fileIndex)),
  ];
  // sources in the order of the merged view (hottest files first, so a size limit drops the coldest)
  let budget = MAX_TOTAL_SOURCE_CHARS;
  const files: HeatmapFile[] = names.map((name) => {
    let text: string | null = null;
    try {
      text = readSource(name);
    } catch {
      text = null;
    }
    if (text === null) return { name, source: null, note: `source not available here: ${name}` };
    if (text.length > MAX_SOURCE_CHARS || text.length > budget) {
      return { name, source: null, note: `source not included (${text.length} characters, too large for the page): ${name}` };
    }
    budget -= text.length;
    const lines = text.split(/\r\n|\r|\n/);
    if (lines.length > 1 && lines[lines.length - 1] === '') lines.pop();
    return { name, source: lines };
  });
  return { version: 1, unit: 'samples', files, views, initialView: 0 };
}

export function exportHeatmap(profile: Profile, meta: ExportMeta, readSource: (filename: string) => string | null): string {
  return htmlPage({
    title: `Source heatmap: ${meta.title}`,
    css: BASE_CSS + HEATMAP_CSS,
    body: heatmapBody({ title: meta.title, facts: recordingFacts(profile, meta), side: validationPanel(profile.stats(), meta.capture ? { capture: meta.capture } : {}) }),
    data: heatmapData(profile, readSource),
    script: HEATMAP_SCRIPT,
  });
}
