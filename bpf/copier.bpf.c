// SPDX-License-Identifier: GPL-2.0
// The kernel side of copies at the interrupt: a perf-event program run at each tick of a per-CPU
// cpu-clock event. When the interrupted thread belongs to the target, it cannot run while the
// program does, so what the program copies is of one moment without a stop. It copies, into one
// record of the `records` ring buffer:
// - the thread state whose address the recorder gave for that thread (`tstates`: kernel thread
//   id → address), `tstate_size` bytes (3.15: through its base frame);
// - the top of the thread's data stack: the current chunk from its start, or MAX_REGION bytes
//   below `datastack_top`, up to it — where the thread's own frames are — and the chunks before
//   it, each from its start to its saved `top`, up to MAX_CHUNKS of them while they fit (a deep
//   recursion's frames: a chunk is 16 KiB, ~100 frames);
// - the fields of the GIL the interpreter runs under (3.13, 3.14: whether the thread holds it is
//   not in its thread state);
// - the interpreter's count of code-object deaths (3.14+), so that the recorder can tell that the
//   code objects it reads later are the ones the frames held at the tick, and whether its
//   garbage collector was running (3.13+: a `<GC>` frame above a thread holding the GIL);
// - the header of each frame of the chain (`current_frame` → `previous`) that lies outside those
//   (a generator's frame, an entry frame on the C stack), up to MAX_FRAMES frames;
// - 3.11, 3.12: the running eval loop's _PyCFrame, through which the thread state reaches its
//   current frame (and, 3.11, the calling loop's: which frame the running one was entered with).
// - the ranges the recorder named for that thread (`extras`: record --async-aware, the objects
//   its asyncio tasks' view read at the thread's last sample — tasks, their names, coroutines
//   and the frames inside them), each as it is at the tick, up to MAX_EXTRAS of them and
//   EXTRA_ROOM bytes; and the running task's object and name, followed from the thread state
//   (`running_task`: a task new since that sample); with --async-mode all, every task on the
//   thread's list, its name and the coroutines it awaits, where the named ranges do not hold
//   them (`tasks_head`: a name or a coroutine new since that sample);
// - with native stacks asked for (`native_stack`): the thread's user registers (rip, rsp, rbp, as
//   it will resume: saved on its kernel stack at the interrupt or system call) and its native
//   stack from just below rsp (the red zone) up to the end of rsp's mapping, at most
//   `native_stack` bytes — as record --native copies a stopped thread's.
// A full ring buffer drops the record and counts it (`lost`): a missed tick is counted, never a
// silent gap. CPython 3.11+ on 64-bit Linux.
//
// Built with clang's BPF target (scripts/build-bpf.sh), loaded through libbpf
// (src/record/linux/kernel-copier.ts). bpf_probe_read_user needs a GPL-compatible license.
#include <linux/bpf.h>
#include <linux/bpf_perf_event.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

/* the fields of the kernel's task_struct read at a context switch: placed by libbpf from the
 * running kernel's BTF at load (CO-RE), so that no kernel header is needed to build */
struct sched_info {
  unsigned long pcount;
} __attribute__((preserve_access_index));

struct task_struct {
  int pid;
  int tgid;
  struct sched_info sched_info;
} __attribute__((preserve_access_index));

struct vm_area_struct {
  unsigned long vm_start;
  unsigned long vm_end;
} __attribute__((preserve_access_index));

/** set by the recorder before attaching: the target, and where the fields are (its Layout) */
struct config {
  __u32 tgid;
  __u32 tstate_size;
  /** offsets in the thread state */
  __u32 current_frame;
  __u32 datastack_chunk;
  __u32 datastack_top;
  /** offset of `previous` in a frame, and the bytes of a frame's header */
  __u32 frame_previous;
  __u32 frame_size;
  /** offset of `interp` in the thread state, and of code_object_generation in the interpreter
   * state (0: none, before 3.14) */
  __u32 tstate_interp;
  __u32 interp_generation;
  /** offset of the collector's `collecting` flag in the interpreter state (0: none) */
  __u32 interp_gc;
  /** a data-stack chunk (_PyStackChunk): offsets of `previous` and `top` (an index of words
   * into its data), and where its data begins */
  __u32 chunk_previous;
  __u32 chunk_top;
  __u32 chunk_data;
  /** native stacks: the most bytes of a thread's native stack to copy (0: no registers or
   * native stack copied) */
  __u32 native_stack;
  /** the GIL the interpreter runs under: offset in the interpreter state of its pointer
   * (`ceval.gil`; 0: not copied — 3.15 says in the thread state whether it holds it), and the
   * span of its fields copied (last holder through count of hand-overs) */
  __u32 gil_pointer;
  __u32 gil_from;
  __u32 gil_length;
  /** 3.11, 3.12: the thread state's `current_frame` field (above) is its `cframe` pointer, to
   * the running eval loop's _PyCFrame (on the C stack, or the root one inside the thread
   * state), whose current_frame is the frame: that field's offset in it (NO_CFRAME: 3.13+, the
   * frame is in the thread state), of its `previous`, and the bytes of it copied; `outer_cframe`
   * (3.11): the calling eval loop's _PyCFrame copied too, through its current_frame (the frame
   * the running loop was entered with) */
  __u32 cframe_current;
  __u32 cframe_previous;
  __u32 cframe_length;
  __u32 outer_cframe;
  /** 3.11: the one GIL is in _PyRuntime, at this address (low and high words; 0: reached through
   * `gil_pointer` in the interpreter state, or not copied) */
  __u32 gil_address_lo;
  __u32 gil_address_hi;
  /** --async-aware: the running task, followed at the tick (a task new since the thread's last
   * sample is in no range the recorder named): the offset of `asyncio_running_task` in the
   * thread state (0: not followed), the task object's bytes copied, the offset of its name in
   * it, and the bytes of the name object copied (a short str's header and text, or an int) */
  __u32 running_task;
  __u32 task_span;
  __u32 task_name;
  __u32 name_span;
  /** --async-mode all: every task on the thread's list followed at the tick (a task's name or
   * the coroutines it awaits change while the task object stays where it was): the offset of
   * `asyncio_tasks_head` in the thread state (0: not followed), of a task's list node and
   * coroutine, of an object's type; the bytes of a coroutine copied (through its frame's
   * header), the offsets in it of its frame state, its frame's stack pointer and local slots;
   * how far below the stack pointer an awaiting coroutine keeps what it awaits; and the frame
   * state (a byte) of a coroutine suspended in `await` */
  __u32 tasks_head;
  __u32 task_node;
  __u32 task_coro;
  __u32 ob_type;
  __u32 coro_span;
  __u32 coro_state;
  __u32 coro_sp;
  __u32 coro_locals;
  __u32 awaited_slot;
  __u32 yield_from;
};

#define NO_CFRAME 0xffffffff
#define MAX_CFRAME 64

/** a record is built here first: SCRATCH bytes of regions, the last one at most MAX_REGION long
 * (256 KiB: the thread state, ~15 chunks of a deep recursion, the headers of frames outside);
 * then, with native stacks, the registers and up to NATIVE_MAX bytes of stack, a page a step
 * (pages are where a read can fail: the copy ends at the first that cannot be read) */
#define SCRATCH (1 << 18)
#define MAX_REGION (1 << 15)
#define NATIVE_MAX (1 << 18)
#define PAGE 4096
/** where the native stack's pages are written: below WHOLE, which bounds a record */
#define WHOLE (1 << 20)
/** a native stack copy starts at a PAGE below the red zone, and stays where the thread's last one
 * started while the stack pointer is within NATIVE_SLACK above it: a copy that starts where the
 * last one did is stored as the words that changed (docs/capture-format.md) */
#define NATIVE_SLACK (1 << 14)
#define RED_ZONE 128
#define MAX_FRAMES 2048
/** data-stack chunks copied before the current one */
#define MAX_CHUNKS 16
/** a region's flag (its pad word): a data-stack chunk from its start; the thread's registers
 * (address 0: rip, rsp, rbp); its native stack; the GIL's fields */
#define REGION_CHUNK 1
#define REGION_REGISTERS 2
#define REGION_NATIVE_STACK 4
#define REGION_GIL 8
#define REGION_EXTRA 16
/** the ranges named for a thread (`extras`): at most MAX_EXTRAS of them (a power of 2), each at
 * most MAX_EXTRA_BYTES, EXTRA_ROOM bytes of a record in all */
#define MAX_EXTRAS 128
#define MAX_EXTRA_BYTES 4096
#define EXTRA_ROOM (1 << 16)
#define MAX_TSTATE 4096
#define MAX_FRAME_HEADER 256
/** a record: tid, region count (u32), time (u64), thread state (u64); then each region: address
 * (u64), length (u32), pad (u32), its bytes padded to 8 */
#define HEADER 24

struct scratch {
  __u8 b[WHOLE + PAGE];
  /** the walk's progress: kept here, not on the stack, so that the verifier does not follow
   * every value they take (it checks a step of the frame walk once for any of them) */
  __u32 used;
  __u32 regions;
  /** the data-stack ranges copied (the top region, then whole chunks): a frame there is not
   * copied again */
  __u64 lo[32];
  __u64 hi[32];
  __u32 ranges;
};

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct config);
} config SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 65536);
  __type(key, __u32);
  __type(value, __u64);
} tstates SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  /* 64 MiB: seconds of records at 1000 Hz (a few hundred of a deep recursion's ~200 KiB ones),
   * if the recorder stopped reading for a while */
  __uint(max_entries, 1 << 26);
} records SEC(".maps");

/** Whether each thread of the target is on a CPU now (on_switch): the recorder copies a thread
 * that is not — waiting, or runnable but not running, which the timer's program cannot see —
 * itself. Seen here, a switch onto a CPU can be missed (measured: about 1 in 20 of a thread's,
 * after a preemption by some tasks), so `on` is a hint; the proof that a thread did not run
 * while the recorder copied it is its count of arrivals on a CPU (sched_info.pcount, which
 * /proc/PID/task/TID/schedstat shows), as it was when it left its CPU (`pcount_out`), not
 * moving before or during the copy. */
struct run {
  __u32 on;
  __u32 ins;
  /** when it last left its CPU (CLOCK_MONOTONIC, ns), and whether it stayed runnable then
   * (preempted) rather than waiting for something */
  __u64 off_ns;
  __u32 preempted;
  __u32 pad;
  __u64 pcount_out;
  /** with native stacks: its user registers when it last left its CPU (what it resumes with,
   * while it stays off), and whether they were read */
  __u64 rip;
  __u64 rsp;
  __u64 rbp;
  __u64 regs_read;
};

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 65536);
  __type(key, __u32);
  __type(value, struct run);
} running SEC(".maps");

/** where each thread's last native stack copy started (NATIVE_SLACK) */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 65536);
  __type(key, __u32);
  __type(value, __u64);
} stack_starts SEC(".maps");

/** Ranges of the target's memory to copy with a thread at each of its ticks (set by the
 * recorder: kernel thread id → ranges), the first `count` of them. */
struct extras {
  __u32 count;
  __u32 pad;
  __u64 address[MAX_EXTRAS];
  __u32 length[MAX_EXTRAS];
};

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  /* (preallocated: the threads that run asyncio loops, which are few) */
  __uint(max_entries, 1024);
  __type(key, __u32);
  __type(value, struct extras);
} extras SEC(".maps");

/** records dropped because the ring buffer was full */
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, __u64);
} lost SEC(".maps");

/* one per CPU (the loader sets how many): a per-CPU array's values are at most 32 KiB; the
 * program runs with its CPU to itself */
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct scratch);
} scratch SEC(".maps");

/** Append the region [address, address + length) at `used`; the new end, or 0 if it does not fit or cannot be read. */
static __always_inline __u32 append_flagged(struct scratch *s, __u32 used, __u64 address, __u32 length, __u32 flag) {
  if (used > SCRATCH - 16 || length >= MAX_REGION) return 0;
  __u32 at = used & (SCRATCH - 8);
  *(__u64 *)&s->b[at] = address;
  *(__u32 *)&s->b[(at + 8) & (SCRATCH - 4)] = length;
  *(__u32 *)&s->b[(at + 12) & (SCRATCH - 4)] = flag;
  __u32 n = length;
  /* (the mask the verifier needs to bound the size: kept from clang, which knows it is a no-op) */
  asm volatile("" : "+r"(n));
  n &= MAX_REGION - 1;
  if (bpf_probe_read_user(&s->b[(at + 16) & (SCRATCH - 1)], n, (const void *)address) != 0) return 0;
  return at + 16 + ((n + 7) & ~7u);
}

static __always_inline __u32 append(struct scratch *s, __u32 used, __u64 address, __u32 length) {
  return append_flagged(s, used, address, length, 0);
}

/** The chunks before the current one, one a step: each from its start to its saved top. */
struct chunks {
  struct scratch *s;
  __u64 chunk;
  __u32 previous;
  __u32 top;
  __u32 data;
};

static long chunk_step(__u64 index, void *ctx) {
  struct chunks *c = ctx;
  struct scratch *s = c->s;
  if (!c->chunk) return 1;
  __u64 previous = 0, top = 0;
  if (bpf_probe_read_user(&previous, 8, (const void *)(c->chunk + c->previous)) != 0) return 1;
  if (bpf_probe_read_user(&top, 8, (const void *)(c->chunk + c->top)) != 0) return 1;
  /* (a chunk larger than a region, made for one huge frame, is left to the frame walk) */
  if (top > (MAX_REGION - 8 - c->data) / 8) return 1;
  __u32 length = c->data + (__u32)top * 8;
  /* (room kept for the headers of frames outside: a chunk that does not leave it stops here) */
  if (s->used + length + 16 > SCRATCH - (SCRATCH >> 3)) return 1;
  __u32 n = s->ranges;
  if (n > MAX_CHUNKS) return 1;
  __u32 next = append_flagged(s, s->used, c->chunk, length, REGION_CHUNK);
  if (!next) return 1;
  s->used = next;
  s->regions++;
  s->lo[n & 31] = c->chunk;
  s->hi[n & 31] = c->chunk + length;
  s->ranges = n + 1;
  c->chunk = previous;
  return 0;
}

/** The ranges named for the thread, one a step: a range that cannot be read is left out (the
 * recorder finds it missing), one that does not fit in what is left of EXTRA_ROOM ends them. */
struct extra_walk {
  struct scratch *s;
  struct extras *e;
  __u32 room;
};

static long extra_step(__u64 index, void *ctx) {
  struct extra_walk *x = ctx;
  struct extras *e = x->e;
  if (index >= e->count || index >= MAX_EXTRAS) return 1;
  __u64 address = e->address[index & (MAX_EXTRAS - 1)];
  __u32 length = e->length[index & (MAX_EXTRAS - 1)];
  if (length == 0 || length > MAX_EXTRA_BYTES) return 0;
  if (length + 16 > x->room) return 1;
  __u32 used = x->s->used;
  __u32 next = append_flagged(x->s, used, address, length, REGION_EXTRA);
  if (!next) return 0;
  x->room -= next - used;
  x->s->used = next;
  x->s->regions++;
  return 0;
}

/** The pointer at `offset` of the thread state's copy (which starts at `at` in the scratch). */
static __always_inline __u64 field(struct scratch *s, __u32 at, __u32 offset) {
  __u64 v = 0;
  if (offset > MAX_TSTATE - 8) return 0;
  bpf_probe_read_kernel(&v, 8, &s->b[(at + offset) & (SCRATCH - 1)]);
  return v;
}

/** Whether [address, address + length) lies inside one of the ranges named for the thread
 * (which the recorder keeps sorted by address): those are copied with it anyway. */
__noinline int named(struct extras *e, __u64 address, __u32 length) {
  /* (a global function: checked once, not at each of its calls with every state they bring) */
  if (!e) return 0;
  __u32 lo = 0, hi = e->count < MAX_EXTRAS ? e->count : MAX_EXTRAS;
  /* (the first range starting past `address`: log2(MAX_EXTRAS) + 1 halvings) */
  for (int i = 0; i < 8; i++) {
    if (lo >= hi) break;
    __u32 mid = (lo + hi) >> 1;
    if (e->address[mid & (MAX_EXTRAS - 1)] <= address) lo = mid + 1;
    else hi = mid;
  }
  if (lo == 0) return 0;
  __u32 i = (lo - 1) & (MAX_EXTRAS - 1);
  return address + length <= e->address[i] + e->length[i];
}

/** The tasks on the thread's list, one a step (--async-mode all): each task object, its name's
 * first bytes, its coroutine and the coroutines it awaits, each awaiting one's slot that holds
 * the next, as the recorder's task view reads them (src/walk/task-graph.ts) — those the ranges
 * named for the thread do not hold, while they fit in `room`. */
#define MAX_LIST_TASKS 128
#define MAX_AWAITED 8
#define TASK_ROOM (1 << 17)
struct task_walk {
  struct scratch *s;
  struct extras *e;
  struct config *c;
  __u64 head;
  __u64 node;
  /** the coroutine to copy at the next step (0: the next task), its type, and its depth */
  __u64 coro;
  __u64 type;
  __u32 depth;
  __u32 room;
};

/** Copy [address, address + length) to the end of the record, not kept yet: where its bytes
 * start in the scratch (its fields read from there: one read of the target for all), or 0 if it
 * could not be read or does not fit in the room left. */
static __always_inline __u32 grab(struct task_walk *w, __u64 address, __u32 length) {
  if (length + 16 > w->room) return 0;
  __u32 used = w->s->used;
  return append_flagged(w->s, used, address, length, REGION_EXTRA) ? used + 16 : 0;
}

/** Keep what grab() copied (its first `length` bytes), unless the ranges named for the thread hold them (copied anyway). */
static __always_inline void keep(struct task_walk *w, __u64 address, __u32 length) {
  if (w->e && named(w->e, address, length)) return;
  struct scratch *s = w->s;
  __u32 size = 16 + ((length + 7) & ~7u);
  if (size > w->room) return;
  /* (its length: it may keep less than it grabbed) */
  *(__u32 *)&s->b[(s->used + 8) & (SCRATCH - 4)] = length;
  w->room -= size;
  s->used += size;
  s->regions++;
}

/** The byte at `offset` of a copy grabbed at `at`. */
static __always_inline __u8 byte_at(struct scratch *s, __u32 at, __u32 offset) {
  return s->b[(at + offset) & (SCRATCH - 1)];
}

/** One step: the next task on the list (its object, name, and where its coroutine is), or one
 * coroutine of the current task's chain (a step each, so that the verifier checks each once). */
static long task_step(__u64 index, void *ctx) {
  struct task_walk *w = ctx;
  struct config *c = w->c;
  struct scratch *s = w->s;
  __u64 coro = w->coro;
  if (coro) {
    w->coro = 0;
    __u32 at = grab(w, coro, c->coro_span);
    if (!at) {
      /* (what a coroutine awaits may be a smaller object: the view reads its type) */
      if (w->type && (at = grab(w, coro, c->ob_type + 8))) keep(w, coro, c->ob_type + 8);
      return 0;
    }
    __u64 own = field(s, at, c->ob_type);
    if (w->type && own != w->type) {
      /* (what it awaits is no coroutine: the view reads its type and ends there) */
      keep(w, coro, c->ob_type + 8);
      return 0;
    }
    keep(w, coro, c->coro_span);
    w->type = own;
    if (byte_at(s, at, c->coro_state) != (__u8)c->yield_from) return 0;
    __u64 sp = field(s, at, c->coro_sp) & ~(__u64)7;
    if (sp < coro + c->coro_locals + c->awaited_slot) return 0;
    __u64 slot = sp - c->awaited_slot;
    if (!(at = grab(w, slot, 8))) return 0;
    keep(w, slot, 8);
    __u64 awaited = field(s, at, 0) & ~(__u64)7;
    if (awaited && ++w->depth < MAX_AWAITED) w->coro = awaited;
    return 0;
  }
  __u64 node = w->node;
  if (node == 0 || node == w->head || (node & 7) || w->room < 64) return 1;
  if (bpf_probe_read_user(&w->node, 8, (const void *)node) != 0) return 1;
  __u64 task = node - c->task_node;
  __u32 at = grab(w, task, c->task_span);
  if (!at) return 1;
  keep(w, task, c->task_span);
  __u64 name = field(s, at, c->task_name) & ~(__u64)7;
  w->coro = field(s, at, c->task_coro) & ~(__u64)7;
  w->type = 0;
  w->depth = 0;
  if (name && grab(w, name, c->name_span)) keep(w, name, c->name_span);
  return 0;
}

/** The frame chain, one frame a step (bpf_loop: the verifier checks one step, not MAX_FRAMES). */
struct walk {
  struct scratch *s;
  __u64 frame;
  /** the thread state's copy (the 3.15 base frame is in it): frames there, and in the data
   * stack's ranges copied (scratch's lo/hi), are copied already */
  __u64 tstate;
  __u32 tsize;
  __u32 previous;
  __u32 frame_size;
};

static long step(__u64 index, void *data) {
  struct walk *w = data;
  if (!w->frame) return 1;
  __u64 prev = 0;
  if (bpf_probe_read_user(&prev, 8, (const void *)(w->frame + w->previous)) != 0) return 1;
  int copied = w->frame >= w->tstate && w->frame < w->tstate + w->tsize;
  __u32 ranges = w->s->ranges;
  for (__u32 i = 0; i <= MAX_CHUNKS && !copied; i++) {
    if (i >= ranges) break;
    copied = w->frame >= w->s->lo[i & 31] && w->frame < w->s->hi[i & 31];
  }
  if (!copied) {
    __u32 next = append(w->s, w->s->used, w->frame, w->frame_size);
    if (!next) return 1;
    w->s->used = next;
    w->s->regions++;
  }
  w->frame = prev;
  return 0;
}


/** A task's user registers as it will resume (saved on its kernel stack when it entered the
 * kernel: the interrupt, a system call); 0 if they cannot be read. */
static __always_inline int user_registers(struct task_struct *task, __u64 *rip, __u64 *rsp, __u64 *rbp) {
  struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
  if (!regs) return 0;
  if (bpf_probe_read_kernel(rip, 8, &regs->rip) != 0) return 0;
  if (bpf_probe_read_kernel(rsp, 8, &regs->rsp) != 0) return 0;
  if (bpf_probe_read_kernel(rbp, 8, &regs->rbp) != 0) return 0;
  return 1;
}

/** The end of the mapping an address is in (bpf_find_vma's callback). */
struct vma_end {
  __u64 end;
};

static long vma_found(struct task_struct *task, struct vm_area_struct *vma, void *ctx) {
  struct vma_end *e = ctx;
  e->end = BPF_CORE_READ(vma, vm_end);
  return 0;
}

/** The native stack, a page a step into the scratch from `at`. */
struct native {
  struct scratch *s;
  __u64 address;
  __u64 end;
  __u32 at;
  __u32 copied;
};

static long page_step(__u64 index, void *ctx) {
  struct native *n = ctx;
  __u64 from = n->address + n->copied;
  if (from >= n->end || n->copied >= NATIVE_MAX) return 1;
  __u32 at = n->at + n->copied;
  if (at > WHOLE - PAGE) return 1;
  if (bpf_probe_read_user(&n->s->b[at & (WHOLE - 1)], PAGE, (const void *)from) != 0) return 1;
  n->copied += PAGE;
  return 0;
}

/** Append the registers and native stack of the running task (thread `tid`); the new end, or `used` if not. */
static __always_inline __u32 append_native(struct scratch *s, __u32 used, __u32 tid, __u32 limit) {
  struct task_struct *task = bpf_get_current_task_btf();
  __u64 rip = 0, rsp = 0, rbp = 0;
  if (!user_registers(task, &rip, &rsp, &rbp) || rsp < PAGE) return used;
  if (used > SCRATCH + MAX_REGION) return used;
  /* the registers */
  __u32 at = used & (WHOLE - 8);
  *(__u64 *)&s->b[at] = 0;
  *(__u32 *)&s->b[(at + 8) & (WHOLE - 4)] = 24;
  *(__u32 *)&s->b[(at + 12) & (WHOLE - 4)] = REGION_REGISTERS;
  *(__u64 *)&s->b[(at + 16) & (WHOLE - 8)] = rip;
  *(__u64 *)&s->b[(at + 24) & (WHOLE - 8)] = rsp;
  *(__u64 *)&s->b[(at + 32) & (WHOLE - 8)] = rbp;
  s->regions++;
  used = at + 40;
  /* the stack: from a page boundary below the red zone (or the last copy's start) to the end of
   * rsp's mapping, or `limit` bytes; the pages are written from a page-aligned offset + 16 so
   * that the region's header sits just before them */
  __u64 aligned = (rsp - RED_ZONE) & ~(__u64)(PAGE - 1);
  __u64 start = aligned;
  __u64 *last = bpf_map_lookup_elem(&stack_starts, &tid);
  if (last && *last <= start && start - *last <= NATIVE_SLACK) start = *last;
  else bpf_map_update_elem(&stack_starts, &tid, &start, BPF_ANY);
  struct vma_end e = {.end = 0};
  /* (the mapping's end: bpf_find_vma fails while the address space's lock is taken, then the
   * copy runs to `limit` or the first page that cannot be read) */
  if (bpf_find_vma(task, rsp, vma_found, &e, 0) != 0 || e.end <= start) e.end = start + limit;
  if (e.end > start + limit) e.end = start + limit;
  __u32 header = used;
  struct native n = {.s = s, .address = start, .end = e.end, .at = header + 16, .copied = 0};
  bpf_loop(NATIVE_MAX / PAGE, page_step, &n, 0);
  if (n.copied == 0 && start != aligned) {
    /* (a last start that cannot be read: another thread's, whose id this one reuses) */
    start = aligned;
    n.address = aligned;
    bpf_map_update_elem(&stack_starts, &tid, &start, BPF_ANY);
    bpf_loop(NATIVE_MAX / PAGE, page_step, &n, 0);
  }
  if (n.copied == 0) return used;
  __u32 h = header & (WHOLE - 8);
  *(__u64 *)&s->b[h] = start;
  *(__u32 *)&s->b[(h + 8) & (WHOLE - 4)] = n.copied;
  *(__u32 *)&s->b[(h + 12) & (WHOLE - 4)] = REGION_NATIVE_STACK;
  s->regions++;
  return header + 16 + n.copied;
}

SEC("perf_event")
int copy_at_tick(struct bpf_perf_event_data *ctx) {
  __u32 zero = 0;
  struct config *c = bpf_map_lookup_elem(&config, &zero);
  if (!c || c->tgid == 0) return 0;
  __u64 id = bpf_get_current_pid_tgid();
  if ((__u32)(id >> 32) != c->tgid) return 0;
  __u32 tid = (__u32)id;
  __u64 *known = bpf_map_lookup_elem(&tstates, &tid);
  if (!known) return 0;
  __u32 cpu = bpf_get_smp_processor_id();
  struct scratch *s = bpf_map_lookup_elem(&scratch, &cpu);
  if (!s) return 0;
  __u64 tstate = *known;
  __u32 tsize = c->tstate_size;
  __u32 fsize = c->frame_size;
  if (tsize == 0 || tsize > MAX_TSTATE || fsize == 0 || fsize > MAX_FRAME_HEADER) return 0;
  *(__u32 *)&s->b[0] = tid;
  *(__u64 *)&s->b[8] = bpf_ktime_get_ns();
  *(__u64 *)&s->b[16] = tstate;
  __u32 regions = 0;
  __u32 used = append(s, HEADER, tstate, tsize);
  if (used) {
    regions = 1;
    __u32 at = HEADER + 16;
    __u64 frame = field(s, at, c->current_frame);
    __u64 chunk = field(s, at, c->datastack_chunk);
    __u64 top = field(s, at, c->datastack_top);
    __u64 interp = field(s, at, c->tstate_interp);
    /* 3.11, 3.12: `frame` is the thread state's cframe pointer; the frame is its current_frame.
     * A _PyCFrame inside the thread state (root_cframe) is in its copy already */
    if (c->cframe_current != NO_CFRAME && c->cframe_length <= MAX_CFRAME && c->cframe_current <= MAX_CFRAME - 8 && frame) {
      __u64 cframe = frame;
      frame = 0;
      if (!(cframe >= tstate && cframe + c->cframe_length <= tstate + tsize)) {
        __u32 next = append(s, used, cframe, c->cframe_length);
        if (next) {
          used = next;
          regions++;
        }
      }
      bpf_probe_read_user(&frame, 8, (const void *)(cframe + c->cframe_current));
      __u64 outer = 0;
      if (c->outer_cframe && c->cframe_previous <= MAX_CFRAME - 8 && bpf_probe_read_user(&outer, 8, (const void *)(cframe + c->cframe_previous)) == 0 && outer &&
          !(outer >= tstate && outer + c->cframe_current + 8 <= tstate + tsize)) {
        __u32 next = append(s, used, outer, c->cframe_current + 8);
        if (next) {
          used = next;
          regions++;
        }
      }
    }
    if (c->interp_generation && interp) {
      __u32 next = append(s, used, interp + c->interp_generation, 8);
      if (next) {
        used = next;
        regions++;
      }
    }
    if (c->interp_gc && interp) {
      __u32 next = append(s, used, interp + c->interp_gc, 4);
      if (next) {
        used = next;
        regions++;
      }
    }
    /* which thread holds the GIL, at the tick (3.11-3.14: not in the thread state) */
    __u64 gil_address = ((__u64)c->gil_address_hi << 32) | c->gil_address_lo;
    if ((gil_address || (c->gil_pointer && interp)) && c->gil_length && c->gil_length <= 64) {
      __u64 gil = gil_address;
      if (gil || (bpf_probe_read_user(&gil, 8, (const void *)(interp + c->gil_pointer)) == 0 && gil)) {
        __u32 next = append_flagged(s, used, gil + c->gil_from, c->gil_length, REGION_GIL);
        if (next) {
          used = next;
          regions++;
        }
      }
    }
    s->ranges = 0;
    int whole = 0;
    if (chunk && top > chunk) {
      whole = top - chunk <= MAX_REGION - 8;
      __u64 lo = whole ? chunk : top - (MAX_REGION - 8);
      __u32 next = append_flagged(s, used, lo, (__u32)(top - lo), whole ? REGION_CHUNK : 0);
      if (next) {
        used = next;
        regions++;
        s->lo[0] = lo;
        s->hi[0] = top;
        s->ranges = 1;
      } else whole = 0;
    }
    s->used = used;
    s->regions = regions;
    /* the chunks before it, while the current one was copied from its start (its `previous`) */
    if (whole && c->chunk_data && c->chunk_data < 64) {
      __u64 older = 0;
      bpf_probe_read_user(&older, 8, (const void *)(chunk + c->chunk_previous));
      struct chunks k = {.s = s, .chunk = older, .previous = c->chunk_previous, .top = c->chunk_top, .data = c->chunk_data};
      bpf_loop(MAX_CHUNKS, chunk_step, &k, 0);
    }
    struct walk w = {.s = s, .frame = frame, .tstate = tstate, .tsize = tsize, .previous = c->frame_previous, .frame_size = fsize};
    bpf_loop(MAX_FRAMES, step, &w, 0);
    /* the running task and its name, as they are at the tick */
    if (c->running_task && c->running_task + 8 <= tsize && c->task_span && c->task_span <= MAX_EXTRA_BYTES) {
      __u64 task = field(s, HEADER + 16, c->running_task) & ~(__u64)3;
      __u32 at = s->used;
      __u32 next = task ? append_flagged(s, at, task, c->task_span, REGION_EXTRA) : 0;
      if (next) {
        s->used = next;
        s->regions++;
        __u64 name = 0;
        if (c->task_name + 8 <= c->task_span && c->name_span && c->name_span <= MAX_EXTRA_BYTES &&
            bpf_probe_read_user(&name, 8, (const void *)(task + c->task_name)) == 0 && (name & ~(__u64)3)) {
          at = s->used;
          next = append_flagged(s, at, name & ~(__u64)3, c->name_span, REGION_EXTRA);
          if (next) {
            s->used = next;
            s->regions++;
          }
        }
      }
    }
    struct extras *e = bpf_map_lookup_elem(&extras, &tid);
    if (c->tasks_head && c->tasks_head + 16 <= tsize && c->task_span <= MAX_EXTRA_BYTES && c->name_span <= MAX_EXTRA_BYTES && c->coro_span <= MAX_EXTRA_BYTES &&
        c->ob_type < 64) {
      struct task_walk tw = {.s = s, .e = e, .c = c, .head = tstate + c->tasks_head, .node = field(s, HEADER + 16, c->tasks_head), .room = TASK_ROOM};
      bpf_loop(MAX_LIST_TASKS * (MAX_AWAITED + 1), task_step, &tw, 0);
    }
    if (e) {
      struct extra_walk x = {.s = s, .e = e, .room = EXTRA_ROOM};
      bpf_loop(MAX_EXTRAS, extra_step, &x, 0);
    }
    used = s->used;
    if (c->native_stack) used = append_native(s, used, tid, c->native_stack < NATIVE_MAX ? c->native_stack : NATIVE_MAX);
    regions = s->regions;
  } else used = HEADER;
  *(__u32 *)&s->b[4] = regions;
  __u32 size = used;
  asm volatile("" : "+r"(size));
  /* (never past WHOLE, as the parts are bounded; a record that were would be counted lost. No
   * wake-up: the recorder reads the ring's memory at its ticks and never waits on it — a wake-up
   * is an interrupt queued on the target's CPU at each record) */
  if (size > WHOLE || bpf_ringbuf_output(&records, s->b, size, BPF_RB_NO_WAKEUP) != 0) {
    __u64 *n = bpf_map_lookup_elem(&lost, &zero);
    if (n) __sync_fetch_and_add(n, 1);
  }
  return 0;
}

/** A context switch: the target's thread leaving its CPU, and the one put on it. */
SEC("tp_btf/sched_switch")
int on_switch(__u64 *ctx) {
  __u32 zero = 0;
  struct config *c = bpf_map_lookup_elem(&config, &zero);
  if (!c || c->tgid == 0) return 0;
  struct task_struct *prev = (struct task_struct *)ctx[1];
  struct task_struct *next = (struct task_struct *)ctx[2];
  if ((__u32)BPF_CORE_READ(prev, tgid) == c->tgid) {
    __u32 tid = BPF_CORE_READ(prev, pid);
    __u64 now = bpf_ktime_get_ns();
    /* (sched_switch's last argument, prev_state: 0 (TASK_RUNNING) when `prev` stays runnable) */
    __u32 preempted = ctx[3] == 0;
    __u64 pcount = BPF_CORE_READ(prev, sched_info.pcount);
    /* with native stacks, the registers it will resume with: a thread off its CPU is copied by
     * the recorder, whose own look (/proc's syscall file) has no rbp */
    __u64 rip = 0, rsp = 0, rbp = 0, read = c->native_stack ? user_registers(prev, &rip, &rsp, &rbp) : 0;
    struct run *r = bpf_map_lookup_elem(&running, &tid);
    if (r) {
      r->off_ns = now;
      r->preempted = preempted;
      r->pcount_out = pcount;
      r->rip = rip;
      r->rsp = rsp;
      r->rbp = rbp;
      r->regs_read = read;
      r->on = 0;
    } else {
      struct run n = {.on = 0, .ins = 0, .off_ns = now, .preempted = preempted, .pcount_out = pcount, .rip = rip, .rsp = rsp, .rbp = rbp, .regs_read = read};
      bpf_map_update_elem(&running, &tid, &n, BPF_NOEXIST);
    }
  }
  if ((__u32)BPF_CORE_READ(next, tgid) == c->tgid) {
    __u32 tid = BPF_CORE_READ(next, pid);
    struct run *r = bpf_map_lookup_elem(&running, &tid);
    if (r) {
      __sync_fetch_and_add(&r->ins, 1);
      r->on = 1;
    } else {
      struct run n = {.on = 1, .ins = 1};
      bpf_map_update_elem(&running, &tid, &n, BPF_NOEXIST);
    }
  }
  return 0;
}

char LICENSE[] SEC("license") = "GPL";
