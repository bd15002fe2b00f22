// pyunwind as a library: processing captures (the package's root entry, `pyunwind`, in Node).
// Everything of the processing entry (./processing.ts: captures in memory, profiles, every
// export format, the walkers — what runs in every runtime), plus what takes Node: capture files
// (reportCapture, openCapture, fileSink) and worker threads (reportCapture's `workers`).
// Recording has its own entries: `pyunwind/record` (a Linux process) and `pyunwind/pyodide`
// (CPython in WebAssembly). Everything not exported from an entry is internal.

export * from './processing.js';
export { reportCapture, type ReportOptions } from './pipeline/report-file.js';
export { fileSink, openCapture } from './capture/file.js';
