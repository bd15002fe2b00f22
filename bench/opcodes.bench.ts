// What keeping the bytecode costs the recorder (docs/benchmarks.md, "Opcodes"): each code
// object copied with its bytecode, and that bytecode read again on the refresh schedule of
// src/record/copy/code-cache.ts (re-recorded when the interpreter re-specialized it) — against code
// objects copied without it (the recorder before opcodes: CopierOptions.bytecode false).
//
// 1. The copies: two copiers on one running program, one keeping bytecode and one not, copy
//    it in turns of SLICE_MS each, as fast as they can (no schedule, no sleeping), for ROUNDS
//    turns each; per copier, copies per second and µs per copy (a copy is a pass over every
//    thread), and the share of copies the general path made (the steady path gives a copy to
//    it when a refresh is due). A machine busy with other work slows both alike.
// 2. The capture: the program recorded at each rate for SECONDS with bytecode; the same
//    capture written again as a recorder without bytecode would have written it (code records
//    cut to the code object's fixed part, records that only refreshed bytecode dropped, with
//    the blocks they started), and as one that kept bytecode but never refreshed it; the bytes
//    per sample of the three, the refresh records and the blocks.
// 3. Beside Tachyon (CPython 3.15's profiler, `run --opcodes`, which reads the opcode at each
//    frame's instruction pointer with every sample): hot()'s instructions in workloads/hotloop.py,
//    the share of its samples each, by Tachyon and by pyunwind (TACHYON=0 leaves it out).
//
//   npm run bench:opcodes
//   (defaults: ROUNDS=20 SLICE_MS=100 SECONDS=5 RATES=1000,10000 WORKLOADS=hotloop,steady,astwalk
//    PYTHONS=pyenv-3.12.1,debian-3.15 TACHYON=1)
//
// Figures go to docs/benchmarks.md by hand, with the date and the machine.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CaptureWriter, memorySink, readCaptureBytes } from '../src/capture/index.js';
import type { CodeRecord } from '../src/capture/types.js';
import { layoutFromSource } from '../src/layout/index.js';
import { MemoryCopier } from '../src/record/copy/copier.js';
import { openLinuxProcess } from '../src/record/linux/process.js';
import { recordProcess } from '../src/record/linux/record-process.js';
import { reportCapture } from '../src/pipeline/report-file.js';
import { nativeInterpreters } from '../harness/interpreters.js';

const ROUNDS = Number(process.env.ROUNDS ?? 20);
const SLICE_MS = Number(process.env.SLICE_MS ?? 100);
const SECONDS = Number(process.env.SECONDS ?? 5);
const RATES = (process.env.RATES ?? '1000,10000').split(',').map(Number);
const WORKLOADS = (process.env.WORKLOADS ?? 'hotloop,steady,astwalk').split(',');
const PYTHONS = (process.env.PYTHONS ?? 'pyenv-3.12.1,debian-3.15').split(',');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pyunwind-opcodes-bench-'));
const f1 = (x: number): string => x.toFixed(1);

/** Part 1: copies per second with and without bytecode, in alternating turns. */
async function copies(python: string, workload: string): Promise<string> {
  const child = spawn(python, [path.resolve(`workloads/${workload}.py`), String(2 * ROUNDS * (SLICE_MS / 1000) + 30)], { stdio: 'ignore' });
  try {
    await new Promise((r) => setTimeout(r, 1500)); // started, imports done
    const source = openLinuxProcess(child.pid!);
    try {
      const copiers = { with: new MemoryCopier(source, { consistency: 'reread', collectUsed: false }), without: new MemoryCopier(source, { consistency: 'reread', collectUsed: false, bytecode: false }) };
      const done = { with: { n: 0, ms: 0 }, without: { n: 0, ms: 0 } };
      for (const c of Object.values(copiers)) for (let i = 0; i < 50; i++) c.copyAll(); // warm
      for (let k = 0; k < 2 * ROUNDS; k++) {
        const side = (k % 4 === 0 || k % 4 === 3 ? 'with' : 'without') as keyof typeof copiers;
        const start = performance.now();
        let n = 0;
        while (performance.now() - start < SLICE_MS) {
          copiers[side].copyAll();
          n++;
        }
        done[side].n += n;
        done[side].ms += performance.now() - start;
      }
      const rate = (s: keyof typeof done): number => (1000 * done[s].n) / done[s].ms;
      const us = (s: keyof typeof done): number => (1000 * done[s].ms) / done[s].n;
      // (copies the steady path could not make: the general path's, several times dearer; a
      // refresh due sends a thread's copy there)
      const general = (s: keyof typeof done): string => `${f1((100 * (done[s].n + 50 - copiers[s].steadyCopies)) / (done[s].n + 50))} %`;
      return `${Math.round(rate('without'))}/s (${f1(us('without'))} µs; general ${general('without')}) | ${Math.round(rate('with'))}/s (${f1(us('with'))} µs; general ${general('with')}) | ${f1((100 * (us('with') - us('without'))) / us('without'))} %`;
    } finally {
      source.close();
    }
  } finally {
    child.kill('SIGKILL');
  }
}

/**
 * The capture `reader` written again: code records cut to the code object's fixed part
 * (`strip`), or whole; records that only refreshed bytecode dropped, with the blocks they began.
 */
function rewrite(reader: ReturnType<typeof readCaptureBytes>, strip: boolean): { bytes: number; refreshes: number } {
  const L = layoutFromSource(reader.header.layoutSource);
  const cut = (c: CodeRecord): CodeRecord => ({ address: c.address, regions: c.regions.map((x, i) => (i === 0 ? { address: x.address, bytes: x.bytes.subarray(0, L.code.size) } : x)) });
  const keyOf = (c: CodeRecord): string => cut(c).regions.map((x) => `${x.address}:${Buffer.from(x.bytes).toString('base64')}`).join(',');
  const sink = memorySink();
  const w = new CaptureWriter(sink, { ...reader.header, bytecode: !strip });
  const last = new Map<bigint, string>();
  let refreshes = 0;
  for (const b of reader.blocks()) {
    const kept = b.codes.filter((c) => {
      const k = keyOf(c);
      const same = last.get(c.address) === k;
      last.set(c.address, k);
      if (same) refreshes++;
      return !same;
    });
    // (a block that began with records that only refreshed bytecode would not have begun)
    if (b.index > 0 && !(b.codes.length > 0 && kept.length < b.codes.length)) w.flush();
    for (const c of kept) w.addCode(strip ? cut(c) : c);
    for (const s of b.samples) w.addSample(s);
    if (b.missed) w.addMissed(b.missed);
  }
  w.close();
  return { bytes: sink.bytes().length, refreshes };
}

/** Part 2: a recording with bytecode, and the same written as without refreshes and without bytecode. */
async function capture(python: string, workload: string, rateHz: number): Promise<string> {
  const file = path.join(tmp, 'with.pyuw');
  const r = await recordProcess({ command: [python, path.resolve(`workloads/${workload}.py`), String(SECONDS + 2)], output: file, rateHz, durationMs: SECONDS * 1000, stdio: 'ignore' });
  const bytes = fs.readFileSync(file).length;
  const reader = readCaptureBytes(fs.readFileSync(file));
  let blocks = 0;
  let codes = 0;
  for (const b of reader.blocks()) {
    blocks++;
    codes += b.codes.length;
  }
  const without = rewrite(reader, true);
  const unrefreshed = rewrite(reader, false);
  const per = (n: number): string => f1(n / Math.max(1, r.stats.samples));
  const more = (n: number): string => `${f1((100 * (n - without.bytes)) / without.bytes)} %`;
  return `${rateHz} | ${r.stats.samples} | ${per(without.bytes)} | ${per(unrefreshed.bytes)} (${more(unrefreshed.bytes)}) | ${per(bytes)} (${more(bytes)}) | ${codes} (${without.refreshes} refreshes) | ${blocks}`;
}

/** Part 3: hot()'s instructions on native 3.15, by Tachyon (run --opcodes) and by pyunwind, one run each. */
async function besideTachyon(): Promise<string[]> {
  const pyp = path.resolve('.cache/cpython/bin/python3.15p');
  const py = path.resolve('.cache/cpython/bin/python3.15');
  if (!fs.existsSync(pyp)) return [`(Tachyon: ${pyp} is missing: npm run provision)`];
  const bin = path.join(tmp, 'tachyon.bin');
  const t = spawnSync(pyp, ['-m', 'profiling.sampling', 'run', '--opcodes', '--binary', '-o', bin, '-r', '1khz', path.resolve('workloads/hotloop.py'), String(SECONDS)], { encoding: 'utf8', timeout: 120_000 });
  if (t.status !== 0) return [`(Tachyon failed: ${t.stderr.trim().split('\n').pop()})`];
  // its replay API gives each sample's frames, the innermost first, with the opcode number
  const count = String.raw`
import collections, json, sys
from profiling.sampling.binary_reader import BinaryReader
from profiling.sampling.opcode_utils import get_opcode_info
counts = collections.Counter()
class C:
    def collect(self, stack_frames, timestamps_us=None, *a, **k):
        for interp in stack_frames:
            for thread in interp.threads:
                f = thread.frame_info[0] if thread.frame_info else None
                if f is not None and f.funcname == "hot":
                    op = get_opcode_info(f.opcode)["opname"] if f.opcode is not None else "?"
                    counts["%s %s" % (f.location[0], op)] += len(timestamps_us) if timestamps_us else 1
    def export(self, *a): pass
with BinaryReader(sys.argv[1]) as r:
    r.replay_samples(C())
print(json.dumps(counts))`;
  const tachyon = JSON.parse(spawnSync(pyp, ['-c', count, bin], { encoding: 'utf8' }).stdout) as Record<string, number>;
  const file = path.join(tmp, 'pyunwind.pyuw');
  await recordProcess({ command: [py, path.resolve('workloads/hotloop.py'), String(SECONDS)], output: file, rateHz: 1000, stdio: 'ignore' });
  const report = await reportCapture(file, { opcodes: true, workers: 0 });
  const ours: Record<string, number> = {};
  for (const th of report.profile.threads()) {
    th.stackWeight.forEach((w, s) => {
      const f = th.frames[th.stackFrame[s]!]!;
      if (f.qualname === 'hot' && w > 0) ours[`${f.line} ${f.opcode ?? '?'}`] = (ours[`${f.line} ${f.opcode ?? '?'}`] ?? 0) + w;
    });
  }
  const total = (c: Record<string, number>): number => Object.values(c).reduce((a, b) => a + b, 0);
  const [tt, ot] = [total(tachyon), total(ours)];
  const keys = [...new Set([...Object.keys(tachyon), ...Object.keys(ours)])].sort((a, b) => (tachyon[b] ?? 0) + (ours[b] ?? 0) - (tachyon[a] ?? 0) - (ours[a] ?? 0));
  return [
    `| line, instruction of hot() | Tachyon (${tt} samples) | pyunwind (${ot} samples) |`,
    '|---|---|---|',
    ...keys.map((k) => `| ${k} | ${f1((100 * (tachyon[k] ?? 0)) / Math.max(1, tt))} % | ${f1((100 * (ours[k] ?? 0)) / Math.max(1, ot))} % |`),
  ];
}

console.log(`opcodes bench, ${new Date().toISOString().slice(0, 10)}: ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'cpu'}, Node ${process.version}, load ${os.loadavg().map(f1).join(' ')}`);
const rows1: string[] = [];
const rows2: string[] = [];
for (const label of PYTHONS) {
  const py = nativeInterpreters().find((p) => p.label === label);
  if (!py || py.missing) {
    console.log(`${label}: skipped (${py?.missing ?? 'unknown interpreter'})`);
    continue;
  }
  for (const workload of WORKLOADS) {
    rows1.push(`| ${label} | ${workload} | ${await copies(py.command, workload)} |`);
    for (const rate of RATES) rows2.push(`| ${label} | ${workload} | ${await capture(py.command, workload, rate)} |`);
  }
}
console.log(`\nCopies as fast as they go, ${ROUNDS} turns of ${SLICE_MS} ms each:\n`);
console.log('| python | workload | without bytecode | with bytecode | µs per copy, more |');
console.log('|---|---|---|---|---|');
for (const r of rows1) console.log(r);
console.log(`\nCaptures of ${SECONDS} s, and the same written as without bytecode, and with it but without its refreshes:\n`);
console.log('| python | workload | rate | samples | B/sample without bytecode | with, not refreshed | with (as recorded) | code records | blocks |');
console.log('|---|---|---|---|---|---|---|---|---|');
for (const r of rows2) console.log(r);
if (process.env.TACHYON !== '0') {
  console.log(`\nhotloop.py on Debian 3.15 at 1 kHz, ${SECONDS} s: the share of hot()'s samples per instruction, Tachyon (run --opcodes) and pyunwind (report --opcodes), one run each:\n`);
  for (const r of await besideTachyon()) console.log(r);
}
fs.rmSync(tmp, { recursive: true, force: true });
