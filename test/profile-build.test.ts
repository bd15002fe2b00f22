// Building a profile from synthetic samples: stacks only from trusted samples, recursion
// counted once in totals, statistics that add up, and the input contract enforced.
import { describe, expect, it } from 'vitest';
import { Profile, ProfileFormatError, type SourceFrame, type SampleInput, type SampleThread } from '../src/profile/index.js';
import { STATUS_NAMES, type Status } from '../src/walk/status.js';

const MAIN: SampleThread = { interpreterId: 0n, threadId: 140_737_488_355_328n, nativeThreadId: 4242n, name: 'MainThread' };
const WORKER: SampleThread = { interpreterId: 0n, threadId: 140_737_488_355_999n, nativeThreadId: 4243n };

const f = (qualname: string, line: number | null, filename = 'app.py'): SourceFrame => ({ qualname, filename, line });
const sample = (frames: SourceFrame[], status: Status = 'complete', extra: Partial<SampleInput> = {}): SampleInput => ({
  time: 0,
  thread: MAIN,
  status,
  frames,
  ...extra,
});

/** Stacks of a thread as "root;…;leaf" → weight, read back through the public tables. */
function stacksOf(p: Profile, t: SampleThread): Map<string, number> {
  const tp = p.thread(t)!;
  const out = new Map<string, number>();
  tp.stackWeight.forEach((w, s) => {
    if (w > 0) out.set(tp.stackPath(s).map((i) => `${tp.frames[i]!.qualname}:${tp.frames[i]!.line}`).join(';'), w);
  });
  return out;
}

describe('Profile.add', () => {
  it('interns frames and stacks as a prefix tree, weights per stack', () => {
    const p = new Profile();
    p.add(sample([f('leaf', 3), f('mid', 2), f('main', 1)]));
    p.add(sample([f('leaf', 3), f('mid', 2), f('main', 1)], 'complete', { weight: 2 }));
    p.add(sample([f('other', 9), f('mid', 2), f('main', 1)]));
    p.add(sample([f('mid', 2), f('main', 1)], 'complete-unverifiable'));
    const t = p.thread(MAIN)!;
    expect(t.frames).toHaveLength(4);
    // main, main;mid, main;mid;leaf, main;mid;other — shared prefixes stored once
    expect(t.stackParent).toHaveLength(4);
    for (let s = 0; s < t.stackParent.length; s++) expect(t.stackParent[s]!).toBeLessThan(s);
    expect(stacksOf(p, MAIN)).toEqual(
      new Map([
        ['main:1;mid:2;leaf:3', 3],
        ['main:1;mid:2;other:9', 1],
        ['main:1;mid:2', 1],
      ]),
    );
    expect(t.stackedWeight).toBe(5);
    expect(t.trustedWeight).toBe(5);
  });

  it('never lets a rejected sample into the stack or frame tables', () => {
    const p = new Profile();
    p.add(sample([f('good', 1)]));
    const rejected = STATUS_NAMES.filter((s) => !['complete', 'complete-unverifiable', 'idle'].includes(s));
    expect(rejected).toHaveLength(9);
    for (const status of rejected) p.add(sample([f(`bad-${status}`, 7), f('good', 1)], status, { weight: 5 }));
    // a thread seen only through rejected samples still has its statistics, and no stacks
    p.add({ time: 3, thread: WORKER, status: 'torn', frames: [f('bad', 1)] });
    const t = p.thread(MAIN)!;
    expect(t.frames.map((x) => x.qualname)).toEqual(['good']);
    expect([...t.stackParent]).toEqual([-1]);
    expect(t.stackedWeight).toBe(1);
    for (const status of rejected) expect(t.statuses[status]).toBe(1);
    const w = p.thread(WORKER)!;
    expect(w.frames).toHaveLength(0);
    expect(w.stackParent).toHaveLength(0);
    expect(w.stats()).toMatchObject({ attempted: 1, trusted: 0, rejected: 1 });
    expect(w.functions()).toEqual([]);
  });

  it('counts idle samples apart, with an empty stack', () => {
    const p = new Profile();
    p.add(sample([], 'idle', { weight: 3 }));
    p.add(sample([], 'idle'));
    p.add(sample([f('work', 1)]));
    const t = p.thread(MAIN)!;
    expect(t.statuses.idle).toBe(2);
    expect(t.idleWeight).toBe(4);
    expect(t.stackedWeight).toBe(1);
    expect(t.trustedWeight).toBe(5);
    expect(t.stackParent).toHaveLength(1);
  });

  it('statistics add up: every attempted sample is in exactly one status', () => {
    const p = new Profile();
    let n = 0;
    for (const status of STATUS_NAMES) {
      for (let i = 0; i <= STATUS_NAMES.indexOf(status); i++, n++) {
        p.add({ time: n, thread: n % 3 === 0 ? WORKER : MAIN, status, frames: status === 'idle' ? [] : [f('x', 1)] });
      }
    }
    p.addTicks(n - 2);
    p.addMissed(4);
    p.addMissed(0);
    const s = p.stats();
    expect(s.attempted).toBe(n);
    expect(STATUS_NAMES.reduce((a, st) => a + s.statuses[st], 0)).toBe(s.attempted);
    STATUS_NAMES.forEach((st, i) => expect(s.statuses[st]).toBe(i + 1));
    expect(s.trusted).toBe(1 + 2 + 3);
    expect(s.trusted + s.rejected).toBe(s.attempted);
    // the schedule counts ticks (here: some ticks sampled two threads), statuses count samples
    expect(s.ticks).toBe(n - 2);
    expect(s.missed).toBe(4);
    expect(s.scheduled).toBe(n - 2 + 4);
    // the per-thread statistics partition the whole
    const ts = p.threads().map((t) => t.stats());
    expect(ts.reduce((a, x) => a + x.attempted, 0)).toBe(n);
    for (const x of ts) expect(STATUS_NAMES.reduce((a, st) => a + x.statuses[st], 0)).toBe(x.attempted);
  });

  it('keeps the first and last time of every attempted sample, trusted or not', () => {
    const p = new Profile();
    p.add(sample([f('a', 1)], 'complete', { time: 500 }));
    p.add(sample([], 'torn', { time: 100 }));
    p.add(sample([], 'idle', { time: 900 }));
    const t = p.thread(MAIN)!;
    expect([t.firstTime, t.lastTime]).toEqual([100, 900]);
    expect(p.timeSpan()).toEqual({ first: 100, last: 900 });
    expect(new Profile().timeSpan()).toBeNull();
  });

  it('names a thread by its latest named sample, whatever the order', () => {
    const named = (name: string | undefined, time: number): SampleInput => ({
      time,
      thread: { ...MAIN, name },
      status: 'complete',
      frames: [f('a', 1)],
    });
    const a = new Profile();
    for (const s of [named('old', 1), named('new', 5), named(undefined, 9), named('mid', 3)]) a.add(s);
    const b = new Profile();
    for (const s of [named('mid', 3), named(undefined, 9), named('new', 5), named('old', 1)]) b.add(s);
    expect(a.thread(MAIN)!.name).toBe('new');
    expect(b.thread(MAIN)!.name).toBe('new');
    const c = new Profile();
    c.add(named(undefined, 1));
    expect(c.thread(MAIN)!.name).toBeUndefined();
  });

  it('keys threads by interpreter, native thread id and thread id, and orders them so', () => {
    const p = new Profile();
    const t = (interpreterId: bigint, nativeThreadId: bigint, threadId: bigint): SampleThread => ({ interpreterId, nativeThreadId, threadId });
    for (const th of [t(1n, 5n, 1n), t(0n, 7n, 2n), t(0n, 5n, 9n), t(0n, 5n, 3n), t(0n, 5n, 3n)]) {
      p.add({ time: 0, thread: th, status: 'complete', frames: [f('a', 1)] });
    }
    expect(p.threads().map((x) => `${x.interpreterId}/${x.nativeThreadId}/${x.threadId}`)).toEqual(['0/5/3', '0/5/9', '0/7/2', '1/5/1']);
    expect(p.thread(t(0n, 5n, 3n))!.statuses.complete).toBe(2);
  });

  it('keeps frames that differ only in line or file apart, and names with any characters', () => {
    const p = new Profile();
    p.add(sample([f('a', 1), f('a', 2), f('a', null), f('a', 1, 'b.py'), f('a;b\0c', 1), f('a', 1, ';\n')]));
    // ("ab", "c") and ("a", "bc") are different frames and different functions
    p.add(sample([{ qualname: 'ab', filename: 'c', line: 1 }]));
    p.add(sample([{ qualname: 'a', filename: 'bc', line: 1 }]));
    expect(p.thread(MAIN)!.frames).toHaveLength(8);
    expect(p.thread(MAIN)!.functions()).toHaveLength(6);
  });
});

describe('functions', () => {
  it('counts a recursive function once per sample in total, aggregated over lines', () => {
    const p = new Profile();
    // fib recursing three deep (two lines), twice; then main alone
    for (let i = 0; i < 2; i++) p.add(sample([f('fib', 5), f('fib', 6), f('fib', 6), f('main', 1)]));
    p.add(sample([f('main', 2)]));
    // a recursion through another function: a → b → a
    p.add(sample([f('a', 1), f('b', 1), f('a', 2), f('main', 1)], 'complete', { weight: 10 }));
    const fns = new Map(p.thread(MAIN)!.functions().map((x) => [x.qualname, x]));
    expect(fns.get('fib')).toMatchObject({ self: 2, total: 2 });
    expect(fns.get('main')).toMatchObject({ self: 1, total: 13 });
    expect(fns.get('a')).toMatchObject({ self: 10, total: 10 });
    expect(fns.get('b')).toMatchObject({ self: 0, total: 10 });
  });

  it('separates functions of the same name in different files, and ranks them', () => {
    const p = new Profile();
    p.add(sample([f('run', 1, 'x.py'), f('main', 1)], 'complete', { weight: 3 }));
    p.add(sample([f('run', 1, 'y.py'), f('main', 1)], 'complete', { weight: 2 }));
    p.add(sample([f('main', 1)], 'complete', { weight: 4 }));
    const t = p.thread(MAIN)!;
    expect(t.topFunctions('self', 10).map((x) => `${x.qualname}@${x.filename}=${x.self}`)).toEqual([
      'main@app.py=4',
      'run@x.py=3',
      'run@y.py=2',
    ]);
    expect(t.topFunctions('total', 2).map((x) => `${x.qualname}@${x.filename}=${x.total}`)).toEqual(['main@app.py=9', 'run@x.py=3']);
  });
});

describe('the input contract', () => {
  it('rejects samples that break it, loudly', () => {
    const p = new Profile();
    expect(() => p.add(sample([f('a', 1)], 'bogus' as Status))).toThrow(/unknown status/);
    expect(() => p.add(sample([f('a', 1)], 'complete', { weight: 0 }))).toThrow(/weight/);
    expect(() => p.add(sample([f('a', 1)], 'complete', { weight: NaN }))).toThrow(/weight/);
    expect(() => p.add(sample([f('a', 1)], 'complete', { time: Infinity }))).toThrow(/time/);
    expect(() => p.add(sample([f('a', 1)], 'idle'))).toThrow(/idle/);
    expect(() => p.add(sample([], 'complete'))).toThrow(/at least one frame/);
    expect(() => p.add(sample([f('a', 1.5)]))).toThrow(/line/);
    expect(() => p.addMissed(-1)).toThrow(RangeError);
    expect(() => p.addMissed(1.5)).toThrow(RangeError);
    expect(() => p.addTicks(-1)).toThrow(RangeError);
    // nothing was counted by the failed calls
    expect(p.stats().attempted).toBe(0);
    // rejected samples' frames are not looked at: a walk that failed may carry anything
    p.add(sample([f('a', 1.5)], 'corrupt'));
    expect(p.stats().rejected).toBe(1);
  });
});

describe('toJSON / fromJSON', () => {
  const build = (order: SampleInput[]): Profile => {
    const p = new Profile();
    for (const s of order) p.add(s);
    p.addTicks(5);
    p.addMissed(3);
    return p;
  };
  const samples: SampleInput[] = [
    sample([f('c', 3), f('b', 2), f('a', 1)], 'complete', { time: 10 }),
    sample([f('b', 2), f('a', 1)], 'complete', { time: 20, weight: 2 }),
    sample([f('z', 9), f('a', 1)], 'complete-unverifiable', { time: 30 }),
    sample([], 'idle', { time: 40 }),
    sample([f('q', 1)], 'dangling', { time: 50 }),
    { time: 5, thread: WORKER, status: 'complete', frames: [f('w', 1, 'threading.py')] },
  ];

  it('is canonical: the same samples in another order give the same JSON', () => {
    const a = build(samples).toJSON();
    const b = build([...samples].reverse()).toJSON();
    expect(b).toEqual(a);
    expect(a.format).toBe('pyunwind-profile');
    expect(a.version).toBe(2);
    expect(a.ticks).toBe(5);
    expect(a.threads[0]!.threadId).toBe('140737488355328'); // bigints as decimal strings
    expect(a.threads[0]!.frames.map((x) => x.qualname)).toEqual(['a', 'b', 'c', 'z']);
    // depth-first, parents first
    expect(a.threads[0]!.stacks).toEqual([
      [-1, 0, 0],
      [0, 1, 2],
      [1, 2, 1],
      [0, 3, 1],
    ]);
  });

  it('round-trips through JSON text exactly', () => {
    const p = build(samples);
    const q = Profile.fromJSON(JSON.parse(JSON.stringify(p)));
    expect(q.toJSON()).toEqual(p.toJSON());
    expect(q.stats()).toEqual(p.stats());
    expect(q.thread(MAIN)!.functions()).toEqual(p.thread(MAIN)!.functions());
    expect(q.thread(MAIN)!.name).toBe('MainThread');
    expect(q.thread(WORKER)!.name).toBeUndefined();
  });

  it('rejects malformed documents with the place and the reason', () => {
    const good = (): any => JSON.parse(JSON.stringify(build(samples)));
    const bad = (mutate: (d: any) => void, message: RegExp): void => {
      const d = good();
      mutate(d);
      let err: unknown;
      try {
        Profile.fromJSON(d);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(ProfileFormatError);
      expect((err as Error).message).toMatch(message);
    };
    expect(() => Profile.fromJSON(good())).not.toThrow();
    bad((d) => (d.format = 'speedscope'), /\$\.format/);
    bad((d) => (d.version = 1), /\$\.version: this reader knows version 2, got 1/);
    bad((d) => (d.missed = -1), /\$\.missed/);
    bad((d) => delete d.ticks, /\$\.ticks/);
    bad((d) => (d.threads[0].threadId = 12), /threads\[0\]\.threadId/);
    bad((d) => (d.threads[0].threadId = '1e3'), /threads\[0\]\.threadId/);
    bad((d) => (d.threads[0].nativeThreadId = '99999999999999999999'), /64 bits/);
    bad((d) => (d.threads[0].statuses.exploded = 1), /unknown status "exploded"/);
    bad((d) => (d.threads[0].statuses.torn = 0.5), /statuses\.torn/);
    bad((d) => delete d.threads[0].statuses.idle, /statuses\.idle/);
    bad((d) => (d.threads[0].stacks[0][0] = 0), /stacks\[0\]\[0\]: parent must be/);
    bad((d) => (d.threads[0].stacks[1][0] = 3), /stacks\[1\]\[0\]/);
    bad((d) => (d.threads[0].stacks[1][1] = 99), /stacks\[1\]\[1\]: frame must index/);
    bad((d) => (d.threads[0].stacks[1][2] = -1), /stacks\[1\]\[2\]/);
    bad((d) => d.threads[0].stacks[1].pop(), /stacks\[1\]: expected \[parent, frame, weight\]/);
    bad((d) => (d.threads[0].frames[0].line = '7'), /frames\[0\]\.line/);
    bad((d) => (d.threads[0].firstTime = 1e9), /firstTime/);
    bad((d) => (d.threads[0].name = 5), /\.name/);
    bad((d) => (d.threads[1].nameTime = 4), /nameTime: must be null/);
    bad((d) => d.threads.push(d.threads[0]), /appears twice/);
    bad((d) => (d.threads = {}), /\$\.threads: expected an array/);
    expect(() => Profile.fromJSON(null)).toThrow(ProfileFormatError);
  });
});
