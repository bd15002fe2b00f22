"""ccalls: long C calls (sorting, zlib, sha256, regex, joins) between short Python phases.

Usage: python3 ccalls.py [SECONDS]        (default 4; a float is fine)

Exercises long calls into C: most of the time the innermost Python frame stays the same for
milliseconds at a time while a C function runs under it (some of them release the GIL: zlib
and hashlib on large buffers). Every C call is made from its own Python function, so its time
shows there as self time. Each round, on data generated once at start from random.Random(0)
and varied per round (rotated, re-seeded):

  - sort_numbers: sorted() of 100 000 floats, and list.sort() of a copy, descending
    (over 10 ms each; the GIL is held);
  - sort_words: sorted() of 40 000 strings, with key=str.lower;
  - compress: zlib.compress() of 512 KB of generated text at level 6, and zlib.decompress();
  - digest: hashlib.sha256() over a 6 MB buffer, twice (once in 1 MB pieces);
  - substitute: a compiled re's sub() and findall() over 1 MB of text;
  - join: bytes.join() of 40 000 pieces, bytes.split() and a join of the pieces reversed;
  - between them, short pure-Python phases (2-6 ms each): scramble perturbs part of
    a list, count_runs scans a slice of the sorted list, mix_bytes folds a slice of the bytes,
    tally_words counts a sample of words in a dict.

A round lasts about 150 ms. The results are folded into a checksum (equal for runs of equal
length). No files are written.

hashlib.sha256 is OpenSSL's when _hashlib imports, else CPython's own (HACL*), which here is
about 4 times slower: digest's share depends on which one the interpreter has.
At the end it prints one JSON line {"rounds": N, "check": C, "late": R} and flushes (R: rounds
a second in the second half of the run).

Runs unchanged on CPython 3.11-3.15.
"""

import hashlib
import random
import re
import sys
import time
import zlib

WORDS = (
    "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt "
    "ut labore et dolore magna aliqua Ut enim ad minim veniam quis nostrud exercitation "
    "ullamco laboris nisi aliquip ex ea commodo consequat Duis aute irure in reprehenderit "
    "voluptate velit esse cillum fugiat nulla pariatur Excepteur sint occaecat cupidatat non"
).split()

PATTERN = re.compile(r"\b(dolor|labore|magna|velit)\s+(\w+)")
NUMBER = re.compile(r"\d{3,}")


class Data:
    def __init__(self, rng):
        self.floats = [rng.random() for _ in range(100000)]
        self.words = [rng.choice(WORDS) + str(rng.randrange(1000)) for _ in range(40000)]
        pieces = []
        for i in range(90000):
            pieces.append(rng.choice(WORDS))
            if i % 13 == 0:
                pieces.append(str(rng.randrange(100000)))
        self.text = " ".join(pieces)[:1 << 20]               # 1 MB
        self.blob = rng.randbytes(1 << 20) * 6               # 6 MB: sha256 reads it all
        chunks = [rng.randbytes(rng.randrange(1, 40)).replace(b"|", b"/") for _ in range(2000)]
        self.chunks = [chunks[rng.randrange(2000)] for _ in range(40000)]


# ---- long C calls ---------------------------------------------------------------------------

def sort_numbers(xs):
    a = sorted(xs)
    b = list(xs)
    b.sort(reverse=True)
    return a, b[0] + b[-1]


def sort_words(words):
    return sorted(words, key=str.lower)


def compress(text, shift):
    raw = text[shift:shift + (1 << 19)].encode()
    packed = zlib.compress(raw, 6)
    back = zlib.decompress(packed)
    if back != raw:
        raise AssertionError("zlib round trip differs")
    return len(packed)


def digest(blob, rnd):
    h = hashlib.sha256(blob)
    g = hashlib.sha256(rnd.to_bytes(4, "little"))
    view = memoryview(blob)
    for k in range(0, len(blob), 1 << 20):
        g.update(view[k:k + (1 << 20)])
    return h.digest()[0] ^ g.digest()[0]


def substitute(text, rnd):
    out = PATTERN.sub(r"\2 \1", text)
    nums = NUMBER.findall(out, rnd % 1000)
    return len(out) + len(nums)


def join(chunks, rnd):
    data = b"|".join(chunks[rnd % 1000:])
    parts = data.split(b"|")
    return len(data) + len(parts) + len(b"".join(parts[::-1]))


# ---- short Python phases --------------------------------------------------------------------

def scramble(xs, rng):
    n = len(xs)
    for _ in range(8000):
        i = rng.randrange(n)
        j = rng.randrange(n)
        xs[i], xs[j] = xs[j], xs[i] * 0.5 + 0.25


def count_runs(sorted_xs, start):
    runs = 0
    prev = -1.0
    for x in sorted_xs[start:start + 90000]:
        if x - prev > 1e-5:
            runs += 1
        prev = x
    return runs


def mix_bytes(blob, start):
    h = 0
    for b in blob[start:start + 80000]:
        h = (h * 31 + b) & 0xFFFFFFFF
    return h


def tally_words(words, start):
    counts = {}
    for w in words[start:start + 35000]:
        key = w[:3]
        counts[key] = counts.get(key, 0) + 1
    return len(counts) + max(counts.values())


def one_round(data, rnd):
    rng = random.Random(rnd)
    check = 0
    scramble(data.floats, rng)
    s, extreme = sort_numbers(data.floats)
    check += count_runs(s, rnd % 1000) + int(extreme * 1000)
    check += tally_words(sort_words(data.words), rnd % 5000)
    check += compress(data.text, (rnd * 7919) % (len(data.text) >> 1))
    check += mix_bytes(data.blob, (rnd * 104729) % (len(data.blob) - 80000))
    check += digest(data.blob, rnd)
    check += substitute(data.text, rnd)
    check += join(data.chunks, rnd)
    return check


def main(seconds):
    data = Data(random.Random(0))
    clock = time.perf_counter
    end = clock() + seconds
    # (the rate of rounds in the second half: what a recorder started with the program costs it
    # once started, apart from its start)
    half = end - seconds / 2
    late = None
    rounds = 0
    check = 0
    while clock() < end:
        check = (check * 31 + one_round(data, rounds)) % 1000000007
        rounds += 1
        if late is None and clock() >= half:
            late = (rounds, clock())
    print('{"rounds": %d, "check": %d, "late": %.3f}' % (rounds, check, (rounds - late[0]) / (clock() - late[1]) if late and clock() > late[1] else 0.0))
    sys.stdout.flush()


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 4.0)
