// pyunwind view FILE: the viewer (dist/web/, built from web/ by npm run build:web) and one
// capture, served to this machine's browser. The capture is processed in the browser (a Web
// Worker runs the walk kernel); the server only hands out files. pyunwind view --profile: the
// same server without a capture, opened at profile.html, the in-browser profiler (Python run in
// Pyodide, from the pyodide/ folder the build puts beside the viewer).
//
// What is served, and to whom: the server listens on 127.0.0.1 only, and answers only paths
// under a random token (16 random bytes, hex) — http://127.0.0.1:PORT/TOKEN/ is the viewer,
// /TOKEN/NAME a file of the viewer's folder (its regular files, listed when the server starts),
// /TOKEN/pyodide/NAME a file of its pyodide/ folder (the one sub-folder served, listed likewise),
// /TOKEN/capture.pyuw the capture. Anything else — no token, a wrong one, `..`, an encoded
// character, a folder, a file added later, another Host (DNS rebinding) — is 404 with no body
// worth reading. Paths are compared as sent, never decoded or joined onto a folder. Every answer
// carries COOP/COEP/CORP (the page is cross-origin isolated), a Content-Security-Policy (scripts
// and connections to this origin only, WebAssembly compilation allowed; for the one script that
// loads Pyodide, profile-worker.js, also eval: emscripten evaluates its EM_ASM snippets),
// Cache-Control: no-store and nosniff.

import { randomBytes, timingSafeEqual } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { UsageError } from './errors.js';
import { openInBrowser } from './open-browser.js';

export const VIEW_HELP = `Usage: pyunwind view FILE [--port N] [--no-open]
       pyunwind view --profile [--port N] [--no-open]

Open a capture in the viewer: an interactive flame graph, the threads, the validation numbers,
and a download of every format of pyunwind report. The capture is processed in the browser;
this command serves the viewer and the one file to 127.0.0.1 only, under a random token in
the URL, until Ctrl-C.

With --profile (and no FILE): the in-browser profiler instead — paste or pick Python, run it
in Pyodide (CPython compiled to WebAssembly) in a Web Worker, watch its flame graph fill in
while it runs, and download the capture.

Options:
      --profile   open the in-browser profiler (no capture is served)
  -p, --port N    the port to listen on (default: any free port)
      --no-open   print the URL only; do not start a browser
  -h, --help      this help
`;

/** The name the capture is served under (beside the viewer). */
export const CAPTURE_NAME = 'capture.pyuw';

/** The viewer's policy: its own scripts, WebAssembly compiled from its own files, nothing from elsewhere. */
export const VIEW_CSP = cspWith("script-src 'self' 'wasm-unsafe-eval'");

/** The worker that loads Pyodide (and only it): emscripten evaluates its EM_ASM snippets with eval while Pyodide loads. */
export const PYODIDE_WORKER_CSP = cspWith("script-src 'self' 'unsafe-eval' 'wasm-unsafe-eval'");
/** The one script served with PYODIDE_WORKER_CSP. */
export const PYODIDE_WORKER = 'profile-worker.js';
/** The in-browser profiler's page. */
export const PROFILE_PAGE = 'profile.html';
/** The one sub-folder of the viewer's folder that is served (its regular files, one level). */
export const PYODIDE_FOLDER = 'pyodide';

function cspWith(scriptSrc: string): string {
  return [
  "default-src 'self'",
  scriptSrc,
  "worker-src 'self'",
  "connect-src 'self'",
  // validationPanel's bar and the renderer set widths in style attributes
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data: blob:",
  "frame-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
  ].join('; ');
}

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.wasm': 'application/wasm',
  '.json': 'application/json; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.txt': 'text/plain; charset=utf-8',
  '.pyuw': 'application/octet-stream',
};

/** dist/web of this package: src/cli/ and dist/cli/ are both two levels below the root. */
export function defaultWebDir(): string {
  return fileURLToPath(new URL('../../dist/web/', import.meta.url));
}

export interface ViewServerOptions {
  /** the capture to serve (none: the viewer and the in-browser profiler only) */
  file?: string;
  /** default 0: any free port */
  port?: number;
  /** the built viewer (default: dist/web of this package) */
  webDir?: string;
}

export interface ViewServer {
  /** the viewer with the capture: http://127.0.0.1:PORT/TOKEN/?file=capture.pyuw&name=FILE; without a capture, the in-browser profiler: http://127.0.0.1:PORT/TOKEN/profile.html */
  url: string;
  /** http://127.0.0.1:PORT/TOKEN/ */
  base: string;
  token: string;
  port: number;
  server: http.Server;
  close(): Promise<void>;
}

/** A served name: letters, digits, `.`, `_`, `-`, not starting with a dot. */
const SAFE_NAME = /^[A-Za-z0-9_-][A-Za-z0-9._-]*$/;

export async function startViewServer(options: ViewServerOptions): Promise<ViewServer> {
  const webDir = path.resolve(options.webDir ?? defaultWebDir());
  const file = options.file === undefined ? null : path.resolve(options.file);
  if (file !== null) {
    let st: fs.Stats;
    try {
      st = fs.statSync(file);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      throw new Error(code === 'ENOENT' ? `${options.file}: no such file` : `${options.file}: ${code ?? (e as Error).message}`);
    }
    if (!st.isFile()) throw new Error(`${options.file} is not a file`);
  }
  if (!fs.existsSync(path.join(webDir, 'index.html'))) throw new Error(`the viewer is not built: ${webDir} has no index.html (run npm run build:web)`);

  // the viewer's files, once: a file added later is not served. Keys are the paths served
  // (NAME, or pyodide/NAME): a request is answered only when its path is one of them, as sent.
  const files = new Map<string, string>();
  for (const d of fs.readdirSync(webDir, { withFileTypes: true })) {
    if (d.isFile() && SAFE_NAME.test(d.name) && d.name !== CAPTURE_NAME) files.set(d.name, path.join(webDir, d.name));
  }
  const pyodideDir = path.join(webDir, PYODIDE_FOLDER);
  let sub: fs.Dirent[] = [];
  try {
    if (!fs.lstatSync(pyodideDir).isSymbolicLink()) sub = fs.readdirSync(pyodideDir, { withFileTypes: true });
  } catch {
    // not built with the profiler: nothing under pyodide/ is served
  }
  for (const d of sub) {
    if (d.isFile() && SAFE_NAME.test(d.name)) files.set(`${PYODIDE_FOLDER}/${d.name}`, path.join(pyodideDir, d.name));
  }
  if (file !== null) files.set(CAPTURE_NAME, file);

  const token = randomBytes(16).toString('hex');
  const tokenBytes = Buffer.from(token);
  let port = 0;

  const securityHeaders = {
    'Cross-Origin-Opener-Policy': 'same-origin',
    'Cross-Origin-Embedder-Policy': 'require-corp',
    'Cross-Origin-Resource-Policy': 'same-origin',
    'Content-Security-Policy': VIEW_CSP,
    'Cache-Control': 'no-store',
    'X-Content-Type-Options': 'nosniff',
    'Referrer-Policy': 'no-referrer',
  };
  const workerHeaders = { ...securityHeaders, 'Content-Security-Policy': PYODIDE_WORKER_CSP };
  const notFound = (res: http.ServerResponse): void => {
    res.writeHead(404, { ...securityHeaders, 'Content-Type': 'text/plain; charset=utf-8', 'Content-Length': '10' });
    res.end('not found\n');
  };

  /** The path a request names (a key of `files`), or null. */
  const resolve = (req: http.IncomingMessage): string | null => {
    const host = req.headers.host;
    if (host !== `127.0.0.1:${port}` && host !== `localhost:${port}`) return null;
    const raw = req.url ?? '';
    const q = raw.indexOf('?');
    const pathname = q < 0 ? raw : raw.slice(0, q);
    // "/" TOKEN "/" NAME, as sent: nothing decoded, nothing joined
    if (pathname.length < token.length + 2 || pathname[0] !== '/' || pathname[token.length + 1] !== '/') return null;
    const given = Buffer.from(pathname.slice(1, token.length + 1));
    if (given.length !== tokenBytes.length || !timingSafeEqual(given, tokenBytes)) return null;
    const name = pathname.slice(token.length + 2) || 'index.html';
    // NAME, or pyodide/NAME: one safe name, in the one sub-folder at most
    const slash = name.indexOf('/');
    const leaf = slash < 0 ? name : name.slice(slash + 1);
    if (slash >= 0 && name.slice(0, slash) !== PYODIDE_FOLDER) return null;
    if (!SAFE_NAME.test(leaf)) return null;
    return files.has(name) ? name : null;
  };

  const server = http.createServer((req, res) => {
    const served = resolve(req);
    const target = served === null ? null : files.get(served)!;
    if (!target) return notFound(res);
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { ...securityHeaders, Allow: 'GET, HEAD', 'Content-Type': 'text/plain; charset=utf-8' });
      res.end('method not allowed\n');
      return;
    }
    let size: number;
    try {
      const s = fs.statSync(target);
      if (!s.isFile()) return notFound(res);
      size = s.size;
    } catch {
      return notFound(res);
    }
    res.writeHead(200, {
      ...(served === PYODIDE_WORKER ? workerHeaders : securityHeaders),
      'Content-Type': TYPES[path.extname(target).toLowerCase()] ?? 'application/octet-stream',
      'Content-Length': String(size),
    });
    if (req.method === 'HEAD') return void res.end();
    const stream = fs.createReadStream(target);
    stream.on('error', () => res.destroy());
    stream.pipe(res);
  });

  await new Promise<void>((ok, fail) => {
    server.once('error', fail);
    server.listen(options.port ?? 0, '127.0.0.1', () => {
      server.off('error', fail);
      ok();
    });
  });
  port = (server.address() as AddressInfo).port;
  const base = `http://127.0.0.1:${port}/${token}/`;
  const url = file === null ? `${base}${PROFILE_PAGE}` : `${base}?file=${CAPTURE_NAME}&name=${encodeURIComponent(path.basename(file))}`;
  return {
    url,
    base,
    token,
    port,
    server,
    close: () =>
      new Promise<void>((ok) => {
        server.close(() => ok());
        server.closeAllConnections();
      }),
  };
}

export async function view(argv: string[], out: (s: string | Uint8Array) => void, err: (s: string) => void): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    options: {
      port: { type: 'string', short: 'p' },
      'no-open': { type: 'boolean' },
      profile: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
    allowPositionals: true,
  });
  if (values.help) {
    out(VIEW_HELP);
    return 0;
  }
  if (values.profile) {
    if (positionals.length) throw new UsageError('view --profile takes no capture file');
  } else if (positionals.length !== 1) throw new UsageError(positionals.length ? 'view takes one capture file' : 'view needs a capture FILE (or --profile)');
  let port = 0;
  if (values.port !== undefined) {
    if (!/^\d{1,5}$/.test(values.port) || Number(values.port) > 65535) throw new UsageError(`--port: "${values.port}" is not a port number`);
    port = Number(values.port);
  }
  let served: ViewServer;
  try {
    served = await startViewServer({ ...(values.profile ? {} : { file: positionals[0]! }), port });
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'EADDRINUSE') throw new Error(`port ${port} is in use (try another --port, or none for any free port)`);
    if (code === 'EACCES') throw new Error(`port ${port} cannot be used by this user (try one above 1023)`);
    throw e;
  }
  if (values.profile && !fs.existsSync(path.join(defaultWebDir(), PROFILE_PAGE))) {
    await served.close();
    throw new Error(`the in-browser profiler is not built: ${defaultWebDir()} has no ${PROFILE_PAGE} (run npm run build:web)`);
  }
  out(`pyunwind view: serving ${values.profile ? 'the in-browser profiler' : positionals[0]} to this machine only (127.0.0.1) at\n  ${served.url}\n`);
  if (values['no-open']) err('pyunwind view: open that URL in a browser; Ctrl-C stops\n');
  else {
    const why = openInBrowser(served.url);
    err(why === null ? 'pyunwind view: opened it in the browser; Ctrl-C stops\n' : `pyunwind view: cannot open a browser here: ${why}; open that URL yourself; Ctrl-C stops\n`);
  }
  await new Promise<void>((done) => {
    const stop = (): void => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      done();
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });
  await served.close();
  err('pyunwind view: stopped\n');
  return 0;
}
