// CPython compiled to WebAssembly (Pyodide 3.14 and 3.15 from npm): the program with a known
// stack (test/fixtures/known_stack.py) calls a JS function at its checkpoint; while Python is
// stopped inside that call pyunwind copies the interpreter's linear memory, and the stack
// walked from the copy (by both walkers) must equal, frame by frame, what the program reported
// about itself with traceback.extract_stack().
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { pyodideSource } from '../src/record/pyodide/source.js';
import { takeSnapshot, type Snapshot, snapshotSamples } from '../src/record/copy/snapshot.js';
import { unwindSnapshot } from '../src/pipeline/snapshot-stacks.js';
import { recordCoverage, skipTest } from './helpers/coverage.js';
import { loadPyodideVersion, runWithCapture, type PyodideVersion } from './helpers/pyodide.js';
import type { ReportedStack } from '../harness/spawn.js';
import { checkedWalker } from './helpers/walkers.js';

const SOURCE = fs.readFileSync(path.resolve('test/fixtures/known_stack.py'), 'utf8');

describe.each(['3.14', '3.15'] as PyodideVersion[])('Pyodide %s', (version) => {
  it('unwinds the stack exactly as the program reports it', async (ctx) => {
    const loaded = await loadPyodideVersion(version);
    if ('missing' in loaded) {
      return skipTest(ctx, 'pyodide-live', `pyodide ${version}`, loaded.missing);
    }
    const { py } = loaded;
    const run = runWithCapture(
      py,
      SOURCE,
      (line: unknown): { report: ReportedStack; snapshot: Snapshot } => ({
        report: JSON.parse(String(line)) as ReportedStack,
        snapshot: takeSnapshot(pyodideSource(py)),
      }),
      { filename: 'known_stack.py' },
    );
    expect(run.captures).toHaveLength(1);
    const { report, snapshot } = run.captures[0]!.value;
    expect(snapshot.layout.pointerSize).toBe(4);

    const stacks = unwindSnapshot(snapshotSamples(snapshot), await checkedWalker());
    const withFrames = stacks.filter((s) => s.frames.length > 0);
    expect(withFrames).toHaveLength(1);
    const t = withFrames[0]!;
    expect(t.copyErrors).toEqual([]);
    expect(t.status).toBe(snapshot.layout.bottom === 'base-frame' ? 'complete' : 'complete-unverifiable');
    expect(t.threadId).toBe(BigInt(report.ident));

    const ours = t.frames.map((f) => ({ qualname: f.qualname, filename: f.filename, line: f.line })).reverse();
    const theirs = report.stack.map((f) => ({ qualname: f.qualname, filename: f.filename, line: f.line }));
    expect(ours).toEqual(theirs);
    const names = theirs.map((f) => f.qualname);
    expect(names.filter((n) => n === 'recurse').length).toBeGreaterThanOrEqual(30);
    for (const n of ['gen_for', 'gen_next', 'coro_outer', 'coro_inner', 'Climber.method', 'outer.<locals>.inner', 'größe_函数', '<lambda>']) {
      expect(names).toContain(n);
    }
    recordCoverage('pyodide-live', `${loaded.label} (${snapshot.description})`, true);
  });
});
