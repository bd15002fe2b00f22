// The status of one sample: trusted (complete, complete-unverifiable, idle) or rejected with
// a reason. The numeric codes are what the WebAssembly kernel emits; keep them in step with
// assembly/kernel.ts.

export const STATUS_NAMES = [
  'complete',
  'complete-unverifiable',
  'idle',
  'incomplete',
  'dangling',
  'cycle',
  'too-deep',
  'corrupt',
  'no-thread-state',
  'torn',
] as const;

export type Status = (typeof STATUS_NAMES)[number];

export const STATUS_CODE: { readonly [K in Status]: number } = Object.fromEntries(
  STATUS_NAMES.map((name, code) => [name, code]),
) as { [K in Status]: number };

/** Statuses whose stacks may enter a profile. */
export const TRUSTED: ReadonlySet<Status> = new Set(['complete', 'complete-unverifiable', 'idle']);

export function statusName(code: number): Status {
  const name = STATUS_NAMES[code];
  if (name === undefined) throw new RangeError(`unknown status code ${code}`);
  return name;
}
