"""gcchurn: a program that makes cyclic garbage all the time, and measures its collections.

Usage: python3 gcchurn.py [SECONDS]
    (default 3 s; a float is fine)

It builds small reference cycles (two objects and a dict pointing at each other) in a loop,
so the cyclic garbage collector runs again and again in this one thread. gc.callbacks tells
the program when each collection starts and stops; it adds up that time with
time.perf_counter() and prints its truth at the end as one JSON line on standard output:

    {"gc": <seconds inside collections>, "total": <whole run of main()>, "collections": <count>}

A profiler that shows the collector as a frame (<GC>) should give it about gc/total of the
samples.
"""

import gc
import json
import os
import sys
import time

SECONDS = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0

in_gc = 0.0
collections = 0
_started = 0.0


def on_gc(phase, info):
    global in_gc, collections, _started
    if phase == "start":
        _started = time.perf_counter()
    else:
        in_gc += time.perf_counter() - _started
        collections += 1


class Node:
    def __init__(self):
        self.other = None
        self.payload = {"self": self}


def make_cycles(n):
    for _ in range(n):
        a = Node()
        b = Node()
        a.other = b
        b.other = a


def main():
    gc.callbacks.append(on_gc)
    start = time.perf_counter()
    until = start + SECONDS
    while time.perf_counter() < until:
        make_cycles(1000)
    total = time.perf_counter() - start
    gc.callbacks.remove(on_gc)
    os.write(1, (json.dumps({"gc": in_gc, "total": total, "collections": collections}) + "\n").encode())


if __name__ == "__main__":
    main()
