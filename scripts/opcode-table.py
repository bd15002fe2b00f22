"""Print the opcode table of the running interpreter as JSON (one line).

scripts/gen-opcodes.ts runs it on one interpreter per minor version and writes
src/symbols/opcodes-MAJOR.MINOR.ts; test/opcodes.test.ts runs it on every interpreter it finds
(native and Pyodide) and compares with the committed table. Works on CPython 3.11 - 3.15.

For each opcode byte 0..255:
- names:  the name `dis` shows for it in adaptive bytecode (dis._all_opname: dis.opname with
          the specialized instructions filled in - opcode._specialized_instructions on 3.11/3.12,
          opcode._specialized_opmap on 3.13+), null for a byte that is no instruction;
- base:   the instruction it specializes (dis.deoptmap, from opcode._specializations), for an
          INSTRUMENTED_X the X (sys.monitoring puts it in X's place), else itself; -1 if none;
- caches: the inline CACHE units that follow it in the bytecode (those of its base,
          dis._inline_cache_entries), -1 where the interpreter does not say (INSTRUMENTED_LINE
          and INSTRUMENTED_INSTRUCTION stand in for whatever instruction they replaced).
"""

import dis
import json
import sys

names = [None if n.startswith("<") else n for n in dis._all_opname[:256]]
opmap = {n: i for i, n in enumerate(names) if n is not None}
deopt = dict(dis.deoptmap)  # specialized name -> base name
entries = dis._inline_cache_entries  # 3.11/3.12: a list by opcode; 3.13+: a mapping by name


def base_of(name):
    if name in deopt:
        return deopt[name]
    if name.startswith("INSTRUMENTED_") and name[len("INSTRUMENTED_"):] in opmap:
        return name[len("INSTRUMENTED_"):]
    if name.startswith("INSTRUMENTED_"):
        return None
    return name


def caches_of(base):
    if base is None:
        return -1
    if isinstance(entries, list):
        return entries[opmap[base]]
    return entries.get(base, 0)


base = []
caches = []
for name in names:
    if name is None:
        base.append(-1)
        caches.append(0)
        continue
    b = base_of(name)
    base.append(-1 if b is None else opmap[b])
    caches.append(caches_of(b))

print(json.dumps({
    "python": "%d.%d.%d%s" % (sys.version_info[:3] + ("" if sys.version_info.releaselevel == "final" else sys.version_info.releaselevel[0] + str(sys.version_info.serial),)),
    "minor": "%d.%d" % sys.version_info[:2],
    "names": names,
    "base": base,
    "caches": caches,
}, separators=(",", ":")))
