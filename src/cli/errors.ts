// How the command fails: one line on stderr, a non-zero exit code. Usage mistakes exit 2,
// everything else 1.

export class UsageError extends Error {
  override name = 'UsageError';
}

export const EXIT = { ok: 0, failure: 1, usage: 2 } as const;

/** One line for the user: no stack trace, no "Error:" prefix. */
export function oneLine(e: unknown): string {
  const msg = e instanceof Error ? e.message : String(e);
  return msg.split('\n')[0]!.trim();
}
