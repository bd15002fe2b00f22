"""subprocs: a Python program that starts two Python children, for record --subprocesses.

Usage: python3 subprocs.py [SECONDS [PYTHON]]
    (default 3 s; PYTHON: the interpreter the exec'd child runs, default sys.executable)

Three processes spin for about SECONDS each, each in a function of its own name (the loop is
in that function: it is the one with the most samples by self in its process's profile). Each
spins a millisecond and sleeps one (time.sleep, in the same function) in turn: three of them
then need one and a half cores, and leave the recorder some CPU on a 2-core machine.

    parent (this process)                     parent_spin()
    exec'd child (subprocess.Popen of PYTHON  popen_child_spin()
      running this file with "--popen-child")
    forked child (multiprocessing, 'fork'     forked_child_spin()
      start method: a copy of this process,
      never exec'd)

Each prints one JSON line on standard output when it starts, {"role": ROLE, "pid": PID}, and
the parent prints {"role": "done", ...} at the end, after both children have exited. The
children start before the parent spins, and the parent spins until both have exited (at least
SECONDS): it never waits in a way that would take its hottest function's place, however long
the children take to start on a busy machine.
"""

import json
import multiprocessing
import os
import subprocess
import sys
import time


def say(role, **more):
    # one write of a whole line: the three processes share standard output, and a line written
    # in two parts could be cut by another process's
    os.write(1, (json.dumps({"role": role, "pid": os.getpid(), **more}) + "\n").encode())


def parent_spin(seconds, done):
    end = time.monotonic() + seconds
    n = 0
    # SECONDS at least, and until the children are done (checked every 10 ms)
    check = 0.0
    while True:
        busy = time.monotonic() + 0.001
        while time.monotonic() < busy:
            n += 1
        time.sleep(0.001)
        now = time.monotonic()
        if now >= end and now >= check:
            if done():
                return n
            check = now + 0.01


def popen_child_spin(seconds):
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        busy = time.monotonic() + 0.001
        while time.monotonic() < busy:
            n += 1
        time.sleep(0.001)
    return n


def forked_child_spin(seconds):
    say("forked")
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        busy = time.monotonic() + 0.001
        while time.monotonic() < busy:
            n += 1
        time.sleep(0.001)
    return n


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--popen-child":
        say("popen")
        popen_child_spin(float(sys.argv[2]))
        return
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
    python = sys.argv[2] if len(sys.argv) > 2 else sys.executable
    say("parent")
    popen = subprocess.Popen([python, os.path.abspath(__file__), "--popen-child", str(seconds)])
    forked = multiprocessing.get_context("fork").Process(target=forked_child_spin, args=(seconds,))
    forked.start()
    parent_spin(seconds, lambda: popen.poll() is not None and not forked.is_alive())
    popen.wait()
    forked.join()
    say("done", popen=popen.returncode, forked=forked.exitcode)


if __name__ == "__main__":
    main()
