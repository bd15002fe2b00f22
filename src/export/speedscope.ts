// speedscope's file format (https://www.speedscope.app/file-format-schema.json; the schema
// ships in the `speedscope` npm package as dist/release/file-format-schema.json).
//
// One sampled profile per thread that has something to show, named like every export names
// threads (threadLabel); frames shared by all of them. A sample is one distinct stack, root
// first, weighted by the summed weight of the samples that ended there: the profile is
// already aggregated, so speedscope's "time order" view shows stacks in depth-first order,
// not in the order they were sampled. Units: weights are sample counts (`none`), or
// microseconds when `sampleIntervalMicros` says how long one sample stands for.
// Idle samples are a `<idle>` frame with `idle: true` and left out by default, as in the
// collapsed export. The output depends only on the profile's content (built from the
// canonical thread JSON).

import type { Profile } from '../profile/profile.js';
import { canonicalThread } from '../profile/profile.js';
import { IDLE_FRAME, frameName, threadLabel } from './common.js';

export const SPEEDSCOPE_SCHEMA = 'https://www.speedscope.app/file-format-schema.json';

export interface SpeedscopeFrame {
  name: string;
  file?: string;
  line?: number;
  col?: number;
}

export interface SpeedscopeSampledProfile {
  type: 'sampled';
  name: string;
  unit: 'none' | 'microseconds';
  startValue: number;
  endValue: number;
  samples: number[][];
  weights: number[];
}

export interface SpeedscopeFile {
  $schema: typeof SPEEDSCOPE_SCHEMA;
  shared: { frames: SpeedscopeFrame[] };
  profiles: SpeedscopeSampledProfile[];
  name?: string;
  activeProfileIndex?: number;
  exporter?: string;
}

export interface SpeedscopeOptions {
  /** the file's name shown by speedscope (default "pyunwind profile") */
  name?: string;
  /** e.g. "pyunwind 0.1.0" (default "pyunwind") */
  exporter?: string;
  /** show idle samples as a `<idle>` frame (default false) */
  idle?: boolean;
  /** one frame per line of a function (default true); false: one frame per function */
  lines?: boolean;
  /** µs one sample of weight 1 stands for; given, weights are in microseconds */
  sampleIntervalMicros?: number;
}

export function speedscopeDocument(profile: Profile, options: SpeedscopeOptions = {}): SpeedscopeFile {
  const { idle = false, lines = true, sampleIntervalMicros } = options;
  if (sampleIntervalMicros !== undefined && !(Number.isFinite(sampleIntervalMicros) && sampleIntervalMicros > 0)) {
    throw new RangeError(`sampleIntervalMicros must be finite and > 0, got ${sampleIntervalMicros}`);
  }
  const scale = sampleIntervalMicros ?? 1;
  const frames: SpeedscopeFrame[] = [];
  const frameIndex = new Map<string, number>();
  const intern = (name: string, file?: string, line?: number | null): number => {
    const key = JSON.stringify([name, file ?? null, line ?? null]);
    let i = frameIndex.get(key);
    if (i === undefined) {
      i = frames.length;
      const f: SpeedscopeFrame = { name };
      if (file !== undefined) f.file = file;
      if (line !== undefined && line !== null) f.line = line;
      frames.push(f);
      frameIndex.set(key, i);
    }
    return i;
  };

  const profiles: SpeedscopeSampledProfile[] = [];
  for (const t of profile.threads()) {
    const tj = canonicalThread(t);
    const shared = tj.frames.map((f) => intern(frameName(f), f.filename, lines ? f.line : null));
    // with lines off, stacks that differ only in lines become the same sample: sum them
    const byPath = new Map<string, number>();
    const samples: number[][] = [];
    const weights: number[] = [];
    const add = (path: number[], w: number): void => {
      const key = path.join(',');
      const at = byPath.get(key);
      if (at === undefined) {
        byPath.set(key, samples.length);
        samples.push(path);
        weights.push(w * scale);
      } else {
        weights[at]! += w * scale;
      }
    };
    for (let s = 0; s < tj.stackWeight.length; s++) {
      const w = tj.stackWeight[s]!;
      if (w <= 0) continue;
      const path: number[] = [];
      for (let x = s; x >= 0; x = tj.stackParent[x]!) path.push(shared[tj.stackFrame[x]!]!);
      add(path.reverse(), w);
    }
    if (idle && tj.idleWeight > 0) add([intern(IDLE_FRAME)], tj.idleWeight);
    if (samples.length === 0) continue; // nothing to draw: the text/json reports still count it
    let total = 0;
    for (const w of weights) total += w;
    profiles.push({
      type: 'sampled',
      name: threadLabel(t),
      unit: sampleIntervalMicros === undefined ? 'none' : 'microseconds',
      startValue: 0,
      endValue: total,
      samples,
      weights,
    });
  }
  let active = 0;
  profiles.forEach((p, i) => {
    if (p.endValue > profiles[active]!.endValue) active = i;
  });
  return {
    $schema: SPEEDSCOPE_SCHEMA,
    shared: { frames },
    profiles,
    name: options.name ?? 'pyunwind profile',
    activeProfileIndex: active,
    exporter: options.exporter ?? 'pyunwind',
  };
}

export function exportSpeedscope(profile: Profile, options: SpeedscopeOptions = {}): string {
  return JSON.stringify(speedscopeDocument(profile, options));
}
