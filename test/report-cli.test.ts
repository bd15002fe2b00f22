// `pyunwind report` as a user meets it: every format listed in --help and written by -f, the
// mistakes it refuses with one line, and --open, which shows an HTML report in the browser when
// there is one and says why not when there is none. The real command over a real capture
// (test/fixtures/captures/hotcold-3.15.pyuw: native CPython 3.15.2).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { FORMAT_NAMES } from '../src/export/formats.js';

const BIN = path.resolve('bin/pyunwind.js');
const CAPTURE = path.resolve('test/fixtures/captures/hotcold-3.15.pyuw');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pyunwind-report-cli-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

function run(args: string[], env: NodeJS.ProcessEnv = process.env): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', timeout: 120_000, env });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('pyunwind report', () => {
  it('lists every format in --help, and writes each one', () => {
    const help = run(['report', '--help']);
    expect(help.code).toBe(0);
    for (const f of FORMAT_NAMES) {
      expect(help.stdout).toMatch(new RegExp(`^\\s+${f}\\b`, 'm'));
      const out = path.join(dir, `out.${f}`);
      const r = run(['report', CAPTURE, '-f', f, '-o', out, '-q']);
      expect(r.code, `${f}: ${r.stderr}`).toBe(0);
      expect(r.stderr).toBe('');
      expect(fs.statSync(out).size, f).toBeGreaterThan(100);
    }
  });

  it('refuses with one line: an unknown format, --diff or --open with a format that cannot', () => {
    for (const [args, pattern] of [
      [['-f', 'svg'], /unknown format "svg" \(text, json, /],
      [['-f', 'json', '--diff', CAPTURE], /--diff works with --format flamegraph or collapsed, not json/],
      [['-f', 'pprof', '--open'], /--open shows HTML formats/],
    ] as const) {
      const r = run(['report', CAPTURE, ...args]);
      expect(r.code).toBe(2);
      expect(r.stderr.trim().split('\n'), r.stderr).toHaveLength(1);
      expect(r.stderr).toMatch(pattern);
    }
  });

  it('--open starts $BROWSER with the HTML file, written to a temporary file without -o', () => {
    // a "browser" that notes what it was asked to open
    const opened = path.join(dir, 'opened.txt');
    const browser = path.join(dir, 'browser.sh');
    fs.writeFileSync(browser, `#!/bin/sh\nprintf '%s' "$1" > ${JSON.stringify(opened)}\n`, { mode: 0o755 });
    const r = run(['report', CAPTURE, '-f', 'flamegraph', '--open'], { ...process.env, BROWSER: browser });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe('');
    const file = r.stderr.match(/opened (\S+\.html) in the browser/)?.[1];
    expect(file, r.stderr).toBeDefined();
    expect(fs.readFileSync(file!, 'utf8')).toMatch(/^<!doctype html>/i);
    // the browser runs detached: wait for its note (it writes at once)
    const until = Date.now() + 30_000;
    while (!fs.existsSync(opened) && Date.now() < until) spawnSync('sleep', ['0.05']);
    expect(fs.readFileSync(opened, 'utf8')).toBe(file);
    fs.rmSync(path.dirname(file!), { recursive: true, force: true });
  });

  it('--open without a desktop or $BROWSER writes the file and says why it cannot open it', () => {
    const out = path.join(dir, 'heat.html');
    const env = { ...process.env };
    delete env.BROWSER;
    delete env.DISPLAY;
    delete env.WAYLAND_DISPLAY;
    const r = run(['report', CAPTURE, '-f', 'heatmap', '-o', out, '--open'], env);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(new RegExp(`wrote ${out.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}; cannot open a browser here: no desktop`));
    expect(fs.statSync(out).size).toBeGreaterThan(100);
  });
});
