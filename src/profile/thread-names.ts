// The names the recorder read from Python's `threading` module (a capture's thread-name records),
// and which one each thread of a profile gets: the name in force at its last sample — so a thread
// renamed while it ran shows under its later name. A name read after a thread's last sample
// (a thread seen before its first read) still names it. Where a thread has such a name it wins
// over "MainThread" from the main-thread flag (which the same thread has in `threading` unless
// the program renamed it); where it has none, the flag's name stays.
//
// Names are applied to the profile after every block is merged, in whichever thread or worker
// the blocks were processed, so the engine and the reference path name threads alike.

import type { ThreadNameRecord } from '../capture/types.js';
import type { Profile } from './profile.js';
import type { Timeline } from './timeline.js';
import { threadKey, type ThreadIds } from './thread.js';

export class ThreadNameTable {
  /** per thread: its names in time order (time, then name, for ties) */
  private readonly byThread = new Map<string, { time: number; name: string }[]>();
  private sorted = true;
  private count = 0;

  add(r: Pick<ThreadNameRecord, 'time' | 'interpreterId' | 'threadId' | 'nativeThreadId' | 'name'>): void {
    const k = threadKey(r);
    let list = this.byThread.get(k);
    if (!list) this.byThread.set(k, (list = []));
    const last = list[list.length - 1];
    if (last && (r.time < last.time || (r.time === last.time && r.name < last.name))) this.sorted = false;
    list.push({ time: r.time, name: r.name });
    this.count++;
  }

  addAll(records: Iterable<ThreadNameRecord>): void {
    for (const r of records) this.add(r);
  }

  /** records added */
  get size(): number {
    return this.count;
  }

  /** The thread's name at `time`: the latest read at or before it, else the first one read after; undefined: none. */
  at(ids: ThreadIds, time: number): string | undefined {
    const list = this.byThread.get(threadKey(ids));
    if (!list || list.length === 0) return undefined;
    this.sort();
    let found: string | undefined;
    for (const e of list) {
      if (e.time > time) break;
      found = e.name;
    }
    return found ?? list[0]!.name;
  }

  /** Give every thread of `profile` that has a recorded name the one in force at its last sample. */
  nameProfile(profile: Profile): void {
    if (this.count === 0) return;
    for (const t of profile.threads()) {
      const name = this.at(t, t.lastTime);
      if (name !== undefined) t.setName(name, t.lastTime);
    }
  }

  /** The same for the threads of a timeline (the name at its last sample). */
  nameTimeline(timeline: Timeline): void {
    if (this.count === 0) return;
    for (const t of timeline.threads()) {
      const last = t.time.length ? t.time[t.time.length - 1]! : 0;
      const name = this.at(t, last);
      if (name !== undefined) t.name = name;
    }
  }

  private sort(): void {
    if (this.sorted) return;
    for (const list of this.byThread.values()) list.sort((a, b) => a.time - b.time || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    this.sorted = true;
  }
}
