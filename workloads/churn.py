"""churn: a Python program that calls and returns at a very high rate through functions whose
possible stacks it reports itself — the oracle for the consistency of copied stacks.

Usage: python3 churn.py [SECONDS] [THREADS] [SHAPE]        (default 4 s, 1 thread, rich)

Before it churns, the program runs one round of its loop under sys.setprofile and prints, as
one JSON line, every stack it had (`{"stacks": [...]}`: qualnames from the outermost frame,
joined by ";", from `main` on — what stands below `main` is the
module, or threading's start of a thread), the way `traceback.extract_stack()` would name them. The loop is the same on
every round, so those are all the stacks it can have: a sampled stack that is not one of them
(or a prefix of one) glues together frames of different moments. At the end it prints
`{"rounds": N}`.

What makes a copy easy to tear here: `main` calls many functions of different frame sizes
from one place of its data stack, one after the other, each a microsecond or less; the same
functions are reached again from `c` one frame higher; generators and a coroutine are driven
from C (`sum(gen())`, `coro.send`), so their frames live outside the data stack and are
linked to it through an entry frame on the C stack that every such call reuses; C calls back
into Python (`sorted(key=)`, `map`); a generator is driven from Python (`for`, `yield from`).
"""

import json
import sys
import threading
import time

DATA = [5, 3, 8, 1]


def leaf(x):
    return x + 1


def gen(n):
    for i in range(n):
        yield leaf(i)


def keyf(x):
    return -x


def mapf(x):
    return leaf(x)


async def coro(n):
    return leaf(n)


def drive():
    co = coro(2)
    try:
        co.send(None)
    except StopIteration as stop:
        return stop.value


def delegate():
    yield from gen(2)


def a():
    return leaf(1)


def b():
    return sum(gen(3))


def c():
    a()
    return b()


def d():
    return sorted(DATA, key=keyf)


def e():
    return list(map(mapf, DATA))


def f():
    return drive()


def g():
    total = 0
    for x in delegate():
        total += x
    return total


class Churner:
    def method(self):
        return b()


def one_round(o):
    a()
    b()
    c()
    d()
    e()
    f()
    g()
    o.method()


def short_round(o):
    a()
    b()
    c()


def nap_round(o):
    """short_round, then a nap of 0.2 ms: the thread blocks and wakes thousands of times a
    second, each wake-up a moment where a copy proven by the thread being asleep could tear."""
    short_round(o)
    time.sleep(0.0002)


ROUNDS = {"rich": one_round, "short": short_round, "naps": nap_round}
SHAPE = "rich"


def main(seconds):
    """Churn for `seconds` (at least one batch of rounds)."""
    o = Churner()
    clock = time.perf_counter
    end = clock() + seconds
    rounds = 0
    while True:
        for _ in range(50):
            ROUNDS[SHAPE](o)
        rounds += 50
        if clock() >= end:
            return rounds


def traced_stacks():
    """Every stack main has — each Python call under it, and each resumption of a generator or
    coroutine, with its callers — as qualnames from `main` on, as the program sees itself."""
    seen = set()

    def profile(frame, event, arg):
        if event != "call":
            return
        names = []
        while frame is not None and frame.f_code is not traced_stacks.__code__:
            names.append(frame.f_code.co_qualname)
            frame = frame.f_back
        seen.add(";".join(reversed(names)))

    sys.setprofile(profile)
    try:
        main(0)
    finally:
        sys.setprofile(None)
    return sorted(seen)


if __name__ == "__main__":
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 4.0
    threads = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    SHAPE = sys.argv[3] if len(sys.argv) > 3 else "rich"
    print(json.dumps({"stacks": traced_stacks()}), flush=True)
    others = [threading.Thread(target=main, args=(seconds,), name=f"churn-{k}") for k in range(1, threads)]
    for t in others:
        t.start()
    rounds = main(seconds)
    for t in others:
        t.join()
    print(json.dumps({"rounds": rounds}), flush=True)
