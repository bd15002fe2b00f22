"""configs: build, serialize and parse configuration documents with json and tomllib.

Usage: python3 configs.py [SECONDS]        (default 4; a float is fine)

Exercises ordinary library code, most of it pure Python, with a few C calls between. Each
round builds one nested, config-like document (sections of scalars, lists, sub-tables and
arrays of tables; strings with quotes, backslashes and non-ASCII text) from random.Random(seed)
with the round's number as seed, then:

  - encodes it pretty-printed with json.JSONEncoder(indent=2).iterencode() joined by hand: the
    pure-Python encoder (json.encoder's _iterencode_dict / _iterencode_list closures) on every
    version — json.dumps(indent=2) itself goes to the C encoder from 3.14 on;
  - encodes it compactly with json.dumps() (the C encoder), and decodes both texts with
    json.loads() (the C scanner);
  - renders it as TOML text with the small pure-Python writer below (toml_document);
  - parses that text with tomllib.loads() (pure Python: tomllib/_parser.py);
  - checks that every decoded document equals the original.

No files are written and nothing is read. At the end it prints one JSON line
{"rounds": N, "chars": C, "late": R} (C: characters of JSON and TOML text produced) and flushes
(R: rounds a second in the second half of the run).

Runs unchanged on CPython 3.11-3.15 (tomllib is new in 3.11).
"""

import json
import random
import sys
import time
import tomllib

WORDS = (
    "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho "
    "sigma tau upsilon phi chi psi omega server client proxy cache pool queue worker timeout "
    "retry backoff region zone cluster node shard replica primary secondary metrics logging "
    "level format handler rotate compress archive token secret user group role policy"
).split()

ODD_TEXT = ('say "hi"', "C:\\path\\to\\file", "tab\there", "caf\u00e9 cr\u00e8me", "\u65e5\u672c",
            "line\nbreak", "50% off", "a#b", "[bracket]", "x = y")


# ---- building documents ---------------------------------------------------------------------

def make_key(rng):
    key = rng.choice(WORDS)
    if rng.random() < 0.4:
        key += "_" + rng.choice(WORDS)
    if rng.random() < 0.2:
        key += "-" + str(rng.randrange(100))
    return key


def make_string(rng):
    r = rng.random()
    if r < 0.15:
        return rng.choice(ODD_TEXT)
    n = rng.randrange(1, 6)
    return " ".join(rng.choice(WORDS) for _ in range(n))


def make_scalar(rng):
    r = rng.random()
    if r < 0.35:
        return make_string(rng)
    if r < 0.6:
        return rng.randrange(-100000, 1000000)
    if r < 0.8:
        return round(rng.uniform(-1000.0, 1000.0), rng.randrange(1, 6))
    return rng.random() < 0.5


def make_list(rng):
    n = rng.randrange(0, 8)
    if rng.random() < 0.15:
        return [[make_scalar(rng) for _ in range(rng.randrange(1, 4))] for _ in range(n)]
    return [make_scalar(rng) for _ in range(n)]


def make_table(rng, depth):
    table = {}
    for _ in range(rng.randrange(3, 10)):
        key = make_key(rng)
        r = rng.random()
        if depth > 0 and r < 0.18:
            table[key] = make_table(rng, depth - 1)
        elif depth > 0 and r < 0.26:
            table[key] = [make_table(rng, depth - 1) for _ in range(rng.randrange(1, 4))]
        elif r < 0.4:
            table[key] = make_list(rng)
        else:
            table[key] = make_scalar(rng)
    return table


def make_document(seed):
    rng = random.Random(seed)
    doc = {"title": make_string(rng), "version": rng.randrange(1, 20)}
    for _ in range(12):
        doc[make_key(rng)] = make_table(rng, 3)
    return doc


# ---- a small TOML writer --------------------------------------------------------------------

ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r", "\b": "\\b",
           "\f": "\\f"}


def toml_string(s):
    out = ['"']
    for ch in s:
        if ch in ESCAPES:
            out.append(ESCAPES[ch])
        elif ch < " " or ch == "\x7f":
            out.append("\\u%04x" % ord(ch))
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def toml_key(key):
    for ch in key:
        if not (ch.isascii() and (ch.isalnum() or ch in "_-")):
            return toml_string(key)
    return key


def toml_value(v):
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, str):
        return toml_string(v)
    if isinstance(v, list):
        return "[" + ", ".join([toml_value(x) for x in v]) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join([toml_key(k) + " = " + toml_value(x) for k, x in v.items()]) + "}"
    raise TypeError(type(v).__name__)


def is_table_array(v):
    if not isinstance(v, list) or not v:
        return False
    for x in v:
        if not isinstance(x, dict):
            return False
    return True


def write_table(lines, path, table):
    subtables = []
    arrays = []
    for key, value in table.items():
        if isinstance(value, dict):
            subtables.append((key, value))
        elif is_table_array(value):
            arrays.append((key, value))
        else:
            lines.append(toml_key(key) + " = " + toml_value(value))
    for key, value in subtables:
        sub = path + (toml_key(key),)
        lines.append("")
        lines.append("[" + ".".join(sub) + "]")
        write_table(lines, sub, value)
    for key, items in arrays:
        sub = path + (toml_key(key),)
        for item in items:
            lines.append("")
            lines.append("[[" + ".".join(sub) + "]]")
            write_table(lines, sub, item)


def toml_document(doc):
    lines = []
    write_table(lines, (), doc)
    lines.append("")
    return "\n".join(lines)


# ---- a round --------------------------------------------------------------------------------

def pretty_json(doc):
    # iterencode() without _one_shot always takes the pure-Python encoder
    return "".join(json.JSONEncoder(indent=2, ensure_ascii=False).iterencode(doc))


def round_trip(seed):
    doc = make_document(seed)
    pretty = pretty_json(doc)
    compact = json.dumps(doc)
    if json.loads(pretty) != doc or json.loads(compact) != doc:
        raise AssertionError("json round trip differs (seed %d)" % seed)
    text = toml_document(doc)
    if tomllib.loads(text) != doc:
        raise AssertionError("toml round trip differs (seed %d)" % seed)
    return len(pretty) + len(compact) + len(text)


def main(seconds):
    clock = time.perf_counter
    end = clock() + seconds
    # (the rate of rounds in the second half: what a recorder started with the program costs it
    # once started, apart from its start)
    half = end - seconds / 2
    late = None
    rounds = 0
    chars = 0
    while clock() < end:
        chars += round_trip(rounds)
        rounds += 1
        if late is None and clock() >= half:
            late = (rounds, clock())
    print('{"rounds": %d, "chars": %d, "late": %.3f}' % (rounds, chars, (rounds - late[0]) / (clock() - late[1]) if late and clock() > late[1] else 0.0))
    sys.stdout.flush()


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 4.0)
