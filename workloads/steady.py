"""steady: a Python program whose frames live much longer than a copy of its stack takes.

Usage: python3 steady.py [SECONDS]        (default 4)

It loops calling step(), which calls parse() and render() — each a pure-Python loop lasting
about a millisecond — so a sampled stack is almost never torn. Its profile is the reference
against which the bias of rejecting torn copies is measured: the per-function totals of a
recording that copies while the program runs must match those of a recording that stops the
program for every copy.

Every stack it can have, as qualnames from the outermost frame:

    <module>
    <module> → main
    <module> → main → step
    <module> → main → step → parse
    <module> → main → step → render
    <module> → main → step → render → layout
"""

import sys
import time


def parse(n):
    x = 0
    for i in range(n):
        x ^= i * 7
    return x


def layout(n):
    x = 0
    for i in range(n):
        x += i & 3
    return x


def render(n):
    x = 0
    for i in range(n):
        x += i
    return x + layout(n)


def step():
    return parse(30000) + render(15000)


def main(seconds):
    clock = time.perf_counter
    end = clock() + seconds
    steps = 0
    while clock() < end:
        step()
        steps += 1
    print('{"steps": %d}' % steps)
    sys.stdout.flush()


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 4.0)
