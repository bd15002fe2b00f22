// A thread whose CPU state the recorder could not read (its /proc stat gone or unreadable) is
// neither on nor off a CPU: its sample carries SAMPLE_FLAG.CPU_UNKNOWN. A report in mode cpu
// leaves it out, as it leaves out samples off a CPU, but counts it (`undetermined`) and says so
// in its exports, on the engine path and the reference path alike. The samples are a committed
// real capture's, their flags set here (a thread's state cannot be made unreadable on cue).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CaptureWriter, fileSink, openCapture } from '../src/capture/index.js';
import { SAMPLE_FLAG, type SampleRecord } from '../src/capture/types.js';
import { reportCapture } from '../src/pipeline/report-file.js';
import { metaFromReport, validationLines } from '../src/export/meta.js';
import { CpuStates } from '../src/record/linux/cpu-states.js';

const FIXTURE = path.resolve('test/fixtures/captures/threadpool-3.12.pyuw');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pyunwind-cpu-unknown-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

/** The fixture again, told as a recording with the cpu fact: every third sample on a CPU, every fifth unknown. */
async function withCpuStates(): Promise<{ file: string; on: number; unknown: number }> {
  const reader = await openCapture(FIXTURE);
  const file = path.join(dir, 'cpu.pyuw');
  const w = new CaptureWriter(fileSink(file), { ...reader.header, facts: ['cpu', 'gil'] });
  let on = 0;
  let unknown = 0;
  let i = 0;
  for (const b of reader.blocks()) {
    for (const c of b.codes) w.addCode(c);
    for (const s of b.samples) {
      const k = i++;
      const base = s.flags & ~(SAMPLE_FLAG.ON_CPU | SAMPLE_FLAG.CPU_UNKNOWN);
      const flags = k % 5 === 0 ? base | SAMPLE_FLAG.CPU_UNKNOWN : k % 3 === 0 ? base | SAMPLE_FLAG.ON_CPU : base;
      if (flags & SAMPLE_FLAG.CPU_UNKNOWN) unknown++;
      if (flags & SAMPLE_FLAG.ON_CPU) on++;
      w.addSample({ ...s, flags } satisfies SampleRecord);
    }
  }
  reader.close();
  w.close();
  return { file, on, unknown };
}

describe('samples whose CPU state is unknown', () => {
  it('are left out of a cpu profile and counted, on the engine path and the reference path alike', async () => {
    const { file, on, unknown } = await withCpuStates();
    expect(on).toBeGreaterThan(0);
    expect(unknown).toBeGreaterThan(0);
    const engine = await reportCapture(file, { mode: 'cpu', workers: 0 });
    const reference = await reportCapture(file, { mode: 'cpu', reference: true });
    for (const r of [engine, reference]) {
      expect(r.undetermined).toBe(unknown);
      expect(r.profile.stats().attempted).toBe(on);
    }
    expect(engine.fallbackBlocks).toBe(0);
    expect(JSON.stringify(engine.profile.toJSON())).toBe(JSON.stringify(reference.profile.toJSON()));
    // said where the exports say how far the samples can be trusted
    expect(validationLines(engine.profile, metaFromReport(engine))).toContain(
      `left out: ${unknown} samples whose thread's CPU state the recorder could not read (neither on nor off a CPU)`,
    );
    // a wall report keeps every sample: nothing is left out
    expect((await reportCapture(file, { workers: 0 })).undetermined).toBe(0);
  });

  it('come from a thread the kernel cannot tell about', () => {
    const states = new CpuStates(process.pid);
    expect(states.onCpu(BigInt(process.pid))).toBe(true); // this very thread, running
    expect(states.onCpu(0x7fffffffn)).toBeNull(); // no such thread
    states.close();
  });
});
