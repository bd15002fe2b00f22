// The real capture the format tests export: a program of the standard library (threadpool.py:
// a main thread and four workers) recorded by `pyunwind record` from native CPython 3.15 — made
// once per test file, in a temporary folder. Null with the reason when 3.15 is not provisioned.

import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { nativeInterpreters } from '../../harness/interpreters.js';

const BIN = path.resolve('bin/pyunwind.js');

export interface FormatCapture {
  file: string;
  /** the interpreter's label, e.g. "debian-3.15" */
  label: string;
}

let made: Promise<FormatCapture | string> | null = null;

/** Record (once) `workload` for `seconds` at 1 kHz; a string: why it cannot be. */
export function formatCapture(workload = 'threadpool.py', seconds = 1.5): Promise<FormatCapture | string> {
  made ??= (async () => {
    const py = nativeInterpreters().find((p) => p.label === 'debian-3.15');
    if (!py || py.missing) return `native CPython 3.15: ${py?.missing ?? 'not known'}`;
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pyunwind-formats-'));
    process.once('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
    const file = path.join(dir, `${path.basename(workload, '.py')}-3.15.pyuw`);
    await promisify(execFile)(process.execPath, [BIN, 'record', '-q', '-r', '1000', '-o', file, '--', py.command, path.resolve('workloads', workload), String(seconds)], {
      env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' },
    });
    return { file, label: py.label };
  })();
  return made;
}
