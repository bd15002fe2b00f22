// The in-browser profiler's page (profile.html): the user pastes or picks Python, presses
// "Run and profile"; a worker (web/profile-worker.ts) runs it in Pyodide and samples it through
// the interrupt buffer and a signal handler, sending each capture block as it is finished. Every
// ~500 ms this page has the viewer's worker (web/worker.ts: reportCaptureBytes over the blocks
// received so far — the capture so far, without its end) process what came, and redraws the
// flame graph; at the end it shows the final profile and a link to download the capture (a
// .pyuw that `pyunwind report` and `pyunwind view` read).
//
// For tests and tools (stable): `#run`, `#stop`, `#status` (text; data-state
// idle|loading|running|processing|done|error), `#samples` (text: the samples in the profile
// shown; data-attempted, data-trusted), `#download-capture` (a link, shown at the end),
// `#flame-frame` (the renderer's page, as in the viewer), `#validation [data-key]`;
// window.__pyunwindProfile: { result (the last ViewerResult), done (the worker's last word),
// updates (profiles drawn while running), capture() (the bytes, as numbers), flame() }.

import { formatCount, formatPercent } from '../src/export/html/page.js';
import { validationPanel } from '../src/export/html/validation.js';
import { CONTROL, SIGINT } from '../src/record/pyodide/protocol.js';
import { fillDefinitionList } from './definition-list.js';
import { fitFrame, flameSrcdoc } from './flame-frame.js';
import type { FromProfileWorker, ToProfileWorker } from './profile-protocol.js';
import type { FromWorker, ToWorker, ViewerResult } from './protocol.js';
import { concatBytes } from '../src/capture/concat.js';

type State = 'idle' | 'loading' | 'running' | 'processing' | 'done' | 'error';
const REDRAW_EVERY_MS = 500;

const $ = <T extends HTMLElement = HTMLElement>(id: string): T => {
  const e = document.getElementById(id);
  if (!e) throw new Error(`the page has no #${id}`);
  return e as T;
};

const processor = new Worker(new URL('worker.js', import.meta.url), { type: 'module' });
let runner: Worker | null = null;

/** the current run */
interface Run {
  id: number;
  name: string;
  blocks: Uint8Array[];
  bytes: number;
  /** blocks in the last capture sent to be processed */
  sentBlocks: number;
  /** a processing request is out */
  processing: boolean;
  /** the worker's last word, once the program has ended */
  done: Extract<FromProfileWorker, { type: 'done' }> | null;
  finalSent: boolean;
  interrupt: Int32Array | null;
  control: Int32Array | null;
  loaded: Extract<FromProfileWorker, { type: 'loaded' }> | null;
  stopTimer: number | null;
  started: number;
}
let run: Run | null = null;
let runCount = 0;
let processId = 0;
/** processing request id → the run and whether it is the final one */
const requests = new Map<number, { run: Run; final: boolean; blocks: number }>();
let current: ViewerResult | null = null;
let captureUrl: string | null = null;
const updates: { samples: number; trusted: number; blocks: number; final: boolean }[] = [];

(window as unknown as { __pyunwindProfile: unknown }).__pyunwindProfile = {
  get result(): ViewerResult | null {
    return current;
  },
  get done(): unknown {
    return run?.done ?? null;
  },
  updates,
  capture(): number[] {
    return run ? [...concatBytes(run.blocks, run.bytes)] : [];
  },
  flame(): unknown {
    const w = ($<HTMLIFrameElement>('flame-frame').contentWindow as (Window & { __pyunwind?: unknown }) | null) ?? null;
    return w?.__pyunwind ?? null;
  },
};

function setState(s: State, text: string): void {
  document.body.dataset.state = s;
  const status = $('status');
  status.dataset.state = s;
  status.textContent = text;
}

const kb = (n: number): string => (n >= 1 << 20 ? `${(n / (1 << 20)).toFixed(1)} MB` : n >= 1024 ? `${(n / 1024).toFixed(0)} kB` : `${n} B`);

function showError(title: string, message: string): void {
  $('error').hidden = false;
  $('error-title').textContent = title;
  $('error-message').textContent = message;
}

function setSamples(attempted: number, trusted: number): void {
  const e = $('samples');
  e.textContent = formatCount(trusted);
  e.dataset.attempted = String(attempted);
  e.dataset.trusted = String(trusted);
  e.title = `${formatCount(attempted)} samples walked, ${formatCount(trusted)} trusted`;
}

function programName(): string {
  const n = $<HTMLInputElement>('filename').value.trim() || 'program.py';
  return n.replace(/[^\w.-]+/g, '_');
}

function start(): void {
  if (run && !run.done) return;
  const python = $<HTMLTextAreaElement>('python').value;
  const filename = $<HTMLInputElement>('filename').value.trim() || 'program.py';
  const args = $<HTMLInputElement>('args').value.trim().split(/\s+/).filter(Boolean);
  const rateHz = Number($<HTMLSelectElement>('rate').value);
  if (captureUrl) URL.revokeObjectURL(captureUrl);
  captureUrl = null;
  const link = $<HTMLAnchorElement>('download-capture');
  link.hidden = true;
  link.removeAttribute('href');
  $('error').hidden = true;
  $('output').textContent = '';
  $('recording').textContent = '';
  updates.length = 0;
  current = null;
  setSamples(0, 0);
  run = {
    id: ++runCount,
    name: `${programName().replace(/\.py$/i, '')}.pyuw`,
    blocks: [],
    bytes: 0,
    sentBlocks: 0,
    processing: false,
    done: null,
    finalSent: false,
    interrupt: null,
    control: null,
    loaded: null,
    stopTimer: null,
    started: performance.now(),
  };
  $<HTMLButtonElement>('run').disabled = true;
  $<HTMLButtonElement>('stop').disabled = false;
  setState('loading', 'starting');
  if (!runner) {
    runner = new Worker(new URL('profile-worker.js', import.meta.url), { type: 'module' });
    runner.onmessage = (ev: MessageEvent<FromProfileWorker>) => onRunner(ev.data);
    runner.onerror = (ev) => fail('The profiler failed', ev.message || 'its worker could not start');
  }
  const request: ToProfileWorker = { type: 'run', python, filename, args, rateHz };
  runner.postMessage(request);
}

function stop(): void {
  const r = run;
  if (!r || r.done || !r.control || !r.interrupt) return;
  $<HTMLButtonElement>('stop').disabled = true;
  Atomics.store(r.control, CONTROL.STOP, 1);
  Atomics.notify(r.control, CONTROL.STOP);
  // SIGINT until the program has stopped (a tick written just before the stop may replace it)
  const interrupt = r.interrupt;
  const again = (): void => {
    if (r.done) return;
    Atomics.store(interrupt, 0, SIGINT);
    r.stopTimer = window.setTimeout(again, 50);
  };
  again();
}

function fail(title: string, message: string): void {
  showError(title, message);
  setState('error', 'error');
  $<HTMLButtonElement>('run').disabled = false;
  $<HTMLButtonElement>('stop').disabled = true;
}

function onRunner(m: FromProfileWorker): void {
  const r = run;
  if (!r) return;
  switch (m.type) {
    case 'status':
      setState(m.text === 'running' ? 'running' : 'loading', m.text);
      break;
    case 'loaded':
      r.loaded = m;
      break;
    case 'started':
      r.interrupt = new Int32Array(m.interrupt);
      r.control = new Int32Array(m.control);
      break;
    case 'block':
      r.blocks.push(new Uint8Array(m.bytes));
      r.bytes += m.bytes.byteLength;
      break;
    case 'progress':
      if (!current) $('samples').textContent = formatCount(m.samples);
      break;
    case 'output':
      $('output').textContent += m.text;
      break;
    case 'done':
      r.done = m;
      if (r.stopTimer !== null) clearTimeout(r.stopTimer);
      $<HTMLButtonElement>('stop').disabled = true;
      if (m.outcome.kind === 'error' || m.outcome.kind === 'exit') showError(m.outcome.kind === 'error' ? `The program raised ${m.outcome.type}` : `The program exited with ${m.outcome.exitCode}`, m.outcome.traceback);
      setState('processing', 'processing the capture');
      pump();
      break;
    case 'fatal':
      fail('The profiler failed', m.message);
      break;
  }
}

/** Have the capture so far processed, unless a request is out (then the next tick does). */
function pump(): void {
  const r = run;
  if (!r || r.processing || r.finalSent) return;
  const final = r.done !== null;
  if (!final && r.blocks.length <= r.sentBlocks) return;
  if (r.blocks.length === 0) return;
  r.processing = true;
  r.sentBlocks = r.blocks.length;
  if (final) r.finalSent = true;
  const id = ++processId;
  requests.set(id, { run: r, final, blocks: r.blocks.length });
  const bytes = concatBytes(r.blocks, r.bytes);
  // in the viewer's worker itself: the capture so far is processed again every redraw, and the
  // program being profiled needs the other cores
  const m: ToWorker = { type: 'open', id, name: r.name, bytes: bytes.buffer as ArrayBuffer, workers: 0 };
  processor.postMessage(m, [bytes.buffer]);
}
window.setInterval(pump, REDRAW_EVERY_MS);

processor.onmessage = (ev: MessageEvent<FromWorker>) => {
  const m = ev.data;
  if (m.type !== 'result' && m.type !== 'error') return;
  const req = requests.get(m.id);
  requests.delete(m.id);
  if (!req) return;
  req.run.processing = false;
  if (req.run !== run) return;
  if (m.type === 'error') {
    // the capture so far cannot be read (its header block has not come yet): try later
    if (req.final) fail('Cannot read the capture', m.message);
    return;
  }
  show(m.result, req.final);
  if (!req.final && run.done) pump();
};
processor.onerror = (ev) => fail('The profiler failed', ev.message || 'the processing worker could not start');

function show(r: ViewerResult, final: boolean): void {
  current = r;
  updates.push({ samples: r.stats.attempted, trusted: r.stats.trusted, blocks: r.blocks, final });
  setSamples(r.stats.attempted, r.stats.trusted);
  $('result').hidden = false;
  $('validation-slot').innerHTML = validationPanel(r.stats, r.meta.capture ? { capture: r.meta.capture } : {});
  renderRecording(r);
  const frame = $<HTMLIFrameElement>('flame-frame');
  frame.onload = () => {
    fitFrame(frame);
    if (final) finish();
  };
  frame.srcdoc = flameSrcdoc(r);
}

function finish(): void {
  const r = run;
  if (!r?.done) return;
  const bytes = concatBytes(r.blocks, r.bytes);
  captureUrl = URL.createObjectURL(new Blob([bytes], { type: 'application/octet-stream' }));
  const link = $<HTMLAnchorElement>('download-capture');
  link.href = captureUrl;
  link.download = r.name;
  link.textContent = `download capture (${r.name}, ${kb(bytes.length)})`;
  link.hidden = false;
  $<HTMLButtonElement>('run').disabled = false;
  const o = r.done.outcome;
  const how = o.kind === 'finished' ? 'the program finished' : o.kind === 'stopped' ? 'stopped' : o.kind === 'exit' ? `the program exited with ${o.exitCode}` : `the program raised ${o.type}`;
  setState('done', `done: ${how}`);
}

function renderRecording(v: ViewerResult): void {
  const r = run;
  const rows: [string, string][] = [
    ['target', v.header.target],
    ['Python', v.header.pythonVersion],
    ['rate', `${v.header.rateHz} Hz`],
    ['mode', v.header.sampling],
    ['copies', v.header.copy ?? 'unknown'],
  ];
  if (r?.loaded) rows.push(['Pyodide ready in', `${formatCount(Math.round(r.loaded.loadMs))} ms`]);
  if (r?.done) {
    const t = r.done.totals;
    rows.push(['ticks', `${formatCount(r.done.scheduled)} scheduled, ${formatCount(t.ticks)} sampled (${formatPercent(t.ticks, r.done.scheduled)}), ${formatCount(t.missed)} missed`]);
    rows.push(['handler', `${t.ticks ? Math.round(t.handlerMicros.total / t.ticks) : 0} µs mean, ${t.handlerMicros.max} µs max per sample`]);
    if (t.failedTicks) rows.push(['failed copies', `${formatCount(t.failedTicks)}: ${t.firstFailure ?? ''}`]);
  }
  rows.push(['capture', `${kb(v.size)}, ${formatCount(v.blocks)} blocks${v.closedCleanly ? '' : ' so far'}`]);
  rows.push(['processed', `in ${formatCount(v.millis)} ms, in this browser`]);
  fillDefinitionList($('recording'), rows);
}

$('run').addEventListener('click', start);
$('stop').addEventListener('click', stop);
$<HTMLInputElement>('py-file').addEventListener('change', (ev) => {
  const input = ev.target as HTMLInputElement;
  const f = input.files?.[0];
  input.value = '';
  if (!f) return;
  void f.text().then((text) => {
    $<HTMLTextAreaElement>('python').value = text;
    $<HTMLInputElement>('filename').value = f.name;
  });
});
setState('idle', 'idle');
