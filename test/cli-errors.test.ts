// Bad use of the command prints one clear error line and exits non-zero: a pid that is not
// Python, a pid that is gone, no permission, a missing or non-capture file, an unknown option.
// The real command is run (bin/pyunwind.js over the built dist/).
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { nobody, runAs } from './helpers/as-nobody.js';
import { recordCoverage, skipTest } from './helpers/coverage.js';
import { nativeInterpreters } from '../harness/interpreters.js';
import { untilReadable, untilRunning } from './helpers/wait.js';

const BIN = path.resolve('bin/pyunwind.js');
const children: import('node:child_process').ChildProcess[] = [];
afterAll(() => children.forEach((c) => c.kill('SIGKILL')));

function run(args: string[]): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', timeout: 60_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** exactly one line on stderr, non-zero exit */
function expectOneLineError(r: ReturnType<typeof run>, pattern: RegExp, code = 1): void {
  expect(r.code, r.stderr).toBe(code);
  const lines = r.stderr.split('\n').filter((l) => l.trim());
  expect(lines, r.stderr).toHaveLength(1);
  expect(lines[0]).toMatch(pattern);
}

describe('the pyunwind command on bad input', () => {
  it('has --help for the command and every verb', () => {
    const top = run(['--help']);
    expect(top.code).toBe(0);
    for (const verb of ['record', 'report', 'dump']) {
      expect(top.stdout).toContain(verb);
      const r = run([verb, '--help']);
      expect(r.code).toBe(0);
      expect(r.stdout).toMatch(new RegExp(`^Usage: pyunwind ${verb}`));
    }
  });

  it('an unknown option or command', () => {
    expectOneLineError(run(['report', '--bogus', 'x.pyuw']), /^pyunwind report: .*'--bogus'.*--help/, 2);
    expectOneLineError(run(['record', '-o', 'x.pyuw']), /^pyunwind record: record needs either --pid PID or -- COMMAND/, 2);
    expectOneLineError(run(['frobnicate']), /^pyunwind: unknown command "frobnicate"/, 2);
    expectOneLineError(run(['dump', '--pid', 'abc']), /^pyunwind dump: "abc" is not a process id/, 2);
    // options that do not go together, refused before anything runs
    expectOneLineError(run(['record', '-o', 'x.pyuw', '--subprocesses', '--live', '--', 'python3', '-c', 'pass']), /^pyunwind record: --live shows one process/, 2);
    expectOneLineError(run(['record', '-o', 'x.pyuw', '--native', '--copy', 'optimistic', '--', 'python3', '-c', 'pass']), /^pyunwind record: --native stops every thread at each sample: not with --copy optimistic/, 2);
    expectOneLineError(run(['record', '-o', 'x.pyuw', '--no-gc', '--', 'python3', '-c', 'pass']), /^pyunwind record: --no-gc is a view of the samples/, 2);
  });

  it('a pid that is gone', () => {
    const child = spawnSync('true');
    const gone = child.pid!;
    expectOneLineError(run(['dump', '--pid', String(gone)]), new RegExp(`no process with pid ${gone}`));
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pyunwind-cli-'));
    expectOneLineError(run(['record', '--pid', String(gone), '-o', path.join(dir, 'x.pyuw')]), new RegExp(`no process with pid ${gone}`));
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('a pid that is not Python', async () => {
    const sleeper = spawn('sleep', ['60']);
    children.push(sleeper);
    await untilRunning(sleeper.pid!, 'sleep');
    expectOneLineError(run(['dump', '--pid', String(sleeper.pid)]), /does not look like CPython/);
  });

  it('no permission to read the target', async (ctx) => {
    const py = nativeInterpreters().find((p) => !p.missing);
    const user = nobody();
    if (!py || typeof user === 'string') {
      return skipTest(ctx, 'cli-errors', 'permission denied', !py ? 'no native interpreter' : String(user));
    }
    // a Python owned by root, read by the command running as nobody (its modules loaded
    // first: nobody may not be able to enter the checkout)
    const target = spawn(py.command, ['-c', 'import time; time.sleep(60)']);
    children.push(target);
    await untilReadable(target.pid!); // by this test's user: the one below may not

    const dist = (f: string): string => JSON.stringify(pathToFileURL(path.resolve('dist/cli', f)).href);
    // (`dump --help` loads the command's module: an import after the switch could not be resolved)
    const r = runAs(user, `const { main } = await import(${dist('main.js')});\nawait main(['dump', '--help'], () => {});`, `process.exitCode = await main(${JSON.stringify(['dump', '--pid', String(target.pid)])});`);
    expectOneLineError(r, /permission denied/);
    recordCoverage('cli-errors', 'permission denied', true);
  });

  it('a missing file, and a file that is not a capture', () => {
    expectOneLineError(run(['report', '/nonexistent/x.pyuw']), /^pyunwind report: .*\/nonexistent\/x\.pyuw/);
    expectOneLineError(run(['report', path.resolve('package.json')]), /not a pyunwind capture/);
    const empty = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'pyunwind-cli-')), 'empty.pyuw');
    fs.writeFileSync(empty, '');
    expectOneLineError(run(['report', empty]), /not a pyunwind capture|empty/);
  });

  it('the version', () => {
    const pkg = JSON.parse(fs.readFileSync('package.json', 'utf8')) as { version: string };
    expect(execFileSync(process.execPath, [BIN, '--version'], { encoding: 'utf8' }).trim()).toBe(`pyunwind ${pkg.version}`);
  });
});
