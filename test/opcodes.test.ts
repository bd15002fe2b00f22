// report --opcodes on real interpreters: workloads/hotloop.py spends its time in one loop of
// hot() and prints, after a warm-up and again at its end, the instructions of hot() as
// `dis.get_instructions(hot, adaptive=True)` shows them — the specialized forms the interpreter
// put in place. Recorded at 1 kHz, `report --opcodes` must name as the hottest instruction of
// hot() one that dis shows on the loop's lines (specialized where dis shows it so), and every
// instruction of hot() with a real share of its samples must be one of those; the frame that
// calls hot() is at a CALL. Expectations come from the program's own output, never from here.
// The block engine, the reference path and worker threads give the same profile; without
// --opcodes the profile has no instruction. Pyodide 3.14/3.15 (recorded by signals) the same.
//
// The opcode tables (src/symbols/opcodes-3.*.ts) are checked against every interpreter found:
// scripts/opcode-table.py, run by the interpreter, must print exactly the committed table.
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { memorySink, readCaptureBytes } from '../src/capture/index.js';
import { recordPyodide, type PyodideVersion } from '../src/record/pyodide/recorder.js';
import { reportCapture, reportCaptureBytes, type CaptureReport } from '../src/pipeline/report-file.js';
import { OPCODE_TABLES, opcodeTable, OpcodeTable } from '../src/symbols/opcodes.js';
import { nativeInterpreters } from '../harness/interpreters.js';
import { recordCoverage, skipTest, cannotRun } from './helpers/coverage.js';
import { loadPyodideVersion } from './helpers/pyodide.js';

const BIN = path.resolve('bin/pyunwind.js');
const WORKLOAD = path.resolve('workloads/hotloop.py');
const TABLE_SCRIPT = path.resolve('scripts/opcode-table.py');
const SECONDS = 2.5;
/** samples of hot() a recording must have to judge its instructions by (2,000+ on a quiet machine) */
const MIN_SAMPLES = 150;
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pyunwind-opcodes-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

function pyunwind(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', timeout: 120_000, maxBuffer: 64 << 20, env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' } });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** What hotloop.py prints: its loop's lines and hot()'s instructions as adaptive dis shows them. */
interface DisLine {
  when: 'warm' | 'end';
  loop: number[];
  instructions: { offset: number; opname: string; line: number | null }[];
}

/** Per loop line, the instruction names dis showed there (after warm-up, and at the end). */
function disNames(stdout: string): { loop: number[]; names: Map<number, Set<string>> } {
  const lines = stdout
    .trim()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as DisLine);
  expect(lines.map((l) => l.when)).toEqual(['warm', 'end']);
  const loop = lines[0]!.loop;
  const names = new Map<number, Set<string>>(loop.map((l) => [l, new Set<string>()]));
  for (const d of lines) for (const ins of d.instructions) if (ins.line !== null && names.has(ins.line)) names.get(ins.line)!.add(ins.opname);
  return { loop, names };
}

interface Frame {
  qualname: string;
  filename: string;
  line: number | null;
  opcode?: string;
}

/** hot()'s self weight per (line, instruction), and the instructions of the frames that called hot(). */
function hotInstructions(report: CaptureReport): { self: Map<string, number>; total: number; callers: Map<string, number> } {
  const self = new Map<string, number>();
  const callers = new Map<string, number>();
  let total = 0;
  for (const t of report.profile.threads()) {
    const frames = t.frames as Frame[];
    t.stackWeight.forEach((w, s) => {
      const path = t.stackPath(s).map((i) => frames[i]!);
      const leaf = path[path.length - 1]!;
      if (leaf.qualname !== 'hot' || !(w > 0)) return;
      total += w;
      const key = `${leaf.line} ${leaf.opcode ?? '?'}`;
      self.set(key, (self.get(key) ?? 0) + w);
      const caller = path[path.length - 2];
      if (caller) callers.set(caller.opcode ?? '?', (callers.get(caller.opcode ?? '?') ?? 0) + w);
    });
  }
  return { self, total, callers };
}

/**
 * The checks every interpreter shares: hot()'s hottest instruction is one dis showed on its
 * line, and so is every instruction of hot() with 5 % of its samples or more.
 */
function checkHot(label: string, report: CaptureReport, stdout: string, minSamples: number): void {
  const { loop, names } = disNames(stdout);
  const { self, total, callers } = hotInstructions(report);
  const ranked = [...self].sort((a, b) => b[1] - a[1]);
  const shown = ranked.map(([k, w]) => `${k} ${((100 * w) / total).toFixed(1)}%`).join(', ');
  console.log(`[opcodes] ${label}: hot() ${total} samples: ${shown}; callers at ${[...callers.keys()].join(', ')}; dis: ${loop.map((l) => `${l}: ${[...names.get(l)!].join(' ')}`).join('; ')}`);
  expect(total).toBeGreaterThanOrEqual(minSamples);
  const inDis = (key: string): boolean => {
    const [line, opcode] = key.split(' ') as [string, string];
    return names.get(Number(line))?.has(opcode) === true;
  };
  const [hottest] = ranked[0]!;
  expect(inDis(hottest), `hottest instruction of hot(): ${hottest}; dis shows ${JSON.stringify(Object.fromEntries([...names].map(([l, s]) => [l, [...s]])))}`).toBe(true);
  for (const [key, w] of ranked) if (w >= 0.05 * total) expect(inDis(key), `${key}: ${((100 * w) / total).toFixed(1)} % of hot()'s samples, not an instruction dis shows on its line`).toBe(true);
  // the frame below hot() is at the call (3.11/3.12: prev_instr is in the CALL's inline cache)
  const callerWeight = [...callers].filter(([op]) => op.startsWith('CALL')).reduce((n, [, w]) => n + w, 0);
  expect(callerWeight / total).toBeGreaterThanOrEqual(0.95);
}

const profileJson = (r: CaptureReport): string => JSON.stringify(r.profile.toJSON());

describe.each(nativeInterpreters())('opcodes, $label', (py) => {
  if (py.missing) {
    cannotRun('opcodes', py.label, py.missing!);
    return;
  }

  it('the opcode table is the interpreter’s own', () => {
    const dumped = JSON.parse(execFileSync(py.command, [TABLE_SCRIPT], { encoding: 'utf8' })) as { minor: string; names: (string | null)[]; base: number[]; caches: number[] };
    const table = opcodeTable(dumped.minor);
    expect(table, `no table for ${dumped.minor} (tables: ${OPCODE_TABLES.join(', ')}; npm run gen:opcodes)`).not.toBeNull();
    expect(table!.data.names).toEqual(dumped.names);
    expect(table!.data.base).toEqual(dumped.base);
    expect(table!.data.caches).toEqual(dumped.caches);
  });

  it('report --opcodes names the hot loop’s instructions as dis shows them; both paths agree', async () => {
    const file = path.join(dir, `${py.label}.pyuw`);
    let rec: ReturnType<typeof pyunwind>;
    let engine: CaptureReport;
    // (a machine busy with other work can starve the recorder or the program: once more then)
    for (let attempt = 1; ; attempt++) {
      rec = pyunwind(['record', '-q', '-r', '1000', '-o', file, '--', py.command, WORKLOAD, String(SECONDS)]);
      expect(rec.status, rec.stderr).toBe(0);
      engine = await reportCapture(file, { workers: 0, opcodes: true });
      const got = hotInstructions(engine).total;
      if (got >= MIN_SAMPLES || attempt === 2) break;
      console.log(`[opcodes] ${py.label}: hot() got ${got} samples (the machine is busy: ${rec.stderr.trim()}); recording again`);
    }
    expect(readCaptureBytes(fs.readFileSync(file)).header.bytecode).toBe(true);
    checkHot(py.label, engine, rec.stdout, MIN_SAMPLES);
    // the reference path and worker threads: the same profile, instructions and all
    const json = profileJson(engine);
    expect(profileJson(await reportCapture(file, { reference: true, opcodes: true }))).toBe(json);
    expect(profileJson(await reportCapture(file, { workers: 2, opcodes: true }))).toBe(json);
    // without --opcodes: no instruction anywhere, and the profile is the functions' and lines' alone
    const plain = await reportCapture(file, { workers: 0 });
    expect(profileJson(plain)).not.toContain('"opcode"');
    const cli = pyunwind(['report', '-q', file, '--opcodes', '--format', 'collapsed']);
    expect(cli.status, cli.stderr).toBe(0);
    expect(cli.stdout).toMatch(/;hot \([^)]*hotloop\.py:\d+\) [A-Z_]+ \d+\n/);
    recordCoverage('opcodes', py.label, true);
  }, 180_000);
});

describe.each(['3.15', '3.14'] as PyodideVersion[])('opcodes, Pyodide %s', (version) => {
  it('the opcode table is the interpreter’s own', async (ctx) => {
    const loaded = await loadPyodideVersion(version);
    if ('missing' in loaded) {
      return skipTest(ctx, 'opcodes', `pyodide ${version} table`, loaded.missing);
    }
    const out = loaded.py.runPython(`
import io, contextlib
_buf = io.StringIO()
with contextlib.redirect_stdout(_buf):
    exec(compile(${JSON.stringify(fs.readFileSync(TABLE_SCRIPT, 'utf8'))}, 'opcode-table.py', 'exec'), {'__name__': '__main__'})
_buf.getvalue()
`) as string;
    const dumped = JSON.parse(out) as { minor: string; names: (string | null)[]; base: number[]; caches: number[] };
    expect(dumped.minor).toBe(version);
    const table = opcodeTable(version)!;
    expect({ names: table.data.names, base: table.data.base, caches: table.data.caches }).toEqual({ names: dumped.names, base: dumped.base, caches: dumped.caches });
    recordCoverage('opcodes', `pyodide ${version} table`, true);
  }, 120_000);

  it('report --opcodes on a Pyodide recording: hot()’s instructions as dis shows them', async (ctx) => {
    const loaded = await loadPyodideVersion(version);
    if ('missing' in loaded) {
      return skipTest(ctx, 'opcodes', `pyodide ${version}`, loaded.missing);
    }
    const sink = memorySink();
    const stats = await recordPyodide({ python: fs.readFileSync(WORKLOAD, 'utf8'), filename: WORKLOAD, args: [String(SECONDS)], rateHz: 1000, output: sink, version });
    expect(stats.ended).toBe('finished');
    const bytes = sink.bytes();
    expect(readCaptureBytes(bytes).header.bytecode).toBe(true);
    const report = await reportCaptureBytes(bytes, { opcodes: true });
    // (samples are taken where the interpreter checks for signals: fewer, at those instructions)
    checkHot(`pyodide ${stats.pythonVersion}`, report, stats.stdout, 100);
    expect(profileJson(await reportCaptureBytes(bytes, { opcodes: true, reference: true }))).toBe(profileJson(report));
    recordCoverage('opcodes', `pyodide ${version}`, true);
  }, 180_000);
});

describe('opcodes without bytecode', () => {
  it('a capture recorded before bytecode was kept: report --opcodes says so', () => {
    const file = path.resolve('test/fixtures/captures/recursion-3.11.pyuw');
    expect(readCaptureBytes(fs.readFileSync(file)).header.bytecode).toBeUndefined();
    const r = pyunwind(['report', '-q', file, '--opcodes']);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/does not hold bytecode/);
    expect(r.stderr).not.toMatch(/at .*\.js:\d+/); // a message, not a stack trace
    // without --opcodes it reports as ever
    expect(pyunwind(['report', '-q', file]).status).toBe(0);
  });
});

describe('instructions in bytecode', () => {
  // made from the 3.11 and 3.13 tables, so the bytecode is what those versions would run
  const t311 = opcodeTable('3.11')!;
  const t313 = opcodeTable('3.13')!;
  const op = (t: OpcodeTable, name: string): number => {
    const i = t.data.names.indexOf(name);
    expect(i, name).toBeGreaterThanOrEqual(0);
    return i;
  };
  /** bytecode of these instructions, each followed by its inline caches (cache units hold junk, as they do) */
  const code = (t: OpcodeTable, names: string[]): { bytes: Uint8Array; starts: number[] } => {
    const units: number[] = [];
    const starts: number[] = [];
    for (const n of names) {
      const o = op(t, n);
      starts.push(units.length / 2);
      units.push(o, 1);
      for (let c = 0; c < t.data.caches[o]!; c++) units.push(0xff - c, 0x7f);
    }
    return { bytes: Uint8Array.from(units), starts };
  };

  it('3.11/3.12 prev_instr: the instruction whose units hold it, caches and EXTENDED_ARG included', () => {
    const names = ['RESUME', 'LOAD_GLOBAL_BUILTIN', 'EXTENDED_ARG', 'LOAD_FAST', 'PRECALL', 'CALL_PY_EXACT_ARGS', 'BINARY_OP_ADD_INT', 'RETURN_VALUE'];
    const { bytes, starts } = code(t311, names);
    expect(t311.data.caches[op(t311, 'CALL_PY_EXACT_ARGS')]).toBeGreaterThan(0);
    names.forEach((n, k) => {
      const end = k + 1 < starts.length ? starts[k + 1]! : bytes.length / 2;
      // every unit of the instruction, its own and its caches', names it
      for (let u = starts[k]!; u < end; u++) expect(t311.name(t311.instructionAt(bytes, u, true)!), `unit ${u}`).toBe(n);
    });
    // a frame that has not started (index −1), and past the end: none
    expect(t311.instructionAt(bytes, -1, true)).toBeNull();
    expect(t311.instructionAt(bytes, bytes.length / 2, true)).toBeNull();
    // the specialized form keeps its base's cache count, and names its base
    expect(t311.baseName(op(t311, 'BINARY_OP_ADD_INT'))).toBe('BINARY_OP');
  });

  it('3.13+ instr_ptr: the instruction that starts there', () => {
    const { bytes, starts } = code(t313, ['RESUME_CHECK', 'LOAD_FAST', 'BINARY_OP_ADD_INT', 'RETURN_VALUE']);
    expect(t313.name(t313.instructionAt(bytes, starts[2]!, false)!)).toBe('BINARY_OP_ADD_INT');
    expect(t313.instructionAt(bytes, -1, false)).toBeNull();
  });

  it('an instruction of unknown length (sys.monitoring’s INSTRUMENTED_LINE) ends what can be read past it', () => {
    const t312 = opcodeTable('3.12')!;
    const { bytes, starts } = code(t312, ['RESUME', 'INSTRUMENTED_LINE', 'LOAD_FAST', 'RETURN_VALUE']);
    expect(t312.name(t312.instructionAt(bytes, starts[0]!, true)!)).toBe('RESUME');
    expect(t312.instructionAt(bytes, starts[2]!, true)).toBeNull();
    // the key of the instructions stops there too: a change past it goes unseen, not misread
    expect(t312.instructionKey(bytes).length).toBe(2);
  });
});
