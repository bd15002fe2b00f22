// A mapped object as a capture keeps it for native frames: where the process had its code mapped,
// and everything needed to unwind through it and name its functions offline, with no file of
// the recording machine at hand (an executable, libpython, an extension module, libc…).

import type { UnwindTable } from './unwind-table.js';

/** An object's function symbols, sorted by start (object addresses, as the table's). */
export interface NativeSymbols {
  starts: BigUint64Array;
  /** bytes of each function (0: unknown — it reaches to the next start) */
  sizes: Uint32Array;
  names: string[];
}

/** An executable mapping of an object, with its unwind rows and symbols. */
export interface NativeObject {
  /** the executable mapping's addresses in the process, [start, end) */
  start: bigint;
  end: bigint;
  /** load bias: an object address + bias = its address in the process */
  bias: bigint;
  /** the file's path as the process mapped it */
  path: string;
  /** the GNU build id (hex), or null when the file has none */
  buildId: string | null;
  table: UnwindTable;
  symbols: NativeSymbols;
}
