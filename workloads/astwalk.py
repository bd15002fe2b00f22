"""astwalk: parse, walk and unparse standard-library sources; pickle with the pure-Python pickler.

Usage: python3 astwalk.py [SECONDS]        (default 4; a float is fine)

Exercises the ast and pickle modules, mostly pure Python with one big C call per module
(ast.parse). At start it reads the sources of ten standard-library modules (located with
importlib.util.find_spec, so they are read, not imported): json.decoder, json.encoder, difflib,
fractions, statistics, textwrap, string, shlex, configparser, argparse. Each round then:

  - ast.parse()s the next module's source (the C parser; its time shows in ast.parse);
  - walks the tree with an ast.NodeVisitor subclass (Census) counting node kinds, names and
    attributes (NodeVisitor.visit/generic_visit, ast.iter_fields: pure Python), and again with
    ast.walk counting the functions and classes that have a docstring;
  - ast.unparse()s a slice of the tree's top-level statements (the pure-Python _Unparser;
    moved to _ast_unparse in 3.15);
  - pickles generated records (dicts, lists, tuples, strings, floats, big ints and instances
    of a small class) with pickle._Pickler and loads them back with pickle._Unpickler (the
    pure-Python implementations, not the C _pickle) over io.BytesIO, and checks the copy
    equals the original.

The data are generated from random.Random(seed). No files are written. At the end it prints one
JSON line {"rounds": N, "nodes": K, "late": R} (K: AST nodes visited) and flushes
(R: rounds a second in the second half of the run).

Runs unchanged on CPython 3.11-3.15 (each interpreter reads its own standard library).
"""

import ast
import importlib.util
import io
import pickle
import random
import sys
import time

MODULES = ("json.decoder", "json.encoder", "difflib", "fractions", "statistics", "textwrap",
           "string", "shlex", "configparser", "argparse")

# top-level statements unparsed per round (the first ones, then a window moving with the round)
UNPARSE_STATEMENTS = 40


def read_sources():
    sources = []
    for name in MODULES:
        path = importlib.util.find_spec(name).origin
        with open(path, encoding="utf-8") as f:
            sources.append((name, f.read()))
    return sources


class Census(ast.NodeVisitor):
    """Counts node kinds, the names loaded and stored, attributes and calls."""

    def __init__(self):
        self.kinds = {}
        self.names = {}
        self.attrs = {}
        self.calls = 0
        self.nodes = 0

    def visit(self, node):
        self.nodes += 1
        kind = type(node).__name__
        self.kinds[kind] = self.kinds.get(kind, 0) + 1
        return super().visit(node)

    def visit_Name(self, node):
        key = (node.id, type(node.ctx).__name__)
        self.names[key] = self.names.get(key, 0) + 1

    def visit_Attribute(self, node):
        self.attrs[node.attr] = self.attrs.get(node.attr, 0) + 1
        self.generic_visit(node)

    def visit_Call(self, node):
        self.calls += 1
        self.generic_visit(node)


def walk_module(name, source, rnd):
    tree = ast.parse(source, filename=name)
    census = Census()
    census.visit(tree)
    functions = 0
    documented = 0
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            functions += 1
            if ast.get_docstring(node):
                documented += 1
    body = tree.body
    start = (rnd * 7) % max(1, len(body) - UNPARSE_STATEMENTS)
    part = ast.Module(body=body[start:start + UNPARSE_STATEMENTS], type_ignores=[])
    text = ast.unparse(part)
    return census.nodes, (len(census.kinds) + len(census.names) + census.calls + functions
                          + documented + len(text))


class Record:
    def __init__(self, key, tags, weight, parent=None):
        self.key = key
        self.tags = tags
        self.weight = weight
        self.parent = parent

    def __eq__(self, other):
        return (type(other) is Record and self.key == other.key and self.tags == other.tags
                and self.weight == other.weight and self.parent == other.parent)


WORDS = "red green blue cyan magenta yellow black white gray orange purple brown".split()


def make_value(rng, depth):
    r = rng.random()
    if depth <= 0 or r < 0.3:
        k = rng.randrange(6)
        if k == 0:
            return rng.choice(WORDS) + str(rng.randrange(1000))
        if k == 1:
            return rng.randrange(-10 ** 6, 10 ** 6)
        if k == 2:
            return rng.random() * 100
        if k == 3:
            return rng.getrandbits(100)
        if k == 4:
            return None
        return rng.random() < 0.5
    if r < 0.5:
        return [make_value(rng, depth - 1) for _ in range(rng.randrange(6))]
    if r < 0.6:
        return tuple(make_value(rng, depth - 1) for _ in range(rng.randrange(4)))
    if r < 0.8:
        return {rng.choice(WORDS): make_value(rng, depth - 1) for _ in range(rng.randrange(5))}
    return Record(rng.randrange(10 ** 5), [rng.choice(WORDS) for _ in range(3)],
                  rng.random(), make_value(rng, depth - 2) if rng.random() < 0.3 else None)


def pickle_round(seed):
    rng = random.Random(seed)
    data = [make_value(rng, 4) for _ in range(60)]
    shared = data[:5]
    obj = {"data": data, "shared": shared, "again": shared}   # shared references use the memo
    buf = io.BytesIO()
    pickle._Pickler(buf, protocol=4).dump(obj)
    raw = buf.getvalue()
    copy = pickle._Unpickler(io.BytesIO(raw)).load()
    if copy != obj or copy["shared"] is not copy["again"]:
        raise AssertionError("pickle round trip differs (seed %d)" % seed)
    return len(raw)


def main(seconds):
    sources = read_sources()
    clock = time.perf_counter
    end = clock() + seconds
    # (the rate of rounds in the second half: what a recorder started with the program costs it
    # once started, apart from its start)
    half = end - seconds / 2
    late = None
    rounds = 0
    nodes = 0
    check = 0
    while clock() < end:
        name, source = sources[rounds % len(sources)]
        n, c = walk_module(name, source, rounds // len(sources))
        nodes += n
        check += c
        for k in range(3):
            check += pickle_round(rounds * 3 + k)
        rounds += 1
        if late is None and clock() >= half:
            late = (rounds, clock())
    print('{"rounds": %d, "nodes": %d, "late": %.3f}' % (rounds, nodes, (rounds - late[0]) / (clock() - late[1]) if late and clock() > late[1] else 0.0))
    sys.stdout.flush()


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 4.0)
