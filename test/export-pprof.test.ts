// The pprof export of a real capture (threadpool.py on native CPython 3.15), read back by the
// `pprof-format` package's decoder (a consumer that is not our code) after node's own gunzip:
// its stacks and counts per thread are exactly the json report's, its functions, locations,
// labels, sample types and comments are what src/export/pprof.ts says, and the CLI writes the
// same bytes with -o. Skips loudly when 3.15 is not provisioned.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { gunzipSync } from 'node:zlib';
import { Profile as PprofProfile } from 'pprof-format';
import { afterAll, describe, expect, it } from 'vitest';
import { exportPprof } from '../src/export/pprof.js';
import { metaFromReport, validationLines } from '../src/export/meta.js';
import { Profile } from '../src/profile/index.js';
import { reportCapture } from '../src/pipeline/report-file.js';
import { recordCoverage, cannotRun } from './helpers/coverage.js';
import { formatCapture } from './helpers/format-capture.js';

const BIN = path.resolve('bin/pyunwind.js');
const run = promisify(execFile);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pyunwind-pprof-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

interface JsonDoc {
  metadata: { rateHz: number; startTime: number };
  summary: { attempted: number; trusted: number; rejected: number; ticks: number; missed: number; scheduled: number; firstTime: number; lastTime: number };
  threads: {
    label: string;
    nativeThreadId: string;
    statuses: Record<string, number>;
    frames: { qualname: string; filename: string; line: number | null }[];
    stacks: [number, number, number][];
  }[];
}

const num = (v: unknown): number => Number(v as number | bigint);

const cap = await formatCapture();

if (typeof cap === 'string') {
  describe('pprof export of a real capture', () => {
    cannotRun('formats', 'pprof', cap);
  });
} else {
  describe(`pprof export of threadpool.py recorded from ${cap.label}`, () => {
    it('reads back (pprof-format) as exactly the json report: stacks, counts, threads, comments', async () => {
      const jsonFile = path.join(dir, 'report.json');
      await run(process.execPath, [BIN, 'report', cap.file, '--format', 'json', '-o', jsonFile]);
      const doc = JSON.parse(fs.readFileSync(jsonFile, 'utf8')) as JsonDoc;

      const report = await reportCapture(cap.file);
      const meta = metaFromReport(report);
      expect(meta.rateHz).toBe(doc.metadata.rateHz);
      const bytes = exportPprof(report.profile, meta);
      // deterministic, and canonical: the same bytes from the json report read back as a profile
      expect(exportPprof(report.profile, meta)).toEqual(bytes);
      expect(exportPprof(Profile.fromJSON(doc), meta)).toEqual(bytes);

      const p = PprofProfile.decode(gunzipSync(bytes));
      const s = (i: unknown): string => p.stringTable.strings[num(i)]!;

      // sample types, period, times
      expect(p.sampleType.map((t) => `${s(t.type)}/${s(t.unit)}`)).toEqual(['samples/count', 'wall/nanoseconds']);
      expect(`${s(p.periodType!.type)}/${s(p.periodType!.unit)}`).toBe('wall/nanoseconds');
      const nsPer = 1e9 / doc.metadata.rateHz;
      expect(num(p.period)).toBe(Math.round(nsPer));
      expect(Math.abs(num(p.timeNanos) / 1e6 - doc.metadata.startTime)).toBeLessThan(1e-3);
      expect(num(p.durationNanos)).toBe(Math.round((doc.summary.lastTime - doc.summary.firstTime) * 1000));

      // functions: name = system name = qualname, start line = smallest line seen
      const fns = new Map(p.function.map((f) => [num(f.id), f]));
      const minLine = new Map<string, number>();
      for (const t of doc.threads) {
        for (const f of t.frames) {
          const k = `${f.qualname}\t${f.filename}`;
          if (!minLine.has(k)) minLine.set(k, 0);
          if (f.line !== null && (minLine.get(k) === 0 || f.line < minLine.get(k)!)) minLine.set(k, f.line);
        }
      }
      expect(p.function.length).toBe(minLine.size);
      for (const f of p.function) {
        expect(s(f.systemName)).toBe(s(f.name));
        expect(num(f.startLine)).toBe(minLine.get(`${s(f.name)}\t${s(f.filename)}`));
      }
      // locations: one line each, one per distinct (function, line)
      const locs = new Map(p.location.map((l) => [num(l.id), l]));
      const distinct = new Set(p.location.map((l) => (expect(l.line).toHaveLength(1), `${num(l.line[0]!.functionId)}:${num(l.line[0]!.line)}`)));
      expect(distinct.size).toBe(p.location.length);

      // every sample: thread label + its stack root → leaf
      const got = new Map<string, number>();
      const tids = new Map<string, number>();
      let total = 0;
      for (const sample of p.sample) {
        const labels = new Map(sample.label.map((l) => [s(l.key), l]));
        const thread = s(labels.get('thread')!.str);
        tids.set(thread, num(labels.get('thread_id')!.num));
        const names = sample.locationId.map((id) => {
          const line = locs.get(num(id))!.line[0]!;
          const f = fns.get(num(line.functionId))!;
          return `${s(f.name)} ${s(f.filename)}:${num(line.line)}`;
        });
        const key = [thread, ...names.reverse()].join('\n');
        const [count, wall] = sample.value.map(num);
        expect(count).toBeGreaterThan(0);
        expect(wall).toBe(Math.round(count! * nsPer));
        got.set(key, (got.get(key) ?? 0) + count!);
        total += count!;
      }
      const want = new Map<string, number>();
      let trustedWithFrames = 0;
      for (const t of doc.threads) {
        trustedWithFrames += t.statuses['complete']! + t.statuses['complete-unverifiable']!;
        t.stacks.forEach(([, , w], i) => {
          if (w === 0) return;
          const names: string[] = [];
          for (let x = i; x >= 0; x = t.stacks[x]![0]) {
            const f = t.frames[t.stacks[x]![1]]!;
            names.push(`${f.qualname} ${f.filename}:${f.line ?? 0}`);
          }
          const key = [t.label, ...names.reverse()].join('\n');
          want.set(key, (want.get(key) ?? 0) + w);
        });
        if (t.stacks.some((st) => st[2] > 0)) expect(tids.get(t.label)).toBe(Number(t.nativeThreadId));
      }
      expect(want.size).toBeGreaterThan(20); // a real profile: many stacks
      expect(got).toEqual(want);
      expect(total).toBe(trustedWithFrames);
      expect(p.sample.length).toBe(want.size);

      // the validation numbers and the metadata
      const comments = p.comment.map(s);
      for (const line of validationLines(report.profile, meta)) expect(comments).toContain(line);
      const all = comments.join('\n');
      const { attempted, trusted, rejected, ticks, missed, scheduled } = doc.summary;
      expect(all).toContain(`samples attempted ${attempted}: trusted ${trusted}`);
      expect(all).toContain(`rejected ${rejected}`);
      expect(all).toContain(`ticks ${ticks} taken, ${missed} missed of ${scheduled} scheduled`);
      expect(all).toContain(`${doc.metadata.rateHz} Hz`);
      expect(all).toContain(report.header.pythonVersion);
      expect(all).toContain(report.header.recorder);

      // the CLI writes the same bytes
      const out = path.join(dir, 'profile.pb.gz');
      await run(process.execPath, [BIN, 'report', cap.file, '--format', 'pprof', '-o', out]);
      expect(new Uint8Array(fs.readFileSync(out))).toEqual(bytes);

      recordCoverage('formats', 'pprof', true);
      process.stderr.write(`pprof: ${p.sample.length} samples (stacks), ${total} trusted samples with frames, ${p.function.length} functions, ${p.location.length} locations, ${bytes.length} bytes\n`);
    });
  });
}
