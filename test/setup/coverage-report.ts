// Global setup: at the end of the run, print which interpreters the live tests covered and
// which they skipped (with the reason), so a skip is never silent.
import fs from 'node:fs';
import path from 'node:path';

// One folder per run, so that runs side by side do not mix their lists; test workers inherit
// the variable.
const DIR = path.resolve('.cache/test-coverage', `run-${process.pid}-${Date.now()}`);

export function setup(): void {
  fs.mkdirSync(DIR, { recursive: true });
  process.env.PYUNWIND_COVERAGE_DIR = DIR;
}

export function teardown(): void {
  try {
    report();
  } finally {
    fs.rmSync(DIR, { recursive: true, force: true });
  }
}

function report(): void {
  if (!fs.existsSync(DIR)) return;
  const rows: { suite: string; target: string; ok: boolean; reason?: string }[] = [];
  for (const f of fs.readdirSync(DIR)) {
    for (const line of fs.readFileSync(path.join(DIR, f), 'utf8').split('\n')) {
      if (line.trim()) rows.push(JSON.parse(line));
    }
  }
  if (rows.length === 0) return;
  const bySuite = new Map<string, typeof rows>();
  for (const r of rows) (bySuite.get(r.suite) ?? bySuite.set(r.suite, []).get(r.suite)!).push(r);
  const out: string[] = ['', 'Interpreters covered by the live tests:'];
  for (const [suite, rs] of bySuite) {
    const seen = new Map<string, (typeof rows)[number]>();
    for (const r of rs) if (!seen.has(r.target) || !r.ok) seen.set(r.target, r);
    const covered = [...seen.values()].filter((r) => r.ok).map((r) => r.target);
    const skipped = [...seen.values()].filter((r) => !r.ok);
    out.push(`  ${suite}: covered ${covered.length ? covered.join(', ') : 'none'}`);
    for (const s of skipped) out.push(`  ${suite}: SKIPPED ${s.target}: ${s.reason}`);
  }
  process.stdout.write(out.join('\n') + '\n');
}
