// A module Web Worker that ticks a Pyodide running in another worker (src/record/pyodide/ticks.ts):
// started by profilePyodide (src/record/pyodide/browser.ts). It gets { interrupt, control,
// rateHz } (SharedArrayBuffers), answers "ready", ticks until the sampling side stops, answers
// { type: "done", ...its TickResult } and closes. No Node API.

import { tickLoop, type TickResult } from './ticks.js';

export interface TickerRequest {
  interrupt: SharedArrayBuffer;
  control: SharedArrayBuffer;
  rateHz: number;
}
export type TickerReply = { type: 'ready' } | ({ type: 'done' } & TickResult) | { type: 'error'; message: string };

const scope = globalThis as unknown as { onmessage: ((ev: MessageEvent<TickerRequest>) => void) | null; postMessage(m: TickerReply): void; close(): void };

scope.onmessage = (ev) => {
  scope.onmessage = null;
  const { interrupt, control, rateHz } = ev.data;
  try {
    scope.postMessage({ type: 'ready' });
    const r = tickLoop(new Int32Array(interrupt), new Int32Array(control), rateHz);
    scope.postMessage({ type: 'done', ...r });
  } catch (e) {
    scope.postMessage({ type: 'error', message: e instanceof Error ? e.message : String(e) });
  }
  scope.close();
};
