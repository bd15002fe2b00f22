// Frames that are not Python code objects, shown where the interpreter was doing something else
// than running Python: named as CPython's own profiler names them (Tachyon's `<GC>`).

import type { SourceFrame } from '../profile/types.js';

/** Above the stack of a thread in which the garbage collector was running (SAMPLE_FLAG.GC). */
export const GC_FRAME: Readonly<SourceFrame> = { qualname: '<GC>', filename: '', line: null };
