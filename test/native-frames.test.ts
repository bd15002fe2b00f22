// <native> frames on every native interpreter: workloads/nativecalls.py has Python called back
// from C (sorted's key, map's function, re.sub's replacement through the _sre module) beside
// plain Python calls, and prints each callback's stack as traceback.extract_stack() gives it.
// With --native, every trusted stack of a callback has <native> right under it, on the frame
// that called into C (sorter, mapper, sub), and nowhere else between frames the program calls
// directly; the stacks with <native> taken out are the program's own, and the same samples
// as without --native, which has no <native> at all. The block engine counts what the reference
// path adds. Every version can tell it: entry frames owned by the C stack (3.12+) or the
// callee's is_entry (3.11).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { reportCapture } from '../src/pipeline/report-file.js';
import { nativeInterpreters } from '../harness/interpreters.js';
import { recordCoverage, cannotRun } from './helpers/coverage.js';

const BIN = path.resolve('bin/pyunwind.js');
const WORKLOAD = path.resolve('workloads/nativecalls.py');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pyunwind-native-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

function pyunwind(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', timeout: 120_000, maxBuffer: 64 << 20, env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' } });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** collapsed lines without line numbers (`--format collapsed` with lines): thread;frame;…;leaf → count, frames as qualnames */
function stacks(collapsed: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of collapsed.trim().split('\n')) {
    const at = line.lastIndexOf(' ');
    const names = line
      .slice(0, at)
      .split(';')
      .slice(1)
      .map((f) => f.replace(/ \(.*\)$/, ''));
    const key = names.join(';');
    out.set(key, (out.get(key) ?? 0) + Number(line.slice(at + 1)));
  }
  return out;
}

const profileJson = (r: Awaited<ReturnType<typeof reportCapture>>): string => JSON.stringify(r.profile.toJSON(), (_, v) => (typeof v === 'bigint' ? v.toString() : v));

describe.each(nativeInterpreters())('<native> frames, $label', (py) => {
  if (py.missing) {
    cannotRun('native-frames', py.label, py.missing!);
    return;
  }
  it('between a function and the callback C called; nowhere else; the program’s own stacks', async () => {
    const file = path.join(dir, `${py.label}.pyuw`);
    // 2.5 s of the program; longer when a busy machine let the recorder take too few samples of each callback
    let rec = pyunwind(['record', '-q', '-r', '1000', '-o', file, '--', py.command, WORKLOAD, '2.5']);
    for (const seconds of ['10', '30']) {
      expect(rec.status, rec.stderr).toBe(0);
      const got = pyunwind(['report', '-q', file, '--format', 'collapsed']).stdout;
      if (['key', 'double', 'repl', 'plain'].every((f) => got.split('\n').filter((l) => l.includes(`;${f} (`)).length >= 3)) break;
      console.log(`[native-frames] ${py.label}: few samples of the callbacks in 2.5 s (a busy machine): recording ${seconds} s`);
      rec = pyunwind(['record', '-q', '-r', '1000', '-o', file, '--', py.command, WORKLOAD, seconds]);
    }
    expect(rec.status, rec.stderr).toBe(0);
    // the program's own view of each callback's stack, outermost first
    const own = JSON.parse(rec.stdout.trim().split('\n').pop()!) as Record<'key' | 'double' | 'repl', string[]>;
    const callers = { key: 'sorter', double: 'mapper', repl: 'sub' } as const;
    for (const [cb, caller] of Object.entries(callers)) expect(own[cb as keyof typeof callers].slice(-2)).toEqual([caller, cb]);

    const withNative = pyunwind(['report', '-q', file, '--format', 'collapsed', '--native']);
    expect(withNative.status, withNative.stderr).toBe(0);
    const plain = pyunwind(['report', '-q', file, '--format', 'collapsed']);
    expect(plain.status, plain.stderr).toBe(0);
    expect(plain.stdout).not.toContain('<native>');
    const nat = stacks(withNative.stdout);
    const base = stacks(plain.stdout);

    // taken out, <native> leaves the very stacks (and counts) of the report without it
    const stripped = new Map<string, number>();
    for (const [k, n] of nat) {
      const s = k
        .split(';')
        .filter((f) => f !== '<native>')
        .join(';');
      stripped.set(s, (stripped.get(s) ?? 0) + n);
    }
    expect(stripped).toEqual(base);

    const seen = { key: 0, double: 0, repl: 0 };
    let plainCalls = 0;
    for (const [k, n] of nat) {
      const f = k.split(';');
      for (const [cb, caller] of Object.entries(callers) as [keyof typeof callers, string][]) {
        const at = f.indexOf(cb);
        if (at < 0) continue;
        seen[cb] += n;
        // the callback's stack is the program's, with <native> where C called it
        expect(f.slice(0, at + 1), k).toEqual([...own[cb].slice(0, -1), '<native>', cb]);
        expect(f[at - 2], k).toBe(caller);
      }
      // Python calling Python: no <native> between the program's own frames (its outer part,
      // <module> → main → work, and plain → burn)
      const work = f.indexOf('work');
      if (work >= 0) expect(f.slice(0, work + 1), k).not.toContain('<native>');
      const p = f.indexOf('plain');
      if (p >= 0) {
        plainCalls += n;
        expect(f.slice(p), k).not.toContain('<native>');
      }
    }
    const total = [...nat.values()].reduce((a, b) => a + b, 0);
    console.log(
      `[native-frames] ${py.label}: ${total} samples; under <native>: key ${seen.key}, double ${seen.double}, repl ${seen.repl}; plain Python calls ${plainCalls}`,
    );
    for (const cb of Object.keys(seen) as (keyof typeof seen)[]) expect(seen[cb], cb).toBeGreaterThan(0);
    expect(plainCalls).toBeGreaterThan(0);

    // the block engine counts <native> as the reference path adds it
    expect(profileJson(await reportCapture(file, { workers: 0, native: true }))).toBe(profileJson(await reportCapture(file, { reference: true, native: true })));
    recordCoverage('native-frames', py.label, true);
  }, 120_000);
});
