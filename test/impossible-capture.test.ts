// A capture that let an impossible stack through (test/fixtures/impossible-gen-3.15.pyuw:
// docs/validation.md, "Agreeing readings are not proof"). A churn program on native 3.15.2 —
// `main` calls `a`, `b` and `c` in turn, `b` runs `sum(gen())`, `c` calls `a` and `b` — recorded
// at 5 kHz by a pyunwind that trusted two agreeing readings. One copy, made while the program
// ran, linked the generator's frame through its entry frame to the slot where `b`'s frame had
// been: `b` had returned (its code pointer cleared), and the walk skipped it as a frame being
// set up, showing `main (line 33) → gen`. The walk now rejects a NULL code pointer below the
// current frame: that sample is corrupt, and no accepted stack has `gen` without `b` under it.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { readCaptureBytes } from '../src/capture/reader.js';
import { layoutFromSource } from '../src/layout/index.js';
import { CodeTable } from '../src/symbols/code-table.js';
import { walkParams } from '../src/walk/index.js';
import { TRUSTED } from '../src/walk/status.js';
import { checkedWalker } from './helpers/walkers.js';

const CAPTURE = path.resolve('test/fixtures/impossible-gen-3.15.pyuw');

describe('the impossible-generator capture', () => {
  it('rejects the torn sample as corrupt and accepts no stack with gen outside b', async () => {
    const reader = readCaptureBytes(new Uint8Array(fs.readFileSync(CAPTURE)), 'impossible-gen-3.15.pyuw');
    const L = layoutFromSource(reader.header.layoutSource);
    const table = new CodeTable(L);
    const walker = await checkedWalker();
    const params = walkParams(L);
    let samples = 0;
    let trusted = 0;
    const bad: string[] = [];
    let torn: { status: string; fail: bigint; owner: number; code: bigint } | null = null;
    for (const block of reader.blocks()) {
      for (const c of block.codes) table.add(c);
      const results = walker.walk(params, table.ranges, block.samples.map((s) => ({ threadStateAddress: s.threadStateAddress, regions: s.regions })));
      block.samples.forEach((s, i) => {
        samples++;
        const r = results[i]!;
        // the sample the old walk accepted: the 6,746th (a copy not made stopped, 18 µs)
        if (samples === 6746) {
          const at = s.regions.find((g) => r.failAddress >= g.address && r.failAddress < g.address + BigInt(g.bytes.length));
          const off = at ? Number(r.failAddress - at.address) : -1;
          const view = at ? new DataView(at.bytes.buffer, at.bytes.byteOffset + off) : null;
          torn = {
            status: r.status,
            fail: r.failAddress,
            owner: view ? view.getUint8(L.frame.owner) : -1,
            code: view ? view.getBigUint64(L.frame.executable, true) & ~BigInt(L.executableTagMask) : -1n,
          };
        }
        if (!TRUSTED.has(r.status)) return;
        trusted++;
        const names = r.frames.map((f) => table.frame(f.code, f.instrPtr).qualname);
        const g = names.indexOf('gen');
        if (g >= 0 && names[g + 1] !== 'b') bad.push(names.slice().reverse().join(';'));
      });
    }
    expect(samples).toBe(12012);
    expect(trusted).toBeGreaterThan(11900);
    expect(bad).toEqual([]);
    // corrupt at the slot of b's frame: a Python frame ("thread" owner) whose code was cleared
    expect(torn).toMatchObject({ status: 'corrupt', owner: L.owners.thread, code: 0n });
  });
});
