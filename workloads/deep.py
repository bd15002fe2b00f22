"""deep: a steady program 32 frames deep, for recording-speed benchmarks.

Usage: python3 deep.py [SECONDS [DEPTH]]        (defaults 4, 32)

main() recurses through descend() to DEPTH frames, then loops calling work(), a pure-Python
loop that lasts about 30 microseconds, until the time is up. The stack below the innermost
frame never changes; the innermost frame returns and is called again from the same place every
~30 µs. At the end it prints {"rounds": N, "late": R} (N: calls of work(); R: their rate per second
in the second half of the run, once a recorder that started with it is under way).

Every stack it can have, as qualnames from the outermost frame:

    <module> → main → descend × k (1 ≤ k ≤ DEPTH) [→ spin → work]
"""

import sys
import time


def work():
    x = 0
    for i in range(2200):
        x += i
    return x


def spin(end, half):
    clock = time.perf_counter
    rounds = 0
    late = None
    while clock() < end:
        work()
        rounds += 1
        if late is None and clock() >= half:
            late = (rounds, clock())
    now = clock()
    return rounds, (rounds - late[0]) / (now - late[1]) if late and now > late[1] else 0.0


def descend(n, end, half):
    if n <= 1:
        return spin(end, half)
    return descend(n - 1, end, half)


def main(seconds, depth):
    start = time.perf_counter()
    rounds, late = descend(depth, start + seconds, start + seconds / 2)
    print('{"rounds": %d, "late": %.3f}' % (rounds, late))
    sys.stdout.flush()


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 4.0, int(sys.argv[2]) if len(sys.argv) > 2 else 32)
