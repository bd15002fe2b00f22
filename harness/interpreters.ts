// The native interpreters the live tests and benchmarks run on, found by version (pyenv via
// `pyenv root`, Debian's own python3.11, and the Debian 3.13/3.14/3.15 unpacked by
// scripts/provision-cpython.sh into .cache/cpython). A missing one is reported with why.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

export interface Interpreter {
  /** short label used in test names and the coverage report, e.g. "pyenv-3.12.1" */
  label: string;
  /** command to run: the interpreter or its launcher */
  command: string;
  /** null when available; otherwise why not */
  missing: string | null;
}

function pyenvRoot(): string | null {
  try {
    return execFileSync('pyenv', ['root'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim() || null;
  } catch {
    const home = process.env.PYENV_ROOT;
    return home && fs.existsSync(home) ? home : null;
  }
}

/**
 * An interpreter is missing only when it is not there. One that is there but does not run is
 * broken: it is not skipped, its tests fail saying why.
 */
function check(label: string, command: string | null, why: string): Interpreter {
  if (command === null) return { label, command: '', missing: why };
  if (!fs.existsSync(command)) return { label, command, missing: `${command} not found (${why})` };
  return { label, command, missing: null };
}

let cached: Interpreter[] | null = null;

/** The seven native interpreters of the core tests, in version order. */
export function nativeInterpreters(): Interpreter[] {
  if (cached) return cached;
  const root = pyenvRoot();
  const pyenv = (v: string): Interpreter =>
    check(
      `pyenv-${v}`,
      root ? path.join(root, 'versions', v, 'bin', `python${v.split('.').slice(0, 2).join('.')}`) : null,
      root ? `pyenv ${v} is not installed` : 'pyenv is not installed',
    );
  const cache = path.resolve('.cache/cpython/bin');
  const debian = (v: string): Interpreter =>
    check(`debian-${v}`, path.join(cache, `python${v}`), 'run scripts/provision-cpython.sh (npm run provision)');
  cached = [
    pyenv('3.11.7'),
    check('debian-3.11', '/usr/bin/python3.11', "Debian's python3.11 package is not installed"),
    pyenv('3.12.1'),
    pyenv('3.13.0'),
    debian('3.13'),
    debian('3.14'),
    debian('3.15'),
  ];
  return cached;
}

/**
 * The layout pyunwind builds for an interpreter, from a short-lived live process of it (debug
 * offsets on 3.13+, built-in tables before).
 */
export async function liveLayout(command: string): Promise<import('../src/layout/layout.js').Layout> {
  const { spawn } = await import('node:child_process');
  const { openLinuxProcess } = await import('../src/record/linux/process.js');
  const child = spawn(command, ['-c', 'import time; print("up", flush=True); time.sleep(60)'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  try {
    await new Promise<void>((resolve, reject) => {
      child.stdout!.once('data', () => resolve());
      child.once('exit', (c) => reject(new Error(`${command} exited ${c}`)));
    });
    const source = openLinuxProcess(child.pid!);
    source.close();
    return source.layout;
  } finally {
    child.kill('SIGKILL');
  }
}
