"""hotcold: a CPU-bound Python program whose profile is known in advance.

Usage: python3 hotcold.py [SECONDS [UNIT [SPLIT]]]
    (default 3 s; a float is fine; UNIT default 100; SPLIT "HOT:COLD" units, default "7:3")

It alternates short calls to hot() and cold() for SECONDS. Both are the same kind of pure
Python loop; hot() runs 7 units of it and cold() 3, so about 70 % of the time is spent in
hot() and 30 % in cold(). SPLIT changes the units: "3:7" turns the split around (about 30 %
in hot(), 70 % in cold()), which gives two recordings of the same stacks to compare. The
program measures its own truth with time.perf_counter() around every call and prints it at
the end as one JSON line on standard output (seconds):

    {"hot": <time inside hot()>, "cold": <time inside cold()>, "total": <whole run of main()>}

A profiler's hot/cold split of samples can be compared with hot/total and cold/total.

Every stack the program can have, as qualnames from the outermost frame (the complete set —
a profiler that reports any other stack for this program is wrong):

    <module>
    <module> → main
    <module> → main → hot
    <module> → main → cold

Nothing else runs Python code: sys and time are built-in modules and os is imported before any
program runs (importing them runs no Python frame), and the clock, the loop's range, the JSON
formatting (% on bytes) and os.write are C functions, which add no Python frame. (Below <module> there may be the host's own
frames, e.g. Pyodide's eval_code when a program is run with runPython; pyunwind's Pyodide
recorder runs it with exec() called from JS, which leaves none.)

Runs unchanged on native CPython 3.11-3.15 (only modules in Debian's python3.X-minimal) and on
Pyodide.

Why short calls: a round (hot, then cold) lasts a fraction of a millisecond, much less than a
sampling interval at 1 kHz, so samples fall at every phase of the round and the profile does
not alias with the round's period. A larger UNIT makes each call last longer: recording a
native process, where a copy of the stack takes tens of microseconds while the program runs on,
calls that last about as long as a copy are sampled with a bias towards the longer one (see
docs/validation.md); UNIT=1000 makes hot() and cold() last a few hundred microseconds.
"""

import os
import sys
import time

# loop iterations per unit of work; a round is (HOT_UNITS + COLD_UNITS) * UNIT iterations
UNIT = 100
HOT_UNITS = 7
COLD_UNITS = 3


def hot():
    x = 0
    for i in range(HOT_UNITS * UNIT):
        x += i * i
    return x


def cold():
    x = 0
    for i in range(COLD_UNITS * UNIT):
        x += i * i
    return x


def main(seconds):
    clock = time.perf_counter
    hot_s = 0.0
    cold_s = 0.0
    start = clock()
    end = start + seconds
    now = start
    while now < end:
        t0 = clock()
        hot()
        t1 = clock()
        cold()
        now = clock()
        hot_s += t1 - t0
        cold_s += now - t1
    total = clock() - start
    # formatted by hand: importing json would run Python frames (its modules, and re) that are
    # not in the documented set of stacks; written with os.write, which runs none either (print
    # would go through sys.stdout, which is Python code in some hosts, e.g. Pyodide)
    os.write(1, b'{"hot": %.6f, "cold": %.6f, "total": %.6f}\n' % (hot_s, cold_s, total))


if __name__ == "__main__":
    if len(sys.argv) > 2:
        UNIT = int(sys.argv[2])
    if len(sys.argv) > 3:
        # map and int are C functions: a generator expression would run a Python frame that
        # is not in the documented set of stacks
        HOT_UNITS, COLD_UNITS = map(int, sys.argv[3].split(":"))
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 3.0)
