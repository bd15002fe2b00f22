// The user side of copies at the interrupt: loads bpf/copier.bpf.c (built into
// dist/bpf/copier.bpf.o) through libbpf, attaches it to one cpu-clock perf event per CPU at the
// sampling rate, tells it the target and each thread's thread-state address, and reads its
// records from the ring buffer. Everything goes away with close() — and, since nothing is pinned,
// with the process however it ends: the kernel drops the program, its maps and perf events when
// their last file descriptor closes.
//
// Each record holds an interrupted thread's state, the top of its data stack (and the chunks
// before it, for deep stacks) and the frames of its chain outside them, copied in the kernel at the tick, as regions a walk reads: record --copy
// interrupt makes them samples (src/record/copy/kernel-samples.ts). A second program follows the
// target's context switches (runState, watch): which thread is on a CPU — the timer's program
// copies those — and, for the others, whether one ran while the recorder copied it.
//
// libbpf and the two system calls are reached through koffi, as the recorder's other calls are
// (src/record/linux/native.ts): no compiled addon, and nothing when they are missing but a
// one-line reason.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { formatVersion, type Layout } from '../../layout/index.js';
import { OffCpuWatch } from './off-cpu.js';
import { RingReader } from './ring-buffer.js';
import type { NativeCopy } from './native-recorder.js';
import type { NativeRegisters } from '../../native/unwind.js';
import type { Region } from '../../capture/types.js';
import { cframeLength, readsOuterCframe } from '../copy/thread-copy.js';
import { asyncioTstateEnd, tickTaskFollow, TICK_READS } from '../copy/task-copy.js';
import type { AsyncioOffsets } from '../../layout/asyncio-offsets.js';
import type { AsyncMode } from '../../walk/task-graph.js';

/** One thread's copy at a tick: its thread state, its frames' memory, as regions. */
export interface KernelRecord {
  tid: number;
  /** CLOCK_MONOTONIC, ns */
  timeNs: bigint;
  /** the thread-state address the recorder gave for the thread */
  threadStateAddress: bigint;
  /** what the program copied: the thread state first, then the data stack's top and the chunks before it, then frames outside them */
  regions: { address: bigint; bytes: Uint8Array; chunk: boolean }[];
  /** with native stacks: the thread's registers and native stack at the tick (absent: not copied) */
  native?: NativeCopy;
  /** the GIL's fields at the tick, from its last holder (3.13, 3.14; absent: not copied) */
  gil?: Region;
  /** the ranges named for the thread (KernelCopier.setReads) that the program could copy, as they were at the tick */
  reads?: Region[];
}

/** A record as the program writes it (bpf/copier.bpf.c): tid, region count, time, thread state, then each region (address, length, flags, bytes padded to 8). Null: not whole. */
export function decodeRecord(view: Uint8Array): KernelRecord | null {
  if (view.length < RECORD_HEADER) return null;
  // (one copy of the whole record, its regions views of it: a record is read out of the ring
  // buffer, which the kernel writes again once it is consumed)
  const bytes = view.slice();
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const count = dv.getUint32(4, true);
  const regions: KernelRecord['regions'] = [];
  let registers: NativeRegisters | null = null;
  let stack: Region | null = null;
  let gil: Region | null = null;
  const reads: Region[] = [];
  let at = RECORD_HEADER;
  for (let i = 0; i < count; i++) {
    if (at + 16 > bytes.length) return null;
    const address = dv.getBigUint64(at, true);
    const length = dv.getUint32(at + 8, true);
    const flags = dv.getUint32(at + 12, true);
    if (at + 16 + length > bytes.length) return null;
    if (flags & REGION_REGISTERS) {
      if (length !== 24) return null;
      registers = { rip: dv.getBigUint64(at + 16, true), rsp: dv.getBigUint64(at + 24, true), rbp: dv.getBigUint64(at + 32, true) };
    } else if (flags & REGION_NATIVE_STACK) stack = { address, bytes: bytes.subarray(at + 16, at + 16 + length) };
    else if (flags & REGION_GIL) gil = { address, bytes: bytes.subarray(at + 16, at + 16 + length) };
    else if (flags & REGION_EXTRA) reads.push({ address, bytes: bytes.subarray(at + 16, at + 16 + length) });
    else regions.push({ address, bytes: bytes.subarray(at + 16, at + 16 + length), chunk: (flags & REGION_CHUNK) !== 0 });
    at += 16 + ((length + 7) & ~7);
  }
  const record: KernelRecord = { tid: dv.getUint32(0, true), timeNs: dv.getBigUint64(8, true), threadStateAddress: dv.getBigUint64(16, true), regions };
  // (registers without a stack: its pages could not be read — no native copy)
  if (registers && stack) record.native = { registers, stack };
  if (gil) record.gil = gil;
  if (reads.length > 0) record.reads = reads;
  return record;
}

/** A thread of the target as its context switches tell (bpf/copier.bpf.c, struct run). */
export interface RunState {
  /** on a CPU now */
  on: boolean;
  /** times it was put on a CPU */
  ins: number;
  /** when it last left its CPU (CLOCK_MONOTONIC, ns), and whether it was preempted then (runnable) */
  offNs: bigint;
  preempted: boolean;
  /** its count of arrivals on a CPU when it last left one (sched_info.pcount) */
  arrivalsOut: bigint;
  /** with native stacks: its user registers when it last left its CPU (null: not read) */
  registers: NativeRegisters | null;
}

/** What copies at the interrupt need, in one line: null when they can run here. */
export const KERNEL_COPY_NEEDS = 'root, or CAP_BPF and CAP_PERFMON';
/** bpf/copier.bpf.c's MAX_TSTATE and MAX_FRAME_HEADER */
const MAX_TSTATE = 4096;
const MAX_FRAME_HEADER = 256;
/** a record's header: tid, region count (u32), time_ns, thread state (u64) */
const RECORD_HEADER = 24;
/** a region's flags (bpf/copier.bpf.c): a data-stack chunk, from its start; the registers; the native stack */
const REGION_CHUNK = 1;
const REGION_REGISTERS = 2;
const REGION_NATIVE_STACK = 4;
const REGION_GIL = 8;
const REGION_EXTRA = 16;
/** struct config's task fields (bpf/copier.bpf.c: running_task .. yield_from), where they begin, and as they are until copyTasks */
const CONFIG_TASK_AT = 23;
const NO_TASKS = new Array<number>(14).fill(0);
/** bpf/copier.bpf.c's NO_CFRAME: the current frame is in the thread state (3.13+) */
const NO_CFRAME = 0xffffffff;
/** bpf/copier.bpf.c's NATIVE_MAX: the most native stack a record holds */
export const KERNEL_NATIVE_MAX = 1 << 18;
const PERF_TYPE_SOFTWARE = 1;
const PERF_COUNT_SW_CPU_CLOCK = 0n;
const PERF_ATTR_SIZE = 128;
const PERF_FLAG_FD_CLOEXEC = 8;
const SYS_PERF_EVENT_OPEN = 298;
const EACCES = 13;
const EPERM = 1;
const EAGAIN = 11;
/** loads tried again when the verifier was interrupted (EAGAIN) */
const LOAD_TRIES = 20;

/**
 * Does this process hold what loading the program needs — CAP_BPF and CAP_PERFMON, or
 * CAP_SYS_ADMIN — among its effective capabilities (/proc/self/status)? A look, not a load: the
 * kernel may still refuse (a lockdown, a sysctl).
 */
export function mayLoadKernelCopier(): boolean {
  let status: string;
  try {
    status = fs.readFileSync('/proc/self/status', 'latin1');
  } catch {
    return false;
  }
  const m = /^CapEff:\s*([0-9a-f]+)$/m.exec(status);
  if (!m) return false;
  const caps = BigInt(`0x${m[1]}`);
  const has = (n: bigint): boolean => ((caps >> n) & 1n) === 1n;
  return has(21n) /* CAP_SYS_ADMIN */ || (has(38n) /* CAP_PERFMON */ && has(39n)) /* CAP_BPF */;
}

/** Can the program reach this Python's frames: a 64-bit one (3.11+, the program's reach)? */
export function kernelCopiesReach(layout: Layout): boolean {
  return layout.pointerSize === 8;
}

/** Where the built BPF object is: dist/bpf/, beside dist/record/linux/ (or the source tree's dist/). */
export function bpfObjectPath(): string {
  const here = path.dirname(fileURLToPath(import.meta.url));
  for (const c of [path.resolve(here, '../../bpf/copier.bpf.o'), path.resolve(here, '../../../dist/bpf/copier.bpf.o')]) {
    if (fs.existsSync(c)) return c;
  }
  return path.resolve(here, '../../bpf/copier.bpf.o');
}

type Fn = (...args: unknown[]) => unknown;

interface Libs {
  koffi: {
    load(name: string): { func(signature: string): Fn };
    view(p: unknown, n: number): ArrayBuffer;
    address(p: unknown): bigint;
    errno(): number;
  };
  syscall: Fn;
  close: Fn;
  mmap: Fn;
  munmap: Fn;
  pageSize: number;
  openMem: Fn;
  load: Fn;
  findProgram: Fn;
  findMap: Fn;
  setMaxEntries: Fn;
  mapFd: Fn;
  attach: Fn;
  attachAuto: Fn;
  destroyLink: Fn;
  closeObject: Fn;
  update: Fn;
  remove: Fn;
  lookup: Fn;
  maxEntries: Fn;
}

let libs: Libs | string | null = null;

function loadLibs(): Libs | string {
  if (libs) return libs;
  let koffi: Libs['koffi'];
  try {
    koffi = createRequire(import.meta.url)('koffi') as Libs['koffi'];
  } catch (e) {
    return (libs = `the koffi package is not available (${(e as Error).message.split('\n')[0]})`);
  }
  let libc: { func(s: string): Fn };
  let bpf: { func(s: string): Fn };
  try {
    libc = koffi.load('libc.so.6');
  } catch (e) {
    return (libs = `cannot load libc.so.6 (${(e as Error).message})`);
  }
  try {
    bpf = koffi.load('libbpf.so.1');
  } catch {
    return (libs = 'libbpf is not installed (apt install libbpf1)');
  }
  // libbpf's own messages to stderr: off (what went wrong is said in one line, from its result)
  bpf.func('void *libbpf_set_print(void *fn)')(null);
  return (libs = {
    koffi,
    syscall: libc.func('long syscall(long n, void *attr, int pid, int cpu, int group, unsigned long flags)'),
    close: libc.func('int close(int fd)'),
    mmap: libc.func('void *mmap(void *addr, size_t length, int prot, int flags, int fd, long offset)'),
    munmap: libc.func('int munmap(void *addr, size_t length)'),
    pageSize: Number(libc.func('long sysconf(int name)')(30 /* _SC_PAGESIZE */)),
    openMem: bpf.func('void *bpf_object__open_mem(const void *buf, size_t size, void *opts)'),
    load: bpf.func('int bpf_object__load(void *obj)'),
    findProgram: bpf.func('void *bpf_object__find_program_by_name(void *obj, const char *name)'),
    findMap: bpf.func('void *bpf_object__find_map_by_name(void *obj, const char *name)'),
    setMaxEntries: bpf.func('int bpf_map__set_max_entries(void *map, unsigned int n)'),
    mapFd: bpf.func('int bpf_map__fd(void *map)'),
    attach: bpf.func('void *bpf_program__attach_perf_event(void *prog, int pfd)'),
    attachAuto: bpf.func('void *bpf_program__attach(void *prog)'),
    destroyLink: bpf.func('int bpf_link__destroy(void *link)'),
    closeObject: bpf.func('void bpf_object__close(void *obj)'),
    update: bpf.func('int bpf_map_update_elem(int fd, const void *key, const void *value, unsigned long long flags)'),
    remove: bpf.func('int bpf_map_delete_elem(int fd, const void *key)'),
    lookup: bpf.func('int bpf_map_lookup_elem(int fd, const void *key, void *value)'),
    maxEntries: bpf.func('unsigned int bpf_map__max_entries(void *map)'),
  });
}

/** The ring buffer mapped into the recorder (ring-buffer.ts): its two mappings, and the reader over them. */
interface RingMapping {
  consumer: unknown;
  rest: unknown;
  restLength: number;
  pageSize: number;
  reader: RingReader;
}

const PROT_READ = 1;
const PROT_WRITE = 2;
const MAP_SHARED = 1;

/** Map the ring buffer `fd` of `size` data bytes as libbpf does: the consumer's page read-write, the producer's page and the data (twice) read-only. */
function mapRing(L: Libs, fd: number, size: number): RingMapping {
  const page = L.pageSize;
  const failed = (p: unknown): boolean => !p || L.koffi.address(p) === 0xffffffffffffffffn;
  const consumer = L.mmap(null, page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (failed(consumer)) throw new KernelCopyError(`copies at the interrupt: cannot map the ring buffer (errno ${L.koffi.errno()})`);
  const restLength = page + 2 * size;
  const rest = L.mmap(null, restLength, PROT_READ, MAP_SHARED, fd, page);
  if (failed(rest)) {
    const errno = L.koffi.errno();
    L.munmap(consumer, page);
    throw new KernelCopyError(`copies at the interrupt: cannot map the ring buffer's data (errno ${errno})`);
  }
  const reader = new RingReader(L.koffi.view(consumer, page), L.koffi.view(rest, restLength), page, size);
  return { consumer, rest, restLength, pageSize: page, reader };
}

function unmapRing(L: Libs, ring: RingMapping): void {
  L.munmap(ring.rest, ring.restLength);
  L.munmap(ring.consumer, ring.pageSize);
}

/**
 * struct config's GIL fields (bpf/copier.bpf.c): where the interpreter keeps its GIL's pointer,
 * and the span of the GIL's fields to copy — where the thread state does not say whether the
 * thread holds it (3.13, 3.14); zeros otherwise.
 */
/** struct config's cframe fields (bpf/copier.bpf.c): 3.11/3.12 reach the current frame through the running eval loop's _PyCFrame */
function cframeConfig(layout: Layout): number[] {
  const T = layout.tstate;
  if (T.cframeCurrentFrame === null) return [NO_CFRAME, 0, 0, 0];
  return [T.cframeCurrentFrame, T.cframePrevious ?? 0, cframeLength(layout), readsOuterCframe(layout) ? 1 : 0];
}

function gilConfig(layout: Layout): [number, number, number] {
  const G = layout.gil;
  if (layout.tstate.holdsGil !== null || !G || (G.interpPointer === null && G.runtime === null)) return [0, 0, 0];
  return [G.interpPointer ?? 0, G.lastHolder, G.switchNumber - G.lastHolder + layout.pointerSize];
}

/** struct config's gil_address (3.11: the one GIL, in _PyRuntime at `runtimeAddress`), as two words */
function gilAddressConfig(layout: Layout, runtimeAddress: bigint | undefined): [number, number] {
  const G = layout.gil;
  if (layout.tstate.holdsGil !== null || !G || G.runtime === null || runtimeAddress === undefined) return [0, 0];
  const at = runtimeAddress + BigInt(G.runtime);
  return [Number(at & 0xffffffffn), Number(at >> 32n)];
}

export class KernelCopyError extends Error {
  override name = 'KernelCopyError';
}

export class KernelCopier {
  private closed = false;

  private constructor(
    private readonly L: Libs,
    private readonly object: unknown,
    private readonly links: unknown[],
    private readonly events: number[],
    private readonly tstatesFd: number,
    private readonly lostFd: number,
    private readonly runningFd: number,
    private readonly extrasFd: number,
    private readonly configFd: number,
    /** struct config as written at open */
    private readonly config: Uint32Array,
    private readonly ring: RingMapping,
    /** the threads' counts of arrivals on a CPU, from /proc (null: no schedstat) */
    private readonly arrivals: OffCpuWatch | null,
  ) {
    const a = arrivals;
    this.watch = a
      ? {
          mark: (tid) => {
            const r = this.runState(tid);
            // (no switch of it seen since the program was attached: blocked since before —
            // a main thread waiting on input — as /proc tells, or running)
            if (!r) return a.mark(tid);
            if (r.on) return null;
            const now = a.arrivals(tid);
            return now !== null && now === r.arrivalsOut ? now : null;
          },
          stillOff: (tid, mark) => a.arrivals(tid) === mark,
        }
      : null;
  }

  /**
   * Load the program and attach it to every CPU at `rateHz` for process `pid`, copying
   * `tstateSize` bytes of each thread state. Throws KernelCopyError with one line saying why not.
   */
  static open(pid: number, options: { rateHz: number; layout: Layout; tstateSize: number; nativeStackBytes?: number; ringBytes?: number; runtimeAddress?: bigint }): KernelCopier {
    const layout = options.layout;
    if (!kernelCopiesReach(layout)) {
      throw new KernelCopyError(`copies at the interrupt: 64-bit Linux only (${formatVersion(layout.version)} here is ${layout.pointerSize * 8}-bit)`);
    }
    const L = loadLibs();
    if (typeof L === 'string') throw new KernelCopyError(`copies at the interrupt: ${L}`);
    if (!(options.tstateSize > 0 && options.tstateSize <= MAX_TSTATE)) throw new KernelCopyError(`copies at the interrupt: a thread state of ${options.tstateSize} bytes (at most ${MAX_TSTATE})`);
    if (layout.frame.size > MAX_FRAME_HEADER) throw new KernelCopyError(`copies at the interrupt: a frame header of ${layout.frame.size} bytes (at most ${MAX_FRAME_HEADER})`);
    const file = bpfObjectPath();
    let image: Buffer;
    try {
      image = fs.readFileSync(file);
    } catch {
      throw new KernelCopyError(`copies at the interrupt are not built in (no ${file}: scripts/build-bpf.sh needs clang and libbpf-dev)`);
    }
    // The verifier gives up on a load when a signal is pending for the loader (EAGAIN), and
    // libbpf's own few tries can all meet one where signals come often (a profiler's SIGPROF):
    // a load is tried again, from a fresh object, a few more times.
    let object: unknown = null;
    let loaded = 0;
    for (let tries = 0; ; tries++) {
      object = L.openMem(image, image.length, null);
      if (!object) throw new KernelCopyError(`copies at the interrupt: libbpf could not read ${file}`);
      // the scratch buffer: one per CPU (a perf-event program runs with its CPU to itself)
      const scratch = L.findMap(object, 'scratch');
      if (scratch) L.setMaxEntries(scratch, os.cpus().length);
      // (the ring buffer's size: a power of 2 pages, 64 MiB as built)
      if (options.ringBytes !== undefined) L.setMaxEntries(L.findMap(object, 'records'), options.ringBytes);
      loaded = Number(L.load(object));
      if (loaded !== -EAGAIN || tries >= LOAD_TRIES) break;
      L.closeObject(object);
    }
    const links: unknown[] = [];
    const events: number[] = [];
    let ring: RingMapping | null = null;
    const undo = (): void => {
      if (ring) unmapRing(L, ring);
      for (const l of links) L.destroyLink(l);
      for (const fd of events) L.close(fd);
      L.closeObject(object);
    };
    try {
      if (loaded !== 0) {
        const errno = -loaded;
        throw new KernelCopyError(
          errno === EPERM || errno === EACCES
            ? `copies at the interrupt need ${KERNEL_COPY_NEEDS} (loading the BPF program was refused)`
            : errno === EAGAIN
              ? `copies at the interrupt: the kernel's check of the BPF program was interrupted by signals ${LOAD_TRIES + 1} times (a profiler's timer?)`
              : `copies at the interrupt: the kernel refused the BPF program (errno ${errno}: a kernel without BPF, or one too old)`,
        );
      }
      const fd = (name: string): number => Number(L.mapFd(L.findMap(object, name)));
      // struct config (bpf/copier.bpf.c): the target, and where the fields are
      const T = layout.tstate;
      const generation = layout.interp.codeObjectGeneration ?? 0;
      const C = layout.chunk;
      const config = new Uint32Array([pid, options.tstateSize, T.currentFrame, T.datastackChunk, T.datastackTop, layout.frame.previous, layout.frame.size, T.interp, generation, layout.interp.gcCollecting ?? 0, C.previous, C.top, C.data, Math.min(options.nativeStackBytes ?? 0, KERNEL_NATIVE_MAX), ...gilConfig(layout), ...cframeConfig(layout), ...gilAddressConfig(layout, options.runtimeAddress), ...NO_TASKS]);
      // (struct config's 37 words, the task fields last)
      if (config.length !== CONFIG_TASK_AT + NO_TASKS.length) throw new Error(`internal: struct config of ${config.length} words`);
      if (Number(L.update(fd('config'), new Uint32Array([0]), config, 0)) !== 0) throw new KernelCopyError('copies at the interrupt: cannot configure the BPF program');
      // the context switches of the target's threads: which is on a CPU (KernelCopier.watch)
      const switches = L.attachAuto(L.findProgram(object, 'on_switch'));
      if (!switches) throw new KernelCopyError('copies at the interrupt: cannot attach to the scheduler\'s context switches (a kernel without BTF?)');
      links.push(switches);
      const program = L.findProgram(object, 'copy_at_tick');
      for (let cpu = 0; cpu < os.cpus().length; cpu++) {
        const attr = new DataView(new ArrayBuffer(PERF_ATTR_SIZE));
        attr.setUint32(0, PERF_TYPE_SOFTWARE, true);
        attr.setUint32(4, PERF_ATTR_SIZE, true);
        attr.setBigUint64(8, PERF_COUNT_SW_CPU_CLOCK, true);
        // a fixed period of the CPU's clock, in ns (not a frequency the kernel adjusts): every
        // CPU ticks at the rate, as the recorder's own schedule does for threads off CPU
        attr.setBigUint64(16, BigInt(Math.max(1000, Math.round(1e9 / options.rateHz))), true);
        const pfd = Number(L.syscall(SYS_PERF_EVENT_OPEN, attr.buffer, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC));
        if (pfd < 0) {
          const errno = L.koffi.errno();
          // (a CPU that is offline has no event: the others do)
          if (errno === 19 /* ENODEV */) continue;
          throw new KernelCopyError(errno === EPERM || errno === EACCES ? `copies at the interrupt need ${KERNEL_COPY_NEEDS} (perf_event_open was refused)` : `copies at the interrupt: perf_event_open failed on CPU ${cpu} (errno ${errno})`);
        }
        events.push(pfd);
        const link = L.attach(program, pfd);
        if (!link) throw new KernelCopyError(`copies at the interrupt: cannot attach the BPF program to CPU ${cpu}'s timer`);
        links.push(link);
      }
      ring = mapRing(L, fd('records'), Number(L.maxEntries(L.findMap(object, 'records'))));
      return new KernelCopier(L, object, links, events, fd('tstates'), fd('lost'), fd('running'), fd('extras'), fd('config'), config, ring, OffCpuWatch.open(pid));
    } catch (e) {
      undo();
      throw e;
    }
  }

  /** what the program was last told: kernel thread id → thread-state address */
  private readonly told = new Map<number, bigint>();

  /**
   * Tell the program each thread's thread-state address (kernel thread id → address): the
   * threads it copies from now on. A thread left out of `map` is forgotten (with `replace`,
   * the default); only what changed is written.
   */
  setThreadStates(map: ReadonlyMap<number, bigint>, replace = true): void {
    if (this.closed) return;
    for (const [tid, address] of map) {
      if (this.told.get(tid) === address) continue;
      this.L.update(this.tstatesFd, new Uint32Array([tid]), new BigUint64Array([address]), 0);
      this.told.set(tid, address);
    }
    if (!replace) return;
    for (const tid of this.told.keys()) {
      if (map.has(tid)) continue;
      this.L.remove(this.tstatesFd, new Uint32Array([tid]));
      this.told.delete(tid);
    }
    for (const tid of this.toldReads.keys()) {
      if (map.has(tid)) continue;
      this.L.remove(this.extrasFd, new Uint32Array([tid]));
      this.toldReads.delete(tid);
    }
  }

  /**
   * Copy what record --async-aware needs of a running thread at its ticks (task-copy.ts): its
   * thread state through the asyncio fields (its running task, of the tick), and the running
   * task's object and the first bytes of its name, followed from there; in `all` mode the
   * tasks on its list too (tickTaskFollow). False: more than the program copies, or the map
   * not written.
   */
  copyTasks(offsets: AsyncioOffsets, layout: Layout, mode: AsyncMode): boolean {
    const { words, fits } = tickTaskFollow(offsets, layout, mode);
    const tstateBytes = asyncioTstateEnd(offsets, layout.pointerSize);
    if (this.closed || tstateBytes > MAX_TSTATE || !fits) return false;
    if (words.length !== NO_TASKS.length) throw new Error(`internal: ${words.length} task fields for struct config's ${NO_TASKS.length}`);
    this.config[1] = Math.max(this.config[1]!, tstateBytes);
    this.config.set(words, CONFIG_TASK_AT);
    return this.writeConfig();
  }

  private writeConfig(): boolean {
    return Number(this.L.update(this.configFd, new Uint32Array([0]), this.config, 0)) === 0;
  }

  /** what the program was last told to copy with each thread (setReads), as `address:length` lists */
  private readonly toldReads = new Map<number, string>();
  /** struct extras (bpf/copier.bpf.c): count, pad, addresses, lengths */
  private readonly extrasValue = new ArrayBuffer(8 + TICK_READS.count * 12);

  /**
   * Tell the program the ranges to copy with thread `tid` at each of its ticks from now on (the
   * first TICK_READS.count; a range longer than TICK_READS.bytes is not copied): what its
   * task view read at its last sample. Only a change is written. False: the program's table is
   * full (the thread's ticks copy none).
   */
  setReads(tid: number, ranges: readonly { address: bigint; length: number }[]): boolean {
    if (this.closed) return false;
    const n = Math.min(ranges.length, TICK_READS.count);
    // (sorted by address: the program looks a range up among them — bpf/copier.bpf.c: named)
    const sorted = ranges.slice(0, n).sort((a, b) => (a.address < b.address ? -1 : a.address > b.address ? 1 : 0));
    const said = sorted.map((r) => `${r.address}:${r.length}`).join(',');
    if (this.toldReads.get(tid) === said) return true;
    const dv = new DataView(this.extrasValue);
    new Uint8Array(this.extrasValue).fill(0);
    dv.setUint32(0, n, true);
    for (let i = 0; i < n; i++) {
      dv.setBigUint64(8 + 8 * i, sorted[i]!.address, true);
      dv.setUint32(8 + 8 * TICK_READS.count + 4 * i, sorted[i]!.length, true);
    }
    if (Number(this.L.update(this.extrasFd, new Uint32Array([tid]), new Uint8Array(this.extrasValue), 0)) !== 0) return false;
    this.toldReads.set(tid, said);
    return true;
  }

  /** The records the kernel wrote since the last call, oldest first. */
  poll(): KernelRecord[] {
    if (this.closed) return [];
    const out: KernelRecord[] = [];
    this.ring.reader.consume((bytes) => {
      const record = decodeRecord(bytes);
      if (record) out.push(record);
      else this.damaged++;
    });
    return out;
  }

  /** records that were not whole (never seen: the program writes them whole) */
  damaged = 0;

  /**
   * Is thread `tid` on a CPU now (by the context switches seen since the program was attached),
   * and how many times it was put on one: null where no switch of it was seen yet.
   */
  runState(tid: number): RunState | null {
    if (this.closed) return null;
    const v = this.run;
    v.fill(0);
    if (Number(this.L.lookup(this.runningFd, this.key(tid), v)) !== 0) return null;
    const w = this.runWords;
    return {
      on: v[0] !== 0,
      ins: v[1]!,
      offNs: (BigInt(v[3]!) << 32n) | BigInt(v[2]!),
      preempted: v[4] !== 0,
      arrivalsOut: (BigInt(v[7]!) << 32n) | BigInt(v[6]!),
      registers: w[7] !== 0n ? { rip: w[4]!, rsp: w[5]!, rbp: w[6]! } : null,
    };
  }

  /** struct run (bpf/copier.bpf.c), as 32-bit and 64-bit words */
  private readonly run = new Uint32Array(16);
  private readonly runWords = new BigUint64Array(this.run.buffer);
  private readonly keyBuf = new Uint32Array(1);
  private key(tid: number): Uint32Array {
    this.keyBuf[0] = tid;
    return this.keyBuf;
  }

  /**
   * The user registers thread `tid` resumes with, off its CPU since `mark` (KernelCopier.watch's):
   * those the program saw it leave its CPU with (native stacks asked for at open), that switch's
   * count of arrivals being the mark; for a thread not seen switching since the program was
   * attached (blocked since before), the stack and instruction pointers /proc gives, rbp unknown
   * (0: an unwind that needs it ends with a status). Null: not known.
   */
  registersOff(tid: number, mark: bigint): NativeRegisters | null {
    const r = this.runState(tid);
    if (r) return !r.on && r.arrivalsOut === mark ? r.registers : null;
    const at = this.arrivals?.blockedAt(tid);
    return at && at.mark === mark ? { rip: at.pc, rsp: at.sp, rbp: 0n } : null;
  }

  /**
   * Is thread `tid` possibly on a CPU: the switches say so, or it was put on one since the last
   * switch off one that was seen (a switch onto a CPU the program missed)? Null: no switch of
   * it seen yet.
   */
  mayRun(tid: number): boolean | null {
    const r = this.runState(tid);
    if (!r) return null;
    if (r.on) return true;
    const now = this.arrivals?.arrivals(tid) ?? null;
    return now === null || now !== r.arrivalsOut;
  }

  /**
   * The proof that a thread did not run while it was copied: off its CPU since a switch the
   * program saw, its count of arrivals on a CPU (from /proc, authoritative) still the count it
   * had then (mark), and the same after the copy (stillOff). Null where /proc has no schedstat.
   */
  readonly watch: { mark(tid: number): bigint | null; stillOff(tid: number, mark: bigint): boolean } | null;

  /** Records the kernel dropped because the ring buffer was full (each a missed tick). */
  lost(): bigint {
    if (this.closed) return 0n;
    const v = this.lostValue;
    v[0] = 0n;
    this.L.lookup(this.lostFd, this.key(0), v);
    return v[0]!;
  }

  private readonly lostValue = new BigUint64Array(1);

  close(): void {
    if (this.closed) return;
    this.closed = true;
    unmapRing(this.L, this.ring);
    for (const l of this.links) this.L.destroyLink(l);
    for (const fd of this.events) this.L.close(fd);
    this.L.closeObject(this.object);
    this.arrivals?.close();
  }
}
