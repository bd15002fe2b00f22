# Half of its time (more or less) in a C extension, the rest in Python, for native-frame tests:
# in_c calls cwork.crunch (its C functions: crunch → mix_outer → mix_inner), in_python loops in
# Python. It measures the share of its own time spent in crunch, and how many rounds (one of
# each) it made per second, and prints them as JSON at the end.
#   share.py SECONDS
import json
import sys
import time

import cwork


def in_c():
    cwork.crunch(400)


def in_python():
    x = 0
    for i in range(20000):
        x += i * i
    return x


def main(seconds):
    c = total = 0.0
    rounds = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        t0 = time.perf_counter()
        in_c()
        t1 = time.perf_counter()
        in_python()
        t2 = time.perf_counter()
        c += t1 - t0
        total += t2 - t0
        rounds += 1
    print(json.dumps({"c_share": c / total, "rounds_per_second": rounds / total}), flush=True)


main(float(sys.argv[1]))
