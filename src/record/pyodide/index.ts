// `pyunwind/pyodide`: recording CPython compiled to WebAssembly (Pyodide), in a worker thread,
// and reading a live Pyodide's memory.

export {
  recordPyodide,
  PyodideProgramError,
  PYODIDE_PACKAGES,
  type PyodideRecordOptions,
  type PyodideRecordingStats,
  type PyodideRecordingEnd,
  type PyodideProgress,
  type PyodideVersion,
} from './recorder.js';
export { pyodideSource, type PyodideLike, type PyodideSource, type PyodideSourceOptions } from './source.js';
