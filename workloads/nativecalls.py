# Python called back from C: sorted() calling its key, map() calling its function, the _sre
# module (re.sub) calling a replacement function; and plain Python calls beside them (main ->
# work -> sorter ...). Runs for argv[1] seconds (default 3), then prints one JSON line: for
# each callback, its stack as traceback.extract_stack() gives it from inside the callback
# (outermost first), so a profile's stacks can be checked against the program's own view.
import json
import re
import sys
import time
import traceback

DATA = list(range(1500, 0, -1))
TEXT = " ".join(map(str, DATA[:400]))
seen = {}


def burn():
    s = 0
    for i in range(40):
        s += i * i
    return s


def note(name):
    if name not in seen:
        seen[name] = [f.name for f in traceback.extract_stack()[:-1]]


def key(x):
    note("key")
    burn()
    return x


def double(x):
    note("double")
    burn()
    return x * 2


def repl(m):
    note("repl")
    burn()
    return m.group(0)


def sorter():
    return sorted(DATA, key=key)


def mapper():
    return list(map(double, DATA))


def subber():
    return re.sub(r"\d+", repl, TEXT)


def plain():
    # Python calling Python only: no C between
    s = 0
    for _ in range(200):
        s += burn()
    return s


def work(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        sorter()
        mapper()
        subber()
        plain()


def main():
    work(float(sys.argv[1]) if len(sys.argv) > 1 else 3.0)
    print(json.dumps(seen), flush=True)


main()
