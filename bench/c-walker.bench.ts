// Walk kernel vs C: the WebAssembly kernel (build/kernel.wasm, as KernelWalker loads it) against
// bench/c-walker/walk.c — a literal C port of the same algorithm — over the same bytes, side by
// side in one run. What is timed on both sides is the kernel's `walk` export alone, over a batch
// already laid out in linear memory: laying out the batch and reading results back are host
// costs the C walker does not have (bench/walk.bench.ts measures the whole KernelWalker.walk).
//
// Samples are real, taken as bench/walk.bench.ts takes them: live snapshots of
// test/fixtures/known_stack.py on the newest native interpreter available (its worker thread
// ~9 frames deep, its main thread ~53 with the default recursion, ~1021 with argv[1] = 1000),
// each repeated into batches.
//
// For each batch: lay it into a kernel memory exactly as KernelWalker does (and check that the
// kernel then gives what KernelWalker.walk gives), time the kernel, dump the memory image and
// the call's arguments to a file, and let the C program (compiled here with `cc -O2`) check
// that its results and frames are byte-identical to the kernel's and time itself.
//
// Timing (not tinybench, which cannot time another process): paired rounds. The C walker runs as
// a server (walk --serve) that times n walks on request, so kernel and C rounds can alternate
// finely — on a shared machine whose load changes from second to second, only rounds taken
// moments apart are comparable. Each walker warms up (WARMUP_MS: this also gets V8 past its
// baseline wasm tier to the optimizing one), its walks per round are fixed so that a round
// takes about ROUND_MS, then ROUNDS rounds each time every kernel build and C in turn (the
// order flipped every round). The table gives each walker's median round and the median of the
// per-round ratios kernel/C.
//
//   node --import tsx bench/c-walker.bench.ts [--kernel path.wasm ...] [--only text]
//
// Environment: ROUND_MS (default 100), ROUNDS (15), WARMUP_MS (500), CC (cc), CFLAGS (-O2);
// VERBOSE=1 prints every round's rates.
// --kernel adds a column for another build of the kernel (e.g. an experiment compiled with
// `npx asc ... -o /tmp/k.wasm`), instantiated with a shared memory if it imports one; --only
// keeps the scenarios whose name (e.g. "main thread ×1000") contains the text.
import * as abi from '../src/kernel/abi.js';
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { openLinuxProcess } from '../src/record/linux/process.js';
import { takeSnapshot } from '../src/record/copy/snapshot.js';
import { CodeTable } from '../src/pipeline/snapshot-stacks.js';
import { KernelWalker, statusName, walkParams, type WalkParams } from '../src/walk/index.js';
import { layBatch } from '../src/kernel/walker.js';
import { kernelImports } from '../src/kernel/load.js';
import type { CodeRange, WalkResult, WalkSample } from '../src/walk/types.js';
import { nativeInterpreters } from '../harness/interpreters.js';
import { spawnUntilReady } from '../harness/spawn.js';

const ROUND_MS = Number(process.env.ROUND_MS ?? 100);
const ROUNDS = Number(process.env.ROUNDS ?? 15);
const WARMUP_MS = Number(process.env.WARMUP_MS ?? 500);
const VERBOSE = process.env.VERBOSE === '1';
const CC = process.env.CC ?? 'cc';
const CFLAGS = (process.env.CFLAGS ?? '-O2').split(/\s+/).filter(Boolean);

// record sizes of assembly/kernel.ts; KernelWalker keeps them private, so they are repeated here
const RESULT_SIZE = 32;
const FRAME_SIZE = 32;
const MIN_FRAME_CAPACITY = 1 << 16; // as KernelWalker

type WalkFn = (
  params: number,
  samples: number,
  count: number,
  codes: number,
  codeCount: number,
  results: number,
  frames: number,
  framesCapacity: number,
) => number;

interface Kernel {
  name: string;
  walk: WalkFn;
  heapBase: number;
  memory: WebAssembly.Memory;
}

/** The arguments of one `walk` call over a batch laid out in a kernel's memory. */
interface Batch {
  args: [number, number, number, number, number, number, number, number];
  count: number;
  results: number;
  frames: number;
  /** one past the last byte of the batch (the last region byte) */
  end: number;
}


async function loadKernel(name: string, file: string): Promise<Kernel> {
  const module = await WebAssembly.compile(fs.readFileSync(file));
  // shared and unshared builds import different kinds of memory: try the shared kind first
  for (const shared of [true, false]) {
    const memory = new WebAssembly.Memory(
      shared ? { initial: 16, maximum: 65536, shared: true } : { initial: 16, maximum: 65536 },
    );
    try {
      const instance = await WebAssembly.instantiate(module, kernelImports(memory));
      const e = instance.exports as unknown as { walk: WalkFn; heapBase(): number };
      return { name, walk: e.walk, heapBase: e.heapBase(), memory };
    } catch (err) {
      if (!(err instanceof WebAssembly.LinkError)) throw err;
    }
  }
  throw new Error(`${file}: imports neither a shared nor an unshared memory`);
}

/**
 * Lay a batch into the kernel's memory as KernelWalker does (layBatch), except that the frame
 * output has room for the whole batch, so that one call walks it all.
 */
function layOut(k: Kernel, params: WalkParams, codeRanges: readonly CodeRange[], samples: readonly WalkSample[], framesTotal: number): Batch {
  const b = layBatch(k.memory, k.heapBase, params, codeRanges, samples, Math.max(params.maxDepth, MIN_FRAME_CAPACITY, framesTotal + params.maxDepth));
  return {
    args: [b.pParams, b.pSamples, b.samples, b.pCodes, b.codeCount, b.pResults, b.pFrames, b.frameCapacity],
    count: b.samples,
    results: b.pResults,
    frames: b.pFrames,
    end: b.end,
  };
}

/** The results of the last walk over `b`, decoded as KernelWalker decodes them. */
function readResults(k: Kernel, b: Batch): WalkResult[] {
  const view = new DataView(k.memory.buffer);
  return Array.from({ length: b.count }, (_, i) => {
    const r = b.results + i * RESULT_SIZE;
    const start = view.getUint32(r + 4, true);
    const count = view.getUint32(r + 8, true);
    return {
      status: statusName(view.getUint32(r, true)),
      frames: Array.from({ length: count }, (_, j) => {
        const f = b.frames + (start + j) * FRAME_SIZE;
        return { frame: view.getBigUint64(f, true), code: view.getBigUint64(f + 8, true), instrPtr: view.getBigUint64(f + 16, true), callsThroughC: (view.getUint32(f + 24, true) & 1) !== 0 };
      }),
      visited: view.getUint32(r + 12, true),
      lastFrame: view.getBigUint64(r + 16, true),
      failAddress: view.getBigUint64(r + 24, true),
    };
  });
}

/** The output bytes of the last walk over `b`: results, then the frames they use. */
function outputBytes(k: Kernel, b: Batch, framesUsed: number): Buffer {
  const u8 = new Uint8Array(k.memory.buffer);
  return Buffer.concat([
    Buffer.from(u8.slice(b.results, b.results + b.count * RESULT_SIZE)),
    Buffer.from(u8.slice(b.frames, b.frames + framesUsed * FRAME_SIZE)),
  ]);
}

const sameResults = (a: WalkResult[], b: WalkResult[]): boolean =>
  JSON.stringify(a, (_, v) => (typeof v === 'bigint' ? v.toString() : v)) ===
  JSON.stringify(b, (_, v) => (typeof v === 'bigint' ? v.toString() : v));

/** Seconds `n` kernel walks over `b` take. */
function timeKernel(k: Kernel, b: Batch, n: number): number {
  const [a0, a1, a2, a3, a4, a5, a6, a7] = b.args;
  const walk = k.walk;
  let sink = 0;
  const start = performance.now();
  for (let j = 0; j < n; j++) sink += walk(a0, a1, a2, a3, a4, a5, a6, a7);
  const seconds = (performance.now() - start) / 1000;
  if (sink !== n * b.count) throw new Error(`${k.name}: walk returned ${sink / n}, not ${b.count}`);
  return seconds;
}

/** A timer of `n` walks: a kernel's, or the C server's. */
type Timer = (n: number) => Promise<number>;

/** Warm up for WARMUP_MS, then the walks per round that make a round last about ROUND_MS. */
async function calibrate(time: Timer): Promise<number> {
  let n = 1;
  const end = performance.now() + WARMUP_MS;
  while (performance.now() < end) {
    const t = await time(n);
    if (t < ROUND_MS / 4000) n *= 2;
  }
  const t = await time(n);
  return Math.max(1, Math.round((n * ROUND_MS) / 1000 / t));
}

/** walk.c in --serve mode over one batch file. */
class CServer {
  private constructor(
    private readonly child: ReturnType<typeof spawn>,
    private readonly lines: AsyncIterator<string>,
    private readonly stderr: () => string,
  ) {}

  static async start(exe: string, file: string): Promise<CServer> {
    const child = spawn(exe, [file, '--serve'], { stdio: ['pipe', 'pipe', 'pipe'] });
    let err = '';
    child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
    const server = new CServer(child, createInterface({ input: child.stdout! })[Symbol.asyncIterator](), () => err);
    const first = JSON.parse(await server.line()) as { identical: boolean };
    if (!first.identical) throw new Error('C walker output differs from the kernel\'s');
    return server;
  }

  private async line(): Promise<string> {
    const next = await this.lines.next();
    if (next.done) throw new Error(`C walker ended early: ${this.stderr()}`);
    return next.value;
  }

  async time(n: number): Promise<number> {
    this.child.stdin!.write(`${n}\n`);
    return Number(await this.line());
  }

  /** End input; true when the output was still identical after every timed walk. */
  async finish(): Promise<boolean> {
    this.child.stdin!.end();
    const last = JSON.parse(await this.line()) as { identical: boolean };
    const code = await new Promise<number | null>((resolve) =>
      this.child.exitCode !== null ? resolve(this.child.exitCode) : this.child.once('exit', resolve),
    );
    return last.identical && code === 0;
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((x, y) => x - y);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** The batch file walk.c reads (format in its header comment). */
function writeBatchFile(file: string, k: Kernel, b: Batch, ret: number, framesUsed: number, visited: number): void {
  const head = Buffer.alloc(72);
  head.write('PYUWCB01', 0, 'latin1');
  [...b.args, ret, framesUsed, visited, 0].forEach((v, i) => head.writeUInt32LE(v >>> 0, 8 + i * 4));
  const size = k.memory.buffer.byteLength;
  // the image ends with the batch; past it the memory is zero, in a fresh kernel as in walk.c
  const u8 = new Uint8Array(k.memory.buffer);
  const image = b.end;
  head.writeBigUInt64LE(BigInt(size), 56);
  head.writeBigUInt64LE(BigInt(image), 64);
  const fd = fs.openSync(file, 'w');
  try {
    fs.writeSync(fd, head);
    // a view of a SharedArrayBuffer cannot be written directly: copy it in slices
    for (let at = 0; at < image; at += 1 << 24) fs.writeSync(fd, Buffer.from(u8.slice(at, Math.min(image, at + (1 << 24)))));
  } finally {
    fs.closeSync(fd);
  }
}

interface Scenario {
  name: string;
  params: WalkParams;
  codes: CodeRange[];
  batch: WalkSample[];
}

interface Target {
  description: string;
  params: WalkParams;
  codes: CodeRange[];
  /** the snapshot's samples, fewest frames visited first */
  threads: WalkSample[];
}

async function snapshotOf(command: string, recursion: number, walker: KernelWalker): Promise<Target> {
  const target = await spawnUntilReady(command, [path.resolve('test/fixtures/known_stack.py'), String(recursion)]);
  try {
    const source = openLinuxProcess(target.pid);
    const snap = takeSnapshot(source);
    source.close();
    const params = walkParams(snap.layout);
    const codes = new CodeTable(snap.layout, snap.codeObjects).ranges;
    const samples: WalkSample[] = snap.threads.map((t) => ({ threadStateAddress: t.threadStateAddress, regions: t.regions }));
    const results = walker.walk(params, codes, samples);
    if (results.some((r) => r.status !== 'complete')) throw new Error(`snapshot not complete: ${results.map((r) => r.status).join(', ')}`);
    const order = samples.map((s, i) => ({ s, visited: results[i]!.visited })).sort((a, b) => a.visited - b.visited);
    return { description: source.description, params, codes, threads: order.map((o) => o.s) };
  } finally {
    target.kill();
  }
}

const repeat = (one: readonly WalkSample[], n: number): WalkSample[] => Array.from({ length: n }, (_, i) => one[i % one.length]!);

async function main(): Promise<void> {
  const extra: string[] = [];
  const only: string[] = [];
  for (let i = 2; i < process.argv.length; i++) {
    if (process.argv[i] === '--kernel' && process.argv[i + 1]) extra.push(process.argv[++i]!);
    else if (process.argv[i] === '--only' && process.argv[i + 1]) only.push(process.argv[++i]!);
    else throw new Error(`usage: bench/c-walker.bench.ts [--kernel path.wasm ...] [--only text ...]`);
  }
  const py = [...nativeInterpreters()].reverse().find((p) => !p.missing);
  if (!py) throw new Error('no native interpreter available');

  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pyunwind-c-walker-'));
  try {
    const exe = path.join(tmp, 'walk');
    const cflags = [...CFLAGS, '-std=c11', '-Wall'];
    // the ABI as a C header, from the one source both sides of the kernel import
    fs.writeFileSync(path.join(tmp, 'abi.h'), Object.entries(abi).map(([k, v]) => `#define ${k} ${Number(v) >>> 0}u\n`).join(''));
    execFileSync(CC, [...cflags, '-I', tmp, '-o', exe, path.resolve('bench/c-walker/walk.c')], { stdio: 'inherit' });
    const ccVersion = execFileSync(CC, ['--version'], { encoding: 'utf8' }).split('\n')[0];

    // the walker the library uses: what every layout here must reproduce
    const walker = await KernelWalker.load();
    const shallow = await snapshotOf(py.command, 32, walker);
    const deep = await snapshotOf(py.command, 1000, walker);
    const [worker, main32] = [shallow.threads[0]!, shallow.threads[shallow.threads.length - 1]!];
    const main1000 = deep.threads[deep.threads.length - 1]!;
    const of = (t: Target, name: string, batch: WalkSample[]): Scenario => ({ name, params: t.params, codes: t.codes, batch });
    const scenarios: Scenario[] = [
      of(shallow, 'worker thread', repeat([worker], 1000)),
      of(shallow, 'main thread', repeat([main32], 1000)),
      of(shallow, 'main thread', repeat([main32], 10)),
      of(shallow, 'both threads (as walk.bench)', repeat(shallow.threads, 1000)),
      of(deep, 'main, recursion 1000', repeat([main1000], 100)),
    ].filter((sc) => only.length === 0 || only.some((t) => `${sc.name} ×${sc.batch.length}`.includes(t)));

    const builds = [
      { name: 'kernel', file: 'build/kernel.wasm' },
      { name: 'unshared', file: 'build/kernel-unshared.wasm' },
      ...extra.map((file) => ({ name: path.basename(file, '.wasm'), file })),
    ];
    const rows: Record<string, string | number>[] = [];
    const ratios: { scenario: string; kernelOverC: number }[] = [];
    for (const sc of scenarios) {
      // a fresh instance per scenario: each batch starts from an empty memory, as in KernelWalker
      const kernels = await Promise.all(builds.map((b) => loadKernel(b.name, path.resolve(b.file))));
      const want = walker.walk(sc.params, sc.codes, sc.batch);
      const framesUsed = want.reduce((n, r) => n + r.frames.length, 0);
      const visited = want.reduce((n, r) => n + r.visited, 0);
      const batches = kernels.map((k) => layOut(k, sc.params, sc.codes, sc.batch, framesUsed));
      let first: Buffer | null = null;
      kernels.forEach((k, i) => {
        const ret = k.walk(...batches[i]!.args);
        if (ret !== sc.batch.length) throw new Error(`${k.name}: walk returned ${ret}`);
        if (!sameResults(readResults(k, batches[i]!), want)) throw new Error(`${k.name}: results differ from KernelWalker.walk (layout mismatch?)`);
        const out = outputBytes(k, batches[i]!, framesUsed);
        if (first && !out.equals(first)) throw new Error(`${k.name}: output bytes differ from ${kernels[0]!.name}`);
        first ??= out;
      });
      const file = path.join(tmp, 'batch.bin');
      writeBatchFile(file, kernels[0]!, batches[0]!, sc.batch.length, framesUsed, visited);

      const server = await CServer.start(exe, file);
      const timers: Timer[] = [
        ...kernels.map((k, i): Timer => async (n) => timeKernel(k, batches[i]!, n)),
        (n) => server.time(n),
      ];
      const reps: number[] = [];
      for (const time of timers) reps.push(await calibrate(time));
      // rates[w][r]: samples/s of walker w (kernels, then C) in round r
      const rates: number[][] = timers.map(() => []);
      for (let r = 0; r < ROUNDS; r++) {
        const order = timers.map((_, w) => w);
        if (r % 2) order.reverse();
        for (const w of order) rates[w]!.push((reps[w]! * sc.batch.length) / (await timers[w]!(reps[w]!)));
      }
      if (VERBOSE) {
        const names = [...kernels.map((k) => k.name), 'C'];
        names.forEach((n, w) => console.log(`${sc.name} ×${sc.batch.length} ${n}: ${rates[w]!.map((x) => Math.round(x)).join(' ')}`));
      }
      if (!(await server.finish())) throw new Error(`C walker output differs from the kernel's after timing (${sc.name})`);

      const c = rates[kernels.length]!;
      const perSample = visited / sc.batch.length;
      const row: Record<string, string | number> = {
        scenario: sc.name,
        batch: sc.batch.length,
        'frames/sample': Number(perSample.toFixed(1)),
      };
      kernels.forEach((k, i) => (row[`${k.name} samples/s`] = Math.round(median(rates[i]!))));
      row['C samples/s'] = Math.round(median(c));
      const ratio = (i: number): number => median(rates[i]!.map((x, r) => x / c[r]!));
      kernels.forEach((k, i) => (row[`${k.name}/C`] = Number(ratio(i).toFixed(2))));
      row['kernel Mframes/s'] = Number(((median(rates[0]!) * perSample) / 1e6).toFixed(1));
      row['C Mframes/s'] = Number(((median(c) * perSample) / 1e6).toFixed(1));
      rows.push(row);
      ratios.push({ scenario: `${sc.name} ×${sc.batch.length}`, kernelOverC: ratio(0) });
      fs.rmSync(file);
    }

    console.log(`target: ${shallow.description} (known_stack.py; recursion 32 and 1000)`);
    console.log(`node ${process.version}, ${os.cpus()[0]?.model ?? 'cpu'} × ${os.cpus().length}, ${new Date().toISOString().slice(0, 10)}`);
    console.log(`C: ${ccVersion}, ${CC} ${cflags.join(' ')}; ${ROUNDS} paired rounds of ~${ROUND_MS} ms per walker, medians`);
    console.log('frames = frames visited per sample (Python or not); outputs byte-identical between every kernel build and C');
    console.table(rows);
    const worst = ratios.reduce((a, b) => (b.kernelOverC < a.kernelOverC ? b : a));
    console.log(`kernel/C: ${ratios.map((r) => `${r.scenario} ${r.kernelOverC.toFixed(2)}×`).join(', ')}; lowest ${worst.kernelOverC.toFixed(2)}× (target ≥ 0.9×)`);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
