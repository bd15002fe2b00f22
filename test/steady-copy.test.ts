// The steady copy (src/record/copy/steady-copy.ts) against the general copier, on real programs.
//
// A real program (threads, asyncio tasks: frames inside and outside the data-stack chunks) is
// frozen with SIGSTOP at several moments; at each, one copier with steady copies and one
// without copy every thread a few times. The memory does not change while the program is
// stopped, so the two must agree exactly: the same threads, the same regions with the same
// bytes, the same verdicts. The steady copier must have made its copies itself (3.14+, where
// it applies) — and none where it does not apply.
import { spawn, type ChildProcess } from 'node:child_process';
import { afterAll, describe, expect, it } from 'vitest';
import { MemoryCopier } from '../src/record/copy/copier.js';
import type { ThreadSnapshot } from '../src/record/copy/thread-snapshot.js';
import { openLinuxProcess } from '../src/record/linux/process.js';
import { liveThreadStates } from '../src/record/copy/thread-list.js';
import { SteadyCopy } from '../src/record/copy/steady-copy.js';
import { AnchorTrust } from '../src/record/copy/consistency.js';
import { recordCoverage, skipTest, cannotRun } from './helpers/coverage.js';
import { nativeInterpreters } from '../harness/interpreters.js';
import { freeze, threadState, untilReadable, waitUntil } from './helpers/wait.js';

const running: ChildProcess[] = [];
afterAll(() => running.forEach((p) => p.kill('SIGKILL')));

/** What a copy says, in a form to compare. */
function summary(t: ThreadSnapshot): unknown {
  return {
    tstate: t.threadStateAddress.toString(16),
    threadId: t.threadId.toString(16),
    nativeThreadId: t.nativeThreadId.toString(),
    holdsGil: t.holdsGil,
    mainThread: t.mainThread,
    unproven: t.unproven,
    errors: t.errors,
    regions: t.regions.map((r) => `${r.address.toString(16)}:${Buffer.from(r.bytes).toString('base64')}`),
  };
}

const PROGRAMS = [
  { name: 'threadpool', args: ['workloads/threadpool.py', '60'] },
  { name: 'asynciotasks', args: ['workloads/asynciotasks.py', '60'] },
];

describe.each(nativeInterpreters())('steady copies equal the general copier, $label', (py) => {
  if (py.missing) {
    cannotRun('steady-copy', py.label, py.missing!);
    return;
  }
  it.each(PROGRAMS)('$name: the same copy at each of 6 moments', async (program) => {
    const child = spawn(py.command, program.args, { stdio: 'ignore', env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' } });
    running.push(child);
    const pid = child.pid!;
    await untilReadable(pid);
    const source = openLinuxProcess(pid);
    // (without the bytecode: its refreshes — 10 ms after a code object is first seen, then 20,
    // 40, … — make a steady copy give way to the general path on a schedule of their own, and
    // the two copiers' schedules differ; what is compared here is the copy of the stacks)
    // (the program is frozen while it is copied: where nothing proves a copy — the thread
    // holding the GIL, without the anchor — its readings agree, and are kept as optimistic
    // mode keeps them, so that both copiers have copies to compare)
    const applies = source.layout.interp.codeObjectGeneration !== null && source.layout.tstate.cframeCurrentFrame === null;
    // Both copiers write the profiler anchor (3.15+), and there is one in each thread state:
    // each would take the other's writes for the interpreter's moves (consistency.ts,
    // AnchorTrust), and trust what it alone would not. So at each moment two new copiers, which
    // know nothing yet, start from the same anchors, and each sees only its own writes: the
    // anchors are set to its view before its pass, and its view taken back after it.
    const lpf = source.layout.tstate.lastProfiledFrame;
    const P = source.layout.pointerSize;
    const anchors = (): Map<bigint, Uint8Array> => {
      const m = new Map<bigint, Uint8Array>();
      if (lpf !== null) for (const ts of liveThreadStates(source, source.layout)) {
        const b = source.tryRead(ts + BigInt(lpf), P);
        if (b) m.set(ts, b);
      }
      return m;
    };
    const setAnchors = (m: Map<bigint, Uint8Array>): void => {
      for (const [ts, b] of m) source.write!(ts + BigInt(lpf!), b);
    };
    let compared = 0;
    let steadyCopies = 0;
    try {
      // until the program is in its stride (every thread started)
      const probe = new MemoryCopier(source, { steady: false, bytecode: false, keepAgreeing: true, consistency: 'reread' });
      await waitUntil(() => probe.copyAll().length >= (program.name === 'threadpool' ? 5 : 1), 'the program started');
      for (let moment = 0; moment < 6; moment++) {
        await new Promise((r) => setTimeout(r, 20 + moment * 15));
        await freeze(pid);
        // (without the bytecode: its refreshes — 10 ms after a code object is first seen, then
        // 20, 40, … — make a steady copy give way to the general path on a schedule of their
        // own, and the two copiers' schedules differ; what is compared here is the copy of the
        // stacks)
        // (the program is frozen while it is copied: where nothing proves a copy — the thread
        // holding the GIL, without the anchor — its readings agree, and are kept as optimistic
        // mode keeps them, so that both copiers have copies to compare)
        const general = new MemoryCopier(source, { steady: false, bytecode: false, keepAgreeing: true });
        const steady = new MemoryCopier(source, { bytecode: false, keepAgreeing: true });
        try {
          let generalView = anchors();
          let steadyView = new Map(generalView);
          // a few passes each: the first ones learn the plan (and place the anchor, the same way)
          let a: ThreadSnapshot[] = [];
          let b: ThreadSnapshot[] = [];
          for (let pass = 0; pass < 4; pass++) {
            setAnchors(generalView);
            a = general.copyAll();
            generalView = anchors();
            setAnchors(steadyView);
            b = steady.copyAll();
            steadyView = anchors();
          }
          expect(b.map(summary)).toEqual(a.map(summary));
          expect([...steady.used].sort()).toEqual([...general.used].sort());
          expect(general.steadyCopies).toBe(0);
          compared += a.length;
          steadyCopies += steady.steadyCopies;
        } finally {
          general.clearAnchors();
          steady.clearAnchors();
          process.kill(pid, 'SIGCONT');
        }
      }
      expect(threadState(pid, pid)).not.toBe('T');
    } finally {
      source.close();
      child.kill('SIGKILL');
    }
    if (applies) expect(steadyCopies).toBeGreaterThan(compared);
    else expect(steadyCopies).toBe(0);
    recordCoverage('steady-copy', py.label, true);
  }, 120_000);
});

// The later readings, on real memory: a reading that moved is simulated by changing, after the
// read, the instruction pointer of the frame below the innermost one (which the check
// compares) — differently in each reading changed. With the first j readings changed, the copy
// must be reading j, checked against the next — the same bytes as the general copier's of the
// frozen program. With every reading but the last changed, no two successive readings agree:
// the copy is unproven. With the count of code-object deaths read after the readings above the
// one read before them, the copy is left to the general copier.
describe.each(nativeInterpreters())('the steady copy\'s later readings, $label', (py) => {
  if (py.missing) {
    cannotRun('steady-copy-readings', py.label, py.missing!);
    return;
  }
  it('takes the first reading the next one agrees with, and says unproven when none does', async (ctx) => {
    const child = spawn(py.command, ['workloads/deep.py', '60', '12'], { stdio: 'ignore', env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' } });
    running.push(child);
    const pid = child.pid!;
    await untilReadable(pid);
    const source = openLinuxProcess(pid);
    const L = source.layout;
    if (L.interp.codeObjectGeneration === null || L.tstate.cframeCurrentFrame !== null) {
      source.close();
      child.kill('SIGKILL');
      // no steady copies on this version (the test above checks that none is made): said, not silent
      const why = L.interp.codeObjectGeneration === null ? 'no steady copy before 3.14: no count of code-object deaths' : 'no steady copy: frames behind a cframe';
      return skipTest(ctx, 'steady-copy-readings', py.label, why, false);
    }
    const general = new MemoryCopier(source, { steady: false, consistency: 'reread', keepAgreeing: true });
    try {
      await waitUntil(() => general.copyAll().some((t) => t.regions.length > 1), 'the program started');
      await new Promise((r) => setTimeout(r, 50));
      await freeze(pid);
      const [thread] = general.copyAll();
      const snap = thread!;
      // (the thread state's region by its address: the regions need not start with it)
      const tsRegion = snap.regions.find((r) => r.address === snap.threadStateAddress)!;
      expect(tsRegion, `regions ${snap.regions.map((r) => r.address.toString(16)).join(' ')}`).toBeDefined();
      const tsBytes = tsRegion.bytes;
      const tsView = new DataView(tsBytes.buffer, tsBytes.byteOffset);
      const interp = tsView.getBigUint64(L.tstate.interp, true);
      const others = snap.regions.filter((r) => r !== tsRegion);
      const plan = {
        tstateLength: tsBytes.length,
        chunks: others.filter((r) => r.bytes.length !== L.frame.size).map((r) => ({ address: r.address, used: r.bytes.length })),
        outside: others.filter((r) => r.bytes.length === L.frame.size).map((r) => r.address),
      };
      // the instruction pointer of the frame below the innermost
      const frameAt = (address: bigint): { region: number; offset: number } => {
        const region = others.findIndex((r) => address >= r.address && address < r.address + BigInt(r.bytes.length));
        const what = `frame 0x${address.toString(16)} in none of ${others.map((r) => `${r.address.toString(16)}+${r.bytes.length}`).join(' ')} (copy: unproven ${snap.unproven}, errors ${JSON.stringify(snap.errors)})`;
        expect(region, what).toBeGreaterThanOrEqual(0);
        return { region, offset: Number(address - others[region]!.address) };
      };
      const inner = frameAt(tsView.getBigUint64(L.tstate.currentFrame, true));
      const innerBytes = others[inner.region]!.bytes;
      const below = innerBytes.length >= inner.offset + L.frame.size ? new DataView(innerBytes.buffer, innerBytes.byteOffset).getBigUint64(inner.offset + L.frame.previous, true) : 0n;
      expect(below).not.toBe(0n);
      let spoil = 0; // readings to change after each read, from the first
      let deathDuringRead = false; // the count of code-object deaths read last is one more than read first
      let spoilAt: number[] = []; // where the instruction pointer is in each reading
      const wrapped = Object.assign(Object.create(source) as typeof source, {
        prepareRead(ranges: readonly { address: bigint; length: number }[]) {
          const real = source.prepareRead(ranges);
          return {
            bytes: real.bytes,
            length: real.length,
            read(): number {
              const got = real.read();
              for (let k = 0; k < spoil; k++) real.bytes[spoilAt[k]!] = real.bytes[spoilAt[k]!]! ^ (k + 1);
              if (deathDuringRead) real.bytes[real.length - 8] = real.bytes[real.length - 8]! + 1;
              return got;
            },
          };
        },
      });
      const steady = new SteadyCopy(wrapped, L, snap.threadStateAddress, interp, interp + BigInt(L.interp.codeObjectGeneration), plan, false, 8192);
      const readings = steady.readings;
      expect(readings).toBeGreaterThanOrEqual(3);
      spoilAt = Array.from({ length: readings }, (_, k) => steady.at(k, below + BigInt(L.frame.instrPtr)));
      expect(spoilAt.every((o) => o >= 0)).toBe(true);
      // (no anchor, no GIL read: the readings' agreement is what is judged, as optimistic mode keeps it)
      const hooks = { confirmed: () => true, bytecodeRange: () => null, refreshRound: () => 0, placeAnchor: () => {}, anchor: new AnchorTrust(), trustAgreement: true };
      const same = (r: ReturnType<typeof steady.copy>): void => {
        expect(r).not.toBeNull();
        expect(r!.regions.map((x) => `${x.address.toString(16)}:${Buffer.from(x.bytes).toString('base64')}`)).toEqual(snap.regions.map((x) => `${x.address.toString(16)}:${Buffer.from(x.bytes).toString('base64')}`));
      };
      for (spoil = 0; spoil < readings - 1; spoil++) {
        const got = steady.copy(hooks);
        same(got);
        expect(got!.unproven).toBe(false);
      }
      spoil = readings - 1;
      const unproven = steady.copy(hooks);
      expect(unproven).not.toBeNull();
      expect(unproven!.unproven).toBe(true);
      // a code object died while the readings were made: which ones saw it alive is not known,
      // so the general copier makes the copy
      spoil = 0;
      deathDuringRead = true;
      expect(steady.copy(hooks)).toBeNull();
      deathDuringRead = false;
      same(steady.copy(hooks));
      process.kill(pid, 'SIGCONT');
      recordCoverage('steady-copy-readings', py.label, true);
    } finally {
      source.close();
      child.kill('SIGKILL');
    }
  }, 60_000);
});
