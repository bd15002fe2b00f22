// record --native, then report --native, on every native interpreter: a C extension built here
// with -fomit-frame-pointer (workloads/cext/cwork.c: crunch → mix_outer → mix_inner, whose code
// uses rbp as a register of its own, so that only its unwind tables can find its callers) is
// called from Python (workloads/cext/share.py), which measures its own share of time in it.
// - its functions appear under the Python function that called them, in the order they call
//   each other, with only C below them;
// - the share of the main thread's samples in them is the program's own, within 5 points;
// - almost every sample shows native frames (the rest are counted, never shown);
// - in pprof, its functions' locations are in its mapping, which has its build id;
// - top --native shows them live.
// With --copy interrupt: the same, the running
// thread's registers and stack copied in the kernel at the tick, and nothing stopped; and a
// thread that naps in time.sleep beside it — copied by the recorder while it stays off its CPU,
// from the registers the kernel saw it leave its CPU with — shows C frames down to libc below
// its Python caller in almost every sample.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { gunzipSync } from 'node:zlib';
import { Profile as PprofProfile } from 'pprof-format';
import { nativeInterpreters } from '../harness/interpreters.js';
import { parseElf } from '../src/record/linux/elf.js';
import { cannotRun, recordCoverage, skipTest } from './helpers/coverage.js';
import { cannotTryKernelCopies, withInterruptCases } from './helpers/bpf.js';

const BIN = path.resolve('bin/pyunwind.js');
const SOURCE = path.resolve('workloads/cext/cwork.c');
const PROGRAM = path.resolve('workloads/cext/share.py');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pyunwind-native-record-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

function run(cmd: string, args: string[], env: NodeJS.ProcessEnv = {}): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(cmd, args, { encoding: 'utf8', timeout: 180_000, maxBuffer: 256 << 20, env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1', ...env } });
  return { status: r.status, stdout: r.stdout ?? '', stderr: r.stderr ?? String(r.error ?? '') };
}


/** share.py with a thread beside it that naps in time.sleep (`nap`), for the recorder to copy off its CPU */
const NAPPING = `import runpy, sys, threading, time
def nap():
    while True:
        time.sleep(0.002)
threading.Thread(target=nap, name="napper", daemon=True).start()
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
`;

const cases = withInterruptCases(nativeInterpreters());

describe.each(cases)('record --native, $py.label, copied at the interrupt: $interrupt', ({ py, interrupt }) => {
  const what = interrupt ? 'native-record interrupt' : 'native-record';
  if (py.missing) {
    cannotRun(what, py.label, py.missing!);
    return;
  }
  it('a C extension without frame pointers, under its Python caller, with the share the program measures', (ctx) => {
    if (run('gcc', ['--version']).status !== 0) skipTest(ctx, what, py.label, 'gcc is not installed (apt install gcc)');
    const why = interrupt ? cannotTryKernelCopies() : null;
    if (why) skipTest(ctx, what, py.label, why);
    const out = path.join(dir, `${py.label}${interrupt ? '-interrupt' : ''}`);
    fs.mkdirSync(out, { recursive: true });
    const where = run(py.command, ['-c', "import sysconfig; print(sysconfig.get_paths()['include']); print(sysconfig.get_config_var('EXT_SUFFIX'))"]);
    expect(where.status, where.stderr).toBe(0);
    const [include, suffix] = where.stdout.trim().split('\n') as [string, string];
    // (Debian keeps pyconfig.h under the multiarch directory beside python3.N)
    const cc = run('gcc', ['-shared', '-fPIC', '-O2', '-fomit-frame-pointer', `-I${include}`, `-I${path.dirname(include)}`, '-o', path.join(out, `cwork${suffix}`), SOURCE]);
    expect(cc.status, cc.stderr).toBe(0);

    const file = path.join(out, 'share.pyuw');
    // (10 s: on a loaded machine the recorder gets ~150 ticks/s, and the share rests on the samples it got)
    const napping = path.join(out, 'napping.py');
    fs.writeFileSync(napping, NAPPING);
    const rec = interrupt
      ? run(process.execPath, [BIN, 'record', '--native', '--copy', 'interrupt', '-r', '1000', '-o', file, '--', py.command, napping, PROGRAM, '10'], { PYTHONPATH: out })
      : run(process.execPath, [BIN, 'record', '-q', '--native', '-r', '1000', '-o', file, '--', py.command, PROGRAM, '10'], { PYTHONPATH: out });
    expect(rec.status, rec.stderr).toBe(0);
    const own = JSON.parse(rec.stdout.trim().split('\n').pop()!) as { c_share: number };
    if (interrupt) {
      // nothing stopped; the running thread's samples copied in the kernel (how many depends on
      // the load: a thread waiting for a CPU is the recorder's to copy)
      expect(rec.stderr).toMatch(/copied with the target stopped 0\.0% \(stopped 0\.0% of the time\)/);
      const kernel = /copied in the kernel ([\d.]+)%/.exec(rec.stderr);
      expect(kernel, rec.stderr).not.toBeNull();
      expect(Number(kernel![1])).toBeGreaterThan(0);
    }

    // top --native: the same C functions, live (three refreshes: on a loaded machine the first
    // can come before the recorder has more than a sample or two; the view adds up the run)
    if (!interrupt) {
      const top = run(process.execPath, [BIN, 'top', '--native', '--iterations', '3', '--interval', '2', '--', py.command, PROGRAM, '8'], { PYTHONPATH: out });
      expect(top.status, top.stderr).toBe(0);
      expect(top.stdout, top.stdout).toMatch(/mix_inner\S* \(\S*cwork/);
    }

    // the extension is gone: the capture alone unwinds and names its frames
    const so = path.join(out, `cwork${suffix}`);
    const buildId = parseElf(fs.readFileSync(so), so).buildId();
    fs.rmSync(so);
    const rep = run(process.execPath, [BIN, 'report', '--native', '--format', 'collapsed', file]);
    expect(rep.status, rep.stderr).toBe(0);
    let total = 0;
    let inC = 0;
    // the napping thread's samples, and those whose leaf is in libc below its Python caller
    let naps = 0;
    let napsInLibc = 0;
    for (const line of rep.stdout.trim().split('\n')) {
      const at = line.lastIndexOf(' ');
      const frames = line.slice(0, at).split(';');
      const n = Number(line.slice(at + 1));
      if (frames[0]!.includes('napper')) {
        naps += n;
        const caller = frames.findIndex((f) => f.startsWith('nap ('));
        if (caller > 0 && /^\S+ \(\S*libc\.so/.test(frames[frames.length - 1]!) && frames.slice(caller + 1).every((f) => !f.includes('.py:'))) napsInLibc += n;
        continue;
      }
      if (!frames[0]!.includes('MainThread')) continue;
      total += n;
      const names = frames.slice(1).map((f) => f.replace(/ \(.*\)$/, ''));
      const ours = names.map((f, i) => (/^(cwork_crunch|mix_outer|mix_inner)/.test(f) && frames[i + 1]!.includes(`cwork${suffix}`) ? f.replace(/\..*$/, '') : null));
      const first = ours.findIndex((o) => o !== null);
      if (first < 0) continue;
      inC += n;
      // in_c → (the interpreter's call) → cwork_crunch → mix_outer → mix_inner, the leaf
      const chain = ours.filter((o) => o !== null);
      expect(['cwork_crunch', 'mix_outer', 'mix_inner'].slice(0, chain.length), line).toEqual(chain);
      expect(names.lastIndexOf('in_c'), line).toBeGreaterThanOrEqual(0);
      expect(names.lastIndexOf('in_c'), line).toBeLessThan(first);
      // past the extension's first frame, only C (its own, or what it calls: the GIL taken back)
      expect(frames.slice(first + 2).every((f) => !f.includes('.py:')), line).toBe(true);
    }
    // pprof: the extension's functions at locations of its mapping, with its build id
    const pp = spawnSync(process.execPath, [BIN, 'report', '--native', '--format', 'pprof', file], { maxBuffer: 256 << 20 });
    const prof = PprofProfile.decode(gunzipSync(pp.stdout));
    const str = (i: number | bigint): string => prof.stringTable.strings[Number(i)]!;
    const mapping = prof.mapping.find((m) => str(m.filename).endsWith(`cwork${suffix}`));
    expect(mapping).toBeDefined();
    if (buildId) expect(str(mapping!.buildId)).toBe(buildId);
    const inner = prof.function.find((f) => str(f.name).startsWith('mix_inner'))!;
    const loc = prof.location.find((l) => l.line.some((x) => Number(x.functionId) === Number(inner.id)))!;
    expect(Number(loc.mappingId)).toBe(Number(mapping!.id));
    const summary = run(process.execPath, [BIN, 'report', '--native', '--format', 'json', file]);
    const stats = (JSON.parse(summary.stdout) as { summary: { attempted: number; trusted: number; statuses: Record<string, number> } }).summary;
    console.log(
      `[${what}] ${py.label}: ${total} main-thread samples, ${inC} in cwork (${((100 * inC) / total).toFixed(1)} %), program ${(100 * own.c_share).toFixed(1)} %; statuses ${JSON.stringify(stats.statuses)}` +
        (interrupt ? `; napper ${naps} samples, ${napsInLibc} with C frames down to libc` : ''),
    );
    expect(total).toBeGreaterThan(100);
    expect(Math.abs(inC / total - own.c_share)).toBeLessThanOrEqual(0.05);
    expect(stats.trusted / stats.attempted).toBeGreaterThan(0.95);
    if (interrupt) {
      expect(naps).toBeGreaterThan(100);
      expect(napsInLibc / naps).toBeGreaterThan(0.9);
    }
    recordCoverage(what, py.label, true);
  }, 300_000);
});
