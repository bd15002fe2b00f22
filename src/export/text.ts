// The default human report: the validation summary of the whole recording, then per thread
// its samples and its heaviest functions by self and by total weight. Plain text in aligned
// columns; numbers come first and the function last so that long names never break the
// alignment.
//
// Percentages: statuses are of the attempted samples; missed ticks are of the scheduled ticks
// (taken + missed: a tick samples every thread); function weights are of the thread's trusted weight (samples with a
// stack plus idle ones), so a thread that idles shows it in its functions' shares. Function
// columns are weights: a sample of weight w counts w times there (weights default to 1), while
// the status lines count samples.
//
// A profile made with opcodes (report --opcodes) adds a third table per thread: the heaviest
// instructions by self weight — (function, line, instruction), where samples ended.

import type { Profile } from '../profile/profile.js';
import type { ThreadProfile } from '../profile/thread.js';
import type { FunctionStat } from '../profile/types.js';
import { STATUS_NAMES, TRUSTED } from '../walk/status.js';
import { frameLabel, threadLabel } from './common.js';
import { compareFrames } from '../profile/thread.js';

export interface TextOptions {
  /** functions per table (default 10) */
  top?: number;
  /** first line (default "pyunwind profile") */
  title?: string;
  /** how a file name is shown (default: whole; a terminal's: shortFilename) */
  filename?: (filename: string) => string;
}

const REJECTED = STATUS_NAMES.filter((s) => !TRUSTED.has(s));
const TRUSTED_LIST = STATUS_NAMES.filter((s) => TRUSTED.has(s));

export function exportText(profile: Profile, options: TextOptions = {}): string {
  const top = options.top ?? 10;
  const out: string[] = [];
  const threads = profile.threads();
  const span = profile.timeSpan();
  out.push(
    `${options.title ?? 'pyunwind profile'}: ${plural(threads.length, 'thread')}` +
      (span === null ? '' : `, ${seconds(span.first)} – ${seconds(span.last)}`),
  );
  out.push('');
  out.push(...validationTable(profile));
  for (const t of threads) {
    out.push('');
    out.push(...threadSection(t, top, options.filename ?? ((f) => f)));
  }
  return out.join('\n') + '\n';
}

function validationTable(profile: Profile): string[] {
  const s = profile.stats();
  const rows: [label: string, n: number, pct: string, note?: string][] = [
    ['ticks scheduled', s.scheduled, ''],
    ['ticks missed', s.missed, percent(s.missed, s.scheduled), 'of scheduled ticks'],
    ['attempted', s.attempted, percent(s.attempted, s.attempted)],
    ['trusted', s.trusted, percent(s.trusted, s.attempted)],
    ...TRUSTED_LIST.map((st): [string, number, string] => [`  ${st}`, s.statuses[st], percent(s.statuses[st], s.attempted)]),
    ['rejected', s.rejected, percent(s.rejected, s.attempted)],
    ...REJECTED.map((st): [string, number, string] => [`  ${st}`, s.statuses[st], percent(s.statuses[st], s.attempted)]),
  ];
  const lw = Math.max(...rows.map((r) => r[0].length));
  const nw = Math.max(...rows.map((r) => num(r[1]).length));
  return [
    'Samples (% of attempted; a tick samples every thread once)',
    ...rows.map(([label, n, pct, note]) =>
      `  ${label.padEnd(lw)}  ${num(n).padStart(nw)}  ${pct.padStart(6)}${note ? `  ${note}` : ''}`.trimEnd(),
    ),
  ];
}

function threadSection(t: ThreadProfile, top: number, name: (filename: string) => string): string[] {
  const st = t.stats();
  const out: string[] = [];
  out.push(`Thread ${printable(threadLabel(t))}`);
  out.push(`  interpreter ${t.interpreterId}, thread id ${t.threadId}, native thread id ${t.nativeThreadId}`);
  const rejected = REJECTED.filter((r) => st.statuses[r] > 0).map((r) => `${r} ${num(st.statuses[r])}`);
  out.push(
    `  ${num(st.attempted)} attempted: ${num(st.trusted)} trusted (${num(st.statuses.idle)} idle), ` +
      `${num(st.rejected)} rejected${rejected.length ? ` (${rejected.join(', ')})` : ''}; ` +
      `${seconds(t.firstTime)} – ${seconds(t.lastTime)}`,
  );
  const base = t.trustedWeight;
  if (t.stackedWeight === 0) {
    out.push(st.trusted === 0 ? '  no trusted samples' : '  no trusted samples with a Python stack');
    return out;
  }
  const bySelf = t.topFunctions('self', top);
  const byTotal = t.topFunctions('total', top);
  out.push('');
  out.push(`  Top ${bySelf.length} by self (% of ${plural(base, 'trusted sample')})`);
  out.push(...functionTable(bySelf, ['self', 'total'], base, name));
  out.push('');
  out.push(`  Top ${byTotal.length} by total`);
  out.push(...functionTable(byTotal, ['total', 'self'], base, name));
  const instructions = instructionTable(t, top, base, name);
  if (instructions.length > 0) {
    out.push('');
    out.push(`  Top ${instructions.length - 1} instructions by self`);
    out.push(...instructions);
  }
  return out;
}

/** The heaviest frames with an instruction by self weight (none without opcodes): header row and rows. */
function instructionTable(t: ThreadProfile, top: number, base: number, name: (filename: string) => string): string[] {
  const self = new Float64Array(t.frames.length);
  t.stackWeight.forEach((w, s) => (self[t.stackFrame[s]!]! += w));
  const rows = t.frames
    .map((f, i) => ({ f, w: self[i]! }))
    .filter((r) => r.f.opcode !== undefined && r.w > 0)
    .sort((a, b) => b.w - a.w || compareFrames(a.f, b.f))
    .slice(0, top);
  if (rows.length === 0) return [];
  const cells = rows.map((r) => [num(r.w), percent(r.w, base)]);
  const w = [0, 1].map((i) => Math.max(i === 0 ? 'self'.length : 1, ...cells.map((c) => c[i]!.length)));
  const line = (c: string[], name: string): string => `    ${c.map((x, i) => x.padStart(w[i]!)).join('  ')}  ${name}`.trimEnd();
  return [line(['self', '%'], 'instruction'), ...rows.map((r, i) => line(cells[i]!, printable(frameLabel({ ...r.f, filename: name(r.f.filename) }))))];
}

function functionTable(rows: FunctionStat[], cols: ['self' | 'total', 'self' | 'total'], base: number, name: (filename: string) => string): string[] {
  const cells = rows.map((f) => [num(f[cols[0]]), percent(f[cols[0]], base), num(f[cols[1]]), percent(f[cols[1]], base)]);
  const w = [0, 1, 2, 3].map((i) => Math.max(i % 2 === 0 ? cols[i / 2]!.length : 1, ...cells.map((c) => c[i]!.length)));
  const line = (c: string[], name: string): string =>
    `    ${c.map((x, i) => x.padStart(w[i]!)).join('  ')}  ${name}`.trimEnd();
  return [line([cols[0], '%', cols[1], '%'], 'function'), ...rows.map((f, i) => line(cells[i]!, printable(`${f.qualname} (${name(f.filename)})`)))];
}

// Names come from the target's memory: a control character (a newline, an ESC sequence) must
// neither break the layout nor reach the terminal, so they are shown escaped (as \n, \x1b).
function printable(s: string): string {
  return s.replace(/[\u0000-\u001f\u007f-\u009f]/g, (c) =>
    c === '\n' ? '\\n' : c === '\r' ? '\\r' : c === '\t' ? '\\t' : `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`,
  );
}

function plural(n: number, word: string): string {
  return `${num(n)} ${word}${n === 1 ? '' : 's'}`;
}

/** Thousands grouped with commas (locale-independent); fractional weights to 1 decimal. */
function num(n: number): string {
  const [int, frac] = (Number.isInteger(n) ? n.toFixed(0) : n.toFixed(1)).split('.');
  const grouped = int!.replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  return frac === undefined ? grouped : `${grouped}.${frac}`;
}

function percent(n: number, of: number): string {
  return of > 0 ? `${((100 * n) / of).toFixed(1)}%` : '-';
}

function seconds(micros: number): string {
  return `${(micros / 1e6).toFixed(3)} s`;
}
