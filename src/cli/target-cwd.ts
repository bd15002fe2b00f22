// Where a target's own files are shown relative to (export/filenames.ts): its working directory.
import fs from 'node:fs';

/** A process's working directory (undefined: not readable). */
export function targetCwd(pid: number): string | undefined {
  try {
    return fs.readlinkSync(`/proc/${pid}/cwd`);
  } catch {
    return undefined;
  }
}
