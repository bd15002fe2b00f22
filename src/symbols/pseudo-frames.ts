// Frames that are not Python code objects, shown where the interpreter was doing something else
// than running Python: named as CPython's own profiler names them (Tachyon's `<GC>`).

import type { SourceFrame } from '../profile/types.js';

/** Above the stack of a thread in which the garbage collector was running (SAMPLE_FLAG.GC). */
export const GC_FRAME: Readonly<SourceFrame> = { qualname: '<GC>', filename: '', line: null };

/**
 * Between a Python frame and the frame it called through C code (`sorted(key=…)`, `map`, a C
 * module's callback): where the interpreter was entered again from C (3.12+: an entry frame
 * owned by the C stack; 3.11: the callee's is_entry). With no frame above it, the thread is in
 * that C code, which is entering Python.
 */
export const NATIVE_FRAME: Readonly<SourceFrame> = { qualname: '<native>', filename: '', line: null };
