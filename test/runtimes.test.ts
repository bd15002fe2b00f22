// Everywhere JavaScript runs: the processing half of the package (its processing entry,
// dist/processing.js) imports no Node API, and Deno, Bun and workerd make from the same real
// capture a profile byte-identical to Node's (the JSON export). Each runtime runs the BUILT
// package (dist/, made by the test command's pretest, as the CLI tests assume): Deno and Bun the
// script test/runtimes/print-json.mjs, workerd a worker (test/runtimes/workerd-entry.mjs) bundled
// the way wrangler bundles one — `pyunwind` resolved under the workerd condition, the kernel a
// precompiled wasm module, the captures data bindings — and served on a local port.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { build } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordCoverage, skipTest } from './helpers/coverage.js';
import { waitUntil } from './helpers/wait.js';
import { exportJson, loadKernel, reportCaptureBytes, VERSION } from '../src/processing.js';
import { reportCapture } from '../src/pipeline/report-file.js';

const CAPTURES = ['threadpool-3.12.pyuw', 'hotcold-3.15.pyuw'].map((f) => `test/fixtures/captures/${f}`);
const SCRIPT = 'test/runtimes/print-json.mjs';
const bin = (name: string): string => path.resolve('node_modules/.bin', name);

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pyunwind-runtimes-'));
const children: ChildProcess[] = [];
afterAll(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  fs.rmSync(tmp, { recursive: true, force: true });
});

/** Node's JSON export of each capture: what every runtime must give, byte for byte. */
const canonical = new Map<string, string>();
beforeAll(async () => {
  if (!fs.existsSync('dist/processing.js')) throw new Error('dist/processing.js is missing: build it with npm run build:ts (the test command does)');
  const module = await loadKernel();
  for (const file of CAPTURES) {
    const { profile } = await reportCaptureBytes(new Uint8Array(fs.readFileSync(file)), { module });
    canonical.set(file, exportJson(profile));
  }
});

/** The runtime's binary answers `--version`; else why not (the runtime is then skipped, loudly). */
/**
 * Why the runtime cannot be tested here (it is not installed: a skip), or null. One that is
 * installed but does not run is broken, and that is a failure, not a skip.
 */
function missing(name: string, args = ['--version']): string | null {
  const exe = bin(name);
  if (!fs.existsSync(exe)) return `${exe} is not installed`;
  const r = spawnSync(exe, args, { encoding: 'utf8', timeout: 60_000 });
  if (r.error) throw new Error(`${exe} ${args.join(' ')}: ${r.error.message}`);
  if (r.status !== 0) throw new Error(`${exe} ${args.join(' ')} exited ${r.status}: ${r.stderr.trim().split('\n')[0] ?? ''}`);
  return null;
}

/** Runs a runtime (its executable) on print-json.mjs from the package root: its stdout (the JSON export) and stderr. */
function runScript(exe: string, args: string[]): { stdout: string; stderr: string } {
  const r = spawnSync(exe, args, {
    encoding: 'utf8',
    timeout: 120_000,
    maxBuffer: 64 << 20,
    env: { ...process.env, NO_COLOR: '1', DENO_NO_UPDATE_CHECK: '1', DENO_NO_PROMPT: '1' },
  });
  expect(r.error, String(r.error)).toBeUndefined();
  expect(r.status, `${path.basename(exe)} ${args.join(' ')}\n${r.stderr}`).toBe(0);
  return { stdout: r.stdout, stderr: r.stderr };
}

describe('the processing entry', () => {
  it('imports no Node API: it bundles for a neutral platform (which refuses node: imports)', async () => {
    const result = await build({
      entryPoints: ['dist/processing.js'],
      bundle: true,
      platform: 'neutral', // no node: builtins, no package `main` fields
      format: 'esm',
      write: false,
      metafile: true,
      logLevel: 'silent',
    });
    expect(result.errors).toEqual([]);
    const inputs = Object.keys(result.metafile.inputs);
    // the Node-only modules stay out of its graph
    for (const nodeOnly of ['dist/index.js', 'dist/pipeline/report-file.js', 'dist/capture/file.js', 'dist/capture/index.js', 'dist/pipeline/workers/pool.js', 'dist/pipeline/workers/block-worker.js']) {
      expect(inputs).not.toContain(nodeOnly);
    }
    expect(inputs).toContain('dist/pipeline/process-capture.js');
    // nothing left outside the bundle (a node: import would be)
    for (const out of Object.values(result.metafile.outputs)) expect(out.imports.filter((i) => i.external)).toEqual([]);
  });

  it('carries the version of package.json (a literal: it reads no file)', () => {
    expect(VERSION).toBe((JSON.parse(fs.readFileSync('package.json', 'utf8')) as { version: string }).version);
    expect(fs.readFileSync('src/version.ts', 'utf8')).not.toMatch(/from 'node:/);
  });

  it('gives in Node what a capture file gives (reportCaptureBytes = reportCapture)', async () => {
    for (const file of CAPTURES) {
      expect(exportJson((await reportCapture(file, { workers: 0 })).profile)).toBe(canonical.get(file));
    }
    // and the package's root in Node, imported by name, is Node's entry
    const r = runScript(process.execPath, [SCRIPT, CAPTURES[0]!, '--root']);
    expect(r.stderr).toMatch(/^root: node$/m);
    expect(r.stdout).toBe(canonical.get(CAPTURES[0]!));
  });
});

describe('the same profile in every runtime', () => {
  it('Deno (only reading: --allow-read=.)', (ctx) => {
    const why = missing('deno');
    if (why) return skipTest(ctx, 'runtimes', 'deno', why);
    for (const file of CAPTURES) {
      // the processing entry, the kernel from its default place (read with fetch)
      expect(runScript(bin('deno'), ['run', `--allow-read=.`, SCRIPT, file]).stdout, file).toBe(canonical.get(file));
      // `pyunwind` under the deno condition is the processing entry
      const root = runScript(bin('deno'), ['run', `--allow-read=.`, SCRIPT, file, '--root']);
      expect(root.stderr).toMatch(/^root: processing$/m);
      expect(root.stdout, file).toBe(canonical.get(file));
    }
    recordCoverage('runtimes', 'deno', true);
  });

  it('Bun', (ctx) => {
    const why = missing('bun');
    if (why) return skipTest(ctx, 'runtimes', 'bun', why);
    for (const file of CAPTURES) {
      expect(runScript(bin('bun'), [SCRIPT, file]).stdout, file).toBe(canonical.get(file));
      // `pyunwind` under the bun condition is Node's entry (Bun has Node's APIs): a file, worker threads
      const root = runScript(bin('bun'), [SCRIPT, file, '--root']);
      expect(root.stderr).toMatch(/^root: node$/m);
      expect(root.stdout, file).toBe(canonical.get(file));
    }
    recordCoverage('runtimes', 'bun', true);
  });

  it('workerd (the kernel a precompiled wasm module, the captures data bindings)', async (ctx) => {
    const why = missing('workerd');
    if (why) return skipTest(ctx, 'runtimes', 'workerd', why);
    const dir = path.join(tmp, 'workerd');
    fs.mkdirSync(dir);
    // bundled as wrangler does: `pyunwind` under the workerd, worker and browser conditions
    const bundle = await build({
      entryPoints: [SCRIPT.replace('print-json.mjs', 'workerd-entry.mjs')],
      bundle: true,
      platform: 'neutral',
      conditions: ['workerd', 'worker', 'browser'],
      format: 'esm',
      external: ['./kernel.wasm'],
      outfile: path.join(dir, 'worker.js'),
      metafile: true,
      logLevel: 'silent',
    });
    expect(bundle.errors).toEqual([]);
    const inputs = Object.keys(bundle.metafile.inputs);
    expect(inputs).toContain('dist/processing.js');
    expect(inputs).not.toContain('dist/index.js');
    fs.copyFileSync('build/kernel-unshared.wasm', path.join(dir, 'kernel.wasm'));
    const bindings = CAPTURES.map((file, i) => {
      fs.copyFileSync(file, path.join(dir, `capture${i}.pyuw`));
      return `(name = "capture${i}", data = embed "capture${i}.pyuw")`;
    });
    fs.writeFileSync(
      path.join(dir, 'config.capnp'),
      `using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [ (name = "main", worker = .worker) ],
  sockets = [ (name = "http", address = "127.0.0.1:0", http = (), service = "main") ],
);

const worker :Workerd.Worker = (
  modules = [
    (name = "worker.js", esModule = embed "worker.js"),
    (name = "kernel.wasm", wasm = embed "kernel.wasm"),
  ],
  bindings = [ ${bindings.join(', ')} ],
  compatibilityDate = "2024-09-23",
);
`,
    );
    const port = await freePort();
    const child = spawn(bin('workerd'), ['serve', 'config.capnp', '--socket-addr', `http=127.0.0.1:${port}`], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(child);
    let log = '';
    child.stdout.on('data', (d: Buffer) => (log += d.toString()));
    child.stderr.on('data', (d: Buffer) => (log += d.toString()));
    try {
      await untilListening(port, child, () => log);
      for (const [i, file] of CAPTURES.entries()) {
        const res = await fetch(`http://127.0.0.1:${port}/?capture=capture${i}`);
        const body = await res.text();
        expect(res.status, body).toBe(200);
        expect(body, file).toBe(canonical.get(file));
      }
    } finally {
      await stop(child);
    }
    recordCoverage('runtimes', 'workerd', true);
  });
});

/** A port nothing listens on now (the OS's pick). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** Resolves once something accepts connections on the port; rejects if the child exits first. */
async function untilListening(port: number, child: ChildProcess, log: () => string): Promise<void> {
  let up = false;
  let trying = false;
  const attempt = (): void => {
    if (trying) return;
    trying = true;
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => ((up = true), socket.destroy()));
    socket.once('error', () => socket.destroy());
    socket.once('close', () => (trying = false));
  };
  await waitUntil(
    () => {
      if (child.exitCode !== null || child.signalCode !== null) throw new Error(`workerd exited (${child.exitCode ?? child.signalCode}) before listening:\n${log()}`);
      if (!up) attempt();
      return up;
    },
    `workerd to listen on 127.0.0.1:${port}`,
    60_000,
  );
}

function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
  });
}
