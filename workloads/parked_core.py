# A program parked at known stacks, for post-mortem tests (test/core-dump.test.ts): threads,
# a running generator, a running coroutine, deep recursion and non-ASCII names, each frame with
# arguments of the types `dump --locals` decodes. Each thread prints one JSON line where it
# parks: its native id, its own stack (traceback.extract_stack) and the repr() of each of its
# frames' arguments, outermost first (said on the line it parks on, so the lines agree). The program then waits until its stdin closes (or it is
# killed, for a core). The test waits for all five lines, in whatever order they come.
import json
import sys
import threading
import traceback

lock = threading.Lock()
release = threading.Event()


def said(kind):
    frame = sys._getframe(1)
    frames = []
    f = frame
    while f is not None:
        code = f.f_code
        n = code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & 4) + bool(code.co_flags & 8)
        frames.append({name: repr(f.f_locals[name]) for name in code.co_varnames[:n] if name in f.f_locals})
        f = f.f_back
    frames.reverse()
    stack = [[s.name, s.lineno] for s in traceback.extract_stack(frame)]
    with lock:
        print(json.dumps({"thread": threading.current_thread().name, "native_id": threading.get_native_id(), "kind": kind, "stack": stack, "args": frames}), flush=True)


def park_values(i, big, neg, f, flag, nothing, text, raw, pair, items, mapping, *rest, key=None, **more):
    said("values"); release.wait()


def values():
    park_values(7, 2**100 + 3, -12345678901234567890, 2.5e-07, True, None, "naïve ☃ text", b"\x00ab'\xff",
                (1, "two", 3.0), [None, False, -1], {"a": 1, "b": [2]}, "r1", key="k", extra=1.5)


def generator(limit):
    for i in range(limit):
        if i == 2:
            said("generator"); release.wait()
        yield i


def drive_generator():
    for _ in generator(3):
        pass


async def coroutine(delay, label):
    said("coroutine"); release.wait()
    return label


def drive_coroutine():
    c = coroutine(0.5, "ünïcode")
    try:
        c.send(None)
    except StopIteration:
        pass


def größe(tiefe, wert):
    if tiefe > 0:
        return größe(tiefe - 1, wert + 1)
    said("unicode"); release.wait()


def 函数():
    größe(3, 0)


def recurse(depth, total):
    if depth > 0:
        return recurse(depth - 1, total + depth)
    said("recursion"); sys.stdin.read()
    release.set()


threads = [threading.Thread(target=t, name=t.__name__) for t in (values, drive_generator, drive_coroutine, 函数)]
for t in threads:
    t.start()
recurse(120, 0)
