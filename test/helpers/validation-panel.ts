// The validation panel of a page (flame graph, heatmap, viewer) must say what `report --format
// json` says: every count of its summary, by status, and the ticks; and what reading the capture
// found (metadata.capture: blocks, skipped, lost, closed cleanly, and the counts that are not 0).
import type { Page } from 'playwright-core';
import { expect } from 'vitest';
import { STATUS_NAMES } from '../../src/walk/status.js';

interface Summary {
  attempted: number;
  trusted: number;
  rejected: number;
  ticks: number;
  missed: number;
  scheduled: number;
  statuses: Record<string, number>;
}
interface Capture {
  blocks: number;
  skippedBlocks: number;
  lostSamples: number | null;
  closedCleanly: boolean;
  undetermined: number;
  cutTaskLists: number;
}

export async function expectValidationPanel(page: Page, json: { summary: Summary; metadata?: { capture?: Capture } }, selector = '#validation'): Promise<void> {
  const shown = await page.$$eval(`${selector} [data-key]`, (els) => Object.fromEntries(els.map((e) => [e.getAttribute('data-key')!, e.getAttribute('data-value')!])));
  const { summary } = json;
  const c = json.metadata?.capture;
  expect(shown).toEqual({
    attempted: String(summary.attempted),
    trusted: String(summary.trusted),
    rejected: String(summary.rejected),
    ticks: String(summary.ticks),
    missed: String(summary.missed),
    scheduled: String(summary.scheduled),
    ...Object.fromEntries(STATUS_NAMES.map((st) => [st, String(summary.statuses[st])])),
    ...(c
      ? {
          'capture-blocks': String(c.blocks),
          'capture-skipped': String(c.skippedBlocks),
          'capture-lost': c.lostSamples === null ? '' : String(c.lostSamples),
          'capture-closed': c.closedCleanly ? '1' : '0',
          ...(c.undetermined ? { 'capture-undetermined': String(c.undetermined) } : {}),
          ...(c.cutTaskLists ? { 'capture-cut-task-lists': String(c.cutTaskLists) } : {}),
        }
      : {}),
  });
}
