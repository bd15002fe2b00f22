// The churn oracle's judgement of a stack (harness/churn.ts possible): strict from `main` on,
// and below it only threading's start and join of threads — never a frame of the program's own
// glued onto them.
import { describe, expect, it } from 'vitest';
import { possible } from '../harness/churn.js';

const stacks = new Set(['main', 'main;one_round', 'main;one_round;a', 'main;one_round;a;leaf', 'main;one_round;b;gen']);
const judge = (s: string): boolean => possible(s.split(';'), stacks);

describe('the churn oracle', () => {
  it('takes the stacks the program reported, under the module or a thread', () => {
    expect(judge('<module>;main;one_round;a;leaf')).toBe(true);
    expect(judge('Thread._bootstrap;Thread._bootstrap_inner;Thread.run;main;one_round;b;gen')).toBe(true);
    expect(judge('<module>')).toBe(true);
    expect(judge('Thread._bootstrap;Thread._bootstrap_inner')).toBe(true);
  });
  it("takes the main thread in threading's start and join of the others, and a thread before or after its run", () => {
    // seen in --blocking soaks: the recorder's stops slow a new thread's start, and the main
    // thread waits for it in Thread.start long enough to be sampled
    expect(judge('<module>;Thread.start;Event.wait;Condition.wait')).toBe(true);
    expect(judge('<module>;Thread.join')).toBe(true);
    expect(judge('Thread._bootstrap;Thread._bootstrap_inner;Event.set;Condition.notify_all')).toBe(true);
  });
  it("refuses a stack glued from frames of different moments", () => {
    expect(judge('<module>;main;one_round;leaf')).toBe(false); // a frame missing between
    expect(judge('<module>;main;a')).toBe(false);
    expect(judge('<module>;a')).toBe(false); // the program's own frame without main
    expect(judge('<module>;Thread.start;Event.wait;leaf')).toBe(false); // churn under threading
    expect(judge('Thread._bootstrap;Thread._bootstrap_inner;Thread.run;leaf')).toBe(false);
    expect(judge('Thread._bootstrap;Thread._bootstrap_inner;Thread.run;Event.wait')).toBe(false); // run calls main only
    expect(judge('Thread.run;main')).toBe(false);
  });
});
