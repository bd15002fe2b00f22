"""recursion: deep pure-Python recursion — a recursive-descent parser and recursive tree folds.

Usage: python3 recursion.py [SECONDS]        (default 4; a float is fine)

Exercises deep stacks: about half the samples are 200 to 1000 Python frames deep. Each round,
with random.Random(seed) for the round, does four times:

  - build (iteratively, make_expression) an arithmetic expression nested 150-250 levels deep,
    e.g. `(3*x - ((y + (... ) * 2) % 7) + 1)`, and tokenize it (tokenize, iterative);
  - parse it with a recursive-descent parser — parse_sum → parse_product → parse_unary →
    parse_atom → parse_sum … — four frames per level of parentheses, so the stack grows to
    600-1000 frames, into a tree of tuples;
  - evaluate the tree recursively (evaluate) and check the value against an iterative
    evaluator of the tokens (shunting-yard into postfix, then a stack machine: to_postfix,
    run_postfix);

and then once:

  - build a random tree 200-600 levels deep recursively (build_tree), and fold it with
    recursive functions: the sum of its values (tree_sum), its height (tree_height) and its
    mirror image (mirror), checking with tree_equal that mirroring twice gives the tree back.

All the recursion is Python calling Python, which takes no C stack on 3.11+ (no recursion
goes through a C function: no tuple(generator), no == on the nested tuples; freeing them is
bounded by the trashcan), so only the Python recursion limit matters; it is raised to 4000
(the deepest stack is about 1000 frames).
No files are written. At the end it prints one JSON line {"rounds": N, "check": C, "late": R}
and flushes (R: rounds a second in the second half of the run).

Runs unchanged on CPython 3.11-3.15.
"""

import random
import sys
import time

MOD = 1000003
VARS = {"x": 3, "y": 7, "z": 11, "w": 13}
EXPRESSIONS = 4      # expressions per round, then one tree


# ---- expressions ----------------------------------------------------------------------------

def small_term(rng):
    r = rng.random()
    if r < 0.4:
        return str(rng.randrange(1, 100))
    if r < 0.7:
        return rng.choice("xyzw")
    return "%d*%s" % (rng.randrange(2, 10), rng.choice("xyzw"))


def make_expression(rng, depth):
    text = small_term(rng)
    for _ in range(depth):
        r = rng.random()
        op = rng.choice("+-*")
        if r < 0.35:
            text = "(" + small_term(rng) + " " + op + " " + text + ")"
        elif r < 0.7:
            text = "(" + text + " " + op + " " + small_term(rng) + ")"
        elif r < 0.85:
            text = "-(" + text + ") " + op + " " + small_term(rng)
        else:
            text = "(" + small_term(rng) + " * " + text + " % " + str(rng.randrange(2, 50)) + ")"
    return text


def tokenize(text):
    tokens = []
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == " ":
            i += 1
        elif "0" <= ch <= "9":
            j = i + 1
            while j < n and "0" <= text[j] <= "9":
                j += 1
            tokens.append(int(text[i:j]))
            i = j
        else:
            tokens.append(ch)
            i += 1
    tokens.append(None)
    return tokens


class Parser:
    def __init__(self, tokens):
        self.tokens = tokens
        self.pos = 0


def parse_sum(p):
    left = parse_product(p)
    while p.tokens[p.pos] in ("+", "-"):
        op = p.tokens[p.pos]
        p.pos += 1
        left = (op, left, parse_product(p))
    return left


def parse_product(p):
    left = parse_unary(p)
    while p.tokens[p.pos] in ("*", "%"):
        op = p.tokens[p.pos]
        p.pos += 1
        left = (op, left, parse_unary(p))
    return left


def parse_unary(p):
    if p.tokens[p.pos] == "-":
        p.pos += 1
        return ("neg", parse_unary(p))
    return parse_atom(p)


def parse_atom(p):
    tok = p.tokens[p.pos]
    p.pos += 1
    if tok == "(":
        node = parse_sum(p)
        if p.tokens[p.pos] != ")":
            raise SyntaxError("expected ) at token %d" % p.pos)
        p.pos += 1
        return node
    if type(tok) is int:
        return tok
    if tok in VARS:
        return VARS[tok]
    raise SyntaxError("unexpected token %r" % (tok,))


def evaluate(node):
    if type(node) is int:
        return node
    op = node[0]
    if op == "neg":
        return -evaluate(node[1]) % MOD
    a = evaluate(node[1])
    b = evaluate(node[2])
    if op == "+":
        return (a + b) % MOD
    if op == "-":
        return (a - b) % MOD
    if op == "*":
        return a * b % MOD
    return a % b


PRECEDENCE = {"+": 1, "-": 1, "*": 2, "%": 2, "neg": 3}


def to_postfix(tokens):
    out = []
    ops = []
    expect_operand = True
    for tok in tokens[:-1]:
        if type(tok) is int:
            out.append(tok)
            expect_operand = False
        elif tok in VARS:
            out.append(VARS[tok])
            expect_operand = False
        elif tok == "(":
            ops.append(tok)
            expect_operand = True
        elif tok == ")":
            while ops[-1] != "(":
                out.append(ops.pop())
            ops.pop()
            expect_operand = False
        elif tok == "-" and expect_operand:
            ops.append("neg")            # prefix minus binds tightest, right to left
        else:
            prec = PRECEDENCE[tok]
            while ops and ops[-1] != "(" and PRECEDENCE[ops[-1]] >= prec:
                out.append(ops.pop())
            ops.append(tok)
            expect_operand = True
    while ops:
        out.append(ops.pop())
    return out


def run_postfix(code):
    stack = []
    for item in code:
        if type(item) is int:
            stack.append(item)
        elif item == "neg":
            stack.append(-stack.pop() % MOD)
        else:
            b = stack.pop()
            a = stack.pop()
            if item == "+":
                stack.append((a + b) % MOD)
            elif item == "-":
                stack.append((a - b) % MOD)
            elif item == "*":
                stack.append(a * b % MOD)
            else:
                stack.append(a % b)
    return stack[0]


def expression_round(rng):
    text = make_expression(rng, rng.randrange(150, 251))
    tokens = tokenize(text)
    p = Parser(tokens)
    tree = parse_sum(p)
    if tokens[p.pos] is not None:
        raise SyntaxError("trailing tokens")
    value = evaluate(tree)
    if run_postfix(to_postfix(tokens)) != value:
        raise AssertionError("recursive and iterative evaluation differ")
    return value


# ---- trees ----------------------------------------------------------------------------------

def build_tree(rng, depth):
    # (value, children): one child carries the depth on, the others are small bushes
    value = rng.randrange(1000)
    if depth <= 0:
        return (value, ())
    children = [build_tree(rng, depth - 1)]
    while rng.random() < 0.35:
        children.append(build_tree(rng, min(depth - 1, rng.randrange(3))))
    rng.shuffle(children)
    return (value, tuple(children))


def tree_sum(node):
    total = node[0]
    for child in node[1]:
        total += tree_sum(child)
    return total


def tree_height(node):
    best = 0
    for child in node[1]:
        h = tree_height(child)
        if h > best:
            best = h
    return best + 1


def mirror(node):
    children = node[1]
    out = []
    for k in range(len(children) - 1, -1, -1):
        out.append(mirror(children[k]))
    return (node[0], tuple(out))


def tree_equal(a, b):
    # not ==: comparing nested tuples recurses in C, which has its own, lower limit
    if a[0] != b[0] or len(a[1]) != len(b[1]):
        return False
    for x, y in zip(a[1], b[1]):
        if not tree_equal(x, y):
            return False
    return True


def tree_round(rng):
    tree = build_tree(rng, rng.randrange(200, 601))
    flipped = mirror(tree)
    if not tree_equal(mirror(flipped), tree) or tree_sum(flipped) != tree_sum(tree):
        raise AssertionError("tree folds differ")
    return tree_sum(tree) + tree_height(tree)


def main(seconds):
    sys.setrecursionlimit(4000)
    clock = time.perf_counter
    end = clock() + seconds
    # (the rate of rounds in the second half: what a recorder started with the program costs it
    # once started, apart from its start)
    half = end - seconds / 2
    late = None
    rounds = 0
    check = 0
    while clock() < end:
        rng = random.Random(rounds)
        for _ in range(EXPRESSIONS):
            check = (check * 31 + expression_round(rng)) % MOD
        check = (check * 31 + tree_round(rng)) % MOD
        rounds += 1
        if late is None and clock() >= half:
            late = (rounds, clock())
    print('{"rounds": %d, "check": %d, "late": %.3f}' % (rounds, check, (rounds - late[0]) / (clock() - late[1]) if late and clock() > late[1] else 0.0))
    sys.stdout.flush()


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 4.0)
