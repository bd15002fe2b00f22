// The GIL holder on every native interpreter (3.11/3.12 from the built-in GIL layouts, 3.13/3.14
// from the debug offsets, 3.15 from the thread state's holds_gil), as py-spy's own GIL tests
// check it (busyloop.py and longsleep.py, ported: test/fixtures/gil_alone.py). A lone thread
// spinning in Python holds the GIL at every moment but the first instants of start-up: at least
// 95 % of its samples must be kept by `report --mode gil`; a lone sleeping thread holds it only
// while starting: at most 5 %. `record --mode gil` writes only the samples holding it: at least
// 95 % of the spinner's ticks. (A thread whose C call releases the GIL while another spins:
// test/modes.test.ts, the hasher.)
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { nativeInterpreters } from '../harness/interpreters.js';
import { recordCoverage, cannotRun } from './helpers/coverage.js';

const BIN = path.resolve('bin/pyunwind.js');
const PROGRAM = path.resolve('test/fixtures/gil_alone.py');
/** py-spy's rate and length */
const RATE = 100;
const SECONDS = 2;
/** a recorder held off the CPU gets fewer ticks; the shares need some */
const MIN_SAMPLES = 50;

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pyunwind-gil-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

interface Summary {
  summary: { attempted: number; statuses: Record<string, number> };
}

function pyunwind(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', timeout: 120_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** Samples of the capture (all, or those `--mode` keeps). */
function samples(file: string, mode?: string): number {
  const r = pyunwind(['report', '-q', file, '-f', 'json', ...(mode ? ['--mode', mode] : [])]);
  if (r.status !== 0) throw new Error(`report ${mode ?? ''}: exit ${r.status}: ${r.stderr}`);
  return (JSON.parse(r.stdout) as Summary).summary.attempted;
}

/** Record the program doing `what` at py-spy's rate; the program runs a second longer than the recording. */
function record(python: string, what: string, extra: string[] = []): string {
  const file = path.join(dir, `${path.basename(python)}-${what}-${extra.join('')}.pyuw`);
  const r = pyunwind(['record', '-q', '-r', String(RATE), '-d', String(SECONDS), ...extra, '-o', file, '--', python, PROGRAM, what, String(SECONDS + 1)]);
  expect(r.status, r.stderr).toBe(0);
  return file;
}

describe.each(nativeInterpreters())('the GIL, as py-spy tests it, $label', (py) => {
  if (py.missing) {
    cannotRun('gil', py.label, py.missing!);
    return;
  }
  it('a lone spinning thread holds it in ≥ 95 % of its samples, a sleeping one in ≤ 5 %', () => {
    const spin = record(py.command, 'spin');
    const sleep = record(py.command, 'sleep');
    const [spinWall, spinGil, sleepWall, sleepGil] = [samples(spin), samples(spin, 'gil'), samples(sleep), samples(sleep, 'gil')];
    const gilOnly = record(py.command, 'spin', ['--mode', 'gil']);
    const written = samples(gilOnly);
    console.log(`[gil] ${py.label}: spin ${spinGil} of ${spinWall} holding it; sleep ${sleepGil} of ${sleepWall}; record --mode gil: ${written} samples of a spinner in ${SECONDS} s at ${RATE} Hz`);
    expect(spinWall).toBeGreaterThanOrEqual(MIN_SAMPLES);
    expect(sleepWall).toBeGreaterThanOrEqual(MIN_SAMPLES);
    expect(spinGil / spinWall).toBeGreaterThanOrEqual(0.95);
    expect(sleepGil / sleepWall).toBeLessThanOrEqual(0.05);
    // (its ticks are not known from the file alone: what the wall recording of the same program got bounds them)
    expect(written).toBeGreaterThanOrEqual(Math.min(MIN_SAMPLES, 0.95 * spinWall));
    recordCoverage('gil', py.label, true);
  });
});
