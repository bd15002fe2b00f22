// A capture recorded with --native, reported in Node and in Chromium's viewer (offline: the page
// gets nothing but the capture from its server), after the C extension it ran was deleted: the
// capture alone unwinds and names the C frames. The viewer with its native box checked gives
// report --native's json byte for byte, and its flame graph names the extension's functions.
// Recorded on the newest native interpreter provisioned (Debian's 3.15 under CI).
import { execFile, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { browserMissing, launchOffline, testOutputDir } from '../harness/browser.js';
import { nativeInterpreters } from '../harness/interpreters.js';
import { startViewServer, type ViewServer } from '../src/cli/view.js';
import { recordCoverage, skipTest } from './helpers/coverage.js';

const run = promisify(execFile);
const BIN = path.resolve('bin/pyunwind.js');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pyunwind-native-viewer-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const py = nativeInterpreters().filter((p) => !p.missing).pop();

describe('native frames in the viewer', () => {
  it('report --native in Node and in Chromium, with no file of the machine at hand', async (ctx) => {
    if (!py) return skipTest(ctx, 'native-viewer', 'native', 'no native interpreter is provisioned');
    const missing = browserMissing();
    if (missing) return skipTest(ctx, 'native-viewer', py.label, missing);
    if (spawnSync('gcc', ['--version']).status !== 0) return skipTest(ctx, 'native-viewer', py.label, 'gcc is not installed (apt install gcc)');
    const build = path.join(dir, 'build');
    fs.mkdirSync(build);
    const where = spawnSync(py.command, ['-c', "import sysconfig; print(sysconfig.get_paths()['include']); print(sysconfig.get_config_var('EXT_SUFFIX'))"], { encoding: 'utf8' });
    const [include, suffix] = where.stdout.trim().split('\n') as [string, string];
    const cc = spawnSync('gcc', ['-shared', '-fPIC', '-O2', '-fomit-frame-pointer', `-I${include}`, `-I${path.dirname(include)}`, '-o', path.join(build, `cwork${suffix}`), path.resolve('workloads/cext/cwork.c')], { encoding: 'utf8' });
    expect(cc.status, cc.stderr).toBe(0);
    const file = path.join(dir, 'share.pyuw');
    await run(process.execPath, [BIN, 'record', '-q', '--native', '-r', '500', '-o', file, '--', py.command, path.resolve('workloads/cext/share.py'), '2'], { env: { ...process.env, PYTHONPATH: build }, maxBuffer: 64 << 20 });
    // the extension is gone: only the capture can name its functions now
    fs.rmSync(build, { recursive: true });
    const json = (await run(process.execPath, [BIN, 'report', '-q', file, '--native', '--format', 'json'], { encoding: 'buffer', maxBuffer: 256 << 20 })).stdout.toString();
    expect(json).toContain('mix_inner');

    const browser = await launchOffline();
    let server: ViewServer | null = null;
    const errors: string[] = [];
    try {
      server = await startViewServer({ file });
      const page = await browser.page([new URL(server.base).origin]);
      page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
      await page.goto(server.url);
      await page.waitForSelector('body[data-state="ready"]');
      await page.check('#view-native');
      await page.waitForSelector('body[data-state="ready"]');
      const names = await page.evaluate(() => (window as unknown as { __pyunwindViewer: { flame(): { frames: { name: string; file: string }[] } | null } }).__pyunwindViewer.flame()!.frames.map((f) => `${f.name} ${f.file}`));
      expect(names.some((n) => /^mix_inner\S* \S*cwork/.test(n)), names.slice(0, 40).join('\n')).toBe(true);
      expect(names.some((n) => /^mix_outer\S* \S*cwork/.test(n))).toBe(true);
      const [d] = await Promise.all([page.waitForEvent('download'), page.click('#downloads a[data-format="json"]')]);
      const got = fs.readFileSync((await d.path())!).toString();
      expect(got).toBe(json);
      await page.screenshot({ path: path.join(testOutputDir(), 'viewer-native.png'), fullPage: true });
      expect(browser.blocked).toEqual([]);
      expect(errors).toEqual([]);
      recordCoverage('native-viewer', py.label, true);
    } finally {
      await browser.close();
      await server?.close();
    }
  }, 300_000);
});
