// What `pyunwind top` shows: the functions of every thread by self or total samples (with
// --opcodes: the instructions, by self samples), with the recording's validation counts above
// them — as lines of text, one screen (or one frame of the plain output) at a time.

import type { AsyncMode } from '../walk/task-graph.js';
import type { FunctionStat } from '../profile/types.js';
import type { Profile } from '../profile/profile.js';
import type { SamplingMode } from '../capture/types.js';
import { frameLabel } from '../export/common.js';
import { percent } from './format.js';

export type TopSort = 'self' | 'total';

export interface TopFrame {
  target: string;
  mode: SamplingMode;
  rateHz: number;
  elapsedMs: number;
  /** ticks the schedule asked for, and of those missed */
  scheduled: number;
  missed: number;
  profile: Profile;
  sort: TopSort;
  /** function rows at most */
  limit: number;
  /** characters per line at most */
  width: number;
  /** a note under the title (keys, or "paused") */
  note?: string;
  /** rows are instructions — (function, line, instruction) by self samples — not functions */
  opcodes?: boolean;
  /** the stacks are asyncio task stacks, in this mode (the title says so) */
  asyncio?: AsyncMode;
  /** how a file name is shown (default: whole; top's: short, export/filenames.ts) */
  filename?: (filename: string) => string;
}

/** Functions of all threads, a function being (qualname, filename): self and total samples summed over threads. */
export function allFunctions(profile: Profile): FunctionStat[] {
  const byKey = new Map<string, FunctionStat>();
  for (const t of profile.threads()) {
    for (const f of t.functions()) {
      const key = `${f.qualname}\n${f.filename}`;
      const had = byKey.get(key);
      if (had) {
        had.self += f.self;
        had.total += f.total;
      } else byKey.set(key, { ...f });
    }
  }
  return [...byKey.values()];
}

const pad = (s: string, n: number): string => (s.length >= n ? s : ' '.repeat(n - s.length) + s);

/** The lines of one frame of the view. */
export function renderTop(f: TopFrame): string[] {
  const s = f.profile.stats();
  const rejected = Object.entries(s.statuses)
    .filter(([k, n]) => n > 0 && k !== 'complete' && k !== 'complete-unverifiable' && k !== 'idle')
    .map(([k, n]) => `${k} ${n}`);
  const lines = [
    `pyunwind top — ${f.target}, ${(f.elapsedMs / 1000).toFixed(1)} s, ${f.rateHz} Hz, mode ${f.mode}${f.asyncio ? `, async-aware ${f.asyncio}` : ''}, ${f.opcodes ? 'instructions by self' : `by ${f.sort}`}`,
    `samples ${s.attempted}: trusted ${s.trusted} (idle ${s.statuses.idle}), rejected ${s.rejected}${rejected.length ? ` (${rejected.join(', ')})` : ''}; ` +
      `ticks ${f.scheduled - f.missed} of ${f.scheduled} (missed ${percent(f.missed, f.scheduled, '–')}); threads ${f.profile.threads().length}`,
  ];
  if (f.note) lines.push(f.note);
  lines.push('');
  // shares of the samples with a Python stack (idle ones have no function)
  const stacked = s.trusted - s.statuses.idle;
  if (f.opcodes) {
    lines.push(...instructionRows(f.profile, stacked, f.limit, f.filename ?? ((n) => n)));
    return lines.map((l) => (l.length > f.width ? l.slice(0, Math.max(1, f.width - 1)) + '…' : l));
  }
  const name = f.filename ?? ((n: string): string => n);
  lines.push(`${pad('self%', 7)} ${pad('total%', 7)} ${pad('self', 8)} ${pad('total', 8)}  function`);
  // (a pseudo-frame — <GC>, <native>, <task NAME> — has no file)
  const rows = allFunctions(f.profile).sort((a, b) => (f.sort === 'self' ? b.self - a.self || b.total - a.total : b.total - a.total || b.self - a.self) || (a.qualname < b.qualname ? -1 : 1));
  for (const fn of rows.slice(0, Math.max(0, f.limit))) {
    const pct = (n: number): string => pad(stacked > 0 ? `${((100 * n) / stacked).toFixed(1)}` : '–', 7);
    lines.push(`${pct(fn.self)} ${pct(fn.total)} ${pad(String(fn.self), 8)} ${pad(String(fn.total), 8)}  ${fn.qualname}${fn.filename ? ` (${name(fn.filename)})` : ''}`);
  }
  if (rows.length === 0) lines.push('(no Python stack sampled yet)');
  return lines.map((l) => (l.length > f.width ? l.slice(0, Math.max(1, f.width - 1)) + '…' : l));
}

/** Instructions of all threads — frames (function, line, instruction) — by the samples that ended in them. */
function instructionRows(profile: Profile, stacked: number, limit: number, name: (filename: string) => string): string[] {
  const self = new Map<string, number>();
  for (const t of profile.threads()) {
    t.stackWeight.forEach((w, s) => {
      const frame = t.frames[t.stackFrame[s]!]!;
      if (w > 0 && frame.opcode !== undefined) {
        const label = frameLabel({ ...frame, filename: name(frame.filename) });
        self.set(label, (self.get(label) ?? 0) + w);
      }
    });
  }
  const rows = [...self].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
  const out = [`${pad('self%', 7)} ${pad('self', 8)}  instruction`];
  for (const [label, w] of rows.slice(0, Math.max(0, limit))) out.push(`${pad(stacked > 0 ? ((100 * w) / stacked).toFixed(1) : '–', 7)} ${pad(String(w), 8)}  ${label}`);
  if (rows.length === 0) out.push('(no Python stack sampled yet)');
  return out;
}
