# Threads parked where C code and Python code call each other, for native-frame tests: each
# thread prints its own stack (traceback.extract_stack) as a JSON line, then blocks, so that a
# stopped copy of the process can be compared with the program's word and with gdb's `bt`.
#   sorter     sorted(key=…): the key function blocks (C list sort → Python key → C wait)
#   qsorter    ctypes calling libc qsort, whose comparator (Python) blocks
#   sleeper    time.sleep under two Python functions
#   compressor zlib.compress of large data, in a loop (a C leaf doing long work)
#   hasher     hashlib.sha256 of large data, in a loop
# The main thread waits for stdin to close, then the program exits. A thread that parks prints
# its stack on the line where it parks: the stack printed is the stack it waits in.
import ctypes
import ctypes.util
import hashlib
import json
import sys
import threading
import time
import traceback
import zlib

release = threading.Event()
lock = threading.Lock()


def say(kind, stack):
    with lock:
        print(json.dumps({
            "thread": threading.current_thread().name,
            "native_id": threading.get_native_id(),
            "kind": kind,
            "stack": [[f.name, f.lineno] for f in stack],
        }), flush=True)


def park_key(x):
    if x == 2:
        say("parked", traceback.extract_stack()); release.wait()  # noqa: E702 (one line: the stack printed is the stack parked)
    return x


def sorter():
    return sorted([3, 1, 2], key=park_key)


CMP = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int))


def compare(a, b):
    if not release.is_set():
        say("parked", traceback.extract_stack()); release.wait()  # noqa: E702
    return a[0] - b[0]


def qsorter():
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    values = (ctypes.c_int * 4)(4, 2, 3, 1)
    libc.qsort(values, len(values), ctypes.sizeof(ctypes.c_int), CMP(compare))


def nap():
    say("parked", traceback.extract_stack()); time.sleep(3600)  # noqa: E702


def sleeper():
    nap()


DATA = bytes(range(256)) * (64 * 1024) + bytes(4 << 20)


def say_once(stack):
    if not getattr(threading.current_thread(), "said", False):
        threading.current_thread().said = True
        say("running", stack)


def compress_loop():
    while not release.is_set(): say_once(traceback.extract_stack()); zlib.compress(DATA, 9)  # noqa: E701,E702


def hash_loop():
    while not release.is_set(): say_once(traceback.extract_stack()); hashlib.sha256(DATA).digest()  # noqa: E701,E702


threads = [
    threading.Thread(target=t, name=t.__name__, daemon=True)
    for t in (sorter, qsorter, sleeper, compress_loop, hash_loop)
]
for t in threads:
    t.start()
# (the main thread too: its stack printed on the line where it waits)
say("parked", traceback.extract_stack()); sys.stdin.read()  # noqa: E702
release.set()
