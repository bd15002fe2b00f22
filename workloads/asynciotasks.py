"""asynciotasks: many asyncio tasks doing pure-Python work on one event loop.

Usage: python3 asynciotasks.py [SECONDS]        (default 4; a float is fine)

Exercises asyncio: coroutines and tasks, all on the main thread, driven by one event loop
(asyncio.run). Each round runs, with asyncio.gather, one producer, three consumers and two
compute tasks:

  - the producer generates small programs (assignments of arithmetic expressions over
    variables) from random.Random(seed) and puts them into an asyncio.Queue(maxsize=4);
  - each consumer takes programs from the queue, tokenizes them (tokenize), parses them with a
    Pratt parser (Parser.expression, Parser.prefix) and evaluates the trees (evaluate), all
    hand-written here, and yields to the loop between statements;
  - a sorting task sorts generated lists by hand with a merge sort (merge_sort, merge) and an
    insertion sort of short runs (insertion_sort), yielding between lists;
  - a sieve task finds primes with a segmented sieve of Eratosthenes (sieve_segment), yielding
    between segments.

Every task yields with `await asyncio.sleep(0)` every fraction of a millisecond, so the
profile also has the event loop's own frames (BaseEventLoop._run_once, Handle._run, the
Task steps, Queue.get/put). At the end it prints one JSON line {"rounds": N, "check": C,
"late": R} and flushes (C: a checksum of the results; R: rounds a second in the second half of
the run). No files are written.

Runs unchanged on CPython 3.11-3.15.
"""

import asyncio
import random
import sys
import time

VARS = "abcdefgh"
MOD = 1000003
CONSUMERS = 3


# ---- a tiny language: tokenizer, Pratt parser, evaluator -------------------------------------

def tokenize(text):
    tokens = []
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == " ":
            i += 1
        elif ch.isdigit():
            j = i + 1
            while j < n and text[j].isdigit():
                j += 1
            tokens.append(("num", int(text[i:j])))
            i = j
        elif ch.isalpha():
            j = i + 1
            while j < n and text[j].isalnum():
                j += 1
            tokens.append(("name", text[i:j]))
            i = j
        elif ch in "+-*/%()=":
            tokens.append(("op", ch))
            i += 1
        else:
            raise SyntaxError("bad character %r" % ch)
    tokens.append(("end", None))
    return tokens


BINDING = {"+": 10, "-": 10, "*": 20, "/": 20, "%": 20}


class Parser:
    def __init__(self, tokens):
        self.tokens = tokens
        self.pos = 0

    def next(self):
        tok = self.tokens[self.pos]
        self.pos += 1
        return tok

    def peek(self):
        return self.tokens[self.pos]

    def prefix(self):
        kind, value = self.next()
        if kind == "num":
            return ("num", value)
        if kind == "name":
            return ("var", value)
        if value == "-":
            return ("neg", self.expression(30))
        if value == "(":
            node = self.expression(0)
            if self.next() != ("op", ")"):
                raise SyntaxError("expected )")
            return node
        raise SyntaxError("unexpected %r" % (value,))

    def expression(self, rbp):
        left = self.prefix()
        while True:
            kind, value = self.peek()
            if kind != "op" or value not in BINDING or BINDING[value] <= rbp:
                return left
            self.pos += 1
            left = (value, left, self.expression(BINDING[value]))

    def statement(self):
        kind, name = self.next()
        if kind != "name" or self.next() != ("op", "="):
            raise SyntaxError("expected assignment")
        tree = self.expression(0)
        if self.peek()[0] != "end":
            raise SyntaxError("trailing tokens")
        return name, tree


def evaluate(node, env):
    op = node[0]
    if op == "num":
        return node[1]
    if op == "var":
        return env.get(node[1], 1)
    if op == "neg":
        return -evaluate(node[1], env) % MOD
    a = evaluate(node[1], env)
    b = evaluate(node[2], env)
    if op == "+":
        return (a + b) % MOD
    if op == "-":
        return (a - b) % MOD
    if op == "*":
        return a * b % MOD
    if op == "/":
        return a // b if b else a
    return a % b if b else a


def gen_expr(rng, depth):
    r = rng.random()
    if depth <= 0 or r < 0.25:
        if rng.random() < 0.5:
            return str(rng.randrange(1, 1000))
        return rng.choice(VARS)
    if r < 0.32:
        return "-" + gen_expr(rng, depth - 1)
    if r < 0.45:
        return "(" + gen_expr(rng, depth - 1) + ")"
    return gen_expr(rng, depth - 1) + " " + rng.choice("+-*/%") + " " + gen_expr(rng, depth - 1)


def gen_program(rng):
    return ["%s = %s" % (rng.choice(VARS), gen_expr(rng, 6)) for _ in range(rng.randrange(4, 10))]


# ---- sorting and sieving by hand -----------------------------------------------------------

def insertion_sort(xs, lo, hi):
    for i in range(lo + 1, hi):
        x = xs[i]
        j = i - 1
        while j >= lo and xs[j] > x:
            xs[j + 1] = xs[j]
            j -= 1
        xs[j + 1] = x


def merge(a, b):
    out = []
    i = j = 0
    na, nb = len(a), len(b)
    while i < na and j < nb:
        if b[j] < a[i]:
            out.append(b[j])
            j += 1
        else:
            out.append(a[i])
            i += 1
    out.extend(a[i:])
    out.extend(b[j:])
    return out


def merge_sort(xs):
    # bottom-up: insertion-sort runs of 16, then merge pairs of runs
    xs = list(xs)
    run = 16
    for lo in range(0, len(xs), run):
        insertion_sort(xs, lo, min(lo + run, len(xs)))
    runs = [xs[lo:lo + run] for lo in range(0, len(xs), run)]
    while len(runs) > 1:
        runs = [merge(runs[k], runs[k + 1]) if k + 1 < len(runs) else runs[k]
                for k in range(0, len(runs), 2)]
    return runs[0] if runs else []


def small_primes(limit):
    flags = bytearray([1]) * (limit + 1)
    flags[0:2] = b"\x00\x00"
    for p in range(2, int(limit ** 0.5) + 1):
        if flags[p]:
            for q in range(p * p, limit + 1, p):
                flags[q] = 0
    return [p for p in range(limit + 1) if flags[p]]


def sieve_segment(lo, hi, base):
    flags = [True] * (hi - lo)
    for p in base:
        if p * p >= hi:
            break
        start = max(p * p, (lo + p - 1) // p * p)
        for q in range(start, hi, p):
            flags[q - lo] = False
    count = 0
    last = 0
    for k in range(hi - lo):
        if flags[k]:
            count += 1
            last = lo + k
    return count, last


# ---- tasks ----------------------------------------------------------------------------------

async def producer(queue, rng, programs):
    for _ in range(programs):
        await queue.put(gen_program(rng))
        await asyncio.sleep(0)
    for _ in range(CONSUMERS):
        await queue.put(None)


async def consumer(queue):
    check = 0
    while True:
        program = await queue.get()
        if program is None:
            return check
        env = {}
        for line in program:
            name, tree = Parser(tokenize(line)).statement()
            env[name] = evaluate(tree, env)
            await asyncio.sleep(0)
        for name in sorted(env):
            check = (check * 31 + env[name]) % MOD


async def sorter(rng, lists):
    check = 0
    for _ in range(lists):
        xs = [rng.randrange(100000) for _ in range(300)]
        ys = merge_sort(xs)
        check = (check + ys[0] + ys[len(ys) // 2] * 7 + ys[-1]) % MOD
        await asyncio.sleep(0)
    return check


async def siever(lo, segments, width):
    base = small_primes(int((lo + segments * width) ** 0.5) + 1)
    total = 0
    for k in range(segments):
        a = lo + k * width
        count, last = sieve_segment(a, a + width, base)
        total += count + last % 97
        await asyncio.sleep(0)
    return total


async def one_round(seed):
    rng = random.Random(seed)
    queue = asyncio.Queue(maxsize=4)
    results = await asyncio.gather(
        producer(queue, rng, 32),
        *[consumer(queue) for _ in range(CONSUMERS)],
        sorter(random.Random(seed + 1), 12),
        siever(10 ** 6 + seed * 18000, 6, 3000),
    )
    check = 0
    for r in results[1:]:
        check = (check * 131 + r) % MOD
    return check


async def run(seconds):
    clock = time.perf_counter
    end = clock() + seconds
    # (the rate of rounds in the second half: what a recorder started with the program costs it
    # once started, apart from its start)
    half = end - seconds / 2
    late = None
    rounds = 0
    check = 0
    while clock() < end:
        check ^= await one_round(rounds)
        rounds += 1
        if late is None and clock() >= half:
            late = (rounds, clock())
    return rounds, check, (rounds - late[0]) / (clock() - late[1]) if late and clock() > late[1] else 0.0


def main(seconds):
    rounds, check, late = asyncio.run(run(seconds))
    print('{"rounds": %d, "check": %d, "late": %.3f}' % (rounds, check, late))
    sys.stdout.flush()


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 4.0)
