// The validation panel every HTML export shows: how many samples were attempted, trusted (by
// kind) and rejected (by reason), and the schedule (ticks taken and missed) — the numbers of the
// json export's `summary`, rendered on the server side (static HTML).
//
// For tests and tools: each number is the text of an element with `data-key` (and the same
// number in `data-value`): attempted, trusted, rejected, every status name (complete,
// complete-unverifiable, idle, incomplete, dangling, cycle, too-deep, corrupt, no-thread-state,
// torn, native-incomplete, native-unmatched), scheduled, ticks, missed — e.g. `#validation [data-key=torn]`. Given what reading the
// capture found (ExportMeta.capture), also capture-blocks, capture-skipped, capture-lost (empty
// data-value: uncounted), capture-closed (1 or 0), capture-undetermined, capture-cut-task-lists,
// and each warning as an `li` of `ul.warnings`.

import type { ProfileStats } from '../../profile/types.js';
import type { CaptureHealth } from '../meta.js';
import { MAX_TASKS } from '../../walk/task-graph.js';
import { STATUS_NAMES, TRUSTED } from '../../walk/status.js';
import { escapeHtml, formatPercent } from './page.js';

export interface ValidationPanelOptions {
  /** the element id (default "validation") */
  id?: string;
  /** heading (default "Validation") */
  title?: string;
  /** a short line after the heading, e.g. which recording (escaped here) */
  subtitle?: string;
  /** what reading the capture found: shown under the samples, its warnings listed */
  capture?: CaptureHealth;
}

/** Warnings listed in the panel (all are in the json export). */
const WARNINGS_SHOWN = 20;

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
  const c = options.capture;
  const plain = (cls: string, label: string, key: string, value: string, shown: string, title: string): string =>
    `<tr class="${cls}" title="${escapeHtml(title)}"><th>${escapeHtml(label)}</th><td data-key="${key}" data-value="${escapeHtml(value)}">${escapeHtml(shown)}</td><td class="pct"></td></tr>`;
  if (c) {
    const damaged = c.skippedBlocks > 0 || !c.closedCleanly;
    rows.push(
      plain(`major gap${damaged ? ' bad' : ''}`, 'capture blocks read', 'capture-blocks', String(c.blocks), String(c.blocks), 'record blocks of the capture whose samples are in the profile'),
      plain(`sub${c.skippedBlocks > 0 ? ' bad' : c.skippedBlocks === 0 ? ' zero' : ''}`, 'skipped (damaged)', 'capture-skipped', String(c.skippedBlocks), String(c.skippedBlocks), 'blocks skipped as damaged, counted against the end block where the file has one'),
      plain(`sub${c.lostSamples !== 0 ? ' bad' : ' zero'}`, 'samples lost', 'capture-lost', c.lostSamples === null ? '' : String(c.lostSamples), c.lostSamples === null ? 'uncounted' : String(c.lostSamples), 'samples the skipped blocks held (uncounted: the file has no end block to count by)'),
      plain(`sub${c.closedCleanly ? '' : ' bad'}`, 'closed cleanly', 'capture-closed', c.closedCleanly ? '1' : '0', c.closedCleanly ? 'yes' : 'no: cut short', 'the file ends with the recorder\'s end block; if not, the recording was cut short (killed, disk full, still being written)'),
    );
    if (c.undetermined > 0) rows.push(plain('sub bad', 'CPU state unknown', 'capture-undetermined', String(c.undetermined), String(c.undetermined), 'samples left out because the recorder could not read whether the thread was on a CPU'));
    if (c.cutTaskLists > 0) rows.push(plain('sub bad', `task lists cut at ${MAX_TASKS}`, 'capture-cut-task-lists', String(c.cutTaskLists), String(c.cutTaskLists), `samples whose thread had more than ${MAX_TASKS} asyncio tasks: those past ${MAX_TASKS} are not shown`));
  }
  const warnings = c?.warnings ?? [];
  const warningList = warnings.length
    ? `<ul class="warnings">${warnings
        .slice(0, WARNINGS_SHOWN)
        .map((w) => `<li>byte ${w.offset}: ${escapeHtml(w.message)}</li>`)
        .join('')}${warnings.length > WARNINGS_SHOWN ? `<li>… and ${warnings.length - WARNINGS_SHOWN} more (all in the json export)</li>` : ''}</ul>`
    : '';
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
  const damage = !c
    ? ''
    : [
        c.skippedBlocks > 0 ? ` The capture is damaged: ${c.skippedBlocks} block${c.skippedBlocks === 1 ? '' : 's'} skipped${c.lostSamples === null ? '' : `, ${c.lostSamples} samples lost`}.` : '',
        c.closedCleanly ? '' : ' The recording was cut short (its file has no end block).',
      ].join('');
  return [
    `<section class="panel validation" id="${escapeHtml(id)}">`,
    `<h2>${escapeHtml(options.title ?? 'Validation')}${options.subtitle ? ` <span class="sub">${escapeHtml(options.subtitle)}</span>` : ''}</h2>`,
    `<p class="verdict">${escapeHtml(verdict + damage)}</p>`,
    bar,
    `<table>${rows.join('')}</table>`,
    ...(warningList ? [warningList] : []),
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
  'native-incomplete': 'its native stack did not unwind to the outermost frame (report --native)',
  'native-unmatched': 'its Python frames could not all be placed in its native stack (report --native)',
  torn: 'the recorder saw the stack move while it copied it',
};
