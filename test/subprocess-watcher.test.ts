// The descendant watcher's verdicts (record --subprocesses): a descendant the recorder asks to
// look at again (LOOK_AGAIN: its program may still be loading) stays watched and is offered
// again at the next polls, until a verdict is given; after one, it is not offered again while
// it runs the same program. On a real process tree: a shell whose child sleeps.
import { spawn } from 'node:child_process';
import { afterAll, describe, expect, it } from 'vitest';
import { DescendantWatcher, LOOK_AGAIN, programIdentity } from '../src/record/linux/subprocesses.js';
import { waitUntil } from './helpers/wait.js';

const started: ReturnType<typeof spawn>[] = [];
afterAll(() => started.forEach((c) => c.kill('SIGKILL')));

describe('DescendantWatcher', () => {
  it('offers a descendant again while the recorder says LOOK_AGAIN, and not after a verdict', async () => {
    // (the shell forks a sleep and waits for it: the sleep is the one descendant)
    const root = spawn('sh', ['-c', 'sleep 30 & wait'], { stdio: 'ignore' });
    started.push(root);
    const offers: number[] = [];
    const watcher = new DescendantWatcher(root.pid!, {
      settled: (pid) => {
        offers.push(pid);
        return offers.length < 3 ? LOOK_AGAIN : 'not Python';
      },
      execed: () => {},
    });
    await waitUntil(() => {
      watcher.poll();
      return offers.length >= 3;
    }, 'three offers of the child');
    expect(new Set(offers).size).toBe(1);
    // the verdict is kept: more polls offer it no more
    for (let i = 0; i < 5; i++) watcher.poll();
    expect(offers).toHaveLength(3);
    expect(watcher.watched).toBe(1);
  });

  it('identifies again a descendant it could not read at first (caught mid-execve), and offers it', async () => {
    const root = spawn('sh', ['-c', 'sleep 30 & wait'], { stdio: 'ignore' });
    started.push(root);
    const offers: number[] = [];
    let refusals = 0;
    // the child's memory unreadable at its first two looks, as in the moment of an execve
    const identify = (pid: number) => {
      if (pid !== root.pid && refusals < 2) {
        refusals++;
        return { why: `cannot read memory of pid ${pid}` };
      }
      return programIdentity(pid);
    };
    const watcher = new DescendantWatcher(
      root.pid!,
      {
        settled: (pid) => {
          offers.push(pid);
          return offers.length < 2 ? LOOK_AGAIN : null;
        },
        execed: () => {},
      },
      identify,
    );
    await waitUntil(() => {
      watcher.poll();
      return offers.length >= 2;
    }, 'two offers of the child once readable');
    expect(refusals).toBe(2);
    expect(new Set(offers).size).toBe(1);
  });

  it('asks about a descendant that stays unreadable, and not again after a verdict', async () => {
    const root = spawn('sh', ['-c', 'sleep 30 & wait'], { stdio: 'ignore' });
    started.push(root);
    const offers: number[] = [];
    const watcher = new DescendantWatcher(
      root.pid!,
      { settled: (pid) => (offers.push(pid), 'permission denied'), execed: () => {} },
      (pid) => (pid === root.pid ? programIdentity(pid) : { why: 'permission denied' }),
    );
    await waitUntil(() => {
      watcher.poll();
      return offers.length >= 1;
    }, 'an offer of the unreadable child');
    for (let i = 0; i < 5; i++) watcher.poll();
    expect(offers).toHaveLength(1);
    expect(watcher.watched).toBe(1);
  });
});
