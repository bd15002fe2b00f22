// The status of one sample: trusted (complete, complete-unverifiable, idle) or rejected with
// a reason. Each name's code is what the WebAssembly kernel emits (src/kernel/abi.ts STATUS_*);
// the names are listed here once, by code.

import {
  STATUS_COMPLETE,
  STATUS_COMPLETE_UNVERIFIABLE,
  STATUS_CORRUPT,
  STATUS_COUNT,
  STATUS_CYCLE,
  STATUS_DANGLING,
  STATUS_IDLE,
  STATUS_INCOMPLETE,
  STATUS_NATIVE_INCOMPLETE,
  STATUS_NATIVE_UNMATCHED,
  STATUS_NO_THREAD_STATE,
  STATUS_TOO_DEEP,
  STATUS_TORN,
} from '../kernel/abi.js';

const BY_CODE = {
  complete: STATUS_COMPLETE,
  'complete-unverifiable': STATUS_COMPLETE_UNVERIFIABLE,
  idle: STATUS_IDLE,
  incomplete: STATUS_INCOMPLETE,
  dangling: STATUS_DANGLING,
  cycle: STATUS_CYCLE,
  'too-deep': STATUS_TOO_DEEP,
  corrupt: STATUS_CORRUPT,
  'no-thread-state': STATUS_NO_THREAD_STATE,
  torn: STATUS_TORN,
  'native-incomplete': STATUS_NATIVE_INCOMPLETE,
  'native-unmatched': STATUS_NATIVE_UNMATCHED,
} as const;

export type Status = keyof typeof BY_CODE;

/** Every status, in the order of its code. */
export const STATUS_NAMES: readonly Status[] = (Object.keys(BY_CODE) as Status[]).sort((a, b) => BY_CODE[a] - BY_CODE[b]);
if (STATUS_NAMES.length !== STATUS_COUNT || STATUS_NAMES.some((n, k) => BY_CODE[n] !== k)) throw new Error('status codes are not 0..STATUS_COUNT-1 (src/kernel/abi.ts)');

export const STATUS_CODE: { readonly [K in Status]: number } = BY_CODE;

/** Statuses whose stacks may enter a profile. */
export const TRUSTED: ReadonlySet<Status> = new Set(['complete', 'complete-unverifiable', 'idle']);

export function statusName(code: number): Status {
  const name = STATUS_NAMES[code];
  if (name === undefined) throw new RangeError(`unknown status code ${code}`);
  return name;
}
