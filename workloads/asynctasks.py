"""asynctasks: asyncio tasks awaiting tasks, for async-aware stacks (CPython 3.14+).

Usage: python3 asynctasks.py [SECONDS] [WORKERS]        (defaults 3 and 3)

The task named "main" awaits asyncio.gather of WORKERS tasks named "worker-0", "worker-1", ...;
each worker creates a task named "sub-0", "sub-1", ... and awaits it. Each sub-task runs
spin(): CPU work in a plain function (crunch) called from the coroutine, with an
`await asyncio.sleep(0)` every 2000 iterations, until SECONDS have passed since the start.

From inside spin, once per sub-task, the program prints what asyncio itself says of the running
task, as one JSON line:

  {"task": "sub-0", "graph": ["<task main>", "main", "<task worker-0>", "worker",
                              "<task sub-0>", "spin"]}

`graph` is asyncio.capture_call_graph() of the current task, outermost first: for the root task
(following the first task of each awaited_by set, as the set iterates) and down to the current
one, "<task NAME>" and then the co_qualname of each frame of its call stack. The last sub-task
also prints, at its first step, the graph of every other task, all waiting then:

  {"waiting": "worker-0", "graph": ["<task main>", "main", "<task worker-0>", "worker"]}

At the end it prints
{"done": true, "spins": N}. Needs asyncio.capture_call_graph (3.14+).
"""

import asyncio
import json
import sys
import time


def crunch(n):
    total = 0
    for i in range(n):
        total = (total * 31 + i) % 1000003
    return total


def chain(graph):
    """The call graph as a list of names, outermost first (first awaiter of each set)."""
    outer = chain(graph.awaited_by[0]) if graph.awaited_by else []
    own = [entry.frame.f_code.co_qualname for entry in reversed(graph.call_stack)]
    return outer + ["<task %s>" % graph.future.get_name()] + own


async def spin(deadline, counter, last):
    told = False
    while time.perf_counter() < deadline:
        for _ in range(20):
            crunch(100)
        counter[0] += 1
        if not told:
            task = asyncio.current_task()
            print(json.dumps({"task": task.get_name(), "graph": chain(asyncio.capture_call_graph())}), flush=True)
            if task.get_name() == last:
                # every other task waits now (the other sub-tasks in asyncio.sleep(0))
                for other in sorted(asyncio.all_tasks(), key=lambda t: t.get_name()):
                    if other is not task:
                        print(json.dumps({"waiting": other.get_name(), "graph": chain(asyncio.capture_call_graph(other))}), flush=True)
            told = True
        await asyncio.sleep(0)


async def worker(k, workers, deadline, counter):
    sub = asyncio.create_task(spin(deadline, counter, "sub-%d" % (workers - 1)), name="sub-%d" % k)
    await sub


async def main(seconds, workers):
    asyncio.current_task().set_name("main")
    deadline = time.perf_counter() + seconds
    counter = [0]
    tasks = [asyncio.create_task(worker(k, workers, deadline, counter), name="worker-%d" % k) for k in range(workers)]
    await asyncio.gather(*tasks)
    print(json.dumps({"done": True, "spins": counter[0]}), flush=True)


if __name__ == "__main__":
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
    workers = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    asyncio.run(main(seconds, workers), debug=False)
