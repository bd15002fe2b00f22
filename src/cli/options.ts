import { ASYNC_MODES, type AsyncMode } from '../walk/task-graph.js';
// Parsing of option values shared by the commands.
import { SAMPLING_MODES, type SamplingMode } from '../capture/types.js';
import { COPY_MODES, type CopyMode } from '../record/copy/modes.js';
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

/** --copy / --blocking (record and dump); `mode`: --mode, which named the copy mode before 0.2. */
export function copyOption(copy: string | undefined, blocking: boolean | undefined, mode?: string): CopyMode {
  if (mode !== undefined && (COPY_MODES as readonly string[]).includes(mode)) {
    throw new UsageError(`--mode ${mode}: the copy mode is now --copy ${mode} (--mode is the sampling mode: ${SAMPLING_MODES.join(', ')})`);
  }
  if (blocking && copy !== undefined && copy !== 'blocking') throw new UsageError(`--blocking contradicts --copy ${copy}`);
  const chosen = blocking ? 'blocking' : (copy ?? 'adaptive');
  if (!(COPY_MODES as readonly string[]).includes(chosen)) throw new UsageError(`unknown copy mode "${copy}" (${COPY_MODES.join(', ')})`);
  return chosen as CopyMode;
}

/** --mode (record, report): which samples to keep. */
export function samplingModeOption(mode: string | undefined): SamplingMode | undefined {
  if (mode === undefined) return undefined;
  if (!(SAMPLING_MODES as readonly string[]).includes(mode)) throw new UsageError(`unknown mode "${mode}" (${SAMPLING_MODES.join(', ')})`);
  return mode as SamplingMode;
}

/** --async-aware / --async-mode (record, report): null when async-aware stacks are not asked for. */
export function asyncModeOption(aware: boolean | undefined, mode: string | undefined): AsyncMode | null {
  if (mode !== undefined && !(ASYNC_MODES as readonly string[]).includes(mode)) throw new UsageError(`unknown async mode "${mode}" (${ASYNC_MODES.join(', ')})`);
  if (!aware) {
    if (mode !== undefined) throw new UsageError('--async-mode needs --async-aware');
    return null;
  }
  return (mode as AsyncMode | undefined) ?? 'running';
}
