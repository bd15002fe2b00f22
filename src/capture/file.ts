// Capture files (Node): writing one (fileSink, a CaptureWriter's sink) and opening one for
// incremental reading (openCapture). Everything else about captures works on bytes in memory
// and runs anywhere (./writer.ts, ./reader.ts); this module is only reachable from the Node
// entries.

import fs from 'node:fs';
import { CaptureReader, type CaptureSource } from './reader.js';
import type { CaptureSink } from './writer.js';
import { CaptureError } from './types.js';

function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** What a failed write of a capture file says, by errno. */
const WRITE_FAILURES: Record<string, string> = {
  ENOSPC: 'no space left on the device',
  EFBIG: 'the file is larger than this process may write (a file size limit)',
  EDQUOT: 'over the disk quota',
  EIO: 'an input/output error',
  EROFS: 'a read-only file system',
};

/**
 * A file written with one `writeSync` per block. Each block is in the kernel when `write`
 * returns, so a recorder killed with SIGKILL leaves every flushed block readable (surviving a
 * power loss would need an fsync per block, which this does not pay for).
 */
export function fileSink(path: string): CaptureSink & { readonly path: string } {
  const fd = fs.openSync(path, 'w');
  let closed = false;
  return {
    path,
    write(bytes: Uint8Array): void {
      if (closed) throw new Error(`${path}: write after close`);
      // writeSync may write less than asked (a full disk, a signal): loop until all is out
      try {
        for (let off = 0; off < bytes.length; ) off += fs.writeSync(fd, bytes, off, bytes.length - off);
      } catch (e) {
        throw new Error(`cannot write ${path}: ${WRITE_FAILURES[(e as { code?: string }).code ?? ''] ?? (e as Error).message}`, { cause: e });
      }
    },
    close(): void {
      if (closed) return;
      closed = true;
      fs.closeSync(fd);
    },
  };
}

/**
 * Opens a capture file for incremental reading: the header now, each block's bytes when it is
 * reached. Call `close()` when done. Throws CaptureError for a missing or unreadable file and
 * for a file that is not a capture.
 */
export async function openCapture(path: string): Promise<CaptureReader> {
  let fd: number;
  try {
    fd = fs.openSync(path, 'r');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new CaptureError(`${path}: no such file`);
    if (code === 'EACCES') throw new CaptureError(`${path}: permission denied`);
    throw new CaptureError(`cannot open ${path}: ${errorMessage(e)}`);
  }
  try {
    let closed = false;
    const stat = fs.fstatSync(fd);
    if (!stat.isFile()) throw new CaptureError(`${path} is ${stat.isDirectory() ? 'a directory' : 'not a regular file'}, not a capture`);
    const source: CaptureSource = {
      size: stat.size,
      read(offset: number, length: number): Uint8Array {
        const buf = new Uint8Array(length);
        let n = 0;
        try {
          while (n < length) {
            const k = fs.readSync(fd, buf, n, length - n, offset + n);
            if (k === 0) break; // the file shrank since it was opened
            n += k;
          }
        } catch (e) {
          throw new CaptureError(`${path}: cannot read ${length} bytes at byte ${offset}: ${errorMessage(e)}`);
        }
        return n === length ? buf : buf.subarray(0, n);
      },
      close(): void {
        if (closed) return;
        closed = true;
        fs.closeSync(fd);
      },
    };
    return new CaptureReader(source, path);
  } catch (e) {
    fs.closeSync(fd);
    throw e;
  }
}
