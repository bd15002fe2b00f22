// The viewer's page: open a capture (the file input, a drop anywhere, or `?file=NAME` /
// `#file=NAME` beside the page, which `pyunwind view` serves), have the worker (web/worker.ts)
// process it with a progress bar, then show the flame graph, the threads, the validation panel
// and a download of every export format. A file that is not a capture, or a damaged one, opens
// the error panel (`#error`) with what the reader found; the intact part of a damaged capture is
// still shown.
//
// The flame graph is the HTML exports' renderer, unchanged: its markup (flamegraphBody), data
// (a `<script type="application/json">` element) and script (flamegraph.js, written by the
// build from FLAMEGRAPH_SCRIPT) in an <iframe srcdoc> — a document of its own for each capture,
// so the script runs once per graph as it was written to.
//
// For tests and tools (stable): <body data-state="idle|loading|processing|ready|error">;
// `#progress` (data-samples, data-blocks, data-bytes, data-total); `#error` (hidden unless
// there is something to say; `#error-warnings li` with data-offset); `#threads li[data-label]`
// with data-key, data-samples (attempted), data-trusted, data-rejected; `#validation [data-key]`
// (validationPanel); `#view-mode`, `#view-gc`, `#view-native` (how the samples are shown:
// report's --mode, --no-gc, --native; a change processes the capture again); `#downloads a[data-format]`; `#flame-frame` (the renderer's page, with its
// own stable ids); window.__pyunwindViewer: { result, flame() } — flame(): the renderer's
// window.__pyunwind ({ data, state, frames, ready }).

import { formatCount, formatPercent } from '../src/export/html/page.js';
import { validationPanel } from '../src/export/html/validation.js';
import { fillDefinitionList } from './definition-list.js';
import { fitFrame, flameSrcdoc } from './flame-frame.js';
import type { SamplingMode } from '../src/capture/types.js';
import type { FormatInfo, FromWorker, ToWorker, ViewChoice, ViewerResult } from './protocol.js';

type State = 'idle' | 'loading' | 'processing' | 'ready' | 'error';

interface RendererApi {
  data: unknown;
  state: unknown;
  frames: { id: number; name: string; file: string | null; line: number | null; samples: number; self: number; depth: number; x: number; width: number }[];
  ready: boolean;
}

const $ = <T extends HTMLElement = HTMLElement>(id: string): T => {
  const e = document.getElementById(id);
  if (!e) throw new Error(`the page has no #${id}`);
  return e as T;
};

const worker = new Worker(new URL('worker.js', import.meta.url), { type: 'module' });
/** the request the page is waiting for: answers to older ones are dropped */
let currentId = 0;
let current: ViewerResult | null = null;
/** download links made so far (revoked when another capture is opened) */
let blobUrls: string[] = [];
const pendingExports = new Map<number, HTMLAnchorElement>();

const api = ((window as unknown as { __pyunwindViewer: unknown }).__pyunwindViewer = {
  get result(): ViewerResult | null {
    return current;
  },
  flame(): RendererApi | null {
    const w = ($<HTMLIFrameElement>('flame-frame').contentWindow as (Window & { __pyunwind?: RendererApi }) | null) ?? null;
    return w?.__pyunwind ?? null;
  },
});
void api;

function setState(s: State): void {
  document.body.dataset.state = s;
}

function send(m: ToWorker, transfer: Transferable[] = []): void {
  worker.postMessage(m, transfer);
}

const mb = (n: number): string => (n >= 1 << 20 ? `${(n / (1 << 20)).toFixed(1)} MB` : n >= 1024 ? `${(n / 1024).toFixed(0)} kB` : `${n} B`);

function showProgress(phase: string, done: number, total: number, detail: string, extra: Record<string, number> = {}): void {
  const box = $('progress');
  box.hidden = false;
  $('progress-phase').textContent = phase;
  $('progress-text').textContent = detail;
  const bar = $<HTMLProgressElement>('progress-bar');
  if (total > 0) bar.value = Math.min(1, done / total);
  else bar.removeAttribute('value'); // indeterminate
  for (const [k, v] of Object.entries(extra)) box.dataset[k] = String(v);
}

function resetView(): void {
  for (const u of blobUrls) URL.revokeObjectURL(u);
  blobUrls = [];
  pendingExports.clear();
  current = null;
  $('error').hidden = true;
  $('result').hidden = true;
  $('welcome').hidden = true;
  $('facts').textContent = '';
}

/** `?workers=N` (or #workers=N): the processing workers to use (0: the viewer's own worker); default: one per core for a large capture. */
const askedWorkers = ((): number | undefined => {
  const v = new URLSearchParams(location.search).get('workers') ?? new URLSearchParams(location.hash.replace(/^#/, '')).get('workers');
  return v !== null && /^\d+$/.test(v) ? Number(v) : undefined;
})();

/** How the capture was processed, in words. */
function processedWhere(r: ViewerResult): string {
  const p = r.processing;
  if (p.workers === 0) return `in ${formatCount(r.millis)} ms, in this browser (one worker${p.sharedKernel ? ", the kernel's shared-memory build" : ''})`;
  const shared = p.sharedCapture ? 'the capture in shared memory, read where it lies' : 'each block copied to its worker';
  return `in ${formatCount(r.millis)} ms, in this browser, by ${p.workers} workers (${shared}; the kernel's ${p.sharedKernel ? 'shared-memory' : 'plain'} build)`;
}

/** Open a capture held in memory (the buffer goes to the worker). */
function openBytes(name: string, bytes: ArrayBuffer): void {
  resetView();
  const id = ++currentId;
  document.title = `${name} — pyunwind viewer`;
  $('title').textContent = name;
  setState('processing');
  showProgress('processing', 0, bytes.byteLength, `${mb(bytes.byteLength)}`, { samples: 0, blocks: 0, bytes: 0, total: bytes.byteLength });
  send({ type: 'open', id, name, bytes, ...(askedWorkers === undefined ? {} : { workers: askedWorkers }) }, [bytes]);
}

async function openFile(file: File): Promise<void> {
  resetView();
  setState('loading');
  $('title').textContent = file.name;
  showProgress('reading the file', 0, file.size, mb(file.size));
  try {
    openBytes(file.name, await file.arrayBuffer());
  } catch (e) {
    showError(`Cannot read ${file.name}`, e instanceof Error ? e.message : String(e), []);
  }
}

/** Fetch a capture beside the page (`?file=NAME`): same origin only. */
async function openUrl(file: string, name: string): Promise<void> {
  resetView();
  setState('loading');
  $('title').textContent = name;
  const url = new URL(file, location.href);
  try {
    if (url.origin !== location.origin) throw new Error(`${file} is not beside this page (only same-origin captures are fetched)`);
    const response = await fetch(url, { cache: 'no-store' });
    if (!response.ok) throw new Error(`HTTP ${response.status} ${response.statusText}`);
    const total = Number(response.headers.get('content-length') ?? 0);
    showProgress('downloading', 0, total, total ? mb(total) : '');
    let bytes: ArrayBuffer;
    if (response.body && total > 0) {
      const out = new Uint8Array(total);
      const reader = response.body.getReader();
      let at = 0;
      let last = 0;
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        if (at + value.length > total) throw new Error(`the server sent more than the ${total} bytes it announced`);
        out.set(value, at);
        at += value.length;
        if (performance.now() - last > 50) {
          last = performance.now();
          showProgress('downloading', at, total, `${mb(at)} of ${mb(total)}`);
        }
      }
      if (at !== total) throw new Error(`the download ended after ${at} of ${total} bytes`);
      bytes = out.buffer;
    } else bytes = await response.arrayBuffer();
    openBytes(name, bytes);
  } catch (e) {
    showError(`Cannot load ${name}`, e instanceof Error ? e.message : String(e), []);
  }
}

function showError(title: string, message: string, warnings: { offset: number; message: string }[], note = ''): void {
  const box = $('error');
  box.hidden = false;
  $('error-title').textContent = title;
  $('error-message').textContent = message;
  $('error-message').hidden = message === '';
  const list = $('error-warnings');
  list.textContent = '';
  for (const w of warnings) {
    const li = document.createElement('li');
    li.dataset.offset = String(w.offset);
    li.textContent = `byte ${w.offset}: ${w.message}`;
    list.appendChild(li);
  }
  $('error-note').textContent = note;
  if (!current) {
    $('progress').hidden = true;
    setState('error');
  }
}

// ---- the result ----

function selectView(key: string): void {
  const frame = $<HTMLIFrameElement>('flame-frame');
  const r = current;
  const doc = frame.contentDocument;
  if (!r || !doc) return;
  const i = r.flame.views.findIndex((v) => v.id === key);
  const select = doc.getElementById('thread') as HTMLSelectElement | null;
  if (i < 0 || !select) return;
  select.value = String(i);
  select.dispatchEvent(new Event('change'));
  document.querySelectorAll<HTMLElement>('#threads li').forEach((li) => li.classList.toggle('selected', li.dataset.key === key));
}

function renderThreads(r: ViewerResult): void {
  const list = $('threads');
  list.textContent = '';
  const item = (key: string, label: string, samples: number, trusted: number, rejected: number, detail: string): HTMLLIElement => {
    const li = document.createElement('li');
    li.dataset.key = key;
    const b = document.createElement('button');
    b.type = 'button';
    b.className = 'thread';
    const name = document.createElement('span');
    name.className = 'name';
    name.textContent = label;
    const n = document.createElement('span');
    n.className = 'count';
    n.textContent = `${formatCount(samples)} samples`;
    b.append(name, n);
    const bar = document.createElement('div');
    bar.className = 'mini-bar';
    const good = document.createElement('span');
    good.className = 'trusted';
    good.style.width = `${samples ? (100 * trusted) / samples : 0}%`;
    const bad = document.createElement('span');
    bad.className = 'rejected';
    bad.style.width = `${samples ? (100 * rejected) / samples : 0}%`;
    bar.append(good, bad);
    const d = document.createElement('div');
    d.className = 'detail';
    d.textContent = detail;
    li.append(b, bar, d);
    b.addEventListener('click', () => selectView(key));
    list.appendChild(li);
    return li;
  };
  const all = item('all', `all threads (${r.threads.length})`, r.stats.attempted, r.stats.trusted, r.stats.rejected, statusLine(r.stats.statuses, r.stats.attempted));
  all.classList.add('all', 'selected');
  for (const t of r.threads) {
    const li = item(t.key, t.label, t.samples, t.trusted, t.rejected, statusLine(t.statuses, t.samples));
    li.dataset.label = t.label;
    li.dataset.samples = String(t.samples);
    li.dataset.trusted = String(t.trusted);
    li.dataset.rejected = String(t.rejected);
  }
  $('threads-sub').textContent = `${r.threads.length}; click one to show it`;
}

/** "trusted 98.0% (complete 900, idle 80); rejected: torn 12, incomplete 8" */
function statusLine(s: Record<string, number>, of: number): string {
  const trusted = ['complete', 'complete-unverifiable', 'idle'].filter((k) => (s[k] ?? 0) > 0);
  const rejected = Object.keys(s).filter((k) => !trusted.includes(k) && !['complete', 'complete-unverifiable', 'idle'].includes(k) && (s[k] ?? 0) > 0);
  const t = trusted.reduce((n, k) => n + s[k]!, 0);
  return (
    `trusted ${formatPercent(t, of)}${trusted.length ? ` (${trusted.map((k) => `${k} ${formatCount(s[k]!)}`).join(', ')})` : ''}` +
    (rejected.length ? `; rejected: ${rejected.map((k) => `${k} ${formatCount(s[k]!)}`).join(', ')}` : '; none rejected')
  );
}

function renderDownloads(r: ViewerResult): void {
  const box = $('downloads');
  box.textContent = '';
  for (const f of r.formats) box.appendChild(downloadLink(f));
}

function downloadLink(f: FormatInfo): HTMLElement {
  const row = document.createElement('div');
  row.className = 'download';
  const head = document.createElement('div');
  const format = document.createElement('span');
  format.className = 'format';
  format.textContent = f.name;
  const a = document.createElement('a');
  a.dataset.format = f.name;
  a.href = '#';
  a.download = f.fileName;
  a.textContent = f.fileName;
  a.title = f.help;
  head.append(format, a);
  const help = document.createElement('span');
  help.className = 'hint';
  help.textContent = f.help.replace(/^[a-z]+( \(default\))?: /, '').replace(/[;,]$/, '') + (f.timeline ? ' (processes the capture again, in time order)' : '');
  row.append(head, help);
  a.addEventListener('click', (ev) => {
    if (a.dataset.ready === '1') return; // the file is made: the browser downloads it
    ev.preventDefault();
    if (a.dataset.busy === '1') return;
    a.dataset.busy = '1';
    a.classList.add('busy');
    const id = ++exportId;
    pendingExports.set(id, a);
    send({ type: 'export', id, format: f.name });
  });
  return row;
}
let exportId = 1 << 20;

function renderRecording(r: ViewerResult): void {
  const rec = r.recording;
  const pct = (n: number): string => formatPercent(n, rec.samples);
  const rows: [string, string][] = [
    ['target', r.header.target],
    ...(r.header.command ? ([['command', r.header.command.join(' ')]] as [string, string][]) : []),
    ['Python', r.header.pythonVersion],
    ['rate', `${r.header.rateHz} Hz`],
    ['mode', r.header.sampling],
    ['copies', r.header.copy ?? 'unknown'],
    ['copy window', `${rec.copyMicros.mean} µs mean, ${rec.copyMicros.p50} µs median, ${rec.copyMicros.p99} µs p99, ${rec.copyMicros.max} µs max`],
    ['copied again', `${pct(rec.retried)} (the stack moved during the first copy)`],
    ['target stopped', `${pct(rec.stopped)} of the copies`],
    ['file', `${mb(r.size)}, ${formatCount(r.blocks)} blocks${r.closedCleanly ? '' : ', not closed by its writer'}`],
    ['processed', processedWhere(r)],
  ];
  fillDefinitionList($('recording'), rows);
}

const MODE_WORDS: Record<SamplingMode, string> = {
  wall: 'all (wall)',
  cpu: 'on a CPU (cpu)',
  gil: 'holding the GIL (gil)',
  exception: 'handling an exception (exception)',
};

function renderView(r: ViewerResult): void {
  const select = $<HTMLSelectElement>('view-mode');
  select.textContent = '';
  for (const m of r.modes) {
    const o = document.createElement('option');
    o.value = m;
    o.textContent = MODE_WORDS[m];
    select.appendChild(o);
  }
  select.value = r.view.mode;
  select.disabled = r.modes.length < 2;
  const gc = $<HTMLInputElement>('view-gc');
  gc.checked = r.view.gc && r.gcKnown;
  gc.disabled = !r.gcKnown;
  gc.parentElement!.title = r.gcKnown ? 'report --no-gc when unchecked' : 'this capture does not tell when the collector ran (CPython 3.13+)';
  $<HTMLInputElement>('view-native').checked = r.view.native;
}

/** Process the capture shown again, another way (the result replaces it). */
function changeView(): void {
  if (!current) return;
  const view: ViewChoice = {
    mode: $<HTMLSelectElement>('view-mode').value as SamplingMode,
    gc: $<HTMLInputElement>('view-gc').checked,
    native: $<HTMLInputElement>('view-native').checked,
  };
  const size = current.size;
  resetView();
  const id = ++currentId;
  setState('processing');
  showProgress('processing', 0, size, `${mb(size)}`, { samples: 0, blocks: 0, bytes: 0, total: size });
  send({ type: 'view', id, view });
}
for (const id of ['view-mode', 'view-gc', 'view-native']) $(id).addEventListener('change', changeView);

function showResult(r: ViewerResult): void {
  current = r;
  $('progress').hidden = true;
  $('result').hidden = false;
  const facts = $('facts');
  facts.textContent = '';
  for (const f of [r.meta.title, ...r.facts]) {
    const s = document.createElement('span');
    s.textContent = f;
    facts.appendChild(s);
  }
  renderView(r);
  renderThreads(r);
  // numbers and fixed words only: validationPanel escapes what it does not make itself
  $('validation-slot').innerHTML = validationPanel(r.stats, r.meta.capture ? { capture: r.meta.capture } : {});
  renderDownloads(r);
  renderRecording(r);
  if (r.warnings.length) {
    showError(
      `${r.name} is damaged: ${r.warnings.length} problem${r.warnings.length === 1 ? '' : 's'} found`,
      r.blocks > 0 ? 'The intact part is shown below: the blocks that passed their checks, and every sample in them, walked and validated as usual.' : 'No intact block was found: the capture has no samples to show.',
      r.warnings,
      'What the reader found, in file order (pyunwind report prints the same warnings).',
    );
  }
  const frame = $<HTMLIFrameElement>('flame-frame');
  frame.onload = () => {
    fitFrame(frame);
    // ready once the renderer has drawn the graph (its first render may come after the load)
    const body = frame.contentDocument?.body;
    if (!body || body.dataset.ready === '1') return setState('ready');
    const drawn = new MutationObserver(() => {
      if (body.dataset.ready !== '1') return;
      drawn.disconnect();
      setState('ready');
    });
    drawn.observe(body, { attributes: true, attributeFilter: ['data-ready'] });
  };
  frame.srcdoc = flameSrcdoc(r);
}

worker.onmessage = (ev: MessageEvent<FromWorker>) => {
  const m = ev.data;
  if (m.type === 'export' || m.type === 'export-error') {
    const a = pendingExports.get(m.id);
    pendingExports.delete(m.id);
    if (!a) return;
    a.dataset.busy = '';
    a.classList.remove('busy');
    if (m.type === 'export-error') {
      a.title = `could not be made: ${m.message}`;
      a.classList.add('failed');
      return;
    }
    const url = URL.createObjectURL(new Blob([m.bytes], { type: m.mime }));
    blobUrls.push(url);
    a.href = url;
    a.download = m.fileName;
    a.dataset.ready = '1';
    a.click();
    return;
  }
  if (m.id !== currentId) return; // an answer about a capture no longer shown
  if (m.type === 'progress') {
    if (current) return; // (a timeline export's progress: the download link shows it is busy)
    const detail = `${formatCount(m.samples)} samples, ${formatCount(m.blocks)} blocks, ${mb(m.bytes)} of ${mb(m.total)}`;
    showProgress(m.phase, m.bytes, m.total, detail, { samples: m.samples, blocks: m.blocks, bytes: m.bytes, total: m.total });
  } else if (m.type === 'result') {
    showResult(m.result);
  } else if (m.type === 'error') {
    showError(`Cannot read ${$('title').textContent}`, m.message, m.warnings, 'pyunwind reads the header of a capture first: without it, nothing in the file can be interpreted.');
  }
};
worker.onerror = (ev) => {
  showError('The viewer failed', ev.message || 'the worker could not start', []);
};

// ---- opening ----

$<HTMLInputElement>('file').addEventListener('change', (ev) => {
  const input = ev.target as HTMLInputElement;
  const f = input.files?.[0];
  if (f) void openFile(f);
  input.value = '';
});

let dragDepth = 0;
const overlay = $('drop-overlay');
const hasFiles = (ev: DragEvent): boolean => ev.dataTransfer?.types.includes('Files') === true;
window.addEventListener('dragenter', (ev) => {
  if (!hasFiles(ev)) return;
  ev.preventDefault();
  dragDepth++;
  overlay.hidden = false;
});
window.addEventListener('dragleave', () => {
  if (--dragDepth <= 0) {
    dragDepth = 0;
    overlay.hidden = true;
  }
});
window.addEventListener('dragover', (ev) => {
  if (!hasFiles(ev)) return;
  ev.preventDefault();
  if (ev.dataTransfer) ev.dataTransfer.dropEffect = 'copy';
});
window.addEventListener('drop', (ev) => {
  ev.preventDefault();
  dragDepth = 0;
  overlay.hidden = true;
  const f = ev.dataTransfer?.files[0];
  if (f) void openFile(f);
});

/** `?file=NAME&name=SHOWN` or `#file=NAME&name=SHOWN`: load that capture (beside the page) now. */
function fromLocation(): void {
  const params = new URLSearchParams(location.search);
  const hash = new URLSearchParams(location.hash.replace(/^#/, ''));
  const file = params.get('file') ?? hash.get('file');
  if (!file) {
    setState('idle');
    return;
  }
  const name = params.get('name') ?? hash.get('name') ?? file.split('/').pop() ?? file;
  void openUrl(file, name);
}
fromLocation();
