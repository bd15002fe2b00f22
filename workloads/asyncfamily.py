"""asyncfamily: a parent running asyncio tasks that starts two Python children, for
record --subprocesses --async-aware (CPython 3.14+).

Usage: python3 asyncfamily.py SECONDS CHILD_OUT [PYTHON]
    (PYTHON: the interpreter the children run, default sys.executable)

    parent (this process)        runs asynctasks.py for SECONDS (its JSON lines on standard
                                 output)
    asyncio child                a new Python (subprocess.Popen: fork and exec) running
                                 asynctasks.py for SECONDS, its JSON lines into the file
                                 CHILD_OUT; it imports asyncio only once it has started
    plain child                  a new Python that never imports asyncio: it sleeps a
                                 millisecond at a time for SECONDS (time.sleep in a loop at
                                 module level), then exits — as long as the others, so that
                                 a recorder held off the CPU still finds it running

First of all the parent prints {"children": {"asyncio": PID, "plain": PID}}; at the end it
waits for both children.
"""

import json
import os
import runpy
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TASKS = os.path.join(HERE, "asynctasks.py")
PLAIN = "import sys, time\nend = time.monotonic() + float(sys.argv[1])\nwhile time.monotonic() < end:\n    time.sleep(0.001)\n"


def main(seconds, child_out, python):
    with open(child_out, "w") as out:
        child = subprocess.Popen([python, TASKS, seconds], stdout=out)
    plain = subprocess.Popen([python, "-c", PLAIN, seconds])
    print(json.dumps({"children": {"asyncio": child.pid, "plain": plain.pid}}), flush=True)
    sys.argv = [TASKS, seconds]
    runpy.run_path(TASKS, run_name="__main__")
    child.wait()
    plain.wait()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else sys.executable)
