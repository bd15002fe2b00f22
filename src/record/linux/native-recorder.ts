// What `record --native` adds to each tick: with every thread held stopped, each thread's
// registers (PTRACE_GETREGS) and the bytes of its native stack, from its stack pointer up to
// the top of its stack (the read stops where the thread's stack ends) or `stackBytes`; and,
// once per mapped object, a native object record (native-objects.ts) — the objects mapped
// later (an extension module imported, a library loaded) as the maps change.

import fs from 'node:fs';
import { readProcMaps, type MapEntry } from './proc-maps.js';
import { readNativeObjects } from './native-objects.js';
import { stackRange, DEFAULT_STACK_BYTES } from './native-stack.js';
import type { ThreadStopper } from './stopper.js';
import type { NativeObject } from '../../native/objects.js';
import type { NativeRegisters } from '../../native/unwind.js';
import type { Region } from '../../capture/types.js';

/** How far below the red zone a thread's stack copy may start (see copyHeld), and the steps it moves by. */
const STACK_SLACK = 16384n;
const STACK_STEP = 4096n;

/** How often the maps are looked at again for objects mapped since (ms). */
const MAPS_EVERY_MS = 500;

export interface NativeCopy {
  registers: NativeRegisters;
  stack: Region;
}

export class NativeRecorder {
  private readonly sent = new Set<string>();
  private maps: MapEntry[] = [];
  private mapsAt = -Infinity;
  private readonly fd: number;
  /** where each stack is read first (reused: a stack is usually far shorter than the limit) */
  private readonly scratch: Uint8Array;
  /** where each thread's last stack copy started (see copyHeld) */
  private readonly starts = new Map<number, bigint>();
  /** objects recorded, and those that could not be read (with why) */
  objects = 0;
  readonly unread = new Map<string, string>();
  /** stack bytes copied, and copies that could not be made */
  stackBytes = 0;
  failed = 0;

  constructor(
    readonly pid: number,
    private readonly stopper: ThreadStopper,
    /** where the objects go (null: none are read — dump reads them before it stops anything) */
    private readonly addObject: ((o: NativeObject) => void) | null,
    readonly limit = DEFAULT_STACK_BYTES,
  ) {
    this.fd = fs.openSync(`/proc/${pid}/mem`, 'r');
    this.scratch = new Uint8Array(limit + Number(STACK_SLACK + STACK_STEP));
  }

  /** Record the objects mapped now that were not recorded yet (at most every MAPS_EVERY_MS unless `force`). */
  refreshObjects(force = false): void {
    const now = performance.now();
    if (!force && now - this.mapsAt < MAPS_EVERY_MS) return;
    this.mapsAt = now;
    let maps: MapEntry[];
    try {
      maps = readProcMaps(this.pid);
    } catch {
      return; // the target is ending: its last maps stand
    }
    this.maps = maps;
    if (!this.addObject) return;
    const fresh = maps.filter((m) => m.perms[2] === 'x' && m.path.startsWith('/') && !this.sent.has(key(m)));
    if (fresh.length === 0) return;
    const { objects, unread } = readNativeObjects(this.pid, maps);
    for (const o of objects) {
      const k = `${o.start}:${o.end}:${o.path}`;
      if (this.sent.has(k)) continue;
      this.addObject(o);
      this.objects++;
    }
    for (const m of fresh) this.sent.add(key(m));
    for (const u of unread) this.unread.set(u.path, u.why);
  }

  /** Registers and native stack of every thread the stopper holds now (call while they are held). */
  copyHeld(): Map<bigint, NativeCopy> {
    this.refreshObjects();
    const out = new Map<bigint, NativeCopy>();
    for (const tid of this.stopper.heldThreads) {
      const registers = this.stopper.registers(tid);
      let range = registers && stackRange(this.maps, registers, this.limit);
      if (!registers || !range) {
        this.failed++;
        continue;
      }
      // A copy that starts where the thread's last one started is stored as the words that
      // changed (docs/capture-format.md, words region); one at a new address, whole. So the
      // start stays put while the stack pointer moves within STACK_SLACK above it, and moves in
      // STACK_STEP steps otherwise: a few KiB of dead stack copied, against the whole stack.
      const top = range.address + BigInt(range.length);
      const last = this.starts.get(tid);
      let start = last !== undefined && last <= range.address && range.address - last <= STACK_SLACK ? last : range.address - (range.address % STACK_STEP);
      const m = this.maps.find((x) => x.start <= registers.rsp && registers.rsp < x.end)!;
      if (start < m.start) start = m.start;
      if (top - start <= BigInt(this.limit) + STACK_SLACK) range = { address: start, length: Number(top - start) };
      this.starts.set(tid, range.address);
      let n = 0;
      try {
        // (a stack mapping may run on into pages that cannot be read: what could, is the copy)
        n = fs.readSync(this.fd, this.scratch, 0, range.length, range.address);
      } catch {
        n = 0;
      }
      if (n <= 0) {
        this.failed++;
        continue;
      }
      this.stackBytes += n;
      out.set(BigInt(tid), { registers, stack: { address: range.address, bytes: this.scratch.slice(0, n) } });
    }
    return out;
  }

  close(): void {
    fs.closeSync(this.fd);
  }
}

function key(m: MapEntry): string {
  return `${m.start}:${m.end}:${m.path}`;
}
