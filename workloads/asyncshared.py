"""asyncshared: one task awaited by two others, for async-aware stacks (CPython 3.14+).

Usage: python3 asyncshared.py [SECONDS]        (default 3)

The task named "main" awaits asyncio.gather of two tasks named "waiter-0" and "waiter-1"; both
await one task, named "shared", which runs spin() (asynctasks.py's: CPU work in crunch, an
`await asyncio.sleep(0)` every 20 rounds) until SECONDS have passed since the start.

From inside spin it prints what asyncio itself says of the shared task, one line each time
the number of its awaiters changes — at its first step the waiters have not begun to await it
yet (the loop runs the shared task first), so that step's graph is the task alone; from the
second step on both await it:

  {"task": "shared", "graph": ["<task shared>", "spin"], "awaiters": {"shared": 0}}
  {"task": "shared", "graph": ["<task main>", "main", "<task waiter-0>", "waiter",
                               "<task shared>", "spin"],
   "awaiters": {"main": 0, "waiter-0": 1, "shared": 2}}

`graph` as asynctasks.py makes it (asyncio.capture_call_graph(), the first awaiter of each
task, outermost first); `awaiters`: how many tasks await each task on that path. It stops
telling once both waiters await it.
"""

import asyncio
import json
import sys
import time

from asynctasks import chain, crunch


def awaiters(graph, out):
    out[graph.future.get_name()] = len(graph.awaited_by)
    if graph.awaited_by:
        awaiters(graph.awaited_by[0], out)
    return out


async def spin(deadline):
    told = -1  # the number of awaiters last told
    while time.perf_counter() < deadline:
        for _ in range(20):
            crunch(100)
        if told < 2:
            graph = asyncio.capture_call_graph()
            if len(graph.awaited_by) != told:
                told = len(graph.awaited_by)
                print(json.dumps({"task": "shared", "graph": chain(graph), "awaiters": awaiters(graph, {})}), flush=True)
        await asyncio.sleep(0)


async def waiter(shared):
    await shared


async def main(seconds):
    asyncio.current_task().set_name("main")
    shared = asyncio.create_task(spin(time.perf_counter() + seconds), name="shared")
    await asyncio.gather(*(asyncio.create_task(waiter(shared), name="waiter-%d" % k) for k in range(2)))


if __name__ == "__main__":
    asyncio.run(main(float(sys.argv[1]) if len(sys.argv) > 1 else 3.0))
