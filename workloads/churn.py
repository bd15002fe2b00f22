"""churn: a Python program that calls and returns at a very high rate through functions whose
possible stacks are known in advance — the oracle for the consistency of copied stacks.

Usage: python3 churn.py [SECONDS]        (default 4)

Every stack the program can have, as qualnames from the outermost frame (a stack is any path
from the root of this tree to one of its nodes; nothing else runs Python code):

    <module>
    └── main
        └── a
            ├── b
            │   └── Churner.method           a method
            │       └── gen                  a generator driven from C: sum(gen(...))
            │           └── leaf
            └── c
                └── leaf

So `gen` is only ever reached through `b` and `Churner.method` — a sampled stack such as
`main → a → c → gen` or `main → a → gen` cannot happen: a profiler that reports one has
glued frames from different moments together (a torn copy).

Each call lives for well under a microsecond to a few microseconds: much less than a copy of
the stack takes, which is the point.
"""

import sys
import time


def leaf(x):
    return x + 1


def gen(n):
    for i in range(n):
        yield leaf(i)


class Churner:
    def method(self, n):
        return sum(gen(n))


def b(o):
    return o.method(3)


def c():
    return leaf(2)


def a(o):
    b(o)
    c()


def main(seconds):
    o = Churner()
    clock = time.perf_counter
    end = clock() + seconds
    rounds = 0
    while clock() < end:
        for _ in range(100):
            a(o)
        rounds += 100
    print('{"rounds": %d}' % rounds)
    sys.stdout.flush()


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 4.0)
