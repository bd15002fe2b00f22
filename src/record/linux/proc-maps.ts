// /proc/PID/maps: which files a process has mapped, and where. The text comes from the kernel
// but describes an untrusted target (file names are chosen by whoever created the files), so
// lines are parsed strictly and a malformed line is an error naming the line.

import fs from 'node:fs';

export interface MapEntry {
  start: bigint;
  /** one past the last byte */
  end: bigint;
  /** e.g. "r-xp" */
  perms: string;
  /** file offset of `start` */
  offset: bigint;
  /** device as the kernel prints it, "major:minor" in hex, e.g. "fe:00" */
  dev: string;
  /** 0 for anonymous mappings */
  inode: bigint;
  /**
   * File path as seen from the reader's root, without any " (deleted)" suffix; "" for an
   * anonymous mapping; pseudo names like "[heap]" as printed.
   */
  path: string;
  /** the kernel marked the file " (deleted)": it was unlinked or replaced after mapping */
  deleted: boolean;
}

export class ProcMapsError extends Error {
  override name = 'ProcMapsError';
}

// start-end perms offset dev inode [path]; the path is the rest of the line and may contain spaces.
const LINE = /^([0-9a-f]+)-([0-9a-f]+) ([r-][w-][x-][ps]) ([0-9a-f]+) ([0-9a-f]+:[0-9a-f]+) (\d+)(?: +(.*))?$/;
const DELETED = ' (deleted)';
// a pid's maps with more entries than this is not something we can sensibly use
const MAX_LINES = 1_000_000;

/** Parse the text of a maps file. `where` names it in error messages. */
export function parseProcMaps(text: string, where = 'maps'): MapEntry[] {
  const lines = text.split('\n');
  if (lines.length > MAX_LINES) throw new ProcMapsError(`${where}: more than ${MAX_LINES} lines`);
  const entries: MapEntry[] = [];
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (line === '') continue;
    const m = LINE.exec(line);
    if (!m) throw new ProcMapsError(`${where}: line ${i + 1} is not a mapping: ${JSON.stringify(line.slice(0, 200))}`);
    let path = m[7] ?? '';
    const deleted = path.endsWith(DELETED);
    if (deleted) path = path.slice(0, -DELETED.length);
    const start = BigInt('0x' + m[1]);
    const end = BigInt('0x' + m[2]);
    if (end < start) throw new ProcMapsError(`${where}: line ${i + 1} ends before it starts`);
    entries.push({
      start,
      end,
      perms: m[3]!,
      offset: BigInt('0x' + m[4]),
      dev: m[5]!,
      inode: BigInt(m[6]!),
      path,
      deleted,
    });
  }
  return entries;
}

/**
 * The mappings of process `pid`. Throws the fs error (ENOENT: no such process; EACCES: no
 * ptrace read access) so that the caller can say which it was.
 */
export function readProcMaps(pid: number): MapEntry[] {
  const where = `/proc/${pid}/maps`;
  return parseProcMaps(fs.readFileSync(where, 'utf8'), where);
}
