// The package as its users get it: packed (`npm pack`), installed into an empty project, and
// imported by name from its three entries — `pyunwind`, `pyunwind/record`, `pyunwind/pyodide`.
// The project records a real Python with recordProcess, processes the capture with
// reportCapture, and its TypeScript is checked against the package's own types. Internal
// files stay out of reach (the `exports` map).
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { recordCoverage, skipTest } from './helpers/coverage.js';
import { nativeInterpreters } from '../harness/interpreters.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pyunwind-package-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const USE = `import { exportCollapsed, reportCapture, VERSION } from 'pyunwind';
import { recordProcess } from 'pyunwind/record';
import { recordPyodide } from 'pyunwind/pyodide';

const [python, program, out] = process.argv.slice(2);
const { stats, target } = await recordProcess({ command: [python, program, '3'], output: out, rateHz: 1000, durationMs: 1000, stdio: 'ignore' });
const { profile } = await reportCapture(out);
const s = profile.stats();
console.log(JSON.stringify({ version: VERSION, target, recorded: stats.samples, attempted: s.attempted, trusted: s.trusted, pyodide: typeof recordPyodide, collapsed: exportCollapsed(profile) }));
`;

const TYPED = `import { Profile, reportCapture, type CaptureReport, type Status } from 'pyunwind';
import { recordProcess, type RecordProcessOptions, type CopyMode, type SamplingMode } from 'pyunwind/record';
import { recordPyodide, type PyodideRecordOptions } from 'pyunwind/pyodide';

const copy: CopyMode = 'adaptive';
const sampling: SamplingMode = 'cpu';
const options: RecordProcessOptions = { pid: 1, output: 'out.pyuw', copy, sampling };
const status: Status = 'complete';
export async function use(): Promise<[CaptureReport, unknown, Profile, Status, PyodideRecordOptions | null]> {
  return [await reportCapture('out.pyuw'), await recordProcess(options), new Profile(), status, typeof recordPyodide === 'function' ? null : null];
}
`;

describe('the packed package, installed by name into an empty project', () => {
  it('records a real Python and processes the capture through its entries, with types', (ctx) => {
    const py = nativeInterpreters().find((p) => !p.missing && /3\.1[3-9]/.test(p.label));
    if (!py) {
      return skipTest(ctx, 'package', 'installed', 'no native CPython 3.13+ to record');
    }
    // dist/ was built by the test command (pretest): pack what is there
    const tarball = execFileSync('npm', ['pack', '--ignore-scripts', '--silent', '--pack-destination', dir], { encoding: 'utf8' }).trim().split('\n').pop()!;
    const project = path.join(dir, 'project');
    fs.mkdirSync(project);
    fs.writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
    const install = spawnSync('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', path.join(dir, tarball)], { cwd: project, encoding: 'utf8', timeout: 300_000 });
    expect(install.status, install.stderr).toBe(0);

    fs.writeFileSync(path.join(project, 'use.mjs'), USE);
    const out = path.join(project, 'out.pyuw');
    const run = spawnSync(process.execPath, ['use.mjs', py.command, path.resolve('workloads/hotcold.py'), out], { cwd: project, encoding: 'utf8', timeout: 120_000 });
    expect(run.status, run.stderr).toBe(0);
    const got = JSON.parse(run.stdout.trim().split('\n').pop()!) as { version: string; target: string; recorded: number; attempted: number; trusted: number; pyodide: string; collapsed: string };
    expect(got.version).toBe((JSON.parse(fs.readFileSync('package.json', 'utf8')) as { version: string }).version);
    expect(got.pyodide).toBe('function');
    expect(got.recorded).toBeGreaterThan(0);
    expect(got.attempted).toBe(got.recorded);
    expect(got.trusted).toBeGreaterThan(0);
    // every stack is one hot/cold can have (workloads/hotcold.py lists them)
    const allowed = new Set(['<module>', '<module>;main', '<module>;main;hot', '<module>;main;cold']);
    const lines = got.collapsed.split('\n').filter(Boolean);
    expect(lines.length).toBeGreaterThan(0);
    for (const line of lines) {
      const stack = line.replace(/ \d+$/, '').split(';').slice(1).map((f) => f.replace(/ \(.*\)$/, '')).join(';');
      expect(allowed.has(stack), line).toBe(true);
    }

    // the entries' types, as a TypeScript user compiles against them
    fs.writeFileSync(path.join(project, 'typed.ts'), TYPED);
    fs.writeFileSync(
      path.join(project, 'tsconfig.json'),
      JSON.stringify({ compilerOptions: { module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', strict: true, noEmit: true, skipLibCheck: true, types: [] }, files: ['typed.ts'] }),
    );
    const tsc = spawnSync(process.execPath, [path.resolve('node_modules/typescript/bin/tsc'), '-p', project], { encoding: 'utf8', timeout: 120_000 });
    expect(tsc.status, tsc.stdout + tsc.stderr).toBe(0);

    // internal files are not part of the API
    const deep = spawnSync(process.execPath, ['--input-type=module', '-e', "await import('pyunwind/dist/pipeline/report-file.js')"], { cwd: project, encoding: 'utf8' });
    expect(deep.status).not.toBe(0);
    expect(deep.stderr).toMatch(/ERR_PACKAGE_PATH_NOT_EXPORTED/);
    recordCoverage('package', 'installed', true);
  }, 600_000);
});
