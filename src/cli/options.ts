// Parsing of option values shared by the commands.
import { SAMPLING_MODES, type SamplingMode } from '../record/modes.js';
import { UsageError } from './errors.js';

export function parsePid(text: string): number {
  if (!/^\d+$/.test(text) || Number(text) <= 0 || Number(text) > 0x3fffffff) throw new UsageError(`"${text}" is not a process id`);
  return Number(text);
}

/** A positive number, for rates and durations ("1000", "1k", "2.5"). */
export function parsePositive(name: string, text: string, { allowK = false } = {}): number {
  const m = /^(\d+(?:\.\d+)?)(k|khz|hz)?$/i.exec(text.trim());
  const unit = m?.[2]?.toLowerCase();
  if (!m || (unit && !allowK)) throw new UsageError(`${name}: "${text}" is not a positive number`);
  const v = Number(m[1]) * (unit === 'k' || unit === 'khz' ? 1000 : 1);
  if (!(v > 0) || !Number.isFinite(v)) throw new UsageError(`${name}: "${text}" is not a positive number`);
  return v;
}

/** --mode / --blocking (record and dump). */
export function modeOption(mode: string | undefined, blocking: boolean | undefined): SamplingMode {
  if (blocking && mode !== undefined && mode !== 'blocking') throw new UsageError(`--blocking contradicts --mode ${mode}`);
  const chosen = blocking ? 'blocking' : (mode ?? 'adaptive');
  if (!(SAMPLING_MODES as readonly string[]).includes(chosen)) throw new UsageError(`unknown mode "${mode}" (adaptive, optimistic or blocking)`);
  return chosen as SamplingMode;
}
