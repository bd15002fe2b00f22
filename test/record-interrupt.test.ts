// record --copy interrupt (bpf/copier.bpf.c, src/record/copy/kernel-samples.ts), through the CLI
// as a user runs it, on every native interpreter (3.11+):
// - a program with five threads — two spinning through a generator (running, taking turns at
//   the GIL), one hashing with the GIL released (running in C), one napping (off its CPU), one
//   making a new function every 20 ms and running it (code objects that the kernel's copies
//   meet first) — and its main thread reading stdin. Each thread prints its own traceback.extract_stack() from its
//   innermost function. Recorded in wall mode at 1000 Hz: every trusted stack is one its thread
//   reported (the spinners' cut anywhere below `spin`), no sample was copied with the
//   target stopped, samples were copied in the kernel and none was lost, at most 5 % were
//   rejected, and every thread got samples of about every tick — the running ones from the
//   kernel, the others copied by the recorder — each between a third and twice the main
//   thread's count (sampled at every tick the recorder took; nearer on a quiet machine); in cpu
//   mode the main thread has (almost) none and the napping thread under a third (runnable after
//   each wake-up until it gets a CPU, which counts as on one);
//   Recorded again at 10 kHz, where the recorder falls behind on this machine (stretches of
//   missed ticks, whose kernel records are left out with them): the same stacks, nothing
//   stopped, at most 5 % rejected, and every thread between a third and twice the main
//   thread's count still;
// - a thread waiting in one function, then another, every 100 ms: each has at least 30 % of
//   its samples (its copy is made again without reading only while it has not run);
// - Python making a system call every ~100 µs: the call's share of the samples is at most 2
//   points above the share of its time the program measures for it, and not none
//   (--blocking's logged beside: 3-10 times it);
// - without root's capabilities: the one line that says what is needed, exit 1, no file (and
//   the default mode's recording then says nothing of --copy interrupt; dump --copy interrupt
//   says the same line and exits 1); a rate above 10 kHz:
//   refused in one line;
// - a default-mode recording that stopped a call-heavy program for 5 % of its time or more
//   ends with the line that says --copy interrupt would not have (none below 5 %, none with it);
// - a recorder killed with SIGKILL mid-recording leaves no program of ours (bpftool prog).
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { nativeInterpreters } from '../harness/interpreters.js';
import { cannotTryKernelCopies, programsOf, stillLoaded, startPython } from './helpers/bpf.js';
import { cannotRun, skipTest } from './helpers/coverage.js';
import { waitUntil } from './helpers/wait.js';

const BIN = path.resolve('bin/pyunwind.js');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pyunwind-interrupt-'));
const children: ChildProcess[] = [];
afterAll(() => {
  for (const c of children) c.kill('SIGKILL');
  fs.rmSync(dir, { recursive: true, force: true });
});

const PROGRAM = `
import hashlib, json, sys, threading, time, traceback
stacks = {}
def mine(role):
    stacks[role] = [f.name for f in traceback.extract_stack()[:-1]]
def leaf(n, role):
    if role not in stacks: mine(role)
    return n + 1
def middle(n, role):
    s = 0
    for i in range(100):
        s += leaf(i, role)
    return s
def gen(role):
    while True:
        yield middle(1, role)
def spin(role):
    for _ in gen(role):
        pass
def hash_loop():
    data = b"x" * (8 << 20)
    mine("hasher")
    while True:
        hashlib.sha256(data).digest()
def nap():
    mine("napper")
    while True:
        time.sleep(0.001)
made = []
def maker():
    # a new function every 20 ms, run for a few: code objects the kernel's copies meet first
    mine("maker")
    n = 0
    while True:
        ns = {}
        exec(f"def made_{n}(k):\\n    s = 0\\n    for i in range(k):\\n        s += i\\n    return s", ns)
        made.append(ns[f"made_{n}"])
        made[-1](50000)
        n += 1
        time.sleep(0.02)
roles = ["spin1", "spin2", "hasher", "napper", "maker"]
threads = [threading.Thread(target=spin, args=("spin1",), daemon=True), threading.Thread(target=spin, args=("spin2",), daemon=True),
           threading.Thread(target=hash_loop, daemon=True), threading.Thread(target=nap, daemon=True), threading.Thread(target=maker, daemon=True)]
for t in threads: t.start()
while len(stacks) < len(roles): time.sleep(0.01)
print(json.dumps({"stacks": stacks, "tids": {r: t.native_id for r, t in zip(roles, threads)}}), flush=True)
sys.stdin.read()
`;

interface ReportJson {
  summary: { attempted: number; rejected: number; statuses: Record<string, number> };
  metadata: { recording: { stopped: number } };
  threads: { label: string; summary: { attempted: number }; frames: { qualname: string }[]; stacks: [number, number, number][] }[];
}

function pyunwind(args: string[], prefix: string[] = []): { status: number | null; stdout: string; stderr: string } {
  const argv = [...prefix, process.execPath, BIN, ...args];
  const r = spawnSync(argv[0]!, argv.slice(1), { encoding: 'utf8', timeout: 300_000, maxBuffer: 256 << 20 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

const start = (command: string, program: string, prefix: string[] = []): Promise<{ child: ChildProcess; line: string }> => startPython(command, program, children, prefix);

/** Each thread's stacks (function names, outermost first) and their weights. */
function stacksOf(t: ReportJson['threads'][number]): Map<string[], number> {
  const out = new Map<string[], number>();
  for (let i = 0; i < t.stacks.length; i++) {
    const weight = t.stacks[i]![2];
    if (weight === 0) continue;
    const names: string[] = [];
    for (let k = i; k >= 0; k = t.stacks[k]![0]) names.unshift(t.frames[t.stacks[k]![1]]!.qualname.split('.').pop()!);
    out.set(names, weight);
  }
  return out;
}


/**
 * Report a recording of PROGRAM and check what every copy mode must hold: no sample copied
 * stopped, at most 5 % rejected, every trusted stack one its thread reported. Each thread's
 * sample count by role.
 */
function judge(file: string, told: { stacks: Record<string, string[]>; tids: Record<string, number> }): { json: ReportJson; counts: Map<string, number> } {
  const r = pyunwind(['report', '-q', file, '-f', 'json']);
  expect(r.status, r.stderr).toBe(0);
  const json = JSON.parse(r.stdout) as ReportJson;
  expect(json.metadata.recording.stopped).toBe(0);
  // (torn: a napping thread that woke during its copy and did not sleep again soon, a record
  // whose code objects changed before they were read — the maker's; more on a loaded machine:
  // measured 0-0.5 % alone, 3.7 % once beside another test file)
  expect(json.summary.rejected, `rejected ${json.summary.rejected} of ${json.summary.attempted}: ${JSON.stringify(json.summary.statuses)}`).toBeLessThanOrEqual(0.05 * json.summary.attempted);
  const counts = new Map<string, number>();
  for (const t of json.threads) {
    const tid = Number(/tid (\d+)/.exec(t.label)?.[1]);
    const role = Object.entries(told.tids).find(([, v]) => v === tid)?.[0] ?? (t.label.includes('MainThread') ? 'main' : null);
    expect(role, t.label).not.toBeNull();
    counts.set(role!, t.summary.attempted);
    for (const [stack, weight] of stacksOf(t)) {
      const shown = `${t.label}: ${stack.join(' > ')} ×${weight}`;
      // (the collector runs in the thread that holds the GIL when an allocation starts it — the
      // maker's exec, mostly: its sample then ends in a <GC> frame, above the thread's own)
      const names = stack.at(-1) === '<GC>' && stack.length > 1 ? stack.slice(0, -1) : stack;
      if (role === 'main') expect(names, shown).toEqual(['<module>']);
      else if (role!.startsWith('spin')) {
        // cut anywhere below spin (between two items the generator's frame is not on the stack)
        const full = told.stacks[role!]!;
        expect(names.length, shown).toBeGreaterThanOrEqual(full.indexOf('spin') + 1);
        expect(names, shown).toEqual(full.slice(0, names.length));
      } else if (role === 'maker') {
        // in maker, in the function it made last, or in the code exec runs to make it
        const full = told.stacks.maker!;
        expect(names.slice(0, full.length), shown).toEqual(full);
        expect(names.length === full.length || (names.length === full.length + 1 && /^(made_\d+|<module>)$/.test(names.at(-1)!)), shown).toBe(true);
      } else expect(names, shown).toEqual(told.stacks[role!]);
    }
  }
  return { json, counts };
}

describe.each(nativeInterpreters())('record --copy interrupt, $label', (py) => {
  if (py.missing) {
    cannotRun('record-interrupt', py.label, py.missing!);
    return;
  }
  it('every thread sampled, running ones in the kernel, the stacks the program reports, nothing stopped', async (ctx) => {
    const why = cannotTryKernelCopies();
    if (why) skipTest(ctx, 'record-interrupt', py.label, why);
    const { child, line } = await start(py.command, PROGRAM);
    const told = JSON.parse(line) as { stacks: Record<string, string[]>; tids: Record<string, number> };
    try {
      const file = path.join(dir, `wall-${py.label}.pyuw`);
      const rec = pyunwind(['record', '--copy', 'interrupt', '-r', '1000', '-d', '3', '-o', file, '--pid', String(child.pid)]);
      expect(rec.status, rec.stderr).toBe(0);
      // the summary line: nothing stopped, a share copied in the kernel, none of it lost
      expect(rec.stderr).toMatch(/copied with the target stopped 0\.0% \(stopped 0\.0% of the time\)/);
      const kernel = /copied in the kernel ([\d.]+)% \((\d+) lost, (\d+) dropped with missed ticks\)/.exec(rec.stderr);
      expect(kernel, rec.stderr).not.toBeNull();
      expect(Number(kernel![1])).toBeGreaterThan(0);
      expect(Number(kernel![2])).toBe(0);
      const { json, counts } = judge(file, told);
      // every thread about once a tick: the main thread, never on a CPU, is sampled at each tick
      // the recorder took, every other thread near it — from the kernel while it runs, from the
      // recorder while it does not (a stretch of ticks the recorder missed drops the kernel's
      // records of it too). How near depends on the load: within 16 % on an otherwise idle
      // 2-CPU machine (docs/validation.md); under a loaded test run a thread runnable behind
      // other processes is sampled by neither at times. Held here to what rules out a side
      // that is missing or counted twice: between a third and twice the main thread's count.
      const ticks = counts.get('main')!;
      for (const [role, n] of counts) {
        const shown = `${role}: ${n} samples, the main thread ${ticks}: ${JSON.stringify(Object.fromEntries(counts))}`;
        expect(n, shown).toBeGreaterThanOrEqual(ticks / 3);
        expect(n, shown).toBeLessThanOrEqual(2 * ticks);
      }
      console.log(`[record-interrupt] ${py.label}: ${json.summary.attempted} samples, ${json.summary.rejected} rejected, ${kernel![1]}% in the kernel, per thread ${JSON.stringify(Object.fromEntries(counts))}`);

      // cpu mode: the threads off their CPUs (napping, reading stdin) are left out
      const cpu = pyunwind(['report', '-q', file, '-f', 'json', '--mode', 'cpu']);
      expect(cpu.status, cpu.stderr).toBe(0);
      const cj = JSON.parse(cpu.stdout) as ReportJson;
      const cpuOf = (role: string): number => cj.threads.find((t) => (role === 'main' ? t.label.includes('MainThread') : t.label.includes(`tid ${told.tids[role]})`)))?.summary.attempted ?? 0;
      for (const role of ['spin1', 'spin2', 'hasher']) expect(cpuOf(role), role).toBeGreaterThan(counts.get(role)! / 4);
      // (the napper wakes a thousand times a second, and is runnable — which counts as on a CPU,
      // as in every copy mode — until it gets one: a share of its samples on a busy machine)
      expect(cpuOf('napper')).toBeLessThanOrEqual(counts.get('napper')! / 3);
      expect(cpuOf('main')).toBeLessThanOrEqual(counts.get('main')! / 20);

      // at 10 kHz the recorder falls behind here (stretches of missed ticks, whose kernel
      // records are left out with them, the code records they carry kept): the same checks
      const fast = path.join(dir, `fast-${py.label}.pyuw`);
      const rec10 = pyunwind(['record', '--copy', 'interrupt', '-r', '10000', '-d', '2', '-o', fast, '--pid', String(child.pid)]);
      expect(rec10.status, rec10.stderr).toBe(0);
      const { json: j10, counts: c10 } = judge(fast, told);
      // every thread as often as the others still: a stretch of ticks the recorder missed is
      // missed for the threads on a CPU too (their records of it are dropped), and records made
      // after a tick's time wait for the tick they belong to
      const ticks10 = c10.get('main')!;
      for (const [role, n] of c10) {
        const shown = `10 kHz: ${role}: ${n} samples, the main thread ${ticks10}: ${JSON.stringify(Object.fromEntries(c10))}`;
        expect(n, shown).toBeGreaterThanOrEqual(ticks10 / 3);
        expect(n, shown).toBeLessThanOrEqual(2 * ticks10);
      }
      console.log(`[record-interrupt] ${py.label} at 10 kHz: ${j10.summary.attempted} samples, ${j10.summary.rejected} rejected; ${rec10.stderr.trim().split('\n').pop()}`);
    } finally {
      child.kill('SIGKILL');
    }
  });
});

// A thread that waits in one function, then in another, and back, every 100 ms: off its CPU
// nearly all the time, so its copies are the recorder's — and its last one is made again while
// its count of arrivals on a CPU stands (MemoryCopier.quietAgain). Made again after it moved,
// a copy would keep the first place: each place must have a fair share of its samples.
const MOVER = `
import sys, threading, time
def wait_a():
    time.sleep(0.1)
def wait_b():
    time.sleep(0.1)
def mover():
    while True:
        wait_a()
        wait_b()
t = threading.Thread(target=mover, daemon=True)
t.start()
print(t.native_id, flush=True)
sys.stdin.read()
`;

describe.each(nativeInterpreters())('record --copy interrupt, a waiting thread that moves, $label', (py) => {
  if (py.missing) {
    cannotRun('record-interrupt', `${py.label} mover`, py.missing!);
    return;
  }
  it('each place it waits in has its share: a copy made again only while the thread has not run', async (ctx) => {
    const why = cannotTryKernelCopies();
    if (why) skipTest(ctx, 'record-interrupt', `${py.label} mover`, why);
    const { child, line } = await start(py.command, MOVER);
    try {
      const file = path.join(dir, `mover-${py.label}.pyuw`);
      const rec = pyunwind(['record', '--copy', 'interrupt', '-r', '1000', '-d', '3', '-o', file, '--pid', String(child.pid)]);
      expect(rec.status, rec.stderr).toBe(0);
      const r = pyunwind(['report', '-q', file, '-f', 'json']);
      expect(r.status, r.stderr).toBe(0);
      const json = JSON.parse(r.stdout) as ReportJson;
      const t = json.threads.find((x) => x.label.includes(`tid ${line.trim()})`));
      expect(t, json.threads.map((x) => x.label).join(', ')).toBeDefined();
      let a = 0;
      let b = 0;
      for (const [names, weight] of stacksOf(t!)) {
        if (names.at(-1) === 'wait_a') a += weight;
        else if (names.at(-1) === 'wait_b') b += weight;
      }
      // (about half each: 30 rounds of each in 3 s; a copy kept past a move would give one place all)
      const shown = `wait_a ${a}, wait_b ${b} of ${t!.summary.attempted}`;
      expect(a + b, shown).toBeGreaterThanOrEqual(0.9 * t!.summary.attempted);
      expect(Math.min(a, b), shown).toBeGreaterThanOrEqual(0.3 * (a + b));
      console.log(`[record-interrupt] ${py.label} mover: ${shown}`);
    } finally {
      child.kill('SIGKILL');
    }
  });
});

// Python that makes a system call every ~100 µs (a select that returns at once) and measures
// the time it spends in it. A sample taken at the interrupt is of the tick's own moment: the
// call gets the share of the samples the program measures for it. (A stop is not: on this
// machine a ptrace stop takes 100-150 µs to land, and a thread that enters a system call
// meanwhile stops there — `--blocking` gave the same call 10-11 % against 1.4 % measured;
// logged here beside, not held: docs/validation.md.)
const SYSCALLS = `
import select, sys, threading, time
spent = [0.0]
start = time.perf_counter()
def compute(n):
    s = 0
    for i in range(n):
        s += i * i
    return s
def poll():
    select.select([], [], [], 0)
def tell():
    for line in sys.stdin:
        print(f"{100 * spent[0] / (time.perf_counter() - start):.3f}", flush=True)
threading.Thread(target=tell, daemon=True).start()
print("up", flush=True)
while True:
    compute(2000)
    t0 = time.perf_counter()
    poll()
    spent[0] += time.perf_counter() - t0
`;

describe.each(nativeInterpreters())('record --copy interrupt, a system call between stretches of Python, $label', (py) => {
  if (py.missing) {
    cannotRun('record-interrupt', `${py.label} syscalls`, py.missing!);
    return;
  }
  it('the call has the share of the samples the program measures for it', async (ctx) => {
    const why = cannotTryKernelCopies();
    if (why) skipTest(ctx, 'record-interrupt', `${py.label} syscalls`, why);
    const { child } = await start(py.command, SYSCALLS);
    let out = '';
    child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    /** the program's own share of its time in poll so far (%) */
    const measured = async (): Promise<number> => {
      const had = out.length;
      child.stdin!.write('\n');
      await waitUntil(() => out.length > had && out.endsWith('\n'), 'the program to tell its share', 10_000);
      return Number(out.slice(had).trim());
    };
    /** the share of the main thread's samples whose innermost function is poll (%) */
    const sampled = (file: string): { share: number; n: number } => {
      const r = pyunwind(['report', '-q', file, '-f', 'json']);
      expect(r.status, r.stderr).toBe(0);
      const t = (JSON.parse(r.stdout) as ReportJson).threads.find((x) => x.label.includes('MainThread'))!;
      let inPoll = 0;
      let all = 0;
      for (const [names, weight] of stacksOf(t)) {
        all += weight;
        if (names.at(-1) === 'poll') inPoll += weight;
      }
      return { share: (100 * inPoll) / all, n: all };
    };
    try {
      const file = path.join(dir, `syscalls-${py.label}.pyuw`);
      const rec = pyunwind(['record', '--copy', 'interrupt', '-r', '1000', '-d', '3', '-o', file, '--pid', String(child.pid)]);
      expect(rec.status, rec.stderr).toBe(0);
      const own = await measured();
      const { share, n } = sampled(file);
      expect(n).toBeGreaterThan(500);
      // Not over-sampled: at most 2 points above what the program measures (nine standard
      // deviations of a share of 3,000 samples; a stop added 4-19 points here). And seen. Samples
      // gave the call 0.38-0.69 of the program's share (0.80-3.84 % against 1.27-6.71 %), once
      // under a third: its timing counts the call into poll and the return, which samples put in
      // the loop, and — more so on a loaded machine — the wait for a CPU at the system call's
      // return, which a tick samples only if the thread was preempted before the tick began
      // (docs/validation.md, holes: a runnable thread's samples follow the load).
      const said = `poll: ${share.toFixed(2)} % of ${n} samples, the program measured ${own.toFixed(2)} %`;
      expect(share, said).toBeLessThanOrEqual(own + 2);
      expect(share, said).toBeGreaterThan(0);
      const blocked = path.join(dir, `syscalls-blocking-${py.label}.pyuw`);
      const b = pyunwind(['record', '--blocking', '-r', '1000', '-d', '3', '-o', blocked, '--pid', String(child.pid)]);
      const beside = b.status === 0 ? `${sampled(blocked).share.toFixed(2)} %` : `not recorded (${b.stderr.trim()})`;
      console.log(`[record-interrupt] ${py.label} syscalls: poll ${share.toFixed(2)} % of ${n} samples at the interrupt, ${own.toFixed(2)} % measured by the program, --blocking ${beside}`);
    } finally {
      child.kill('SIGKILL');
    }
  });
});

describe('record --copy interrupt: the rights, and nothing left behind', () => {
  const py = nativeInterpreters().find((p) => !p.missing);
  if (!py) {
    cannotRun('record-interrupt', 'rights and cleanup', 'no native interpreter');
    return;
  }
  it('without root’s capabilities: one line saying what is needed, and no capture', async (ctx) => {
    const why = cannotTryKernelCopies();
    if (why) skipTest(ctx, 'record-interrupt', 'rights', why);
    if (spawnSync('setpriv', ['--version']).error) skipTest(ctx, 'record-interrupt', 'rights', 'setpriv is not installed (util-linux)');
    // (the target without capabilities too: reading a process needs every capability it has)
    const drop = ['setpriv', '--inh-caps=-all', '--bounding-set=-all', '--'];
    const { child } = await start(py.command, 'import sys; print("up", flush=True); sys.stdin.read()', drop);
    try {
      const file = path.join(dir, 'rights.pyuw');
      const r = pyunwind(['record', '--copy', 'interrupt', '-d', '1', '-o', file, '--pid', String(child.pid)], drop);
      expect(r.stderr).toBe('pyunwind record: copies at the interrupt need root, or CAP_BPF and CAP_PERFMON (loading the BPF program was refused)\n');
      expect(r.status).toBe(1);
      expect(fs.existsSync(file)).toBe(false);
      // (dump --copy interrupt: the same line)
      const dumped = pyunwind(['dump', '--copy', 'interrupt', '--pid', String(child.pid)], drop);
      expect(dumped.stderr).toBe('pyunwind dump: copies at the interrupt need root, or CAP_BPF and CAP_PERFMON (loading the BPF program was refused)\n');
      expect(dumped.status).toBe(1);
      // and today's copies work as they did, with the same rights — never pointing at the mode
      // these rights cannot load
      const today = pyunwind(['record', '-d', '1', '-o', file, '--pid', String(child.pid)], drop);
      expect(today.status, today.stderr).toBe(0);
      expect(today.stderr).not.toMatch(/--copy interrupt would/);
      expect(fs.statSync(file).size).toBeGreaterThan(0);
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('a recording that stopped the target for 5 % of its time or more says --copy interrupt could have been used; one with it, not', async (ctx) => {
    const why = cannotTryKernelCopies();
    if (why) skipTest(ctx, 'record-interrupt', 'hint', why);
    // call-heavy Python: the default mode stops it for most of its copies
    const program = 'import sys\nprint("up", flush=True)\ndef f(n): return n if n < 2 else f(n - 1) + f(n - 2)\nwhile True: f(18)';
    const { child } = await start(py.command, program);
    try {
      const hint = /^pyunwind: the target was stopped ([\d.]+)% of its time; --copy interrupt would copy its running threads in the kernel instead, never stopping it \(docs\/recording\.md\)$/m;
      const file = path.join(dir, 'hint.pyuw');
      const adaptive = pyunwind(['record', '-q', '-d', '1', '-o', file, '--pid', String(child.pid)]);
      expect(adaptive.status, adaptive.stderr).toBe(0);
      const stopped = Number(/\(stopped ([\d.]+)% of the time\)/.exec(adaptive.stderr)?.[1]);
      // (the share the summary says decides it: at 5 % and above, the line; below, none)
      if (stopped >= 5) expect(hint.exec(adaptive.stderr)?.[1], adaptive.stderr).toBe(String(stopped.toFixed(1)));
      else expect(adaptive.stderr).not.toMatch(hint);
      const interrupt = pyunwind(['record', '-q', '--copy', 'interrupt', '-d', '1', '-o', file, '--pid', String(child.pid)]);
      expect(interrupt.status, interrupt.stderr).toBe(0);
      expect(interrupt.stderr).not.toMatch(/--copy interrupt would/);
      console.log(`[record-interrupt] hint: adaptive stopped the target ${stopped} % of its time`);
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('a rate above what the recorder can take is refused in one line, before anything is loaded', () => {
    const file = path.join(dir, 'fast.pyuw');
    const r = pyunwind(['record', '--copy', 'interrupt', '-r', '20k', '-o', file, '--pid', String(process.pid)]);
    expect(r.stderr).toBe('pyunwind record: --rate 20000: copies at the interrupt go up to 10000 Hz (what the recorder can make samples of) (try: pyunwind record --help)\n');
    expect(r.status).toBe(2);
    expect(fs.existsSync(file)).toBe(false);
  });

  it('a recorder killed mid-recording leaves no program of ours, and its capture reads back', async (ctx) => {
    const why = cannotTryKernelCopies();
    if (why) skipTest(ctx, 'record-interrupt', 'cleanup', why);
    const { child } = await start(py.command, PROGRAM);
    const file = path.join(dir, 'killed.pyuw');
    const recorder = spawn(process.execPath, [BIN, 'record', '-q', '--copy', 'interrupt', '-o', file, '--pid', String(child.pid)], { stdio: 'ignore' });
    children.push(recorder);
    try {
      // (a block is written every second: wait for the first, then for the program listed)
      await waitUntil(() => fs.existsSync(file) && fs.statSync(file).size > 4096, 'the recorder to write a block', 60_000);
      // (ours: the recorder's — other tests may load theirs meanwhile)
      const ours = programsOf(recorder.pid!);
      expect(ours.length).toBe(2);
      expect(stillLoaded(ours)).toEqual(ours);
      const ended = new Promise((r) => recorder.once('exit', r));
      recorder.kill('SIGKILL');
      await ended;
      // (the kernel frees a program when its last descriptor closes; the release can lag the exit)
      await waitUntil(() => stillLoaded(ours).length === 0, 'the programs to be gone after the recorder was killed', 10_000);
      const r = pyunwind(['report', '-q', file, '-f', 'json']);
      expect(r.status, r.stderr).toBe(0);
      expect((JSON.parse(r.stdout) as ReportJson).summary.attempted).toBeGreaterThan(0);
    } finally {
      child.kill('SIGKILL');
    }
  });
});
