// The base-frame check on real memory. A program stops at two moments (test/fixtures/
// two_moments.py); pyunwind copies its memory at each, and the test builds torn copies out of
// those real bytes: a `previous` pointer zeroed in a copied frame, the generator frame as it
// was after the generator was suspended, and the thread state of one moment with the chunks of
// the other. On 3.15 (bottom rule `base-frame`) every one is rejected while the consistent
// copies are complete. On 3.12–3.14 (`entry-frame`) and 3.11 (`is-entry-flag`) the test shows
// which of them the structural checks catch there and which they cannot (3.11 and 3.12 copy the
// calling eval loop's _PyCFrame too, which the running loop's entry frame must lead to).
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { BottomRule } from '../src/layout/layout.js';
import { openLinuxProcess } from '../src/record/linux/process.js';
import { MemoryCopier } from '../src/record/copy/copier.js';
import type { CodeRecord } from '../src/capture/types.js';
import { takeSnapshot, type Snapshot, snapshotSamples } from '../src/record/copy/snapshot.js';
import { unwindSnapshot, type ThreadStack } from '../src/pipeline/snapshot-stacks.js';
import { TRUSTED } from '../src/walk/status.js';
import { readPointer } from '../src/walk/region-memory.js';
import type { Region } from '../src/walk/types.js';
import { recordCoverage, cannotRun } from './helpers/coverage.js';
import { nativeInterpreters } from '../harness/interpreters.js';
import { spawnInteractive, type Interactive } from '../harness/spawn.js';
import { checkedWalker } from './helpers/walkers.js';
import { readsOuterCframe } from '../src/record/copy/thread-copy.js';

const PROGRAM = path.resolve('test/fixtures/two_moments.py');
const running: Interactive[] = [];
afterAll(() => running.forEach((p) => p.kill()));

/** The regions with `length` bytes at `address` replaced (copy-on-write: inputs are not changed). */
function patch(regions: Region[], address: bigint, bytes: Uint8Array): Region[] {
  let done = false;
  const out = regions.map((r) => {
    const off = address - r.address;
    if (done || off < 0n || off + BigInt(bytes.length) > BigInt(r.bytes.length)) return r;
    done = true;
    const copy = r.bytes.slice();
    copy.set(bytes, Number(off));
    return { address: r.address, bytes: copy };
  });
  if (!done) throw new Error(`0x${address.toString(16)} is not in the copy`);
  return out;
}

function readPtrIn(regions: Region[], address: bigint, size: 4 | 8): bigint {
  for (const r of regions) {
    const off = address - r.address;
    if (off >= 0n && off + BigInt(size) <= BigInt(r.bytes.length)) return readPointer(r.bytes, Number(off), size);
  }
  throw new Error(`0x${address.toString(16)} is not in the copy`);
}

function withRegions(s: Snapshot, regions: Region[], codeObjects?: CodeRecord[]): Snapshot {
  return { ...s, threads: [{ ...s.threads[0]!, regions }], codeObjects: codeObjects ?? s.codeObjects };
}

interface Case {
  name: string;
  snapshot: Snapshot;
  /** rejected here (by the bottom rule, and on 3.11/3.12 the calling loop's _PyCFrame); where not, the test shows it is (wrongly) accepted */
  caught: boolean;
}

describe.each(nativeInterpreters())('torn copies from real memory, $label', (py) => {
  if (py.missing) {
    cannotRun('torn-copies', py.label, py.missing!);
    return;
  }

  it('rejects cut and mixed chains; shows what each bottom rule catches', async () => {
    const p = spawnInteractive(py.command, [PROGRAM]);
    running.push(p);
    await p.waitFor('A');
    const source = openLinuxProcess(p.pid);
    const layout = source.layout;
    const P = layout.pointerSize;
    // (the program waits at each moment: its readings agree — kept as optimistic mode keeps
    // them where nothing else proves a copy)
    const copier = new MemoryCopier(source, { keepAgreeing: true, consistency: 'reread' });
    const A = takeSnapshot(source, { copier });
    p.send('');
    await p.waitFor('B');
    const B = takeSnapshot(source, { copier });
    const walker = await checkedWalker();
    const unwind = (s: Snapshot): ThreadStack => unwindSnapshot(snapshotSamples(s), walker)[0]!;
    const trusted = layout.bottom === 'base-frame' ? 'complete' : 'complete-unverifiable';
    const by = (...rules: BottomRule[]): boolean => rules.includes(layout.bottom);
    // 3.11, 3.12: the calling eval loop's _PyCFrame is copied, and checked against
    const callingLoop = readsOuterCframe(layout);

    // The consistent copies are trusted and have the shapes the program describes.
    const a = unwind(A);
    const b = unwind(B);
    expect(a.status).toBe(trusted);
    expect(b.status).toBe(trusted);
    const names = (t: ThreadStack) => t.frames.map((f) => f.qualname).reverse();
    expect(names(a)).toEqual(['<module>', 'driver', 'gen', ...Array(6).fill('deep'), 'moment']);
    expect(names(b)).toEqual(['<module>', 'driver', 'shallow', 'moment']);

    const frameOf = (name: string, nth = 0) => a.walk.frames.filter((_, i) => a.frames[i]!.qualname === name)[nth]!.frame;
    const prevOffset = BigInt(layout.frame.previous);
    const zero = new Uint8Array(P);
    const regionsA = A.threads[0]!.regions;
    const genFrame = frameOf('gen');
    const belowGen = readPtrIn(regionsA, genFrame + prevOffset, P);

    // the generator's frame as it is at moment B: suspended, no longer linked
    const genAtB = source.read(genFrame, layout.frame.size);
    expect(readPointer(genAtB, layout.frame.previous, P), 'a suspended generator frame has previous = NULL').toBe(0n);

    const cases: Case[] = [
      {
        name: 'previous zeroed in a Python frame (deep)',
        snapshot: withRegions(A, patch(regionsA, frameOf('deep', 2) + prevOffset, zero)),
        caught: true,
      },
      {
        name: 'previous zeroed in the generator frame',
        snapshot: withRegions(A, patch(regionsA, genFrame + prevOffset, zero)),
        // 3.11 marks a generator resumed from C as an entry frame, and a chain ending there would
        // look whole; but the entry frame of the loop next() entered must lead to the calling
        // loop's current frame (its _PyCFrame is copied), and this one leads nowhere
        caught: true,
      },
      {
        name: 'generator frame copied after the generator was suspended',
        snapshot: withRegions(A, patch(regionsA, genFrame, genAtB)),
        // (3.11: the same, its previous is NULL)
        caught: true,
      },
      {
        name: 'thread state of moment A with the chunks and frames of moment B',
        snapshot: withRegions(A, [regionsA[0]!, ...B.threads[0]!.regions.slice(1)]),
        caught: true,
      },
      {
        name: 'thread state of moment B with the chunks and frames of moment A',
        snapshot: withRegions(A, [B.threads[0]!.regions[0]!, ...regionsA.slice(1)]),
        // 3.11, 3.12: B's thread state points at the _PyCFrame of the eval loop that called
        // next(), which A's copy holds (the calling eval loop's, copied for the running loop's
        // entry frame): the mix shows <module> → driver as at that call, a stack that looks
        // whole (3.13, 3.14: that _PyCFrame is not copied, the mix's chain is cut)
        caught: by('base-frame') || (by('entry-frame') && !callingLoop),
      },
    ];
    // 3.12+: next() entered the eval loop through an entry frame below the generator
    const belowGenOwner = belowGen === 0n ? null : readOwner(regionsA, belowGen, layout.frame.owner);
    if (belowGenOwner !== null && belowGenOwner !== layout.owners.thread && belowGenOwner !== layout.owners.generator) {
      cases.push({
        name: 'previous zeroed in the entry frame of next() below the generator',
        snapshot: withRegions(A, patch(regionsA, belowGen + prevOffset, zero)),
        // a chain cut at an entry frame ends like a real one: the base frame tells, and on 3.12
        // the calling loop's _PyCFrame — the entry frame of the running loop leads nowhere
        caught: by('base-frame') || callingLoop,
      });
      // an entry frame always names its executable (None, or the interpreter's trampoline code):
      // one without is bytes of another frame read as a header — as the thread state of moment
      // B over moment A's chunk reads them where B's current frame falls inside one of A's deep
      // frames, whose owner byte is then a byte of a pointer (1 run in ~100 made it an entry
      // frame's owner, and the mix passed as idle)
      cases.push({
        name: 'executable zeroed in the entry frame of next() below the generator',
        snapshot: withRegions(A, patch(regionsA, belowGen + BigInt(layout.frame.executable), zero)),
        caught: true,
      });
    }

    const table: string[] = [];
    for (const c of cases) {
      const t = unwind(c.snapshot);
      table.push(`  ${c.name}: ${t.status} (${t.frames.length} Python frames)`);
      if (c.caught) {
        expect(TRUSTED.has(t.status), `${c.name}: accepted as ${t.status}`).toBe(false);
      } else {
        // what the structural checks cannot catch here: a shorter stack that looks whole
        expect(t.status, c.name).toBe(trusted);
        expect(t.frames.length).toBeLessThan(a.frames.length);
      }
    }
    // the cut chains end early: on 3.15 that is `incomplete`, the base frame was not reached
    if (layout.bottom === 'base-frame') {
      for (const c of cases.filter((c) => /previous zeroed|suspended/.test(c.name))) {
        expect(unwind(c.snapshot).status, c.name).toBe('incomplete');
      }
    }
    console.log(`${py.label} (bottom rule ${layout.bottom}):\n${table.join('\n')}`);
    source.close();
    recordCoverage('torn-copies', py.label, true);
  });
});

function readOwner(regions: Region[], frame: bigint, ownerOffset: number): number | null {
  for (const r of regions) {
    const off = frame + BigInt(ownerOffset) - r.address;
    if (off >= 0n && off < BigInt(r.bytes.length)) return r.bytes[Number(off)]!;
  }
  return null;
}
