// What `record --native` adds to each tick: each thread's registers and the bytes of its native
// stack, from its stack pointer up to the top of its stack (the read stops where the thread's
// stack ends) or `stackBytes`; and, once per mapped object, a native object record
// (native-objects.ts) — the objects mapped later (an extension module imported, a library
// loaded) as the maps change.
//
// A thread's registers and stack must be of one moment with its Python frames. A running
// thread is stopped for them (PTRACE_GETREGS). A thread blocked in the kernel is not, where
// what the kernel publishes is enough (holdNeeded): its syscall file gives the stack and
// instruction pointers it entered the kernel with, but not rbp; the copy is kept when its
// stack unwinds to the outermost frame without rbp (every rule on the way takes the CFA from
// rsp, or rbp from where a callee saved it — with rbp unknown, a rule that needs it ends the
// unwind with a status, never a guess), and the kernel shows the thread stayed off its CPU
// until its Python frames were copied too (off-cpu.ts). Builds without frame pointers (before
// 3.15) pass through glibc's waits this way; 3.15's frame-pointer code often needs rbp at once
// (a thread in `time.sleep` or `read`), and that thread is stopped.

import fs from 'node:fs';
import { readProcMaps, type MapEntry } from './proc-maps.js';
import { readNativeObjects } from './native-objects.js';
import { stackRange, DEFAULT_STACK_BYTES } from './native-stack.js';
import type { ThreadStopper } from './stopper.js';
import type { OffCpuWatch } from './off-cpu.js';
import type { HeldSome } from '../copy/copier.js';
import type { NativeObject } from '../../native/objects.js';
import { unwindNative, type NativeRegisters } from '../../native/unwind.js';
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

/**
 * A tick's threads as holdNeeded left them: the running ones held stopped, the blocked ones
 * whose stacks unwind without rbp copied without a stop — each thread's native copy in
 * `copies`, kept up to date as the copier asks about each thread after its Python copy.
 */
export interface NativeHold extends HeldSome {
  /** every thread to stop was seen stopped (or is gone) */
  held: boolean;
  copies: Map<bigint, NativeCopy>;
}

export class NativeRecorder {
  private readonly sent = new Set<string>();
  /** the objects recorded, the latest first (an address mapped again is the latest's) */
  private mapped: NativeObject[] = [];
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
  /** stack bytes read (a blocked thread's copy that needed rbp is read again stopped), and copies that could not be made */
  stackBytes = 0;
  failed = 0;

  constructor(
    readonly pid: number,
    /** null: nothing is stopped — copies at the interrupt, whose records carry the running threads' registers and stacks */
    private readonly stopper: ThreadStopper | null,
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
      this.mapped.unshift(o);
      this.objects++;
    }
    for (const m of fresh) this.sent.add(key(m));
    for (const u of unread) this.unread.set(u.path, u.why);
  }

  /** Registers and native stack of every thread the stopper holds now (call while they are held). */
  copyHeld(): Map<bigint, NativeCopy> {
    this.refreshObjects();
    const out = new Map<bigint, NativeCopy>();
    for (const tid of this.stopper?.heldThreads ?? []) {
      const registers = this.stopper!.registers(tid);
      const copy = registers && this.copyStack(tid, registers);
      if (!copy) {
        this.failed++;
        continue;
      }
      out.set(BigInt(tid), copy);
    }
    return out;
  }

  /**
   * Copy the native stacks of a tick's threads, stopping only those that need it: a blocked
   * thread whose stack unwinds without rbp is copied as it waits, every other is stopped and
   * copied. Its `after` then tells the copier, thread by thread once its Python frames are
   * copied too, whether a thread copied without a stop stayed off its CPU — and stops and
   * copies again one that ran. Null where the kernel cannot show a thread off its CPU (no
   * watch): then every thread is to be stopped, as before. Call resume() on the stopper after.
   */
  holdNeeded(watch: OffCpuWatch | null): NativeHold | null {
    if (!watch || !this.stopper) return null;
    this.refreshObjects();
    let tids: number[];
    try {
      tids = fs.readdirSync(`/proc/${this.pid}/task`).map(Number);
    } catch {
      return null;
    }
    const marks = new Map<bigint, bigint>();
    const copies = new Map<bigint, NativeCopy>();
    const stop: number[] = [];
    for (const tid of tids) {
      const at = watch.blockedAt(tid);
      // (rbp unknown: 0, which no rule can follow — see unwind.ts)
      const registers: NativeRegisters | null = at && { rip: at.pc, rsp: at.sp, rbp: 0n };
      const copy = registers && this.copyStack(tid, registers);
      if (at && copy && unwindNative(registers!, copy.stack, this.mapped).status === 'complete') {
        marks.set(BigInt(tid), at.mark);
        copies.set(BigInt(tid), copy);
      } else stop.push(tid);
    }
    const held = this.stopper.stopThreads(stop);
    for (const [tid, copy] of this.copyHeld()) copies.set(tid, copy);
    const stopper = this.stopper;
    const after = (tid: bigint): 'stopped' | 'quiet' | 'again' | 'unproven' => {
      const mark = marks.get(tid);
      if (mark !== undefined && watch.stillOff(Number(tid), mark)) {
        this.quiet++;
        return 'quiet';
      }
      // (a thread not yet started has no native id, and nothing to copy)
      if (tid === 0n || stopper.heldThreads.includes(Number(tid))) return 'stopped';
      // it ran since it was looked at (or started since): stopped now, copied again
      copies.delete(tid);
      const registers = stopper.stopThreads([Number(tid)]) ? stopper.registers(Number(tid)) : null;
      const copy = registers && this.copyStack(Number(tid), registers);
      if (!copy) return 'unproven';
      copies.set(tid, copy);
      this.woke++;
      return 'again';
    };
    return { held, copies, after };
  }

  /** threads copied without a stop (holdNeeded), and those stopped and copied again because they ran meanwhile */
  quiet = 0;
  woke = 0;

  /** The thread's stack from `registers` on (null: rsp in no mapping, or nothing could be read). */
  copyStack(tid: number, registers: NativeRegisters): NativeCopy | null {
    let range = stackRange(this.maps, registers, this.limit);
    if (!range) return null;
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
    if (n <= 0) return null;
    this.stackBytes += n;
    return { registers, stack: { address: range.address, bytes: this.scratch.slice(0, n) } };
  }

  close(): void {
    fs.closeSync(this.fd);
  }
}

function key(m: MapEntry): string {
  return `${m.start}:${m.end}:${m.path}`;
}
