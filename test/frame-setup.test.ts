// A copy that caught the innermost frame while CPython set it up. A Python call made where the
// frame that just returned lay (the next call of a loop, at the same depth) writes the new
// frame's code object before its instruction pointer: a copy reading in between finds one
// function's code with the other's instruction pointer. The two readings of a checked copy
// cannot see it — the innermost frame's instruction pointer changes as it runs, so it is not
// compared — and the walk would reject the sample as `corrupt` (workloads/reuse.py, recorded
// for a minute, showed one in 5,000 samples; a loop of two calls, one in 70,000 at 5 kHz).
// The recorder checks that pointer against the frame's code object: such a copy was not proven.
//
// Real memory, one write faked: a program stopped at a known stack (test/fixtures/
// two_moments.py, moment A), read through a source that, once, gives the first reading the
// innermost frame's instruction pointer set to its caller's (a pointer into another code object).
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { MemoryCopier } from '../src/record/copy/copier.js';
import { openLinuxProcess } from '../src/record/linux/process.js';
import { copierFor } from '../src/record/copy/modes.js';
import { takeSnapshot, snapshotSamples } from '../src/record/copy/snapshot.js';
import type { MemorySource, PreparedRead } from '../src/record/copy/source.js';
import { openStopper } from '../src/record/linux/stopper.js';
import { unwindSnapshot, type ThreadStack } from '../src/pipeline/snapshot-stacks.js';
import { TRUSTED } from '../src/walk/status.js';
import { recordCoverage, cannotRun } from './helpers/coverage.js';
import { checkedWalker } from './helpers/walkers.js';
import { nativeInterpreters } from '../harness/interpreters.js';
import { spawnInteractive, type Interactive } from '../harness/spawn.js';

const PROGRAM = path.resolve('test/fixtures/two_moments.py');
const running: Interactive[] = [];
afterAll(() => running.forEach((p) => p.kill()));

type Range = { address: bigint; length: number };

/**
 * `inner`, but while `armed` is above 0 each gathered read (readv, or a prepared read's read())
 * gets `bytes` at `address` in the first range that holds them — the first reading — and
 * counts `armed` down. Other reads are left alone.
 */
function oneTear(inner: MemorySource, address: bigint, bytes: Uint8Array): MemorySource & { armed: number; applied: number } {
  const at = (ranges: readonly Range[]): { index: number; offset: number } | null => {
    for (let i = 0; i < ranges.length; i++) {
      const off = address - ranges[i]!.address;
      if (off >= 0n && off + BigInt(bytes.length) <= BigInt(ranges[i]!.length)) return { index: i, offset: Number(off) };
    }
    return null;
  };
  const torn = {
    armed: 0,
    applied: 0,
    description: inner.description,
    runtimeAddress: inner.runtimeAddress,
    layout: inner.layout,
    ...(inner.nativeThreadIds !== undefined ? { nativeThreadIds: inner.nativeThreadIds } : {}),
    read: (a: bigint, n: number) => inner.read(a, n),
    tryRead: (a: bigint, n: number) => inner.tryRead(a, n),
    ...(inner.write ? { write: (a: bigint, b: Uint8Array) => inner.write!(a, b) } : {}),
    close: () => inner.close(),
    readv(ranges: readonly Range[]): (Uint8Array | null)[] {
      const got = inner.readv!(ranges);
      const where = torn.armed > 0 ? at(ranges) : null;
      const hit = where && got[where.index];
      if (where && hit) {
        torn.armed--;
        torn.applied++;
        const copy = hit.slice();
        copy.set(bytes, where.offset);
        got[where.index] = copy;
      }
      return got;
    },
    prepareRead(ranges: readonly Range[]): PreparedRead {
      const prepared = inner.prepareRead!(ranges);
      const where = at(ranges);
      const start = where ? ranges.slice(0, where.index).reduce((n, r) => n + r.length, 0) + where.offset : -1;
      return {
        get bytes() {
          return prepared.bytes;
        },
        get length() {
          return prepared.length;
        },
        read() {
          const n = prepared.read();
          if (torn.armed > 0 && start >= 0 && n === prepared.length) {
            torn.armed--;
            torn.applied++;
            prepared.bytes.set(bytes, start);
          }
          return n;
        },
      };
    },
  };
  return torn;
}

describe.each(nativeInterpreters())('a frame caught while it was set up, $label', (py) => {
  if (py.missing) {
    cannotRun('frame-setup', py.label, py.missing!);
    return;
  }

  it('is never walked: the copy is not proven, and is made again', async () => {
    const p = spawnInteractive(py.command, [PROGRAM]);
    running.push(p);
    await p.waitFor('A');
    const inner = openLinuxProcess(p.pid);
    const L = inner.layout;
    const walker = await checkedWalker();
    const names = (t: ThreadStack): string[] => t.frames.map((f) => `${f.qualname}:${f.line}`);

    // the stack as it is (the program waits): moment's frame innermost, deep's below it
    const honest = unwindSnapshot(snapshotSamples(takeSnapshot(inner)), walker)[0]!;
    expect(TRUSTED.has(honest.status), honest.status).toBe(true);
    expect(honest.frames.slice(0, 2).map((f) => f.qualname)).toEqual(['moment', 'deep']);
    const [innermost, caller] = honest.walk.frames;
    const ip = new Uint8Array(L.pointerSize);
    new DataView(ip.buffer).setBigUint64(0, caller!.instrPtr, true);
    const source = oneTear(inner, innermost!.frame + BigInt(L.frame.instrPtr), ip);

    // (1) the general copy, not made again: the copy is not proven (torn); its bytes would walk as corrupt
    // (its readings' agreement is what would pass the torn reading: optimistic mode's rule
    // where nothing proves a copy)
    const general = new MemoryCopier(source, { steady: false, retries: 0, keepAgreeing: true, consistency: 'reread' });
    takeSnapshot(source, { copier: general });
    source.armed = 1;
    const once = takeSnapshot(source, { copier: general });
    expect(source.applied, 'the first reading got the caller instruction pointer').toBe(1);
    const torn = unwindSnapshot(snapshotSamples(once), walker)[0]!;
    expect(once.threads[0]!.unproven).toBe(true);
    expect(torn.status).toBe('torn');
    expect(torn.walk.status, 'the torn bytes, walked anyway').toBe('corrupt');
    expect(torn.walk.failAddress, `${JSON.stringify(torn.walk, (k, v) => (typeof v === "bigint" ? v.toString(16) : v))} caller ${caller!.frame.toString(16)} inner ${innermost!.frame.toString(16)}`).toBe(caller!.instrPtr);

    // (2) adaptive, as `record` copies: the copy is made again (with the thread stopped, or
    // from a later reading of the steady copy's five), nothing lost. Without the anchor
    // (before 3.15) adaptive copies a thread that may run Python stopped first — or, as here
    // where the program waits for its input, proven asleep by the kernel (off-cpu.ts): there
    // is no reading made while it runs to tear.
    const stopper = openStopper(p.pid);
    try {
      const adaptive = copierFor(source, { copy: 'adaptive', stopper });
      takeSnapshot(source, { copier: adaptive });
      takeSnapshot(source, { copier: adaptive });
      const anchored = L.tstate.lastProfiledFrame !== null;
      if (anchored) source.armed = 1;
      const again = takeSnapshot(source, { copier: adaptive });
      source.armed = 0;
      if (anchored) expect(source.applied).toBe(2);
      else expect(again.threads[0]!.stopped || again.threads[0]!.offCpuProof, 'copied stopped first, or proven asleep').toBe(true);
      const kept = unwindSnapshot(snapshotSamples(again), walker)[0]!;
      expect(kept.status).toBe(honest.status);
      expect(names(kept)).toEqual(names(honest));
    } finally {
      stopper.close();
    }

    // (3) 3.14+: the steady copy (five readings in one call) keeps the first reading that
    // holds (the anchor proves it, or on 3.14 it agrees with the next) — not the torn first one. (A copier makes steady copies from its
    // second copy of a thread on, and gives a copy to the general path when a code object's
    // bytecode is due for a refresh: tried until a steady copy got the torn reading.)
    if (L.interp.codeObjectGeneration !== null) {
      // (the readings' agreement where the anchor cannot prove the copy: 3.14, as optimistic mode keeps it)
      const steady = new MemoryCopier(source, { retries: 0, keepAgreeing: true });
      let shown = false;
      for (let i = 0; i < 20 && !shown; i++) {
        takeSnapshot(source, { copier: steady });
        takeSnapshot(source, { copier: steady });
        const before = steady.steadyCopies;
        const applied = source.applied;
        source.armed = 1;
        const s = takeSnapshot(source, { copier: steady });
        source.armed = 0;
        if (steady.steadyCopies === before || source.applied === applied) continue;
        shown = true;
        const kept = unwindSnapshot(snapshotSamples(s), walker)[0]!;
        expect(kept.status).toBe(honest.status);
        expect(names(kept)).toEqual(names(honest));
      }
      expect(shown, 'a steady copy read the torn reading').toBe(true);
    }
    source.close();
    recordCoverage('frame-setup', py.label, true);
  });
});
