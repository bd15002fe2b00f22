// The validation panel every HTML export shows: how many samples were attempted, trusted (by
// kind) and rejected (by reason), and the schedule (ticks taken and missed) — the numbers of the
// json export's `summary`, rendered on the server side (static HTML).
//
// For tests and tools: each number is the text of an element with `data-key` (and the same
// number in `data-value`): attempted, trusted, rejected, every status name (complete,
// complete-unverifiable, idle, incomplete, dangling, cycle, too-deep, corrupt, no-thread-state,
// torn), scheduled, ticks, missed — e.g. `#validation [data-key=torn]`.

import type { ProfileStats } from '../../profile/types.js';
import { STATUS_NAMES, TRUSTED } from '../../walk/status.js';
import { escapeHtml, formatPercent } from './page.js';

export interface ValidationPanelOptions {
  /** the element id (default "validation") */
  id?: string;
  /** heading (default "Validation") */
  title?: string;
  /** a short line after the heading, e.g. which recording (escaped here) */
  subtitle?: string;
}

const REJECTED = STATUS_NAMES.filter((s) => !TRUSTED.has(s));
const TRUSTED_LIST = STATUS_NAMES.filter((s) => TRUSTED.has(s));

export function validationPanel(s: ProfileStats, options: ValidationPanelOptions = {}): string {
  const id = options.id ?? 'validation';
  const row = (cls: string, label: string, key: string, n: number, of: number, title: string): string =>
    `<tr class="${cls}${n === 0 && cls.includes('sub') ? ' zero' : ''}" title="${escapeHtml(title)}"><th>${escapeHtml(label)}</th>` +
    `<td data-key="${key}" data-value="${n}">${n}</td><td class="pct">${formatPercent(n, of)}</td></tr>`;
  const rows = [
    row('major', 'attempted', 'attempted', s.attempted, s.attempted, 'samples attempted: one thread at one tick'),
    row('major', 'trusted', 'trusted', s.trusted, s.attempted, 'samples whose stack was validated (or that were idle)'),
    ...TRUSTED_LIST.map((st) => row('sub', st, st, s.statuses[st], s.attempted, STATUS_HELP[st] ?? st)),
    row(`major gap${s.rejected > 0 ? ' bad' : ''}`, 'rejected', 'rejected', s.rejected, s.attempted, 'samples left out of the profile, by reason'),
    ...REJECTED.map((st) => row(`sub${s.statuses[st] > 0 ? ' bad' : ''}`, st, st, s.statuses[st], s.attempted, STATUS_HELP[st] ?? st)),
    row('major gap', 'ticks scheduled', 'scheduled', s.scheduled, s.scheduled, 'sampling moments the schedule wanted (taken + missed)'),
    row('sub', 'taken', 'ticks', s.ticks, s.scheduled, 'ticks that sampled every thread'),
    row(`sub${s.missed > 0 ? ' bad' : ''}`, 'missed', 'missed', s.missed, s.scheduled, 'ticks that gave no samples: the recorder was late, or the copy failed'),
  ];
  const idle = s.statuses.idle;
  const w = (n: number): string => (s.attempted > 0 ? ((100 * n) / s.attempted).toFixed(3) : '0');
  const bar =
    `<div class="bar" title="trusted with a stack, idle, rejected">` +
    `<span class="trusted" style="width:${w(s.trusted - idle)}%"></span><span class="idle" style="width:${w(idle)}%"></span>` +
    `<span class="rejected" style="width:${w(s.rejected)}%"></span></div>`;
  const verdict =
    s.attempted === 0
      ? 'No samples were attempted.'
      : `${formatPercent(s.trusted, s.attempted)} of the samples are trusted; ${s.rejected === 0 ? 'none was' : `${s.rejected} were`} rejected.`;
  return [
    `<section class="panel validation" id="${escapeHtml(id)}">`,
    `<h2>${escapeHtml(options.title ?? 'Validation')}${options.subtitle ? ` <span class="sub">${escapeHtml(options.subtitle)}</span>` : ''}</h2>`,
    `<p class="verdict">${escapeHtml(verdict)}</p>`,
    bar,
    `<table>${rows.join('')}</table>`,
    '<p class="note">A sample is one thread at one tick. Only trusted samples are in the profile: a rejected sample is counted here by reason and shown nowhere else. Percentages: of attempted samples; ticks: of scheduled ticks.</p>',
    '</section>',
  ].join('\n');
}

const STATUS_HELP: Partial<Record<string, string>> = {
  complete: '3.15+: the chain ended exactly at the thread\'s base frame, every frame found and sane',
  'complete-unverifiable': 'before 3.15: every frame found and sane, but there is no base frame to prove nothing was cut',
  idle: 'the thread had no Python frame (it ran C code only): not an error',
  incomplete: 'the chain ended before its bottom (the typical tear)',
  dangling: 'a pointer of the chain leads to memory that is not in the copy',
  cycle: 'following previous came back to a frame already visited',
  'too-deep': 'more frames than the depth limit',
  corrupt: 'the copy contradicts itself (a misaligned or misplaced frame, a bad code or instruction pointer)',
  'no-thread-state': 'the thread state itself is not in the copy',
  torn: 'the recorder saw the stack move while it copied it',
};
