// A C port of the walk kernel (assembly/walk.ts, batch entry assembly/kernel.ts), for one purpose: to measure how fast the
// WebAssembly kernel is against native code running the same algorithm over the same bytes
// (bench/c-walker.bench.ts). It is not part of pyunwind.
//
// The port is deliberately literal: the same globals, the same functions (loadParams, locate,
// readPtr, findCode, walkOne, walk), the same checks in the same order, and every load
// bounds-checked against the same memory size, addressed with the same u32 arithmetic. Only
// then does "the kernel runs at X x C" say something about WebAssembly rather than about two
// different algorithms. Keep it in step with assembly/walk.ts (whose splice path, used only by
// the block engine, is off in the batch walk this port mirrors).
//
// Usage:
//   walk <batch file> [seconds per round] [rounds]
//       warm up for one round, time the rounds, print one JSON line:
//       {"samplesPerSec", "framesPerSec", "nsPerSample", "identical", ...} (median round; frames
//       are frames visited, Python or not, as in docs/benchmarks.md)
//   walk <batch file> --serve
//       print {"identical": ...}, then answer each line "<n>" on stdin with the seconds n walks
//       took; at end of input print {"identical": ...} again (after all the timed walks). This
//       lets the bench alternate kernel and C rounds finely, so that a shared machine's load
//       changes hit both sides alike.
// Exit status 1 when the output differs from the kernel's, 2 on bad input.
//
// The batch file is a dump of the kernel's linear memory right after the kernel walked the
// batch, preceded by the arguments of that call:
//   offset  0: char[8]  "PYUWCB01"
//   offset  8: u32      params, samples, count, codes, codeCount, results, frames, framesCapacity
//   offset 40: u32      the kernel's return value
//   offset 44: u32      Python frames the kernel emitted (sum of the results' frame counts)
//   offset 48: u32      frames the kernel visited, Python or not (sum of the results' visited)
//   offset 52: u32      0
//   offset 56: u64      memory size in bytes (memory.size() << 16 when the kernel ran)
//   offset 64: u64      bytes of memory image that follow (<= memory size; the rest is zero)
//   offset 72: the image
// Because the image holds the kernel's own results and frames, this program checks its output
// against them byte for byte (after wiping them, so it cannot pass by not writing).

#define _POSIX_C_SOURCE 199309L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef uint8_t u8;
typedef int32_t i32;
typedef uint32_t u32;
typedef uint64_t u64;

// ---- the linear memory ----
static u8 *mem;
static u64 mem_bytes;

// wasm loads are little-endian and may be unaligned; memcpy compiles to one mov on x86-64.
// The effective address is a u32 base plus a constant offset, computed without wrapping, as
// in wasm.
static inline u64 load_u64(u32 base, u32 off) { u64 v; memcpy(&v, mem + (u64)base + off, 8); return v; }
static inline u32 load_u32(u32 base, u32 off) { u32 v; memcpy(&v, mem + (u64)base + off, 4); return v; }
static inline i32 load_i32(u32 base, u32 off) { i32 v; memcpy(&v, mem + (u64)base + off, 4); return v; }
static inline u32 load_u8(u32 base, u32 off) { return mem[(u64)base + off]; }
static inline void store_u64(u32 base, u32 off, u64 v) { memcpy(mem + (u64)base + off, &v, 8); }
static inline void store_u32(u32 base, u32 off, u32 v) { memcpy(mem + (u64)base + off, &v, 4); }

// ---- the ABI (src/kernel/abi.ts): abi.h, written from it by bench/c-walker.bench.ts ----
#include "abi.h"
enum { COMPLETE = STATUS_COMPLETE, COMPLETE_UNVERIFIABLE = STATUS_COMPLETE_UNVERIFIABLE, IDLE = STATUS_IDLE,
       INCOMPLETE = STATUS_INCOMPLETE, DANGLING = STATUS_DANGLING, CYCLE = STATUS_CYCLE,
       TOO_DEEP = STATUS_TOO_DEEP, CORRUPT = STATUS_CORRUPT, NO_THREAD_STATE = STATUS_NO_THREAD_STATE };

// ---- parameters of the current batch ----
static u32 ptrSize = 8;
static u32 tsNeed, tsCurrentFrame;
static i32 cframeCurrent = -1, tsBaseFrame = -1, cframePrevious = -1;
static u32 frSize, frPrevious, frExecutable, frInstrPtr, frOwner;
static i32 frIsEntry = -1;
static u64 tagMask;
static u32 ownerPython, ownerSkip;
static i32 bottom;
static u32 ipPrevious, maxDepth, ownerThread;

// ---- current sample ----
static u32 regTable, regCount, codeTable, codeCount;

static u32 locOffset;
static i32 locRegion = -1;
enum { LOC_OK = 0, LOC_MISSING = 1, LOC_CROSSES = 2 };

static int readOk;

// memory.size() << 16 in the kernel
static inline u64 memSize(void) { return mem_bytes; }
static inline int inMemory(u64 off, u64 len) { return off + len <= memSize(); }

static i32 locate(u64 addr, u32 len) {
  i32 lo = 0, hi = (i32)regCount - 1, found = -1;
  while (lo <= hi) {
    i32 mid = (i32)((u32)(lo + hi) >> 1);
    u64 start = load_u64(regTable + (u32)mid * REGION_SIZE, 0);
    if (start <= addr) {
      found = mid;
      lo = mid + 1;
    } else {
      hi = mid - 1;
    }
  }
  if (found < 0) return LOC_MISSING;
  u32 entry = regTable + (u32)found * REGION_SIZE;
  u64 start = load_u64(entry, REGION_ADDRESS);
  u64 length = load_u32(entry, REGION_LENGTH);
  u64 data = load_u32(entry, REGION_DATA);
  u64 off = addr - start;
  if (off >= length) return LOC_MISSING;
  if (off + (u64)len > length) return LOC_CROSSES;
  if (!inMemory(data + off, (u64)len)) return LOC_MISSING;
  locOffset = (u32)(data + off);
  locRegion = found;
  return LOC_OK;
}

static u64 readPtr(u64 addr) {
  if (locate(addr, ptrSize) != LOC_OK) {
    readOk = 0;
    return 0;
  }
  readOk = 1;
  return ptrSize == 8 ? load_u64(locOffset, 0) : (u64)load_u32(locOffset, 0);
}

static inline u64 fieldPtr(u32 base, u32 off) {
  return ptrSize == 8 ? load_u64(base + off, 0) : (u64)load_u32(base + off, 0);
}

static u64 codeStart, codeEnd, codeFrameSize;

static int findCode(u64 addr) {
  i32 lo = 0, hi = (i32)codeCount - 1;
  while (lo <= hi) {
    i32 mid = (i32)((u32)(lo + hi) >> 1);
    u32 entry = codeTable + (u32)mid * CODE_SIZE;
    u64 a = load_u64(entry, CODE_ADDRESS);
    if (a == addr) {
      codeStart = load_u64(entry, CODE_START);
      codeEnd = load_u64(entry, CODE_END);
      codeFrameSize = (u64)load_u32(entry, CODE_FRAME_SIZE);
      return 1;
    }
    if (a < addr) lo = mid + 1;
    else hi = mid - 1;
  }
  return 0;
}

static inline int ownerIn(u32 mask, u32 owner) { return owner < 32 && ((mask >> owner) & 1) != 0; }

static int loadParams(u32 p) {
  if (!inMemory((u64)p, (u64)P_COUNT * 4)) return 0;
  ptrSize = load_u32(p, P_PTR_SIZE * 4);
  if (ptrSize != 4 && ptrSize != 8) return 0;
  tsNeed = load_u32(p, P_TS_NEED * 4);
  tsCurrentFrame = load_u32(p, P_TS_CURRENT_FRAME * 4);
  cframeCurrent = load_i32(p, P_CFRAME_CURRENT * 4);
  tsBaseFrame = load_i32(p, P_TS_BASE_FRAME * 4);
  frSize = load_u32(p, P_FR_SIZE * 4);
  frPrevious = load_u32(p, P_FR_PREVIOUS * 4);
  frExecutable = load_u32(p, P_FR_EXECUTABLE * 4);
  frInstrPtr = load_u32(p, P_FR_INSTR_PTR * 4);
  frOwner = load_u32(p, P_FR_OWNER * 4);
  frIsEntry = load_i32(p, P_FR_IS_ENTRY * 4);
  tagMask = (u64)load_u32(p, P_TAG_MASK * 4);
  ownerPython = load_u32(p, P_OWNER_PYTHON * 4);
  ownerSkip = load_u32(p, P_OWNER_SKIP * 4);
  bottom = load_i32(p, P_BOTTOM * 4);
  ipPrevious = load_u32(p, P_IP_PREVIOUS * 4);
  maxDepth = load_u32(p, P_MAX_DEPTH * 4);
  ownerThread = load_u32(p, P_OWNER_THREAD * 4);
  cframePrevious = load_i32(p, P_CFRAME_PREVIOUS * 4);
  if (frSize == 0 || frSize > 4096) return 0;
  if (frPrevious + ptrSize > frSize || frExecutable + ptrSize > frSize) return 0;
  if (frInstrPtr + ptrSize > frSize || frOwner + 1 > frSize) return 0;
  if (frIsEntry >= 0 && (u32)frIsEntry + 1 > frSize) return 0;
  if (tsNeed > 1u << 20 || tsCurrentFrame + ptrSize > tsNeed) return 0;
  if (tsBaseFrame >= 0 && (u32)tsBaseFrame + ptrSize > tsNeed) return 0;
  if (cframeCurrent > 4096) return 0;
  if (cframePrevious < -1 || cframePrevious > 4096 || (cframePrevious >= 0 && cframeCurrent < 0)) return 0;
  return 1;
}

static u32 outStatus, outVisited, outFrames;
static u64 outLast, outFail;

static void walkOne(u64 tstate, u32 frames) {
  outVisited = 0;
  outLast = 0;
  outFail = 0;
  outFrames = 0;
  if (tstate == 0) {
    outStatus = NO_THREAD_STATE;
    return;
  }
  if (locate(tstate, tsNeed) != LOC_OK) {
    outStatus = NO_THREAD_STATE;
    outFail = tstate;
    return;
  }
  u32 ts = locOffset;
  u64 frame = fieldPtr(ts, tsCurrentFrame);
  u64 enteredFrom = 0;
  if (cframeCurrent >= 0) {
    u64 cframe = frame;
    if (cframe == 0) {
      outStatus = CORRUPT;
      outFail = tstate;
      return;
    }
    frame = readPtr(cframe + (u64)cframeCurrent);
    if (!readOk) {
      outStatus = DANGLING;
      outFail = cframe;
      return;
    }
    if (cframePrevious >= 0) {
      u64 outer = readPtr(cframe + (u64)cframePrevious);
      if (readOk && outer != 0) {
        enteredFrom = readPtr(outer + (u64)cframeCurrent);
        if (!readOk) enteredFrom = 0;
      }
    }
  }
  u64 base = 0;
  if (tsBaseFrame >= 0) {
    base = fieldPtr(ts, (u32)tsBaseFrame);
    if (base == 0) {
      outStatus = CORRUPT;
      outFail = tstate;
      return;
    }
  }

  u32 visited = 0, pyCount = 0;
  u64 last = 0;
  u32 lastOwner = 0xffffffffu, lastIsEntry = 0;
  u32 throughC = 0;
  u64 tortoise = frame;
  u32 power = 1, lam = 0;
  const u64 align = (u64)ptrSize - 1;
  u64 callee = 0;
  i32 calleeRegion = -1;

  while (frame != 0) {
    if (visited >= maxDepth) {
      outStatus = TOO_DEEP;
      outFail = frame;
      outVisited = visited;
      outLast = last;
      outFrames = pyCount;
      return;
    }
    u32 fail = 0xffffffffu;
    if ((frame & align) != 0) {
      fail = CORRUPT;
    } else {
      i32 loc = locate(frame, frSize);
      if (loc == LOC_MISSING) fail = DANGLING;
      else if (loc == LOC_CROSSES) fail = CORRUPT;
    }
    if (fail != 0xffffffffu) {
      outStatus = fail;
      outFail = frame;
      outVisited = visited;
      outLast = last;
      outFrames = pyCount;
      return;
    }
    u32 f = locOffset;
    i32 region = locRegion;
    u32 owner = load_u8(f, frOwner);
    u64 prev = fieldPtr(f, frPrevious);
    u64 nextCallee = 0;
    if (ownerIn(ownerPython, owner)) {
      u64 code = fieldPtr(f, frExecutable) & ~tagMask;
      /* a NULL executable below the current frame: frames of different moments */
      if (code == 0 && visited != 0) {
        outStatus = CORRUPT;
        outFail = frame;
        outVisited = visited;
        outLast = last;
        outFrames = pyCount;
        return;
      }
      if (code != 0) {
        u64 ip = fieldPtr(f, frInstrPtr);
        u64 bad = 0;
        if (!findCode(code)) {
          bad = code;
        } else {
          u64 low = ipPrevious != 0 && codeStart >= 2 ? codeStart - 2 : codeStart;
          if (ip < low || ip >= codeEnd || ((ip ^ codeStart) & 1) != 0) bad = ip == 0 ? frame : ip;
        }
        if (bad == 0 && owner == ownerThread && callee != 0 && calleeRegion == region &&
            codeFrameSize != 0 && frame + codeFrameSize != callee) {
          bad = callee;
        }
        if (bad != 0) {
          outStatus = CORRUPT;
          outFail = bad;
          outVisited = visited;
          outLast = last;
          outFrames = pyCount;
          return;
        }
        if (owner == ownerThread) nextCallee = frame;
        u32 out = frames + pyCount * FRAME_SIZE;
        store_u64(out, FRAME_ADDRESS, frame);
        store_u64(out, FRAME_CODE, code);
        store_u64(out, FRAME_IP, ip);
        store_u32(out, FRAME_FLAGS, throughC);
        store_u32(out, FRAME_FLAGS + 4, 0);
        pyCount++;
      }
    } else if (!ownerIn(ownerSkip, owner)) {
      outStatus = CORRUPT;
      outFail = frame;
      outVisited = visited;
      outLast = last;
      outFrames = pyCount;
      return;
    }
    callee = nextCallee;
    calleeRegion = region;
    last = frame;
    lastOwner = owner;
    lastIsEntry = frIsEntry >= 0 ? load_u8(f, (u32)frIsEntry) : 0;
    if (lastIsEntry == 0 && visited == 0 && enteredFrom != 0 && prev == enteredFrom && ownerIn(ownerPython, owner)) lastIsEntry = 1;
    throughC = ownerIn(ownerPython, owner) ? (lastIsEntry != 0 ? FRAME_CALLS_THROUGH_C : 0u) : FRAME_CALLS_THROUGH_C;
    visited++;
    frame = prev;
    lam++;
    if (frame != 0 && frame == tortoise) {
      outStatus = CYCLE;
      outFail = frame;
      outVisited = visited;
      outLast = last;
      outFrames = pyCount;
      return;
    }
    if (lam == power) {
      tortoise = frame;
      power <<= 1;
      lam = 0;
    }
  }

  outVisited = visited;
  outLast = last;
  outFrames = pyCount;
  if (bottom == BOTTOM_BASE_FRAME) {
    if (last != base) {
      outStatus = INCOMPLETE;
      outFail = last;
    } else {
      outStatus = pyCount > 0 ? COMPLETE : IDLE;
    }
    return;
  }
  if (visited == 0) {
    outStatus = IDLE;
    return;
  }
  int bottomOk = 0;
  if (bottom == BOTTOM_ENTRY_FRAME) bottomOk = ownerIn(ownerSkip, lastOwner);
  else if (bottom == BOTTOM_IS_ENTRY_FLAG) bottomOk = lastIsEntry != 0;
  if (!bottomOk) {
    outStatus = INCOMPLETE;
    outFail = last;
    return;
  }
  outStatus = pyCount > 0 ? COMPLETE_UNVERIFIABLE : IDLE;
}

// noinline: one call per batch, as the host calls the kernel's export, so the timing loop
// cannot be folded into the walk
__attribute__((noinline)) i32 walk(u32 params, u32 samples, u32 count, u32 codes, u32 codesCount,
                                   u32 results, u32 frames, u32 framesCapacity) {
  if (!loadParams(params)) return -1;
  if (!inMemory((u64)samples, (u64)count * SAMPLE_SIZE)) return -1;
  if (!inMemory((u64)codes, (u64)codesCount * CODE_SIZE)) return -1;
  if (!inMemory((u64)results, (u64)count * RESULT_SIZE)) return -1;
  if (!inMemory((u64)frames, (u64)framesCapacity * FRAME_SIZE)) return -1;
  codeTable = codes;
  codeCount = codesCount;
  u32 used = 0;
  for (u32 i = 0; i < count; i++) {
    if (framesCapacity - used < maxDepth) return (i32)i;
    u32 s = samples + i * SAMPLE_SIZE;
    regTable = load_u32(s, SAMPLE_REGIONS);
    regCount = load_u32(s, SAMPLE_REGION_COUNT);
    u32 r = results + i * RESULT_SIZE;
    if (!inMemory((u64)regTable, (u64)regCount * REGION_SIZE)) regCount = 0;
    walkOne(load_u64(s, SAMPLE_TSTATE), frames + used * FRAME_SIZE);
    store_u32(r, RESULT_STATUS, outStatus);
    store_u32(r, RESULT_FRAME_START, used);
    store_u32(r, RESULT_FRAME_COUNT, outFrames);
    store_u32(r, RESULT_VISITED, outVisited);
    store_u64(r, RESULT_LAST, outLast);
    store_u64(r, RESULT_FAIL, outFail);
    used += outFrames;
  }
  return (i32)count;
}

// ---- benchmark driver ----

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void die(const char *what) {
  fprintf(stderr, "walk: %s\n", what);
  exit(2);
}

// the call the kernel made, and the output it gave
static u32 A_params, A_samples, A_count, A_codes, A_codeCount, A_results, A_frames, A_framesCapacity;
static u32 wantReturn, framesUsed, visitedTotal;
static u8 *wantResults, *wantFrames;
static u64 resultBytes, frameBytes;

static i32 walkBatch(void) {
  return walk(A_params, A_samples, A_count, A_codes, A_codeCount, A_results, A_frames, A_framesCapacity);
}

static int sameOutput(void) {
  return memcmp(wantResults, mem + A_results, resultBytes) == 0 && memcmp(wantFrames, mem + A_frames, frameBytes) == 0;
}

static void readBatch(const char *file) {
  FILE *in = fopen(file, "rb");
  if (!in) die("cannot open the batch file");
  u8 head[72];
  if (fread(head, 1, sizeof head, in) != sizeof head || memcmp(head, "PYUWCB01", 8) != 0) die("not a batch file");
  u32 a[12];
  memcpy(a, head + 8, sizeof a);
  u64 sizes[2];
  memcpy(sizes, head + 56, sizeof sizes);
  A_params = a[0], A_samples = a[1], A_count = a[2], A_codes = a[3], A_codeCount = a[4];
  A_results = a[5], A_frames = a[6], A_framesCapacity = a[7];
  wantReturn = a[8], framesUsed = a[9], visitedTotal = a[10];
  mem_bytes = sizes[0];
  u64 image = sizes[1];
  if (image > mem_bytes || mem_bytes > (1ull << 32)) die("bad sizes");
  mem = calloc(1, mem_bytes);
  if (!mem) die("out of memory");
  if (fread(mem, 1, image, in) != image) die("short image");
  fclose(in);

  // keep the kernel's output, then wipe it so that a walk that writes nothing cannot match
  resultBytes = (u64)A_count * RESULT_SIZE;
  frameBytes = (u64)framesUsed * FRAME_SIZE;
  if ((u64)A_results + resultBytes > mem_bytes || (u64)A_frames + frameBytes > mem_bytes) die("outputs outside memory");
  wantResults = malloc(resultBytes + 1);
  wantFrames = malloc(frameBytes + 1);
  if (!wantResults || !wantFrames) die("out of memory");
  memcpy(wantResults, mem + A_results, resultBytes);
  memcpy(wantFrames, mem + A_frames, frameBytes);
  memset(mem + A_results, 0xa5, resultBytes);
  memset(mem + A_frames, 0xa5, frameBytes);
}

// volatile: the timed walks' return values are used, so no call can be dropped
static volatile i32 sink;

static double timeWalks(u64 n) {
  double start = now();
  for (u64 j = 0; j < n; j++) sink += walkBatch();
  return now() - start;
}

static int serve(int identical) {
  printf("{\"identical\":%s}\n", identical ? "true" : "false");
  fflush(stdout);
  char line[64];
  while (fgets(line, sizeof line, stdin)) {
    unsigned long long n = strtoull(line, NULL, 10);
    printf("%.9f\n", timeWalks(n ? n : 1));
    fflush(stdout);
  }
  identical = identical && sameOutput();
  printf("{\"identical\":%s}\n", identical ? "true" : "false");
  return identical ? 0 : 1;
}

int main(int argc, char **argv) {
  if (argc < 2) die("usage: walk <batch file> [seconds per round] [rounds] | walk <batch file> --serve");
  readBatch(argv[1]);
  i32 ret = walkBatch();
  int identical = ret == (i32)wantReturn && sameOutput();
  if (argc > 2 && strcmp(argv[2], "--serve") == 0) return serve(identical);

  double roundSeconds = argc > 2 ? atof(argv[2]) : 0.2;
  int rounds = argc > 3 ? atoi(argv[3]) : 10;
  if (roundSeconds <= 0 || rounds <= 0 || rounds > 1000) die("bad round settings");
  // Same protocol as the TypeScript side: warm up for one round, fix the repetitions per round
  // from it, time the rounds, report the median round.
  u64 warmed = 0;
  double t0 = now(), warmEnd = t0 + roundSeconds;
  while (now() < warmEnd) {
    sink += walkBatch();
    warmed++;
  }
  double perCall = (now() - t0) / (double)warmed;
  u64 reps = (u64)(roundSeconds / perCall);
  if (reps < 1) reps = 1;
  double *rates = malloc(sizeof(double) * (size_t)rounds);
  if (!rates) die("out of memory");
  for (int k = 0; k < rounds; k++) rates[k] = (double)reps * (double)A_count / timeWalks(reps);
  // the timed walks must still have produced the kernel's output
  identical = identical && sameOutput();

  qsort(rates, (size_t)rounds, sizeof(double), cmp_double);
  double median = rounds % 2 ? rates[rounds / 2] : (rates[rounds / 2 - 1] + rates[rounds / 2]) / 2;
  double framesPerSample = A_count ? (double)visitedTotal / (double)A_count : 0;
  printf("{\"samplesPerSec\":%.1f,\"framesPerSec\":%.1f,\"nsPerSample\":%.3f,\"identical\":%s,"
         "\"returned\":%d,\"repsPerRound\":%llu,\"rounds\":%d,\"minSamplesPerSec\":%.1f,\"maxSamplesPerSec\":%.1f}\n",
         median, median * framesPerSample, 1e9 / median, identical ? "true" : "false", ret,
         (unsigned long long)reps, rounds, rates[0], rates[rounds - 1]);
  return identical ? 0 : 1;
}
