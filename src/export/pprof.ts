// pprof: a gzip'd profile.proto (github.com/google/pprof/blob/main/proto/profile.proto), what
// `go tool pprof`, Grafana Pyroscope, Parca, Cloud Profiler and friends read. Encoded with the
// `pprof-format` package; gzip'd with fflate.
//
// - Sample types: samples/count, and wall/nanoseconds (weight × 1e9/rate) when the rate is
//   known (rate 0: counts only). period_type wall/nanoseconds, period 1e9/rate.
// - A Function per (qualname, filename) over all threads: name = system_name = the qualname,
//   start_line = the smallest line any sample saw in it (the profile keeps only the executing
//   line of each frame, not the code's first line; 0 when no sample had a line).
// - A Location per distinct (function, line) (line 0 when CPython had none), with one Line; no
//   Mapping for Python code (there is no binary to symbolize: every location already has its
//   function).
// - Native frames (report --native on a capture with native stacks): their Function's filename
//   is the object's path; their Location has the object's Mapping (file name, build id, where it
//   was mapped, has_functions) so that pprof and Pyroscope show them as native code.
// - With opcodes (report --opcodes), a frame's instruction is a function inlined into it: the
//   Location of (function, line, instruction) has two Lines, the instruction's first (a Function
//   per instruction name, e.g. BINARY_OP_ADD_INT, no file) — so the flame graph has it as a level
//   below each frame, `-top` ranks instructions over the whole program, and `-noinlines` folds
//   them back into their functions.
// - A Sample per distinct stack of each thread, leaf first as pprof wants, valued by the summed
//   weight of the trusted samples that ended on it (counts rounded to integers; weights are 1
//   unless a producer said otherwise), labelled `thread` = the thread's name in every export
//   (threadLabel) and `thread_id` = its native thread id (and, in a profile of several
//   processes, `pid` = its process's pid). Idle samples (no Python frame) are
//   left out, as in the collapsed export; rejected samples are never in a profile's stacks.
// - Comments: the title, Python version, recorder, mode and rate, then the validation numbers
//   (validationLines), so `go tool pprof -comments` shows how far the samples can be trusted.
// - time_nanos: the recording's start (0 when unknown); duration_nanos: from the first sample
//   to the last.
// - Deterministic: the threads, frames and stacks are walked in their canonical order
//   (canonicalThread), ids are given in that order, and the gzip header has no time.

import { gzipSync } from 'fflate';
import { Function as PprofFunction, Label, Line, Location, Mapping, Profile as PprofProfile, Sample, StringTable, ValueType } from 'pprof-format';
import type { Profile } from '../profile/profile.js';
import { canonicalThread } from '../profile/profile.js';
import { threadLabel } from './common.js';
import { mergedFunctions } from './functions.js';
import { validationLines, type ExportMeta } from './meta.js';

/** The profile.proto message before encoding (for callers that want to add to it). */
export function pprofProfile(profile: Profile, meta: ExportMeta): PprofProfile {
  const strings = new StringTable();
  const str = (s: string): number => strings.dedup(s);
  const nsPerSample = meta.rateHz > 0 ? 1e9 / meta.rateHz : 0;

  const sampleType = [new ValueType({ type: str('samples'), unit: str('count') })];
  const wall = nsPerSample > 0 ? new ValueType({ type: str('wall'), unit: str('nanoseconds') }) : undefined;
  if (wall) sampleType.push(wall);

  const threads = profile.threads();
  const docs = threads.map(canonicalThread);

  // functions (qualname, filename) and their smallest line, in canonical order of first use
  const { functions: fnKeys, frameFunction: frameFn } = mergedFunctions(docs);
  const functions = fnKeys.map(
    (f, i) => new PprofFunction({ id: i + 1, name: str(f.qualname), systemName: str(f.qualname), filename: str(f.filename), startLine: f.line }),
  );

  // instructions (opcodes), each a function of its own, after the Python functions
  const opcodeFn = new Map<string, number>();
  const opcodeFunction = (name: string): number => {
    let id = opcodeFn.get(name);
    if (id === undefined) {
      id = functions.length + 1;
      opcodeFn.set(name, id);
      functions.push(new PprofFunction({ id, name: str(name), systemName: str(name), filename: str(''), startLine: 0 }));
    }
    return id;
  };

  // mappings: one per native object path (the first placement of it the capture describes)
  const mappings: Mapping[] = [];
  const mappingOf = new Map<string, number>();
  for (const o of meta.objects ?? []) {
    if (mappingOf.has(o.path)) continue;
    const id = mappings.length + 1;
    mappingOf.set(o.path, id);
    mappings.push(new Mapping({ id, memoryStart: o.start, memoryLimit: o.end, filename: str(o.path), buildId: str(o.buildId ?? ''), hasFunctions: true }));
  }
  const nativeMapping = (path: string): number => {
    let id = mappingOf.get(path);
    if (id === undefined) {
      id = mappings.length + 1;
      mappingOf.set(path, id);
      mappings.push(new Mapping({ id, filename: str(path), hasFunctions: true }));
    }
    return id;
  };

  // locations (function, line, instruction)
  const locIndex = new Map<string, number>();
  const locations: Location[] = [];
  const frameLoc = docs.map((d, ti) =>
    d.frames.map((f, fi) => {
      const fn = frameFn[ti]![fi]!;
      const line = f.line ?? 0;
      const key = f.native ? `${fn}:native` : f.opcode === undefined ? `${fn}:${line}` : `${fn}:${line}:${f.opcode}`;
      let id = locIndex.get(key);
      if (id === undefined) {
        id = locations.length + 1;
        locIndex.set(key, id);
        const lines = [new Line({ functionId: fn + 1, line })];
        if (f.opcode !== undefined) lines.unshift(new Line({ functionId: opcodeFunction(f.opcode), line }));
        locations.push(new Location({ id, line: lines, ...(f.native ? { mappingId: nativeMapping(f.filename) } : {}) }));
      }
      return id;
    }),
  );

  const threadKey = str('thread');
  const threadIdKey = str('thread_id');
  const pidKey = str('pid');
  const samples: Sample[] = [];
  docs.forEach((d, ti) => {
    const t = threads[ti]!;
    const labels = [new Label({ key: threadKey, str: str(threadLabel(t)) }), new Label({ key: threadIdKey, num: t.nativeThreadId })];
    if (t.process?.pid != null) labels.push(new Label({ key: pidKey, num: t.process.pid }));
    const locOf = frameLoc[ti]!;
    const { stackParent, stackFrame, stackWeight } = d;
    for (let s = 0; s < stackWeight.length; s++) {
      const w = stackWeight[s]!;
      if (!(w > 0)) continue;
      const locationId: number[] = [];
      for (let x = s; x >= 0; x = stackParent[x]!) locationId.push(locOf[stackFrame[x]!]!);
      const value = [Math.round(w)];
      if (wall) value.push(Math.round(w * nsPerSample));
      samples.push(new Sample({ locationId, value, label: labels }));
    }
  });

  const rate = meta.rateHz > 0 ? `${meta.rateHz} Hz` : 'rate unknown';
  const comment = [
    `pyunwind profile of ${meta.title}`,
    `Python ${meta.pythonVersion ?? 'version unknown'}; recorded by ${meta.recorder} at ${rate}, mode ${meta.mode}, copies ${meta.copy ?? 'unknown'}`,
    ...validationLines(profile, meta),
  ].map(str);

  const span = profile.timeSpan();
  return new PprofProfile({
    sampleType,
    sample: samples,
    location: locations,
    function: functions,
    ...(mappings.length ? { mapping: mappings } : {}),
    stringTable: strings,
    timeNanos: epochNanos(meta.startTime),
    durationNanos: span ? Math.round((span.last - span.first) * 1000) : 0,
    ...(wall ? { periodType: wall, period: Math.round(nsPerSample) } : {}),
    comment,
  });
}

/** ms since the epoch (maybe fractional) as ns, exactly enough: a double has no ns at this size. */
function epochNanos(ms: number): bigint {
  if (!(Number.isFinite(ms) && ms > 0)) return 0n;
  const whole = Math.trunc(ms);
  return BigInt(whole) * 1_000_000n + BigInt(Math.round((ms - whole) * 1e6));
}

/** The gzip'd profile.proto of a profile (see the file comment). */
export function exportPprof(profile: Profile, meta: ExportMeta): Uint8Array {
  // mtime 0: no time in the gzip header, so the same profile gives the same bytes
  return gzipSync(pprofProfile(profile, meta).encode(), { mtime: 0 });
}
