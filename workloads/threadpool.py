"""threadpool: a ThreadPoolExecutor of 4 worker threads running a mix of library jobs.

Usage: python3 threadpool.py [SECONDS]        (default 4; a float is fine)

Exercises threads: five Python threads share the GIL. The main thread submits a batch of jobs
to a concurrent.futures.ThreadPoolExecutor(max_workers=4) and waits for each with
Future.result(), so it sits in threading.Condition.wait (a lock acquire in C) for most of the
run, round after round; the workers (concurrent.futures.thread._worker) run the jobs and wait
in the work queue's get() between batches. The jobs, each on text or numbers generated from
random.Random(seed):

  - diff_job: difflib.SequenceMatcher ratio/opcodes and difflib.unified_diff of two versions
    of a generated text (pure Python);
  - regex_job: re.compile, findall, finditer and sub over a generated log text (the matching is
    C; the compiling of new patterns, sre_compile/_parser, is pure Python);
  - fraction_job: fractions.Fraction series (pure Python) and decimal.Decimal series (C);
  - stats_job: statistics mean, fmean, median, stdev, quantiles and correlation (mostly pure
    Python: statistics._sum works with exact ratios).

A round is one batch of 16 jobs (four of each kind), each lasting 5-15 ms of CPU. Every job
returns a small deterministic result; the main thread folds them into a checksum. No files are
written. At the end it prints one JSON line {"rounds": N, "check": C, "late": R} and flushes
(R: rounds a second in the second half of the run).

In wall-clock samples of all threads, the main thread's Condition.wait takes a fifth (one
thread of five) and the workers' _worker (idle in get(), or waiting for the GIL on return from
it) about an eighth to a sixth; the rest is spread over the jobs' functions.

A profiler must sample all threads to see the jobs (profiling.sampling: -a).

Runs unchanged on CPython 3.11-3.15.
"""

import concurrent.futures
import decimal
import difflib
import fractions
import random
import re
import statistics
import sys
import time

WORDS = (
    "the quick brown fox jumps over lazy dog while seven wizards quietly hex bold jackdaws "
    "amid grey fog and pale light of an early spring morning near river bank under old bridge"
).split()

LEVELS = ("INFO", "WARN", "ERROR", "DEBUG")


def run_parts(part, seed, n):
    # a job is n independent parts, so that it lasts 5-15 ms, longer than the interpreter's
    # switch interval (5 ms): the busy workers take turns with the GIL in the middle of jobs
    total = 0
    for k in range(n):
        total += part(seed * 8 + k)
    return total


def make_lines(rng, n):
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randrange(3, 12))) + "\n"
            for _ in range(n)]


def edit_lines(rng, lines):
    out = list(lines)
    for _ in range(len(out) // 8):
        i = rng.randrange(len(out))
        r = rng.random()
        if r < 0.4:
            words = out[i].split()
            words[rng.randrange(len(words))] = rng.choice(WORDS)
            out[i] = " ".join(words) + "\n"
        elif r < 0.7:
            del out[i]
        else:
            out.insert(i, " ".join(rng.choice(WORDS) for _ in range(5)) + "\n")
    return out


def diff_job(seed):
    return run_parts(diff_job_part, seed, 4)


def diff_job_part(seed):
    rng = random.Random(seed)
    a = make_lines(rng, 240)
    b = edit_lines(rng, a)
    sm = difflib.SequenceMatcher(None, a, b)
    ratio = sm.ratio()
    ops = len(sm.get_opcodes())
    diff = list(difflib.unified_diff(a, b, "a.txt", "b.txt", n=2))
    # character-level matching of a few changed line pairs
    chars = 0
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "replace":
            chars += sum(m.size for m in difflib.SequenceMatcher(
                None, a[i1], b[j1]).get_matching_blocks())
    return int(ratio * 1000) + ops + len(diff) + chars


def make_log(rng, n):
    lines = []
    for i in range(n):
        lines.append("2024-%02d-%02d %02d:%02d:%02d %s [%s] user=%s id=%d %s\n" % (
            rng.randrange(1, 13), rng.randrange(1, 29), rng.randrange(24), rng.randrange(60),
            rng.randrange(60), rng.choice(LEVELS), rng.choice(WORDS), rng.choice(WORDS),
            rng.randrange(100000), " ".join(rng.choice(WORDS) for _ in range(6))))
    return "".join(lines)


def regex_job(seed):
    return run_parts(regex_job_part, seed, 3)


def regex_job_part(seed):
    rng = random.Random(seed)
    text = make_log(rng, 250)
    total = 0
    # patterns that differ per job, so some are compiled anew (re's cache holds 512)
    word = rng.choice(WORDS)
    patterns = [
        r"(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d)",
        r"\[(%s|%s)\] user=(\w+)" % (word, rng.choice(WORDS)),
        r"id=(\d{%d,})" % rng.randrange(2, 6),
        r"\b%s\w*\b" % word[: rng.randrange(1, len(word) + 1)],
        r"(?m)^.*%s.*(%s|%s).*$" % (rng.choice(LEVELS), rng.choice(WORDS), rng.choice(WORDS)),
    ]
    for p in patterns:
        rx = re.compile(p)
        total += len(rx.findall(text))
    for m in re.finditer(r"user=(\w+) id=(\d+)", text):
        total += len(m.group(1)) + int(m.group(2)) % 7
    out = re.sub(r"(\d\d):(\d\d):(\d\d)", lambda m: m.group(3) + m.group(1), text)
    out = re.sub(r"\b(%s)\b" % "|".join(WORDS[:8]), r"<\1>", out)
    total += len(out)
    return total


def fraction_job(seed):
    return run_parts(fraction_job_part, seed, 8)


def fraction_job_part(seed):
    rng = random.Random(seed)
    F = fractions.Fraction
    # a partial sum of a series of small rationals, and a continued fraction
    k = rng.randrange(2, 5)
    s = F(0)
    for n in range(1, 400):
        s += F((-1) ** n * k, n * (n + k))
    cf = F(1)
    for n in range(200):
        cf = 1 + F(rng.randrange(1, 5)) / cf
    # Decimal: e and a logarithm series at 60 digits
    with decimal.localcontext() as ctx:
        ctx.prec = 60
        D = decimal.Decimal
        e = D(0)
        term = D(1)
        for n in range(1, 60):
            e += term
            term /= n
        x = D(rng.randrange(1, 9)) / 10
        ln = D(0)
        p = x
        for n in range(1, 150):
            ln += p / n if n % 2 else -p / n
            p *= x
        d = int((e + ln) * 10 ** 12)
    return (s.numerator % 1000003) + (cf.denominator % 1000003) + d % 1000003


def stats_job(seed):
    return run_parts(stats_job_part, seed, 4)


def stats_job_part(seed):
    rng = random.Random(seed)
    xs = [rng.gauss(50.0, 12.0) for _ in range(1000)]
    ys = [x * 0.5 + rng.random() * 10 for x in xs]
    ints = [rng.randrange(1000) for _ in range(1000)]
    r = 0.0
    r += statistics.mean(xs)
    r += statistics.fmean(ys)
    r += statistics.median(xs)
    r += statistics.stdev(xs)
    r += statistics.pvariance(ints)
    r += sum(statistics.quantiles(ys, n=10))
    r += statistics.correlation(xs, ys)
    r += statistics.mean(ints)
    return int(r * 1000)


JOBS = (regex_job, stats_job, diff_job, fraction_job)   # roughly longest first
# 16 jobs per batch keeps the workers idle for less than a fifth of the time (with 8, the
# batch's start and end, when fewer than 4 jobs are left, leave them idle 40 % of the time)
BATCH = 16


def run_batch(pool, batch):
    futures = []
    for i in range(BATCH):
        job = JOBS[i % len(JOBS)]
        futures.append(pool.submit(job, batch * BATCH + i))
    check = 0
    for f in futures:
        check = (check * 31 + f.result()) % 1000000007
    return check


def main(seconds):
    clock = time.perf_counter
    end = clock() + seconds
    # (the rate of rounds in the second half: what a recorder started with the program costs it
    # once started, apart from its start)
    half = end - seconds / 2
    late = None
    rounds = 0
    check = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        while clock() < end:
            check ^= run_batch(pool, rounds)
            rounds += 1
            if late is None and clock() >= half:
                late = (rounds, clock())
    print('{"rounds": %d, "check": %d, "late": %.3f}' % (rounds, check, (rounds - late[0]) / (clock() - late[1]) if late and clock() > late[1] else 0.0))
    sys.stdout.flush()


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 4.0)
