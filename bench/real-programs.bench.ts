// The real-program suite side by side: each program of workloads/ (see
// harness/real-programs.ts) recorded by pyunwind in its default mode, with --blocking and,
// where the recorder can load its BPF program (root, dist/bpf/copier.bpf.o), with --copy
// interrupt, and — on 3.15 — by CPython's own profiler with --blocking (exact), one after the other on one
// machine. Per program: samples, rejected %, copied stopped %, target slowdown against
// unprofiled runs, and the largest per-function gap of self share against pyunwind --blocking.
//
//   STDLIB=1 npm run provision        (Debian 3.13/3.14/3.15 with their standard library)
//   npm run bench:programs            (VERSIONS=3.15 SECONDS=6 RATE=1000 PROGRAMS=astwalk,ccalls)
//
// Figures go to docs/validation.md with the date and the machine.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  REAL_PROGRAMS,
  baseline,
  largestGap,
  recordWithPyunwind,
  recordWithTachyon,
  topShares,
  type Recording,
} from '../harness/real-programs.js';

const VERSIONS = (process.env.VERSIONS ?? '3.13,3.14,3.15').split(',');
const SECONDS = Number(process.env.SECONDS ?? 6);
const RATE = Number(process.env.RATE ?? 1000);
const ONLY = process.env.PROGRAMS?.split(',');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pyunwind-programs-'));

const pct = (n: number, d: number): string => (d ? `${((100 * n) / d).toFixed(1)} %` : '–');

/** copies at the interrupt can be recorded here */
const interrupt = process.getuid?.() === 0 && fs.existsSync('dist/bpf/copier.bpf.o');

async function main(): Promise<void> {
  console.log(`# ${new Date().toISOString().slice(0, 10)}, node ${process.version}, ${os.cpus()[0]?.model} × ${os.cpus().length}, ${SECONDS} s per run at ${RATE} Hz`);
  for (const v of VERSIONS) {
    const py = path.resolve(`.cache/cpython/bin/python${v}`);
    const pyp = path.resolve(`.cache/cpython/bin/python${v}p`);
    if (!fs.existsSync(py)) {
      console.log(`\n${v}: not provisioned (STDLIB=1 npm run provision)`);
      continue;
    }
    const tachyon = fs.existsSync(pyp) && v >= '3.15';
    console.log(`\n## CPython ${v}\n`);
    console.log('| program | tool, mode | samples | rejected | copied stopped | target stopped (of its time) | slowdown | largest gap vs pyunwind --blocking |');
    console.log('|---|---|---|---|---|---|---|---|');
    for (const program of REAL_PROGRAMS.filter((p) => !ONLY || ONLY.includes(p.name))) {
      const before = baseline(py, program, SECONDS);
      const rows: Recording[] = [];
      const blocking = await recordWithPyunwind(py, program, { mode: 'blocking', seconds: SECONDS, rateHz: RATE, dir });
      rows.push(await recordWithPyunwind(py, program, { mode: 'adaptive', seconds: SECONDS, rateHz: RATE, dir }));
      rows.push(blocking);
      if (interrupt) rows.push(await recordWithPyunwind(py, program, { mode: 'interrupt', seconds: SECONDS, rateHz: RATE, dir }));
      if (tachyon) rows.push(recordWithTachyon(pyp, program, { blocking: true, seconds: SECONDS, rateHz: RATE, dir }));
      const after = baseline(py, program, SECONDS);
      const base = (before.rounds + after.rounds) / 2;
      for (const r of rows) {
        const gap = r === blocking ? null : largestGap(r.shares, blocking.shares);
        console.log(
          `| ${program.name} | ${r.tool} ${r.mode} | ${r.attempted} | ${pct(r.rejected, r.attempted)} | ${pct(r.stopped, r.attempted)} | ${r.stoppedTime === null ? '–' : `${r.stoppedTime.toFixed(1)} %`} | ` +
            `${(100 * (1 - r.rounds / base)).toFixed(1)} % | ${gap ? `${gap.gap.toFixed(1)} (${gap.fn}: ${gap.a.toFixed(1)} vs ${gap.b.toFixed(1)})` : '—'} |`,
        );
      }
      if (process.env.VERBOSE) for (const r of rows) console.error(`  ${program.name} ${r.tool} ${r.mode}: ${topShares(r.shares, 8)}`);
    }
  }
  fs.rmSync(dir, { recursive: true, force: true });
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
