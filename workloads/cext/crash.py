# Crashes in C under a few Python frames (test/core-dump.test.ts): prints its own stack, then
# calls pyunwind_crash.deref(0), which dereferences NULL (workloads/cext/crash.c).
import json
import traceback

import pyunwind_crash


def fall(depth):
    if depth:
        return fall(depth - 1)
    print(json.dumps([[s.name, s.lineno] for s in traceback.extract_stack()]), flush=True); pyunwind_crash.deref(0)


fall(3)
