// The text, json and collapsed exports of a small profile whose every number is known.
// (speedscope has its own file: it validates against the schema in the speedscope package.)
import { describe, expect, it } from 'vitest';
import { escapeCollapsed, exportCollapsed, exportJson, exportText, jsonDocument, unescapeCollapsed } from '../src/export/index.js';
import { Profile, type SourceFrame, type SampleThread } from '../src/profile/index.js';

const MAIN: SampleThread = { interpreterId: 0n, threadId: 140_000_000_000_001n, nativeThreadId: 1234n, name: 'MainThread' };
const WORKER: SampleThread = { interpreterId: 0n, threadId: 140_000_000_000_002n, nativeThreadId: 1235n };
// a subinterpreter thread whose names need escaping in the collapsed format
const SUB: SampleThread = { interpreterId: 1n, threadId: (1n << 64n) - 1n, nativeThreadId: 1234n, name: 'w;x' };
const F = (qualname: string, line: number | null, filename = 'app.py'): SourceFrame => ({ qualname, filename, line });

/**
 * MainThread: 6 × <module>→main:3→compute, 3 × <module>→main:4→fib:6→fib:5 (recursion),
 * 1 idle, 1 torn. thread 1235: 1 incomplete, 1 complete-unverifiable. Subinterpreter: one
 * sample of weight 2 on an oddly named frame without a line. 2 samples missed.
 */
function knownProfile(): Profile {
  const p = new Profile();
  for (let i = 0; i < 6; i++) p.add({ time: i * 1000, thread: MAIN, status: 'complete', frames: [F('compute', 10), F('main', 3), F('<module>', 20)] });
  for (let i = 0; i < 3; i++) p.add({ time: i * 1000 + 500, thread: MAIN, status: 'complete', frames: [F('fib', 5), F('fib', 6), F('main', 4), F('<module>', 20)] });
  p.add({ time: 9000, thread: MAIN, status: 'idle', frames: [] });
  p.add({ time: 9500, thread: MAIN, status: 'torn', frames: [F('never-shown', 1)] });
  p.add({ time: 100, thread: WORKER, status: 'incomplete', frames: [F('never-shown', 1)] });
  p.add({ time: 200, thread: WORKER, status: 'complete-unverifiable', frames: [F('run', 1, 'threading.py')] });
  p.add({ time: 300, thread: SUB, status: 'complete', frames: [F('odd;name%', null, 'dir;x/\n.py')], weight: 2 });
  p.addTicks(12);
  p.addMissed(2);
  return p;
}

describe('collapsed', () => {
  it('writes one line per distinct stack, thread first, root to leaf', () => {
    expect(exportCollapsed(knownProfile())).toBe(
      [
        'MainThread (tid 1234);<module> (app.py:20);main (app.py:3);compute (app.py:10) 6',
        'MainThread (tid 1234);<module> (app.py:20);main (app.py:4);fib (app.py:6);fib (app.py:5) 3',
        'thread 1235;run (threading.py:1) 1',
        'w%3Bx (tid 1234, interp 1);odd%3Bname%25 (dir%3Bx/%0A.py) 2',
        '',
      ].join('\n'),
    );
  });

  it('shows idle samples as <idle> only when asked', () => {
    const lines = exportCollapsed(knownProfile(), { idle: true }).trimEnd().split('\n');
    expect(lines).toHaveLength(5);
    expect(lines[0]).toBe('MainThread (tid 1234);<idle> 1');
  });

  it('drops line numbers with lines: false, summing the lines of a function', () => {
    const p = new Profile();
    p.add({ time: 0, thread: MAIN, status: 'complete', frames: [F('f', 1), F('main', 1)] });
    p.add({ time: 0, thread: MAIN, status: 'complete', frames: [F('f', 2), F('main', 1)], weight: 4 });
    expect(exportCollapsed(p, { lines: false })).toBe('MainThread (tid 1234);main (app.py);f (app.py) 5\n');
    expect(exportCollapsed(p)).toBe('MainThread (tid 1234);main (app.py:1);f (app.py:1) 1\nMainThread (tid 1234);main (app.py:1);f (app.py:2) 4\n');
  });

  it('drops the thread with threads: false, summing equal stacks of different threads', () => {
    const p = knownProfile();
    p.add({ time: 0, thread: WORKER, status: 'complete', frames: [F('compute', 10), F('main', 3), F('<module>', 20)], weight: 4 });
    expect(exportCollapsed(p, { threads: false })).toBe(
      [
        '<module> (app.py:20);main (app.py:3);compute (app.py:10) 10',
        '<module> (app.py:20);main (app.py:4);fib (app.py:6);fib (app.py:5) 3',
        'odd%3Bname%25 (dir%3Bx/%0A.py) 2',
        'run (threading.py:1) 1',
        '',
      ].join('\n'),
    );
  });

  it('stays parseable: split at the last space and at ";", unescape, and the names come back', () => {
    const text = exportCollapsed(knownProfile());
    const parsed = text
      .trimEnd()
      .split('\n')
      .map((line) => {
        const sp = line.lastIndexOf(' ');
        return { frames: line.slice(0, sp).split(';').map(unescapeCollapsed), count: Number(line.slice(sp + 1)) };
      });
    expect(parsed[3]).toEqual({ frames: ['w;x (tid 1234, interp 1)', 'odd;name% (dir;x/\n.py)'], count: 2 });
    expect(parsed.reduce((a, x) => a + x.count, 0)).toBe(6 + 3 + 1 + 2);
    for (const s of ['plain', 'a;b', '%3B', '100%', 'x\r\ny;%;%25', '']) {
      expect(unescapeCollapsed(escapeCollapsed(s))).toBe(s);
      expect(decodeURIComponent(escapeCollapsed(s))).toBe(s);
      expect(escapeCollapsed(s)).not.toMatch(/[;\n\r]/);
    }
    expect(exportCollapsed(new Profile())).toBe('');
  });
});

describe('text', () => {
  const text = exportText(knownProfile());
  const lines = text.split('\n');

  it('heads with the threads and the time span', () => {
    expect(lines[0]).toBe('pyunwind profile: 3 threads, 0.000 s – 0.009 s');
  });

  it('summarizes validation: every status, % of attempted, missed ticks % of scheduled ticks', () => {
    const start = lines.indexOf('Samples (% of attempted; a tick samples every thread once)');
    expect(start).toBeGreaterThan(0);
    expect(lines.slice(start + 1, start + 19)).toEqual([
      '  ticks scheduled          14',
      '  ticks missed              2   14.3%  of scheduled ticks',
      '  attempted                14  100.0%',
      '  trusted                  12   85.7%',
      '    complete               10   71.4%',
      '    complete-unverifiable   1    7.1%',
      '    idle                    1    7.1%',
      '  rejected                  2   14.3%',
      '    incomplete              1    7.1%',
      '    dangling                0    0.0%',
      '    cycle                   0    0.0%',
      '    too-deep                0    0.0%',
      '    corrupt                 0    0.0%',
      '    no-thread-state         0    0.0%',
      '    torn                    1    7.1%',
      '    native-incomplete       0    0.0%',
      '    native-unmatched        0    0.0%',
      '',
    ]);
  });

  it('per thread: ids, sample counts, top functions by self and total as % of trusted samples', () => {
    const start = lines.indexOf('Thread MainThread (tid 1234)');
    expect(lines.slice(start, start + 16)).toEqual([
      'Thread MainThread (tid 1234)',
      '  interpreter 0, thread id 140000000000001, native thread id 1234',
      '  11 attempted: 10 trusted (1 idle), 1 rejected (torn 1); 0.000 s – 0.009 s',
      '',
      '  Top 2 by self (% of 10 trusted samples)',
      '    self      %  total      %  function',
      '       6  60.0%      6  60.0%  compute (app.py)',
      '       3  30.0%      3  30.0%  fib (app.py)',
      '',
      '  Top 4 by total',
      '    total      %  self      %  function',
      '        9  90.0%     0   0.0%  <module> (app.py)',
      '        9  90.0%     0   0.0%  main (app.py)',
      '        6  60.0%     6  60.0%  compute (app.py)',
      '        3  30.0%     3  30.0%  fib (app.py)',
      '',
    ]);
    expect(text).toContain('Thread thread 1235\n  interpreter 0, thread id 140000000000002, native thread id 1235\n');
    expect(text).toContain('  2 attempted: 1 trusted (0 idle), 1 rejected (incomplete 1); 0.000 s – 0.000 s\n');
    expect(text).toContain('Thread w;x (tid 1234, interp 1)\n  interpreter 1, thread id 18446744073709551615, native thread id 1234\n');
    // control characters from the target's memory are shown escaped, never raw
    expect(text).toContain('       2  100.0%      2  100.0%  odd;name% (dir;x/\\n.py)\n');
    const p = new Profile();
    p.add({ time: 0, thread: { ...MAIN, name: 'evil\x1b[2J' }, status: 'complete', frames: [F('f\x7f\r\t', 1)] });
    expect(exportText(p)).toContain('Thread evil\\x1b[2J (tid 1234)\n');
    expect(exportText(p)).toContain('  f\\x7f\\r\\t (app.py)\n');
    expect(exportText(p)).not.toMatch(/[\x00-\x09\x0b-\x1f\x7f]/);
  });

  it('limits the tables to top N, and says when a thread has nothing to show', () => {
    const short = exportText(knownProfile(), { top: 1, title: 'run 7' });
    expect(short.split('\n')[0]).toBe('run 7: 3 threads, 0.000 s – 0.009 s');
    expect(short).toContain('  Top 1 by self (% of 10 trusted samples)\n    self      %  total      %  function\n       6  60.0%      6  60.0%  compute (app.py)\n\n');
    const p = new Profile();
    p.add({ time: 0, thread: WORKER, status: 'dangling', frames: [] });
    p.add({ time: 1, thread: MAIN, status: 'idle', frames: [] });
    const t = exportText(p);
    expect(t).toContain('  1 attempted: 0 trusted (0 idle), 1 rejected (dangling 1); 0.000 s – 0.000 s\n  no trusted samples\n');
    expect(t).toContain('  1 attempted: 1 trusted (1 idle), 0 rejected; 0.000 s – 0.000 s\n  no trusted samples with a Python stack\n');
    expect(exportText(new Profile())).toContain('  attempted                0       -');
  });

  it('groups thousands', () => {
    const p = new Profile();
    p.add({ time: 0, thread: MAIN, status: 'complete', frames: [F('f', 1)], weight: 1_234_567 });
    expect(exportText(p)).toContain('  Top 1 by self (% of 1,234,567 trusted samples)\n         self       %      total       %  function\n    1,234,567  100.0%  1,234,567  100.0%  f (app.py)\n');
  });
});

describe('json', () => {
  it('has the format, version, summary and per-thread tables documented in docs/json-format.md', () => {
    const doc = JSON.parse(exportJson(knownProfile(), { metadata: { target: 'pid 1', rateHz: 100 } }));
    expect(Object.keys(doc)).toEqual(['format', 'version', 'metadata', 'summary', 'ticks', 'missed', 'threads']);
    expect(doc.format).toBe('pyunwind-profile');
    expect(doc.version).toBe(2);
    expect(doc.ticks).toBe(12);
    expect(doc.metadata).toEqual({ target: 'pid 1', rateHz: 100 });
    // statuses count samples; the subinterpreter's one sample weighs 2
    expect(doc.summary).toEqual({
      attempted: 14,
      trusted: 12,
      rejected: 2,
      statuses: {
        complete: 10,
        'complete-unverifiable': 1,
        idle: 1,
        incomplete: 1,
        dangling: 0,
        cycle: 0,
        'too-deep': 0,
        corrupt: 0,
        'no-thread-state': 0,
        torn: 1,
        'native-incomplete': 0,
        'native-unmatched': 0,
      },
      missed: 2,
      ticks: 12,
      scheduled: 14,
      firstTime: 0,
      lastTime: 9500,
    });
    expect(doc.threads.map((t: any) => t.label)).toEqual(['MainThread (tid 1234)', 'thread 1235', 'w;x (tid 1234, interp 1)']);
    const [main, worker, sub] = doc.threads;
    expect(Object.keys(main)).toEqual([
      'interpreterId',
      'threadId',
      'nativeThreadId',
      'name',
      'nameTime',
      'label',
      'firstTime',
      'lastTime',
      'statuses',
      'summary',
      'idleWeight',
      'functions',
      'frames',
      'stacks',
    ]);
    expect(main).toMatchObject({ interpreterId: '0', threadId: '140000000000001', nativeThreadId: '1234', name: 'MainThread', nameTime: 9500 });
    expect(main.summary).toEqual({ attempted: 11, trusted: 10, rejected: 1, stackedWeight: 9, trustedWeight: 10 });
    expect(main.idleWeight).toBe(1);
    expect(main.functions).toEqual([
      { qualname: '<module>', filename: 'app.py', self: 0, total: 9 },
      { qualname: 'main', filename: 'app.py', self: 0, total: 9 },
      { qualname: 'compute', filename: 'app.py', self: 6, total: 6 },
      { qualname: 'fib', filename: 'app.py', self: 3, total: 3 },
    ]);
    expect(main.frames).toEqual([
      { qualname: '<module>', filename: 'app.py', line: 20 },
      { qualname: 'compute', filename: 'app.py', line: 10 },
      { qualname: 'fib', filename: 'app.py', line: 5 },
      { qualname: 'fib', filename: 'app.py', line: 6 },
      { qualname: 'main', filename: 'app.py', line: 3 },
      { qualname: 'main', filename: 'app.py', line: 4 },
    ]);
    expect(main.stacks).toEqual([
      [-1, 0, 0], // <module>
      [0, 4, 0], //  main:3
      [1, 1, 6], //    compute
      [0, 5, 0], //  main:4
      [3, 3, 0], //    fib:6
      [4, 2, 3], //      fib:5
    ]);
    expect(worker).toMatchObject({ name: null, nameTime: null, frames: [{ qualname: 'run', filename: 'threading.py', line: 1 }], stacks: [[-1, 0, 1]] });
    expect(sub).toMatchObject({ interpreterId: '1', threadId: '18446744073709551615', frames: [{ qualname: 'odd;name%', filename: 'dir;x/\n.py', line: null }] });
  });

  it('reads back as the same profile (a report is also a shard)', () => {
    const p = knownProfile();
    const q = Profile.fromJSON(JSON.parse(exportJson(p, { indent: 2, metadata: { a: [1, null] } })));
    expect(q.toJSON()).toEqual(p.toJSON());
    expect(exportJson(q)).toBe(exportJson(p));
    expect(exportText(q)).toBe(exportText(p));
  });

  it('limits functions with maxFunctions; an empty profile is a valid document', () => {
    expect(jsonDocument(knownProfile(), { maxFunctions: 1 }).threads[0]!.functions).toHaveLength(1);
    const empty = JSON.parse(exportJson(new Profile()));
    expect(empty).toEqual({
      format: 'pyunwind-profile',
      version: 2,
      summary: {
        attempted: 0,
        trusted: 0,
        rejected: 0,
        statuses: expect.any(Object),
        ticks: 0,
        missed: 0,
        scheduled: 0,
        firstTime: null,
        lastTime: null,
      },
      ticks: 0,
      missed: 0,
      threads: [],
    });
    expect(Profile.fromJSON(empty).stats().attempted).toBe(0);
  });
});
