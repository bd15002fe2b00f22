// What native stacks cost, measured on real programs (docs/benchmarks.md, "Native frames"):
//
// 1. Recording: each program recorded by `pyunwind record` with and without --native, rounds
//    alternating which goes first; per case the medians of ticks per second, the target's time
//    stopped, capture bytes per sample (the samples' own, and the object records once), and —
//    for workloads/cext/share.py, which counts its own rounds — the target's speed against a run
//    with no recorder.
// 2. Unwinding: every native sample of the --native captures unwound by the kernel's unwinder and
//    by the reference (src/native/unwind.ts), side by side in one tinybench run: native frames
//    per second.
//
//   node --import tsx bench/native.bench.ts [--rounds N] [--seconds S] [--rate HZ] [--version 3.15]
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Bench } from 'tinybench';
import { nativeInterpreters } from '../harness/interpreters.js';
import { openCapture } from '../src/capture/file.js';
import { memorySink, CaptureWriter } from '../src/capture/index.js';
import { ObjectSet } from '../src/native/object-set.js';
import { unwindNative, type NativeRegisters, type StackCopy } from '../src/native/unwind.js';
import { stackCopyOf } from '../src/native/mixed-stack.js';
import { KernelNativeUnwinder } from '../src/kernel/native-unwinder.js';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    seconds: { type: 'string', default: '4' },
    rate: { type: 'string', default: '1000' },
    version: { type: 'string', default: '3.15' },
  },
});
const rounds = Number(values.rounds);
const seconds = Number(values.seconds);
const rate = Number(values.rate);
const py = nativeInterpreters().find((p) => !p.missing && p.label.endsWith(values.version!));
if (!py) {
  console.error(`no native interpreter ${values.version} provisioned`);
  process.exit(2);
}
const BIN = path.resolve('bin/pyunwind.js');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pyunwind-native-bench-'));

// the C extension, built as the tests build it
const where = spawnSync(py.command, ['-c', "import sysconfig; print(sysconfig.get_paths()['include']); print(sysconfig.get_config_var('EXT_SUFFIX'))"], { encoding: 'utf8' });
const [include, suffix] = where.stdout.trim().split('\n') as [string, string];
const cc = spawnSync('gcc', ['-shared', '-fPIC', '-O2', '-fomit-frame-pointer', `-I${include}`, `-I${path.dirname(include)}`, '-o', path.join(tmp, `cwork${suffix}`), path.resolve('workloads/cext/cwork.c')], { encoding: 'utf8' });
if (cc.status !== 0) throw new Error(cc.stderr);
const env = { ...process.env, PYTHONPATH: tmp, PYTHONDONTWRITEBYTECODE: '1' };

const PROGRAMS: Record<string, string[]> = {
  share: [path.resolve('workloads/cext/share.py'), String(seconds)],
  threadpool: [path.resolve('workloads/threadpool.py'), String(seconds + 1)],
};

interface Run {
  ticksPerSecond: number;
  stoppedShare: number;
  samples: number;
  bytes: number;
  objectBytes: number;
  roundsPerSecond: number | null;
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[s.length >> 1]! : NaN;
};

/** Bytes the object records of a capture take, written alone as the writer writes them. */
async function objectBytes(file: string): Promise<number> {
  const reader = await openCapture(file);
  try {
    const sink = memorySink();
    const w = new CaptureWriter(sink, reader.header);
    const start = sink.bytes().length;
    for (const b of reader.blocks()) for (const o of b.objects) w.addObject(o);
    w.close();
    return sink.bytes().length - start;
  } finally {
    reader.close();
  }
}

async function recordOnce(program: string, native: boolean, file: string): Promise<Run> {
  const r = spawnSync(process.execPath, [BIN, 'record', '-o', file, '-r', String(rate), '-d', String(seconds), ...(native ? ['--native'] : []), '--', py!.command, ...PROGRAMS[program]!], {
    encoding: 'utf8',
    env,
    timeout: (seconds + 120) * 1000,
  });
  if (r.status !== 0) throw new Error(r.stderr);
  const line = r.stderr.split('\n').find((l) => l.startsWith('pyunwind: recorded'))!;
  const samples = Number(/recorded (\d+) samples/.exec(line)![1]);
  const ticks = Number(/\(([\d.]+) ticks\/s/.exec(line)![1]);
  const stopped = Number(/stopped ([\d.]+)% of the time/.exec(line)?.[1] ?? 0);
  const own = r.stdout.trim().split('\n').pop() ?? '';
  const roundsPerSecond = own.startsWith('{') ? ((JSON.parse(own) as { rounds_per_second?: number }).rounds_per_second ?? null) : null;
  const ob = native ? await objectBytes(file) : 0;
  return { ticksPerSecond: ticks, stoppedShare: stopped, samples, bytes: fs.statSync(file).size, objectBytes: ob, roundsPerSecond };
}

function alone(program: string): number | null {
  const r = spawnSync(py!.command, PROGRAMS[program]!, { encoding: 'utf8', env });
  const own = r.stdout.trim().split('\n').pop() ?? '';
  return own.startsWith('{') ? ((JSON.parse(own) as { rounds_per_second?: number }).rounds_per_second ?? null) : null;
}

console.log(`# native frames: ${py.label}, ${rate} Hz, ${seconds} s, ${rounds} rounds; node ${process.version}, ${os.cpus().length} cores, ${new Date().toISOString().slice(0, 10)}`);
const captures: string[] = [];
for (const program of Object.keys(PROGRAMS)) {
  const runs: Record<string, Run[]> = { plain: [], native: [] };
  const bare: number[] = [];
  for (let k = 0; k < rounds; k++) {
    const order = k % 2 === 0 ? ['plain', 'native'] : ['native', 'plain'];
    for (const mode of order) {
      const file = path.join(tmp, `${program}-${mode}-${k}.pyuw`);
      runs[mode]!.push(await recordOnce(program, mode === 'native', file));
      if (mode === 'native' && k === 0) captures.push(file);
    }
    const a = alone(program);
    if (a !== null) bare.push(a);
  }
  for (const mode of ['plain', 'native']) {
    const rs = runs[mode]!;
    const perSample = median(rs.map((r) => (r.bytes - r.objectBytes) / r.samples));
    const speed = bare.length ? median(rs.map((r) => r.roundsPerSecond ?? NaN)) / median(bare) : null;
    console.log(
      `${program.padEnd(11)} ${mode.padEnd(7)} ticks/s ${median(rs.map((r) => r.ticksPerSecond)).toFixed(0).padStart(5)}  stopped ${median(rs.map((r) => r.stoppedShare)).toFixed(1).padStart(5)} %  ` +
        `B/sample ${perSample.toFixed(1).padStart(7)}  objects ${(median(rs.map((r) => r.objectBytes)) / 1024).toFixed(0).padStart(5)} KiB` +
        (speed !== null ? `  target speed ${(100 * speed).toFixed(0)} % of alone` : ''),
    );
  }
}

// unwinding: every native sample of the --native captures
const cases: { regs: NativeRegisters; stack: StackCopy; set: ObjectSet }[] = [];
for (const file of captures) {
  const reader = await openCapture(file);
  const set = new ObjectSet();
  for (const b of reader.blocks()) {
    set.add(b.objects);
    for (const s of b.samples) {
      if (!s.registers) continue;
      const stack = stackCopyOf(s.regions, s.registers.rsp);
      if (stack) cases.push({ regs: s.registers, stack, set });
    }
  }
  reader.close();
}
const kernel = await KernelNativeUnwinder.load();
let frames = 0;
for (const c of cases) frames += unwindNative(c.regs, c.stack, c.set.objects).pcs.length;
const bench = new Bench({ time: 2000 });
let laid: ObjectSet | null = null;
bench
  .add('kernel (WebAssembly)', () => {
    for (const c of cases) {
      if (laid !== c.set) kernel.setObjects((laid = c.set).objects);
      kernel.unwind(c.regs, c.stack);
    }
  })
  .add('reference (TypeScript)', () => {
    for (const c of cases) unwindNative(c.regs, c.stack, c.set.objects);
  });
await bench.run();
const [k, r] = bench.tasks.map((t) => (t.result as { latency?: { mean: number } }).latency?.mean ?? NaN);
console.log(`unwinding ${cases.length} samples (${frames} native frames) of the --native captures, per pass:`);
console.log(`  kernel    ${(k!).toFixed(2)} ms  ${((frames / k!) * 1000 / 1e6).toFixed(2)} M frames/s`);
console.log(`  reference ${(r!).toFixed(2)} ms  ${((frames / r!) * 1000 / 1e6).toFixed(2)} M frames/s  (kernel ${(r! / k!).toFixed(1)}× faster)`);
fs.rmSync(tmp, { recursive: true, force: true });
