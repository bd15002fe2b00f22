// The Firefox Profiler's *processed* profile format (what https://profiler.firefox.com loads
// directly, without its Gecko-format processing step), version 63.
//
// Version and shapes: firefox-devtools/profiler at commit 0d66fdef2dab —
// src/types/profile.ts (RawProfileSharedData, RawThread, RawSamplesTable, RawMarkerTable,
// FrameTable, FuncTable, SourceTable, SourceMapInfoTable, ProfileMeta),
// src/profile-logic/data-structures.ts (getEmpty*: the exact columns of every table) and
// src/profile-logic/processed-profile-versioning.ts, whose last upgrader there is [63] (63
// added `sourceMapInfo` to the frame and func tables and `content` to the sources). Later
// versions of the profiler upgrade a version-63 file on load (they keep an upgrader for every
// version), so writing the latest version whose table shapes could be read in full is what
// keeps the file loadable. The changes that matter here, per docs-developer/CHANGELOG-formats.md
// and the upgraders: pids are strings (47); stack tables have no category columns, frames
// carry them (53); one string array shared by all threads (56); func file names moved to a
// shared `sources` table (58: funcTable.source, not fileName); stack, frame, func, resource
// and native-symbol tables shared by all threads in `profile.shared` (60).
//
// What the file holds:
// - one thread per Python thread, named by threadLabel, pid from the title ("pid 1234 …") or
//   "0", tid = the native thread id; MainThread is the process's main thread; in a profile of
//   several processes (the captures of record --subprocesses), each thread has its process's
//   pid and name (processLabel), so the profiler shows each process as a track of its own, on
//   one clock (the timeline's times, from the earliest capture's start);
// - one sample per trusted sample, at its time in ms since meta.startTime (the recording's
//   wall-clock start); a Python frame is a frame (func + line) of the 'Python' category; an
//   idle sample is a stack of one `<idle>` frame in the 'Idle' category (transparent in the
//   activity graph, but counted in the call tree, as Firefox counts its own idle threads);
// - rejected samples are not samples (their stacks are not trusted): each is an instant
//   marker "Rejected sample: <status>" at its time, {type: 'Text', name: status};
// - each stretch of consecutive idle samples of a thread is one interval marker "Idle";
// - the validation numbers (validationLines) are in meta.extra (the profile's "more info"
//   panel) and in a "pyunwind validation" marker on the first thread, over the recording.
// Funcs are (qualname, filename) — (qualname and instruction, filename) with opcodes: a
// frame`s func is named `hot BINARY_OP_ADD_INT` then —, lineNumber null (CPython's frame gives the current line,
// not the function's first line); frames are (func, line). Sample weights are null (1 each).

import type { Profile } from '../profile/profile.js';
import { IDLE_STACK, REJECTED_STACK, type Timeline, type TimelineThread } from '../profile/timeline.js';
import { IDLE_FRAME, frameName, threadLabel } from './common.js';
import { validationLines, type ExportMeta } from './meta.js';

/** meta.preprocessedProfileVersion written (see the file header) */
export const GECKO_PROCESSED_VERSION = 63;
/**
 * meta.version: the Gecko (unprocessed) format version. Only informative in a processed
 * profile (the loader reads preprocessedProfileVersion); 32 is the Gecko version the
 * profiler's constants pair with processed version 60, the nearest pairing on record.
 */
export const GECKO_FORMAT_VERSION = 32;

const CATEGORY_OTHER = 0;
const CATEGORY_PYTHON = 1;
const CATEGORY_IDLE = 2;
const INSTANT = 0;
const INTERVAL = 1;

type Nullable<T> = T | null;

interface StackTable {
  frame: number[];
  prefix: Nullable<number>[];
  length: number;
}
interface FrameTable {
  address: number[];
  inlineDepth: number[];
  category: Nullable<number>[];
  subcategory: Nullable<number>[];
  func: number[];
  nativeSymbol: Nullable<number>[];
  innerWindowID: Nullable<number>[];
  line: Nullable<number>[];
  column: Nullable<number>[];
  sourceMapInfo: Nullable<number>[];
  length: number;
}
interface FuncTable {
  name: number[];
  isJS: boolean[];
  relevantForJS: boolean[];
  resource: number[];
  source: Nullable<number>[];
  lineNumber: Nullable<number>[];
  columnNumber: Nullable<number>[];
  sourceMapInfo: Nullable<number>[];
  length: number;
}
interface SourceTable {
  id: Nullable<string>[];
  filename: number[];
  startLine: number[];
  startColumn: number[];
  sourceMapURL: Nullable<number>[];
  content: Nullable<string>[];
  length: number;
}
interface TextMarkerData {
  type: 'Text';
  name: string;
}
interface MarkerTable {
  data: Nullable<TextMarkerData>[];
  name: number[];
  startTime: Nullable<number>[];
  endTime: Nullable<number>[];
  phase: number[];
  category: number[];
  length: number;
}
interface SamplesTable {
  stack: Nullable<number>[];
  time: number[];
  weight: null;
  weightType: 'samples';
  length: number;
}

/** A thread of the processed format (RawThread), as written here. */
export interface GeckoThread {
  processType: 'default';
  processStartupTime: number;
  processShutdownTime: number | null;
  registerTime: number;
  unregisterTime: number | null;
  pausedRanges: never[];
  showMarkersInTimeline: boolean;
  name: string;
  isMainThread: boolean;
  processName: string;
  pid: string;
  tid: number | string;
  samples: SamplesTable;
  markers: MarkerTable;
}

/** The processed profile (Profile in the profiler's src/types/profile.ts), as written here. */
export interface GeckoProfile {
  meta: {
    interval: number;
    startTime: number;
    profilingStartTime: number;
    profilingEndTime: number;
    processType: number;
    product: string;
    importedFrom: string;
    stackwalk: 0;
    version: number;
    preprocessedProfileVersion: number;
    symbolicated: boolean;
    usesOnlyOneStackType: boolean;
    sourceCodeIsNotOnSearchfox: boolean;
    keepProfileThreadOrder: boolean;
    initialVisibleThreads: number[];
    initialSelectedThreads: number[];
    categories: { name: string; color: string; subcategories: string[] }[];
    markerSchema: object[];
    extra: { label: string; entries: { label: string; format: 'string'; value: string }[] }[];
    arguments: string;
  };
  libs: never[];
  pages: never[];
  shared: {
    stackTable: StackTable;
    frameTable: FrameTable;
    funcTable: FuncTable;
    resourceTable: { lib: never[]; name: never[]; host: never[]; type: never[]; length: 0 };
    nativeSymbols: { libIndex: never[]; address: never[]; name: never[]; functionSize: never[]; length: 0 };
    sources: SourceTable;
    stringArray: string[];
    sourceMapInfo: { originalSource: never[]; originalLine: never[]; originalColumn: never[]; length: 0 };
  };
  threads: GeckoThread[];
}

/** The tid as the profiler takes it: a number, or a string when a double cannot hold it. */
function tidOf(id: bigint): number | string {
  return id <= BigInt(Number.MAX_SAFE_INTEGER) && id >= 0n ? Number(id) : String(id);
}

/** The pid named in an ExportMeta title ("pid 1234 (python3.15, …)"), "0" when none is. */
function pidOf(title: string): string {
  return /\bpid (\d+)\b/.exec(title)?.[1] ?? '0';
}

/** The indexes of a thread's samples in time order (recording order, stably sorted by time). */
function timeOrder(t: TimelineThread): number[] {
  const order = t.time.map((_, i) => i);
  let sorted = true;
  for (let i = 1; i < t.time.length && sorted; i++) if (t.time[i]! < t.time[i - 1]!) sorted = false;
  return sorted ? order : order.sort((a, b) => t.time[a]! - t.time[b]! || a - b);
}

class Builder {
  readonly strings: string[] = [];
  private readonly stringIndex = new Map<string, number>();
  readonly stackTable: StackTable = { frame: [], prefix: [], length: 0 };
  readonly frameTable: FrameTable = {
    address: [],
    inlineDepth: [],
    category: [],
    subcategory: [],
    func: [],
    nativeSymbol: [],
    innerWindowID: [],
    line: [],
    column: [],
    sourceMapInfo: [],
    length: 0,
  };
  readonly funcTable: FuncTable = { name: [], isJS: [], relevantForJS: [], resource: [], source: [], lineNumber: [], columnNumber: [], sourceMapInfo: [], length: 0 };
  readonly sources: SourceTable = { id: [], filename: [], startLine: [], startColumn: [], sourceMapURL: [], content: [], length: 0 };
  private readonly sourceIndex = new Map<string, number>();
  private readonly funcIndex = new Map<string, number>();
  private readonly frameIndex = new Map<string, number>();
  private readonly stackIndex = new Map<string, number>();

  str(s: string): number {
    let i = this.stringIndex.get(s);
    if (i === undefined) {
      i = this.strings.length;
      this.strings.push(s);
      this.stringIndex.set(s, i);
    }
    return i;
  }

  private source(filename: string): number {
    let i = this.sourceIndex.get(filename);
    if (i === undefined) {
      const s = this.sources;
      i = s.length++;
      s.id.push(null);
      s.filename.push(this.str(filename));
      s.startLine.push(1);
      s.startColumn.push(1);
      s.sourceMapURL.push(null);
      s.content.push(null);
      this.sourceIndex.set(filename, i);
    }
    return i;
  }

  /** a func per (qualname, filename); filename null: a pseudo-function (`<idle>`) */
  private func(qualname: string, filename: string | null): number {
    // length-prefixed: unambiguous whatever the names hold
    const key = `${qualname.length}:${qualname}${filename === null ? '\0' : `/${filename}`}`;
    let i = this.funcIndex.get(key);
    if (i === undefined) {
      const f = this.funcTable;
      i = f.length++;
      f.name.push(this.str(qualname));
      f.isJS.push(false);
      f.relevantForJS.push(false);
      f.resource.push(-1);
      f.source.push(filename === null ? null : this.source(filename));
      f.lineNumber.push(null);
      f.columnNumber.push(null);
      f.sourceMapInfo.push(null);
      this.funcIndex.set(key, i);
    }
    return i;
  }

  frame(qualname: string, filename: string | null, line: number | null, category: number): number {
    const func = this.func(qualname, filename);
    const key = `${func}:${line ?? ''}:${category}`;
    let i = this.frameIndex.get(key);
    if (i === undefined) {
      const f = this.frameTable;
      i = f.length++;
      f.address.push(-1);
      f.inlineDepth.push(0);
      f.category.push(category);
      f.subcategory.push(0);
      f.func.push(func);
      f.nativeSymbol.push(null);
      f.innerWindowID.push(null);
      f.line.push(line);
      f.column.push(null);
      f.sourceMapInfo.push(null);
      this.frameIndex.set(key, i);
    }
    return i;
  }

  stack(prefix: number | null, frame: number): number {
    const key = `${prefix ?? ''}:${frame}`;
    let i = this.stackIndex.get(key);
    if (i === undefined) {
      i = this.stackTable.length++;
      this.stackTable.prefix.push(prefix);
      this.stackTable.frame.push(frame);
      this.stackIndex.set(key, i);
    }
    return i;
  }
}

function emptyMarkers(): MarkerTable {
  return { data: [], name: [], startTime: [], endTime: [], phase: [], category: [], length: 0 };
}

interface PendingMarker {
  name: string;
  start: number;
  end: number | null;
  phase: number;
  category: number;
  text: string;
}

export function geckoDocument(profile: Profile, timeline: Timeline, meta: ExportMeta): GeckoProfile {
  const b = new Builder();
  const interval = meta.rateHz > 0 ? 1000 / meta.rateHz : 1;
  const pid = pidOf(meta.title);
  const threads = timeline.threads();
  let endMs = 0;
  for (const t of threads) for (const us of t.time) endMs = Math.max(endMs, us / 1000);
  const lines = validationLines(profile, meta);

  const out: GeckoThread[] = threads.map((t, ti) => {
    // timeline stack → shared stack, parents first (a timeline parent has a smaller index)
    const stackMap = new Array<number>(t.stackParent.length);
    for (let s = 0; s < t.stackParent.length; s++) {
      const f = t.frames[t.stackFrame[s]!]!;
      const parent = t.stackParent[s]!;
      stackMap[s] = b.stack(parent < 0 ? null : stackMap[parent]!, b.frame(frameName(f), f.filename, f.line, CATEGORY_PYTHON));
    }
    let idleStack: number | null = null;
    const samples: SamplesTable = { stack: [], time: [], weight: null, weightType: 'samples', length: 0 };
    const markers: PendingMarker[] = [];
    const order = timeOrder(t);
    let idleRun: { start: number; last: number; count: number } | null = null;
    const closeIdle = (nextMs: number | null): void => {
      if (!idleRun) return;
      markers.push({
        name: 'Idle',
        start: idleRun.start,
        end: nextMs ?? idleRun.last + interval,
        phase: INTERVAL,
        category: CATEGORY_IDLE,
        text: `idle, ${idleRun.count} sample${idleRun.count === 1 ? '' : 's'}`,
      });
      idleRun = null;
    };
    for (const i of order) {
      const ms = t.time[i]! / 1000;
      const stack = t.stack[i]!;
      if (stack === IDLE_STACK) {
        idleStack ??= b.stack(null, b.frame(IDLE_FRAME, null, null, CATEGORY_IDLE));
        samples.stack.push(idleStack);
        samples.time.push(ms);
        samples.length++;
        if (idleRun) (idleRun.last = ms), idleRun.count++;
        else idleRun = { start: ms, last: ms, count: 1 };
        continue;
      }
      closeIdle(ms);
      if (stack === REJECTED_STACK) {
        const status = t.status[i]!;
        markers.push({ name: `Rejected sample: ${status}`, start: ms, end: null, phase: INSTANT, category: CATEGORY_OTHER, text: status });
      } else {
        samples.stack.push(stackMap[stack]!);
        samples.time.push(ms);
        samples.length++;
      }
    }
    closeIdle(null);
    if (ti === 0) markers.push({ name: 'pyunwind validation', start: 0, end: Math.max(endMs, interval), phase: INTERVAL, category: CATEGORY_OTHER, text: lines.join('; ') });
    // markers sorted by start time (the processed format keeps them sorted since version 1)
    markers.sort((x, y) => x.start - y.start);
    const table = emptyMarkers();
    for (const m of markers) {
      table.data.push({ type: 'Text', name: m.text });
      table.name.push(b.str(m.name));
      table.startTime.push(m.start);
      table.endTime.push(m.end);
      table.phase.push(m.phase);
      table.category.push(m.category);
      table.length++;
    }
    return {
      processType: 'default',
      processStartupTime: 0,
      processShutdownTime: null,
      registerTime: 0,
      unregisterTime: null,
      pausedRanges: [],
      showMarkersInTimeline: true,
      name: threadLabel(t, false),
      isMainThread: t.name === 'MainThread' && t.interpreterId === 0n,
      processName: t.process?.label ?? meta.title,
      pid: t.process?.pid != null ? String(t.process.pid) : pid,
      tid: tidOf(t.nativeThreadId),
      samples,
      markers: table,
    };
  });

  const main = out.findIndex((t) => t.isMainThread);
  const entry = (label: string, value: string) => ({ label, format: 'string' as const, value });
  return {
    meta: {
      interval,
      startTime: meta.startTime,
      profilingStartTime: 0,
      profilingEndTime: endMs,
      processType: 0,
      product: 'pyunwind',
      importedFrom: 'pyunwind',
      stackwalk: 0,
      version: GECKO_FORMAT_VERSION,
      preprocessedProfileVersion: GECKO_PROCESSED_VERSION,
      symbolicated: true,
      usesOnlyOneStackType: true,
      sourceCodeIsNotOnSearchfox: true,
      keepProfileThreadOrder: true,
      // every thread shown: the profiler would otherwise hide the ones it finds idle
      initialVisibleThreads: out.map((_, i) => i),
      initialSelectedThreads: out.length ? [Math.max(main, 0)] : [],
      categories: [
        // the first grey category is the default one the format requires
        { name: 'Other', color: 'grey', subcategories: ['Other'] },
        { name: 'Python', color: 'blue', subcategories: ['Other'] },
        { name: 'Idle', color: 'transparent', subcategories: ['Other'] },
      ],
      markerSchema: [
        {
          name: 'Text',
          tooltipLabel: '{marker.name}',
          tableLabel: '{marker.data.name}',
          chartLabel: '{marker.data.name}',
          display: ['marker-chart', 'marker-table', 'timeline-overview'],
          fields: [{ key: 'name', label: 'Details', format: 'string' }],
          description: 'pyunwind: a rejected sample (its status says why), a stretch of idle samples, or the validation summary',
        },
      ],
      extra: [
        {
          label: 'pyunwind',
          entries: [
            entry('Target', meta.title),
            entry('Python', meta.pythonVersion ?? 'unknown'),
            entry('Recorder', meta.recorder),
            entry('Rate', `${meta.rateHz} Hz`),
            entry('Sampling mode', meta.mode),
            entry('Copy mode', meta.copy ?? 'unknown'),
            entry('Samples', lines[0]!),
            entry('Ticks', lines[1]!),
            // the capture's health (captureLines: "capture: …", "warning: …"), each under its own label
            ...lines.slice(2).map((l) => {
              const at = l.indexOf(': ');
              return entry(`${l[0]!.toUpperCase()}${l.slice(1, at)}`, l.slice(at + 2));
            }),
          ],
        },
      ],
      arguments: meta.title,
    },
    libs: [],
    pages: [],
    shared: {
      stackTable: b.stackTable,
      frameTable: b.frameTable,
      funcTable: b.funcTable,
      resourceTable: { lib: [], name: [], host: [], type: [], length: 0 },
      nativeSymbols: { libIndex: [], address: [], name: [], functionSize: [], length: 0 },
      sources: b.sources,
      stringArray: b.strings,
      sourceMapInfo: { originalSource: [], originalLine: [], originalColumn: [], length: 0 },
    },
    threads: out,
  };
}

/** The processed profile as JSON text (load it at https://profiler.firefox.com). */
export function exportGecko(profile: Profile, timeline: Timeline, meta: ExportMeta): string {
  return JSON.stringify(geckoDocument(profile, timeline, meta));
}
