// The copier: copies the memory of every thread of every interpreter of a target as regions,
// and each code object the stacks reach, once.
//
// Per thread it copies the thread state (on 3.15 through the base frame, which lies past
// thread_state.size), the _PyCFrame on 3.11/3.12 when it is outside the thread state, the used
// part of each data-stack chunk, and every frame the chain reaches outside those (generator
// and coroutine frames inside their objects, entry frames on the C stack). Reads are whole
// structures. The copy does not judge the stack — the walk does, over exactly these bytes —
// but it notes whether anything proves the copy shows one moment (`unproven`: consistency.ts).
//
// This file runs a pass: the interpreters and their thread lists (thread-list.ts), one read
// for everything the last pass foresaw, and for each thread the copy that fits — its steady
// copy (steady-copy.ts), the general copy (thread-copy.ts), copies made again when they unproven
// (consistency.ts), or made with the thread stopped (stop-policy.ts, stopper.ts).
//
// Used once by takeSnapshot, and repeatedly by the sampler: code objects are then copied once
// per address, and copied again only when the address has been reused by another code object
// (src/record/copy/code-cache.ts). They are checked inside the copy window of the sample that uses
// them, and what was read is kept only if the copy did not move: then the frames that refer to
// them were alive throughout, and so were their code objects.

import type { Layout } from '../../layout/layout.js';
import { readPointer } from '../../walk/region-memory.js';
import type { CodeRecord } from '../../capture/types.js';
import { CodeCache, type PendingCodes } from './code-cache.js';
import type { Consistency } from './consistency.js';
import type { Range } from '../linux/native.js';
import { readMany, type MemorySource, type PreparedRead } from './source.js';
import { SteadyCopy, type SteadyHooks } from './steady-copy.js';
import { learn, mayRunPython, STOP_FIRST_RATE, stopsFirst } from './stop-policy.js';
import type { Stopper } from '../linux/stopper.js';
import type { NativeCopy } from '../linux/native-recorder.js';
import { newThreadCache, type ThreadCache } from './thread-cache.js';
import { copyThread, FROZEN, planOf, type Attempt, type CopyContext, type Prefetched } from './thread-copy.js';
import { AddressSet, liveThreadStates, MAX_INTERPRETERS, ThreadListPass, type ListEntry } from './thread-list.js';
import { emptySnapshot, type ThreadSnapshot } from './thread-snapshot.js';

export interface CopierOptions {
  /** frames followed per thread while looking for frames outside the chunks */
  maxFrames?: number;
  /** default: `anchor` where the layout has the anchor and the source can write, else `reread` */
  consistency?: Consistency;
  /** copies of a thread tried again, at once, when the copy is not proven (default 1) */
  retries?: number;
  /** when nothing proved a thread's copy after the retries: stop the target and copy it (adaptive) */
  stopper?: Stopper;
  /**
   * the stopper serves blocking passes only (copyAll's `blocking`): every other pass copies as
   * if there were none — copies at the interrupt, whose ticks alternate with --blocking's to be
   * compared with them (the sampler's `alternate`)
   */
  stopsOnlyBlocking?: boolean;
  /** false: every copy by the general path, never a SteadyCopy (for comparing the two) */
  steady?: boolean;
  /**
   * Copy every thread state through at least this many bytes (default: thread_state.size, or on
   * 3.15 through the base frame): fields past the public thread state that a recording needs in
   * the same read as the stack — the asyncio running task (task-copy.ts), so that it is the task
   * of the stack copied.
   */
  tstateMin?: number;
  /**
   * pointer-sized fields of the thread state (offsets, within tstateMin) that a copy's second
   * reading must show unchanged too, besides the stack's (async-aware: the running loop and
   * task, which a stack read a moment after them could otherwise outdate unseen)
   */
  tstateCheck?: readonly number[];
  /** false: do not collect `used` (a recorder that never asks for it saves a set insert per frame) */
  collectUsed?: boolean;
  /** false: code objects are copied without their bytecode, which is never refreshed (code-cache.ts; for measuring what it costs) */
  bytecode?: boolean;
  /**
   * Where nothing can prove a copy of a running thread (no anchor: CPython before 3.15, or
   * read-only), keep a copy whose readings agree instead of counting it as unproven (`--copy
   * optimistic`; not exact: see consistency.ts). Default false.
   */
  keepAgreeing?: boolean;
  /**
   * Threads (by kernel thread id) whose samples are copied elsewhere — in the kernel, at the
   * interrupt (record --copy interrupt: those on a CPU). Such a thread is not copied: its
   * snapshot holds only its thread state as read with the pass, and says `leftToKernel`.
   */
  leaveOut?: (nativeThreadId: bigint) => boolean;
  /**
   * A proof that a thread did not run while it was copied, tried first for every thread (record
   * --copy interrupt: the context switches the kernel program sees, KernelCopier.watch), in
   * place of the stopper's (off-cpu.ts), which is tried only before a stop.
   */
  quiet?: QuietWatch;
  /**
   * With `quiet`: the registers and native stack of thread `tid`, off its CPU since `mark` — made
   * within its copy's window (after the mark, before the proof that it stayed off), so of the
   * same moment as its Python frames (record --native --copy interrupt). Null: none.
   */
  quietNative?: (tid: number, mark: bigint) => NativeCopy | null;
  /**
   * With `quiet`: more to copy of a thread within its copy's window, before the proof that it
   * stayed off its CPU (record --async-aware --copy interrupt: its asyncio tasks, which only it
   * changes), added to its snapshot.
   */
  inWindow?: (snap: ThreadSnapshot) => void;
}

/** Tells that a thread stayed off its CPU: `mark` before a copy (null: it is on one), `stillOff` after. */
export interface QuietWatch {
  mark(tid: number): bigint | null;
  stillOff(tid: number, mark: bigint): boolean;
}

/**
 * A copy of every thread where only some are held stopped (copyAll's `some`): the others, blocked
 * in the kernel, stand if they stayed off their CPUs (record --native: NativeRecorder.holdNeeded).
 */
export interface HeldSome {
  /**
   * How the copy of thread `tid` (its kernel id), just made, stands: 'stopped' (it is held),
   * 'quiet' (proven off its CPU throughout), 'again' (it ran, and is held now: copy it again),
   * 'unproven' (it ran, and could not be stopped).
   */
  after(tid: bigint): 'stopped' | 'quiet' | 'again' | 'unproven';
}

/**
 * How long a copy proven by the thread staying off its CPU (CopierOptions.quiet) waits for a
 * thread that woke during its copy to be off its CPU again, ms: a thread that naps thousands of
 * times a second (workloads/churn.py `naps`) is off again within a fraction of that.
 */
const QUIET_WAIT_MS = 0.5;
/** Copies made within QUIET_WAIT_MS at most */
const QUIET_TRIES = 4;
/** How often that wait looks at the thread, ms (a sleep this short wakes ~50 µs late: about as often) */
const QUIET_LOOK_MS = 0.03;
/** A word nobody writes: Atomics.wait on it sleeps for its timeout. */
const pause = new Int32Array(new SharedArrayBuffer(4));

export class MemoryCopier {
  private readonly P: 4 | 8;
  /** a Linux target's process id as a thread id (its first thread's), where the interpreter does not name its main thread */
  private readonly processMain: bigint | null;
  private readonly layout: Layout;
  private readonly codes: CodeCache;
  /** what each thread's previous copy found (thread state address → cache) */
  private readonly threads = new Map<bigint, ThreadCache>();
  /** the interpreters the previous pass found */
  private knownInterps: bigint[] = [];
  /** [lo, hi) of an interpreter state: every field a pass reads from it, in one read */
  private readonly interpSpan: { lo: number; hi: number };
  /** code objects reached by the stacks of the last copyAll() */
  readonly used = new Set<bigint>();
  /**
   * The caller has stopped the target for this copyAll (blocking): every copy is of one
   * moment, whatever its check says.
   */
  private allStopped = false;
  /**
   * The target cannot run during this copyAll, without being stopped: it waits for the copy
   * (Pyodide: the copy runs in its only thread, at a safe point). Copies are of one moment, as
   * with `allStopped`, but are not flagged as copied stopped: nothing was stopped.
   */
  private pausedOnly = false;
  /** this pass copies as blocking mode does (see copyAll) */
  private blocking = false;
  /** this pass stops nothing (see copyAll) */
  private look = false;
  /**
   * The copy being processed was read while its thread was stopped, and the thread runs again
   * now: it may read nothing more (a read throws FROZEN; see stoppedCopy).
   */
  private frozen = false;
  /** how copies are checked; falls back to `reread` if writing the anchor fails */
  consistency: Consistency;
  /** why writing the anchor failed, if it did */
  writeFailure: string | null = null;
  private readonly retries: number;
  /** CopierOptions.stopsOnlyBlocking */
  private readonly stopsOnlyBlocking: boolean;
  private readonly stopper: Stopper | null;
  /** the interpreters seen by this pass, and the walk over their thread lists */
  private readonly seenInterps = new AddressSet();
  private readonly list: ThreadListPass;
  /** where the runtime's interpreter list starts */
  private headAt: Range | null = null;
  /** thread states whose anchor this copier has set (cleared by clearAnchors) */
  private readonly anchored = new Set<bigint>();
  /** copies can be made by a SteadyCopy where the plan holds (see steady-copy.ts) */
  private readonly steadyable: boolean;
  private pass: PassRead | null = null;
  /** what a general copy asks of this copier */
  private readonly ctx: CopyContext;
  /** CopierOptions.keepAgreeing */
  private readonly keepAgreeing: boolean;
  /** CopierOptions.leaveOut */
  private readonly leaveOut: ((nativeThreadId: bigint) => boolean) | null;
  /** CopierOptions.quiet */
  private readonly quiet: QuietWatch | null;
  /** CopierOptions.quietNative */
  private readonly quietNative: ((tid: number, mark: bigint) => NativeCopy | null) | null;
  /** CopierOptions.inWindow */
  private readonly inWindow: ((snap: ThreadSnapshot) => void) | null;
  /**
   * The fields of the GIL each interpreter of the last pass runs under (Layout.gil: its last
   * holder through its count of hand-overs), read with each pass for the GIL facts of the
   * samples and around each copy to prove it (consistency.ts gilProves); absent where this
   * Python's GIL is not known.
   */
  private readonly gils = new Map<bigint, Range>();
  /** copies made by steady copies so far (the rest by the general path) */
  steadyCopies = 0;

  constructor(
    private readonly source: MemorySource,
    options: CopierOptions = {},
  ) {
    this.layout = source.layout;
    this.P = this.layout.pointerSize;
    const pid = (source as { pid?: unknown }).pid;
    this.processMain = typeof pid === 'number' && pid > 0 ? BigInt(pid) : null;
    this.codes = new CodeCache(source, this.layout, options.bytecode ?? true);
    const t = this.layout.tstate;
    const canAnchor = t.lastProfiledFrame !== null && typeof source.write === 'function';
    this.consistency = options.consistency ?? (canAnchor ? 'anchor' : 'reread');
    if (this.consistency === 'anchor' && !canAnchor) {
      throw new Error(
        t.lastProfiledFrame === null
          ? `${source.description}: this Python has no profiler anchor (CPython 3.15+); use the read-only check`
          : `${source.description}: the memory source cannot write the profiler anchor`,
      );
    }
    this.retries = options.retries ?? 1;
    this.steadyable =
      options.steady !== false && this.layout.interp.codeObjectGeneration !== null && t.cframeCurrentFrame === null && this.P === 8 && typeof source.prepareRead === 'function';
    this.stopper = options.stopper ?? null;
    this.stopsOnlyBlocking = options.stopsOnlyBlocking ?? false;
    this.list = new ThreadListPass(source, this.layout);
    const f = this.layout.interp;
    const fields: [number, number][] = [
      [f.id, 8],
      [f.next, this.P],
      [f.threadsHead, this.P],
    ];
    if (f.threadsMain !== null) fields.push([f.threadsMain, this.P]);
    if (this.layout.gil?.interpPointer != null) fields.push([this.layout.gil.interpPointer, this.P]);
    if (f.gcCollecting !== null) fields.push([f.gcCollecting, 4]);
    this.interpSpan = { lo: Math.min(...fields.map(([o]) => o)), hi: Math.max(...fields.map(([o, n]) => o + n)) };
    const collectUsed = options.collectUsed ?? true;
    this.keepAgreeing = options.keepAgreeing ?? false;
    this.leaveOut = options.leaveOut ?? null;
    this.quiet = options.quiet ?? null;
    this.quietNative = options.quiet ? (options.quietNative ?? null) : null;
    this.inWindow = options.quiet ? (options.inWindow ?? null) : null;
    // eslint-disable-next-line @typescript-eslint/no-this-alias
    const self = this;
    this.ctx = {
      source,
      layout: this.layout,
      codes: this.codes,
      maxFrames: options.maxFrames ?? 8192,
      tstateMin: Math.max(options.tstateMin ?? 0, this.layout.tstate.size),
      tstateCheck: options.tstateCheck ?? [],
      get consistency() {
        return self.consistency;
      },
      get frozen() {
        return self.frozen;
      },
      get trustAgreement() {
        return self.trustAgreement;
      },
      gilRange: (interp) => this.gils.get(interp) ?? null,
      get canStop() {
        return self.stopper !== null && (!self.stopsOnlyBlocking || self.blocking);
      },
      reached: collectUsed ? (codes) => codes.forEach((c) => self.used.add(c)) : () => {},
      writeAnchor: (tstate, target, below) => this.writeAnchor(tstate, target, below),
    };
  }

  /**
   * Copy every thread of every interpreter. `stopped`: the caller has stopped the target
   * (every thread) for the whole call, so every copy is of one moment. `blocking`: every copy is
   * made exact — a thread that may be running Python is stopped for its copy; one that is not
   * (it released the GIL: waiting, or in a long C call) cannot change its frames, and its copy
   * is checked instead (and made stopped if it started to run meanwhile), which spares the
   * program the stop: a stop interrupts the system call the thread waits in. `look`: nothing
   * is stopped, whatever the stopper — a copy nothing proved stays unproven (a recorder warming up
   * beside other targets, which a stop that waits for a busy machine would hold up).
   */
  copyAll(options: { stopped?: boolean; paused?: boolean; blocking?: boolean; look?: boolean; some?: HeldSome } = {}): ThreadSnapshot[] {
    this.allStopped = (options.stopped ?? false) || (options.paused ?? false);
    this.heldSome = (options.stopped ?? false) ? (options.some ?? null) : null;
    this.pausedOnly = !(options.stopped ?? false) && (options.paused ?? false);
    this.look = options.look ?? false;
    this.blocking = (options.blocking ?? false) && this.stopper !== null && !this.look;
    try {
      return this.copyInterpreters();
    } finally {
      this.allStopped = false;
      this.pausedOnly = false;
      this.blocking = false;
      this.look = false;
      this.heldSome = null;
    }
  }

  /**
   * Is the thread left out of this pass (CopierOptions.leaveOut)? Asked once a pass: when its
   * read is planned, and again when it is copied.
   */
  private leavesOut(cache: ThreadCache): boolean {
    // (a blocking pass copies every thread itself: the sampler's `alternate` ticks)
    if (!this.leaveOut || this.blocking || cache.nativeThreadId <= 0n) return false;
    if (cache.leftInPass === this.passes) return cache.leftOut;
    cache.leftInPass = this.passes;
    return (cache.leftOut = this.leaveOut(cache.nativeThreadId));
  }

  /** passes over the threads begun (leavesOut's: a decision holds for one pass) */
  private passes = 0;

  /** copyAll's `some`, while it runs */
  private heldSome: HeldSome | null = null;

  /** A copy nothing proves is kept when its readings agree (CopierOptions.keepAgreeing, and no anchor). */
  private get trustAgreement(): boolean {
    return this.keepAgreeing && this.consistency !== 'anchor';
  }

  /** Copies may stop the target now: there is a stopper, the pass is not a look (and is a blocking one, if the stopper serves those only). */
  private get canStop(): boolean {
    return this.stopper !== null && !this.look && (!this.stopsOnlyBlocking || this.blocking);
  }

  private copyInterpreters(): ThreadSnapshot[] {
    const L = this.layout;
    const P = this.P;
    const source = this.source;
    if (this.used.size > 0) this.used.clear();
    this.codes.beginPass(performance.now());
    this.passes++;
    const threads: ThreadSnapshot[] = [];
    const f = L.interp;
    const { lo, hi } = this.interpSpan;
    // Everything the previous pass read — the interpreter list, and each thread's copy and
    // its second reading — in one gathered read. What changed since is read on its own.
    const headAt = (this.headAt ??= { address: source.runtimeAddress + BigInt(L.runtime.interpretersHead), length: P });
    let prefetched: Map<bigint, Prefetched> | null = null;
    let got: (Uint8Array | null)[];
    const pass = this.steadyable && !this.allStopped && !this.blocking ? this.passRead(headAt) : null;
    if (pass && pass.read.read() === pass.read.length) {
      // every thread read last time has a steady copy: the list and all of them in one read
      got = pass.views;
      for (let k = 0; k < pass.tstates.length; k++) this.threads.get(pass.tstates[k]!)!.preread = pass.slices[k]!;
    } else {
      const plan = this.passLead(headAt);
      const planned: { tstate: bigint; at: number; plan: Range[] }[] = [];
      for (const [tstate, cache] of this.threads) {
        // (a thread to be stopped first is read after its stop)
        if (!cache.live || this.mayStopFirst(cache)) continue;
        // (a thread with a steady copy reads on its own)
        if (this.inPass(cache)) continue;
        // (one left out — copied elsewhere, at the interrupt — needs its thread state alone:
        // decided here, for the pass, not read in full and dropped at every tick)
        const left = this.leavesOut(cache);
        const p = left ? [{ address: tstate, length: this.layout.tstate.size }] : planOf(this.ctx, tstate, cache.interp, cache, !this.allStopped);
        planned.push({ tstate, at: plan.length, plan: p });
        plan.push(...p);
      }
      got = readMany(source, plan);
      prefetched = new Map();
      for (const t of planned) {
        const tstateAt = t.plan.findIndex((r) => r.address === t.tstate);
        prefetched.set(t.tstate, { plan: t.plan, got: got.slice(t.at, t.at + t.plan.length), tstateAt });
      }
    }
    for (const cache of this.threads.values()) cache.live = false;
    const known = this.knownInterps;
    const interpBlock = (i: bigint): Uint8Array => {
      const k = known.indexOf(i);
      return (k >= 0 ? got[1 + k] : null) ?? source.read(i + BigInt(lo), hi - lo);
    };
    // the GIL fields read with the pass, by address (read now where an interpreter's moved)
    const gilRead = new Map<bigint, Uint8Array | null>();
    for (let k = 0, at = 1 + known.length; k < known.length; k++) {
      const r = this.gils.get(known[k]!);
      if (r && !gilRead.has(r.address)) gilRead.set(r.address, got[at++] ?? null);
    }
    let interp = got[0] ? readPointer(got[0], 0, P) : readPointer(source.read(headAt.address, P), 0, P);
    const seenInterps = this.seenInterps;
    seenInterps.clear();
    this.knownInterps = [];
    for (let i = 0; interp !== 0n && i < MAX_INTERPRETERS && !seenInterps.has(interp); i++) {
      seenInterps.add(interp);
      this.knownInterps.push(interp);
      const block = interpBlock(interp);
      const interpreterId = BigInt.asIntN(64, readPointer(block, f.id - lo, 8));
      const main = f.threadsMain !== null ? readPointer(block, f.threadsMain - lo, P) : 0n;
      // the GIL this interpreter runs under: its last holder holds it while it is taken
      const gil = this.gilFields(interp, block, gilRead);
      const gilHolder = gil ? readPointer(gil, 0, P) : null;
      const gilTaken = gil !== null && new DataView(gil.buffer, gil.byteOffset + L.gil!.locked - L.gil!.lastHolder, 4).getInt32(0, true) !== 0;
      // the collector runs in the thread holding the GIL
      const collecting = f.gcCollecting !== null && new DataView(block.buffer, block.byteOffset + f.gcCollecting - lo, 4).getInt32(0, true) !== 0;
      // (a thread state freed under the pass ends this walk of the list: see thread-list.ts)
      this.list.walk(interp, readPointer(block, f.threadsHead - lo, P), (tstate) => {
        const { snap, entry } = this.thread(interp, interpreterId, tstate, prefetched?.get(tstate), gilHolder);
        const found = this.list.found;
        found.entry = entry;
        if (entry === 'stale') return;
        found.next = readPointer(snap.regions[0]!.bytes, L.tstate.next, P);
        if (entry !== 'thread') return;
        const cache = this.threads.get(tstate);
        if (cache) {
          cache.live = true;
          cache.interp = interp;
        }
        // 3.14+: the interpreter names its main thread; before, on Linux, the main interpreter's
        // thread running on the process's first thread (its thread id is the process id) is the
        // main thread as `threading` knows it, unless Python was started on another thread
        snap.mainThread = f.threadsMain !== null ? main !== 0n && main === tstate : this.processMain !== null && interpreterId === 0n && snap.nativeThreadId === this.processMain;
        if (L.tstate.holdsGil === null && gilTaken) snap.holdsGil = gilHolder === tstate;
        snap.inGc = collecting && snap.holdsGil;
        threads.push(snap);
      });
      interp = readPointer(block, f.next - lo, P);
    }
    for (const i of this.gils.keys()) if (!seenInterps.has(i)) this.gils.delete(i);
    // threads that were not in any list this time are gone: forget them
    for (const [tstate, cache] of this.threads) {
      cache.preread = null;
      if (!cache.live) this.threads.delete(tstate);
    }
    return threads;
  }

  /**
   * What every pass reads first: the interpreter list's head, each known interpreter's fields,
   * and the fields of each GIL they run under (as the last pass found them).
   */
  private passLead(headAt: Range): Range[] {
    const { lo, hi } = this.interpSpan;
    const ranges: Range[] = [headAt];
    for (const i of this.knownInterps) ranges.push({ address: i + BigInt(lo), length: hi - lo });
    const seen = new Set<bigint>();
    for (const i of this.knownInterps) {
      const r = this.gils.get(i);
      if (r && !seen.has(r.address)) {
        seen.add(r.address);
        ranges.push(r);
      }
    }
    return ranges;
  }

  /**
   * The fields of the GIL interpreter `interp` runs under (Layout.gil: last holder through count
   * of hand-overs), as the pass read them (`read`, by address) or read now; remembered for the
   * next pass and for the copies' proof. Null where this Python's GIL is not known, or the
   * interpreter has none yet.
   */
  private gilFields(interp: bigint, block: Uint8Array, read: Map<bigint, Uint8Array | null>): Uint8Array | null {
    const G = this.layout.gil;
    if (!G) return null;
    const at = G.runtime !== null ? this.source.runtimeAddress + BigInt(G.runtime) : readPointer(block, G.interpPointer! - this.interpSpan.lo, this.P);
    if (at === 0n) {
      this.gils.delete(interp);
      return null;
    }
    const range = { address: at + BigInt(G.lastHolder), length: G.switchNumber - G.lastHolder + this.P };
    const had = this.gils.get(interp);
    if (!had || had.address !== range.address) this.gils.set(interp, range);
    return read.get(range.address) ?? this.source.tryRead(range.address, range.length);
  }

  /** Is the thread's next copy read with the pass (see passRead)? */
  private inPass(cache: ThreadCache): boolean {
    return cache.live && cache.steady !== null && cache.steadySkip === 0 && !this.allStopped && !this.blocking && !this.mayStopFirst(cache);
  }

  /**
   * May the thread's next copy be made stopped first (adaptive: nothing but a stop can prove
   * it without the anchor; its copies kept moving lately)? Such a thread is not read with the
   * pass: what a pass reads before the stop is of no use to a copy made after it.
   */
  private mayStopFirst(cache: ThreadCache): boolean {
    return this.canStop && !this.allStopped && !this.blocking && ((this.consistency !== 'anchor' && cache.ranPython) || cache.unprovenRate > STOP_FIRST_RATE);
  }

  /**
   * One prepared read for a whole pass: the interpreter list, and every thread with a steady
   * copy (its readings, as the steady copy lays them out) — made again only when the
   * interpreters, the threads or a plan changed. Null when no thread has a steady copy.
   */
  private passRead(headAt: Range): PassRead | null {
    const p = this.pass;
    let ok = p !== null && p.interps.length === this.knownInterps.length && p.interps.every((i, k) => i === this.knownInterps[k] && p.gils[k] === this.gils.get(i));
    let k = 0;
    for (const [tstate, cache] of this.threads) {
      if (!this.inPass(cache)) continue;
      if (ok && (k >= p!.tstates.length || p!.tstates[k] !== tstate || p!.steadies[k] !== cache.steady)) ok = false;
      k++;
    }
    if (ok && k === p!.tstates.length) return p;
    this.pass = null;
    if (k === 0) return null;
    const ranges = this.passLead(headAt);
    const lead = ranges.length;
    const next: PassRead = { read: null!, interps: [...this.knownInterps], gils: this.knownInterps.map((i) => this.gils.get(i)), tstates: [], steadies: [], slices: [], views: [] };
    for (const [tstate, cache] of this.threads) {
      if (!this.inPass(cache)) continue;
      next.tstates.push(tstate);
      next.steadies.push(cache.steady!);
      ranges.push(...cache.steady!.ranges);
    }
    next.read = (this.source as MemorySource & { prepareRead(r: readonly Range[]): PreparedRead }).prepareRead(ranges);
    const bytes = next.read.bytes;
    let o = 0;
    for (let r = 0; r < lead; r++) {
      next.views.push(bytes.subarray(o, o + ranges[r]!.length));
      o += ranges[r]!.length;
    }
    for (const s of next.steadies) {
      next.slices.push(bytes.subarray(o, o + s.length));
      o += s.length;
    }
    this.pass = next;
    return next;
  }

  /**
   * Check and record code objects reached otherwise than by a thread's stack (the suspended
   * coroutines of asyncio tasks: src/record/copy/task-copy.ts), read now, outside any copy window.
   * `interp` is the interpreter state's address: where it has a code_object_generation (3.14+),
   * that is read first, and a code object confirmed at the same generation is not read again
   * (no code object of the interpreter has died since); else each is examined again.
   */
  recordCodes(addresses: Iterable<bigint>, interp: bigint): { fresh: CodeRecord[]; replaced: boolean } {
    return this.commitCodes(this.checkCodes(addresses, interp));
  }

  /**
   * recordCodes in two steps: the code objects read now (checkCodes), inside a copy's window,
   * and recorded later (commitCodes), once that copy is kept — a copy dropped must not take
   * with it the only record of a code object the cache then holds as recorded.
   */
  checkCodes(addresses: Iterable<bigint>, interp: bigint): PendingCodes {
    const at = this.layout.interp.codeObjectGeneration;
    const g = at === null ? null : this.source.tryRead(interp + BigInt(at), 8);
    const generation = g ? new DataView(g.buffer, g.byteOffset, 8).getBigUint64(0, true) : null;
    return this.codes.check(addresses, interp, generation);
  }

  commitCodes(pending: PendingCodes): { fresh: CodeRecord[]; replaced: boolean } {
    return this.codes.commit(pending);
  }

  /**
   * Check and record the code objects of copies made elsewhere, earlier (in the kernel, at the
   * interrupt: recordCodesAtTicks), read now: like recordCodes, with the interpreter's
   * code_object_generation as read before the check and after it (null where there is none),
   * for the caller to tell whether a code object died since its copies were made. `examine`:
   * every one is read again and compared with the copy recorded for its address (a new copy is
   * recorded where it differs), whatever the count says.
   */
  private recordCodesOf(addresses: Iterable<bigint>, interp: bigint, examine = false): { fresh: CodeRecord[]; replaced: boolean; before: bigint | null; after: bigint | null } {
    const at = this.layout.interp.codeObjectGeneration;
    const generation = (): bigint | null => {
      const g = at === null ? null : this.source.tryRead(interp + BigInt(at), 8);
      return g ? new DataView(g.buffer, g.byteOffset, 8).getBigUint64(0, true) : null;
    };
    const before = generation();
    // (`examine`: each one read and compared with what was confirmed at its address, as where
    // there is no count of deaths — a code object confirmed at this count is not read again)
    const pending = this.codes.check(addresses, interp, examine ? null : before);
    const after = at === null ? null : generation();
    return { ...this.codes.commit(pending), before, after };
  }

  /**
   * Record the code objects of copies made at the interrupt, read now, after their ticks (each
   * copy: the code objects it refers to, and the interpreter's count of code-object deaths
   * copied at its tick). 3.14+: where the count moved between a copy's tick and the reads (or
   * during them) the object read at an address may be another's, so each of that copy's code
   * objects is read again and compared with the copy recorded for its address; the copy is
   * proven only if every one was recorded before and is unchanged (the check every copy gets
   * where there is no count) — never one without its count. Before 3.14 there is no count:
   * the reads check each object themselves, and every copy is proven.
   */
  recordCodesAtTicks(interp: bigint, ticks: readonly { codes: Iterable<bigint>; generation: bigint | null }[]): { fresh: CodeRecord[]; replaced: boolean; proven: boolean[] } {
    const all = new Set<bigint>();
    for (const t of ticks) for (const c of t.codes) all.add(c);
    const known = new Set([...all].filter((a) => this.codeObject(a) !== null));
    const first = this.recordCodesOf(all, interp);
    let { fresh, replaced } = first;
    const { before, after } = first;
    const counted = this.layout.interp.codeObjectGeneration !== null;
    const moved = ticks.map((t) => counted && (t.generation === null || t.generation !== before || before !== after));
    const changed = new Set(fresh.map((c) => c.address));
    if (moved.some(Boolean)) {
      const again = this.recordCodesOf(new Set(ticks.filter((_, i) => moved[i]).flatMap((t) => [...t.codes])), interp, true);
      for (const c of again.fresh) changed.add(c.address);
      fresh = [...fresh, ...again.fresh];
      replaced ||= again.replaced;
    }
    const proven = ticks.map((t, i) => !moved[i] || (t.generation !== null && [...t.codes].every((c) => known.has(c) && !changed.has(c))));
    return { fresh, replaced, proven };
  }

  /**
   * Is every one of these code objects confirmed for interpreter `interp` at this
   * code_object_generation (and none due for a refresh of its bytecode)? Then a copy made when
   * the interpreter's count was `generation` refers to those very objects — none died between
   * their confirmation and the copy — and nothing needs reading. Never where there is no such
   * count (null).
   */
  codesConfirmed(addresses: Iterable<bigint>, interp: bigint, generation: bigint | null): boolean {
    if (generation === null) return false;
    for (const a of addresses) if (!this.codes.confirmed(a, interp, generation)) return false;
    return true;
  }

  /** The bytecode [start, end) of a known code object (null: not known as one). */
  bytecodeOf(address: bigint): [bigint, bigint] | null {
    return this.codes.bytecodeRange(address);
  }

  /** The copy recorded for a code object (null: the address is not a known code object). */
  codeObject(address: bigint): CodeRecord | null {
    return this.codes.snapshot(address);
  }

  /**
   * Copy one thread: tried again at once if the copy is not proven, and — with a stopper — copied with
   * the target stopped if it still moves. A thread whose copies keep moving (adaptive), or any
   * thread that may be running Python (blocking), is stopped first.
   */
  private thread(interp: bigint, interpreterId: bigint, tstate: bigint, prefetched?: Prefetched, gilHolder: bigint | null = null): { snap: ThreadSnapshot; entry: ListEntry } {
    const cache = this.threads.get(tstate);
    if (cache && this.leavesOut(cache)) {
      const left = this.leftOut(interp, interpreterId, tstate, prefetched);
      if (left) return left;
    }
    if (cache && this.quiet && cache.nativeThreadId > 0n && !this.allStopped) {
      // One that woke during its copy is copied again once it is off its CPU again, while that
      // is within QUIET_WAIT_MS of the first copy, up to QUIET_TRIES copies (a thread that naps
      // often: a copy of its next wait — a napping thread of workloads/churn.py tore 1.2 % of
      // its copies with one try more); one that runs on is copied as usual, and proven
      // otherwise or torn.
      const tid = Number(cache.nativeThreadId);
      const again = this.quietAgain(cache, tstate, tid, prefetched);
      if (again) return again;
      const until = performance.now() + QUIET_WAIT_MS;
      for (let tries = 1; tries <= QUIET_TRIES; tries++) {
        const quiet = this.offCpuCopy(interp, interpreterId, tstate, cache.nativeThreadId, this.quiet);
        if (quiet) return this.finish(quiet, tries);
        while (this.quiet.mark(tid) === null && performance.now() < until) {
          // (slept, not spun: a thread waiting for a CPU to finish its turn and sleep again
          // may be waiting for this one — measured at 10 kHz on 2 CPUs with a busy target,
          // spinning here took a third of the recorder's time in looks at the thread)
          Atomics.wait(pause, 0, 0, QUIET_LOOK_MS);
        }
        if (this.quiet.mark(tid) === null) break;
      }
    }
    // (adaptive, without the anchor: nothing but a stop proves the copy of a thread that may
    // be running Python, so it is stopped first, as blocking does)
    const stopFirst = cache && (this.blocking || (this.canStop && !this.allStopped && (this.consistency !== 'anchor' || stopsFirst(cache))));
    const mayRun = mayRunPython(this.layout, tstate, prefetched ? prefetched.got[prefetched.tstateAt] : undefined, gilHolder);
    if (cache) cache.ranPython = mayRun;
    if (stopFirst && mayRun) {
      // A thread off its CPU that stays off while it is copied needs no stop (off-cpu.ts): the
      // waiting threads of a program before 3.15, whose last GIL holder is often asleep.
      const quiet = this.blocking ? null : this.offCpuCopy(interp, interpreterId, tstate, cache.nativeThreadId);
      if (quiet) return this.finish(quiet, 1);
      // Stopped first, the copy is of the sample's own moment. (Adaptive: a thread whose first
      // copies were not proven lately runs call-heavy code; a copy nothing proved would be made
      // again — at once, or with it stopped a few hundred microseconds later — after the sample's
      // moment, by when it is more often in a long-lived frame than in a short one.)
      const attempt = this.stoppedCopy(interp, interpreterId, tstate, cache.nativeThreadId);
      if (attempt.entry !== 'thread') return attempt;
      return this.finish(attempt, 1);
    }
    let attempt = (this.allStopped ? null : this.steadyCopy(interp, interpreterId, tstate)) ?? this.copyThread(interp, interpreterId, tstate, this.allStopped, prefetched);
    if (attempt.entry !== 'thread') return attempt;
    let attempts = 1;
    if (this.allStopped) {
      const how = this.heldSome?.after(attempt.snap.nativeThreadId) ?? 'stopped';
      if (how === 'again') {
        attempt = this.copyThread(interp, interpreterId, tstate, true);
        if (attempt.entry !== 'thread') return attempt;
        attempts++;
      }
      if (how === 'quiet') {
        attempt.snap.unproven = false;
        attempt.snap.offCpuProof = true;
        this.offCpuProofs++;
      } else if (how === 'unproven') attempt.snap.unproven = true;
      else this.settle(attempt.snap);
    }
    // (what the policy learns: whether the copy of the sample's own moment was proven — one
    // made again is of a later moment, and biased: see stopsFirst)
    const firstUnproven = attempt.snap.unproven;
    // (a copy the anchor did not prove left the anchor on its innermost Python frame: made
    // again at once, a few microseconds after the first, it is proven unless that frame was
    // already gone)
    while (attempt.snap.unproven && attempts <= this.retries) {
      attempt = this.steadyCopy(interp, interpreterId, tstate) ?? this.copyThread(interp, interpreterId, tstate, false);
      attempts++;
    }
    if (!this.allStopped && !this.blocking) {
      const c = this.threads.get(tstate);
      if (c) learn(c, firstUnproven);
    }
    if (attempt.snap.unproven && this.canStop) {
      attempt = this.stoppedCopy(interp, interpreterId, tstate, attempt.snap.nativeThreadId);
      attempts++;
    }
    return this.finish(attempt, attempts);
  }

  /**
   * The thread's last copy proven by staying off its CPU, made this tick's copy again without
   * reading it (a thread waiting for seconds is copied once, not at every tick): its count of
   * arrivals on a CPU is still the one it had before that copy, so it has not run since and
   * its frames are as they were; its thread state — where other threads do write (the list's
   * links, the eval breaker) — is read again, and must be what the copy holds. Null: copy it.
   */
  private quietAgain(cache: ThreadCache, tstate: bigint, tid: number, prefetched?: Prefetched): { snap: ThreadSnapshot; entry: ListEntry } | null {
    const last = cache.quietCopy;
    if (!last) return null;
    const start = performance.now();
    const had = last.snap.regions[0];
    if (!had || had.address !== tstate) return (cache.quietCopy = null);
    const n = had.bytes.length;
    const pre = prefetched?.got[prefetched.tstateAt];
    const now = pre && pre.length >= n ? pre : this.source.tryRead(tstate, n);
    // (the count read after the thread state: unchanged, the thread did not run before it)
    if (!now || now.length < n || !this.quiet!.stillOff(tid, last.mark)) return (cache.quietCopy = null);
    for (let i = 0; i < n; i++) if (now[i] !== had.bytes[i]) return (cache.quietCopy = null);
    const snap: ThreadSnapshot = { ...last.snap, codes: [], codeReplaced: false, attempts: 1, copyMicros: Math.round((performance.now() - start) * 1000) };
    // (set again by the pass where the thread state does not say it: copyInterpreters)
    if (this.layout.tstate.holdsGil === null) snap.holdsGil = false;
    this.offCpuProofs++;
    return { snap, entry: 'thread' };
  }

  /**
   * A thread whose sample is copied elsewhere (CopierOptions.leaveOut): its thread state as the
   * pass read it (or read now), for the thread list and its ids; null when it is not that
   * thread's any more (the caller copies it as usual, and learns what it is).
   */
  private leftOut(interp: bigint, interpreterId: bigint, tstate: bigint, prefetched?: Prefetched): { snap: ThreadSnapshot; entry: ListEntry } | null {
    const L = this.layout;
    const ts = prefetched?.got[prefetched.tstateAt] ?? this.source.tryRead(tstate, L.tstate.size);
    if (!ts || ts.length < L.tstate.size || readPointer(ts, L.tstate.interp, this.P) !== interp) return null;
    const snap = emptySnapshot(interpreterId, tstate, [{ address: tstate, bytes: ts }]);
    snap.threadId = readPointer(ts, L.tstate.threadId, this.P);
    snap.nativeThreadId = readPointer(ts, L.tstate.nativeThreadId, this.P);
    if (snap.nativeThreadId !== this.threads.get(tstate)?.nativeThreadId) return null;
    snap.unproven = true;
    snap.leftToKernel = true;
    return { snap, entry: 'thread' };
  }

  /**
   * A copy of a thread the kernel shows off its CPU before the copy and not put on one until
   * after it (off-cpu.ts): nothing of it ran meanwhile, so the copy is proven as a stopped one
   * is, without stopping it. Null where that cannot be shown (the thread runs, or ran during the
   * copy, or the kernel cannot tell): the caller stops it.
   */
  private offCpuCopy(interp: bigint, interpreterId: bigint, tstate: bigint, tid: bigint, watch: QuietWatch | null | undefined = this.stopper?.offCpu): Attempt | null {
    if (!watch || tid <= 0n || this.allStopped) return null;
    const mark = watch.mark(Number(tid));
    if (mark === null) return null;
    // (never bytes the pass read before the mark)
    const cache = this.threads.get(tstate);
    if (cache) cache.preread = null;
    // (the watch of the context switches proves the copy by itself — it was made while the
    // thread was off its CPU, or is not kept — so it is read once, as a stopped thread's is)
    const own = watch === this.quiet;
    const attempt = (own ? null : this.steadyCopy(interp, interpreterId, tstate)) ?? this.copyThread(interp, interpreterId, tstate, own);
    if (attempt.entry !== 'thread') return null;
    // (its native copy inside the same window: proven with the frames, by the same look)
    const native = own && this.quietNative ? this.quietNative(Number(tid), mark) : null;
    if (own && this.inWindow) this.inWindow(attempt.snap);
    if (!watch.stillOff(Number(tid), mark)) return null;
    if (native) attempt.snap.native = native;
    attempt.snap.unproven = false;
    attempt.snap.offCpuProof = true;
    this.offCpuProofs++;
    // (made again from this copy while the thread stays off: quietAgain)
    if (own && cache) cache.quietCopy = { mark, snap: attempt.snap };
    return attempt;
  }

  /** copies proven by the kernel showing the thread off its CPU throughout (offCpuCopy) */
  offCpuProofs = 0;

  /**
   * A copy made with the thread stopped — for as short a time as can be: the thread runs on as
   * soon as its memory is read (thread state, chunks, frames outside them), and the copy is
   * processed meanwhile (code checks with what was read, masking). Only if a code object needs
   * reading (new, or changed at its address) is the thread stopped again for a whole copy: a
   * code object must be read while the frame that refers to it is alive.
   */
  private stoppedCopy(interp: bigint, interpreterId: bigint, tstate: bigint, tid: bigint): Attempt {
    const stopper = this.stopper!;
    let stopped = false;
    let held = false;
    const release = (): void => {
      if (!held) return;
      held = false;
      stopper.resume();
      this.frozen = true;
    };
    let attempt: Attempt | null = null;
    try {
      stopped = stopper.stopThread(Number(tid));
      held = true;
      // not stopped (it could not be): a copy checked as usual
      if (!stopped) {
        release();
        this.frozen = false;
        return this.copyThread(interp, interpreterId, tstate, false);
      }
      // the steady copy where its plan holds: one read, and the thread runs on (never bytes a
      // pass read before the stop)
      const cache = this.threads.get(tstate);
      if (cache) cache.preread = null;
      attempt = this.steadyCopy(interp, interpreterId, tstate);
      if (attempt) release();
      else attempt = this.copyThread(interp, interpreterId, tstate, true, undefined, release);
    } catch (e) {
      if (e !== FROZEN) throw e;
    } finally {
      this.frozen = false;
      if (held) stopper.resume();
    }
    if (!attempt) {
      try {
        stopped = stopper.stopThread(Number(tid));
        attempt = this.copyThread(interp, interpreterId, tstate, stopped);
      } finally {
        stopper.resume();
      }
    }
    if (stopped && attempt.entry === 'thread') this.settle(attempt.snap);
    return attempt;
  }

  /**
   * The copy made by the thread's SteadyCopy, when it has one that holds (see steady-copy.ts);
   * null: the general path makes it. A SteadyCopy that gave up is dropped, and tried again
   * after a number of general copies that doubles with each failure in a row.
   */
  private steadyCopy(interp: bigint, interpreterId: bigint, tstate: bigint): Attempt | null {
    if (!this.steadyable || this.frozen) return null;
    const cache = this.threads.get(tstate);
    if (!cache || cache.chunks.length === 0) return null;
    // read with the pass (once: a second copy of the thread in this pass reads on its own)
    let preread = cache.preread;
    cache.preread = null;
    if (cache.steadySkip > 0) {
      cache.steadySkip--;
      return null;
    }
    const started = performance.now();
    let steady = cache.steady;
    const gil = this.layout.gil && this.gils.get(interp);
    if (!steady || !steady.matches(cache, interp, this.consistency === 'anchor', gil ?? null)) {
      const plan = { tstateLength: cache.tstateLength, chunks: cache.chunks, outside: cache.outside };
      const source = this.source as MemorySource & { prepareRead(r: readonly Range[]): PreparedRead };
      const I = this.layout.interp;
      const G = this.layout.gil;
      steady = cache.steady = new SteadyCopy(source, this.layout, tstate, interp, interp + BigInt(I.codeObjectGeneration!), plan, this.consistency === 'anchor', this.ctx.maxFrames, this.ctx.tstateMin, this.ctx.tstateCheck, gil || null, G ? G.switchNumber - G.lastHolder : 0);
      preread = null; // read for the steady copy it replaces
    }
    cache.steadyHooks ??= this.steadyHooks(tstate, cache);
    const got = steady.copy(cache.steadyHooks, preread);
    if (!got) {
      cache.steady = null;
      cache.steadyFailures = Math.min(cache.steadyFailures + 1, 10);
      cache.steadySkip = 1 << (cache.steadyFailures - 1);
      return null;
    }
    cache.steadyFailures = 0;
    this.steadyCopies++;
    this.ctx.reached(got.codes);
    const snap = emptySnapshot(interpreterId, tstate, got.regions);
    snap.frames = { addresses: got.frames, size: this.ctx.layout.frame.size, wordBytes: this.ctx.layout.pointerSize };
    snap.threadId = got.threadId;
    snap.nativeThreadId = got.nativeThreadId;
    snap.holdsGil = got.holdsGil;
    snap.handlingException = got.handlingException;
    snap.unproven = got.unproven;
    snap.copyMicros = Math.round((performance.now() - started) * 1000);
    return { snap, codes: EMPTY_CODES, entry: 'thread' };
  }

  /** What a thread's steady copy asks of the copier (made once per thread). */
  private steadyHooks(tstate: bigint, cache: ThreadCache): SteadyHooks {
    // eslint-disable-next-line @typescript-eslint/no-this-alias
    const self = this;
    return {
      anchor: cache.anchor,
      get trustAgreement() {
        return self.trustAgreement;
      },
      confirmed: (a, interp, g) => this.codes.confirmed(a, interp, g),
      bytecodeRange: (a) => this.codes.bytecodeRange(a),
      refreshRound: () => this.codes.refreshRound,
      placeAnchor: (target, below) => this.writeAnchor(tstate, target, below),
    };
  }

  /** The general copy of a thread (thread-copy.ts). */
  private copyThread(interp: bigint, interpreterId: bigint, tstate: bigint, stopped: boolean, prefetched?: Prefetched, released?: () => void): Attempt {
    return copyThread(this.ctx, this.threadCache(tstate), interp, interpreterId, tstate, stopped, prefetched, false, released);
  }

  /** Keep the code checks of a copy that holds. */
  private finish(attempt: Attempt, attempts: number): { snap: ThreadSnapshot; entry: ListEntry } {
    const snap = attempt.snap;
    snap.attempts = attempts;
    // what was read of code objects in a window nothing proved may be a successor's or garbage
    if (!snap.unproven && attempt.codes.size > 0) {
      const { fresh, replaced } = this.codes.commit(attempt.codes);
      snap.codes = fresh;
      snap.codeReplaced = replaced;
    }
    return { snap, entry: attempt.entry };
  }

  /**
   * A copy made with the thread stopped (or the target waiting for it): nothing ran while it
   * was made, whatever its readings' own check says — the stop proves it.
   */
  private settle(snap: ThreadSnapshot): void {
    snap.unproven = false;
    snap.stopped = !this.pausedOnly;
  }

  /** Write 0 into the anchor of every thread this copier anchored that still exists. */
  clearAnchors(): void {
    const lpf = this.layout.tstate.lastProfiledFrame;
    if (this.anchored.size === 0 || lpf === null || !this.source.write) return;
    // only thread states still in the interpreters' lists: an exited thread's memory may
    // already belong to something else
    for (const tstate of liveThreadStates(this.source, this.layout)) {
      if (!this.anchored.has(tstate)) continue;
      try {
        this.source.write(tstate + BigInt(lpf), new Uint8Array(this.P));
      } catch {
        // the thread or the process is gone: nothing left to clear
      }
    }
    this.anchored.clear();
  }

  /**
   * Set the thread's profiler anchor to `target` (`below`: the frames under it in the copy's
   * chain: AnchorTrust); on failure, check copies by comparing alone.
   */
  private writeAnchor(tstate: bigint, target: bigint, below: Iterable<number>): void {
    // little-endian: a 4-byte pointer is the low half of the 8-byte word
    const word = new Uint8Array(8);
    new DataView(word.buffer).setBigUint64(0, target, true);
    try {
      this.source.write!(tstate + BigInt(this.layout.tstate.lastProfiledFrame!), word.subarray(0, this.P));
      this.anchored.add(tstate);
      this.threads.get(tstate)?.anchor.wrote(target, below);
    } catch (e) {
      // the target cannot be written after all: check copies by comparing alone from now on
      this.consistency = 'reread';
      this.writeFailure = (e as Error).message;
    }
  }

  private threadCache(tstate: bigint): ThreadCache {
    let c = this.threads.get(tstate);
    if (!c) {
      c = newThreadCache(this.ctx.tstateMin);
      this.threads.set(tstate, c);
    }
    return c;
  }
}

/** See MemoryCopier.passRead. */
interface PassRead {
  read: PreparedRead;
  interps: bigint[];
  /** the GIL fields each interpreter's were (the same objects as the copier's, while unchanged) */
  gils: (Range | undefined)[];
  tstates: bigint[];
  steadies: SteadyCopy[];
  /** each steady copy's part of the read */
  slices: Uint8Array[];
  /** the list head, then each interpreter's fields, then the GILs' (passLead) */
  views: Uint8Array[];
}

/** the code checks of a steady copy: none (every code object was confirmed already) */
const EMPTY_CODES: PendingCodes = new Map();

