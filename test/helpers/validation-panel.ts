// The validation panel of a page (flame graph, heatmap, viewer) must say what `report --format
// json`'s summary says: every count, by status, and the ticks.
import type { Page } from 'playwright-core';
import { expect } from 'vitest';
import { STATUS_NAMES } from '../../src/walk/status.js';

export async function expectValidationPanel(page: Page, summary: { attempted: number; trusted: number; rejected: number; ticks: number; missed: number; scheduled: number; statuses: Record<string, number> }, selector = '#validation'): Promise<void> {
  const shown = await page.$$eval(`${selector} [data-key]`, (els) => Object.fromEntries(els.map((e) => [e.getAttribute('data-key')!, e.textContent!.trim()])));
  expect(shown).toEqual({
    attempted: String(summary.attempted),
    trusted: String(summary.trusted),
    rejected: String(summary.rejected),
    ticks: String(summary.ticks),
    missed: String(summary.missed),
    scheduled: String(summary.scheduled),
    ...Object.fromEntries(STATUS_NAMES.map((st) => [st, String(summary.statuses[st])])),
  });
}
