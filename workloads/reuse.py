"""reuse: functions compiled, run and dropped at a high rate, so that CPython reuses the memory
of dead code objects for new ones.

Usage: python3 reuse.py [SECONDS] [LIFE_MS]        (defaults 4, 2)

Each generation n compiles a new function f_<n> from the same template (exec of generated
source), runs it for about LIFE_MS milliseconds, and drops it: the function, its code object,
its name and its line table die at once (nothing else refers to them), and the next
generation's objects — the same sizes — are usually allocated at the very same addresses.
Only the name tells the functions apart: same file, same first line, same bytecode length,
same line table. Between generations, interlude() runs for about half a millisecond.

It prints one JSON line per generation — {"n": N, "start": NS, "end": NS}, the
time.monotonic_ns() just before and just after f_<n> ran (the same clock as a recorder's
CLOCK_MONOTONIC) — and at the end {"generations": N, "rounds": N}. A sample whose innermost
frame is f_<n> must have been taken while generation n ran. SIGTERM ends it after the
generation running then (its line is printed), so a recorder can stop it on an event of its own.

Every stack it can have, as qualnames from the outermost frame:

    <module>
    <module> → main
    <module> → main → interlude
    <module> → main → f_<n>

and, once SIGTERM came, its handler (a <lambda>) on top of any of them.
"""

import signal
import sys
import time

TEMPLATE = '''
def f_{n}(limit):
    x = 0
    i = 0
    while i < limit:
        x += i * 3
        i += 1
    return x
'''


def interlude(limit):
    x = 0
    for i in range(limit):
        x ^= i
    return x


def calibrate(ms):
    """Loop iterations of the template's loop that take about `ms` milliseconds."""
    ns = {}
    exec(compile(TEMPLATE.format(n="calibration"), "<generated>", "exec"), ns)
    f = ns.pop("f_calibration")
    n = 20000
    start = time.perf_counter()
    f(n)
    took = time.perf_counter() - start
    return max(1000, int(n * (ms / 1000.0) / max(took, 1e-6)))


def main(seconds, life_ms):
    limit = calibrate(life_ms)
    pause = calibrate(0.5)
    out = sys.stdout
    clock = time.monotonic_ns
    end = time.perf_counter() + seconds
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    n = 0
    while not stopping and time.perf_counter() < end:
        ns = {}
        exec(compile(TEMPLATE.format(n=n), "<generated>", "exec"), ns)
        # only this name refers to the function now (its globals do not: popped)
        f = ns.pop("f_%d" % n)
        start = clock()
        f(limit)
        stop = clock()
        del f, ns
        out.write('{"n": %d, "start": %d, "end": %d}\n' % (n, start, stop))
        interlude(pause)
        n += 1
    out.write('{"generations": %d, "rounds": %d}\n' % (n, n))
    out.flush()


if __name__ == "__main__":
    main(
        float(sys.argv[1]) if len(sys.argv) > 1 else 4.0,
        float(sys.argv[2]) if len(sys.argv) > 2 else 2.0,
    )
