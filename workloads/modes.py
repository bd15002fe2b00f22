"""modes: threads that differ in being on a CPU, holding the GIL and handling an exception.

Usage: python3 modes.py [SECONDS]
    (default 3 s; a float is fine)

Four threads run for SECONDS:

    spinner   a pure-Python loop: on a CPU and holding the GIL nearly all the time. Every other
              unit of its loop runs inside an `except` block (handled()), the others outside
              it (plain()): about half its time it is handling an exception.
    hasher    hashlib.sha256 over 32 MB at a time: on a CPU, but the GIL released while it
              hashes (CPython drops it for data of 2 KB or more); it takes the GIL only
              between two digests.
    napper    time.sleep(0.05) in a loop: off the CPU, GIL released.
    main      joins the others: off the CPU, GIL released.

At the end it prints one JSON line on standard output (seconds), each thread's own truth:

    {"wall": <whole run>, "spinner_cpu": <time.thread_time() of spinner>,
     "hasher_cpu": <... of hasher>, "napper_cpu": <... of napper>,
     "main_cpu": <... of the main thread>, "spinner_handling": <time inside handled(), perf_counter>,
     "spinner_total": <spinner's run>}

A profiler's sampling modes compare with these: cpu mode should give spinner and hasher most of
their wall-clock samples and napper and main almost none; gil mode spinner most, hasher few,
napper and main none; exception mode spinner about spinner_handling / spinner_total of its
samples and the others none.
"""

import hashlib
import json
import os
import sys
import threading
import time

SECONDS = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
UNIT = 20000
DATA = b"\x5a" * (32 << 20)

result = {}
stop = threading.Event()


def work(n):
    x = 0
    for i in range(n):
        x += i * i
    return x


def handled():
    return work(UNIT)


def plain():
    return work(UNIT)


def spinner():
    start = time.perf_counter()
    handling = 0.0
    while not stop.is_set():
        try:
            raise ValueError("the spinner handles this exception for half its time")
        except ValueError:
            t = time.perf_counter()
            handled()
            handling += time.perf_counter() - t
        plain()
    result["spinner_handling"] = handling
    result["spinner_total"] = time.perf_counter() - start
    result["spinner_cpu"] = time.thread_time()


def hasher():
    while not stop.is_set():
        hashlib.sha256(DATA).digest()
    result["hasher_cpu"] = time.thread_time()


def napper():
    while not stop.is_set():
        time.sleep(0.05)
    result["napper_cpu"] = time.thread_time()


def main():
    start = time.perf_counter()
    threads = [threading.Thread(target=f, name=f.__name__) for f in (spinner, hasher, napper)]
    for t in threads:
        t.start()
    stop.wait(SECONDS)
    stop.set()
    for t in threads:
        t.join()
    result["wall"] = time.perf_counter() - start
    result["main_cpu"] = time.thread_time()
    os.write(1, (json.dumps(result) + "\n").encode())


if __name__ == "__main__":
    main()
