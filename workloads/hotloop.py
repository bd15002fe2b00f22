"""hotloop: one function with one hot loop, and its bytecode as the interpreter runs it.

Usage: python3 hotloop.py [SECONDS]
    (default 3 s; a float is fine)

`hot(n, k)` adds up i * k over a range: nearly all of the program's time is in its loop, on
its `for` line and the line of its body. After a warm-up (a few calls: long enough for the
interpreter to quicken and specialize the loop), the program prints, as one JSON line on
standard output, the instructions of `hot` as `dis` shows them in adaptive bytecode
(dis.get_instructions(hot, adaptive=True): the specialized forms the interpreter put in place),
then calls `hot` until SECONDS have passed and prints the instructions again, as a second line:

    {"when": "warm", "file": ..., "loop": [<for line>, <body line>],
     "instructions": [{"offset": 30, "opname": "FOR_ITER_RANGE", "line": 7}, ...]}
    {"when": "end", ...}

A profiler that names instructions should find the hottest ones of `hot` among those `dis`
shows for the loop's lines, specialized where `dis` shows them specialized.
"""

import dis
import json
import sys
import time

SECONDS = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0


def hot(n, k):
    total = 0
    for i in range(n):  # the loop's first line
        total += i * k  # its body
    return total


LOOP = [hot.__code__.co_firstlineno + 2, hot.__code__.co_firstlineno + 3]


def instructions(when):
    out = []
    line = None
    for ins in dis.get_instructions(hot, adaptive=True):
        # (3.11/3.12 give starts_line only where a line starts; 3.13+ give every line)
        if getattr(ins, "positions", None) is not None and ins.positions.lineno is not None:
            line = ins.positions.lineno
        elif ins.starts_line is not None and ins.starts_line is not False and ins.starts_line is not True:
            line = ins.starts_line
        out.append({"offset": ins.offset, "opname": ins.opname, "line": line})
    return {"when": when, "file": __file__, "loop": LOOP, "instructions": out}


def main():
    for _ in range(5):
        hot(20_000, 3)
    print(json.dumps(instructions("warm")), flush=True)
    until = time.perf_counter() + SECONDS
    while time.perf_counter() < until:
        hot(200_000, 3)
    print(json.dumps(instructions("end")), flush=True)


if __name__ == "__main__":
    main()
