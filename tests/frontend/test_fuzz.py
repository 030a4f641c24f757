"""Mutation fuzzing: 2,000+ random edits of the examples (tokens and characters deleted,
swapped, inserted). Every input must end in success or in diagnostics; any other exception
(a traceback reaching a user) fails the test. The driver runs every stage that exists, so this
covers semantic analysis too."""

import pathlib
import random

import pytest

from tilelang.diagnostics import Severity
from tilelang.driver import check_source
from tilelang.frontend.parser import _lark

ROOT = pathlib.Path(__file__).resolve().parents[2]
SOURCES = [p.read_text() for p in sorted(ROOT.glob("examples/*.tile"))]
SNIPPETS = ["(", ")", "{", "}", "[", "]", ";", ",", "let", "var", "fn", "kernel", "@launch",
            "=", "+=", "**", "-", "not", "if", "else", "for", "in", "range(", "static", "\x00",
            "9" * 40, "0x", "1e999", "Tile[", "Array[f32,", '"', "/*", "//", "'", "é", "\t",
            "inf", "nan", "true", "const", "import", ".", "->", "@", "::", "$", "\\", "\n"]
N_TOKEN, N_CHAR = 1200, 900


def token_mutation(rng: random.Random, src: str) -> str:
    toks = list(_lark().lex(src))
    spans = [(t.start_pos, t.end_pos) for t in toks]
    kind = rng.randrange(3)
    i = rng.randrange(len(spans))
    a, b = spans[i]
    if kind == 0:  # delete a token
        return src[:a] + src[b:]
    if kind == 1:  # swap two tokens
        j = rng.randrange(len(spans))
        (a, b), (c, d) = sorted([spans[i], spans[j]])
        if c < b:
            return src
        return src[:a] + src[c:d] + src[b:c] + src[a:b] + src[d:]
    other = toks[rng.randrange(len(toks))]  # duplicate a token elsewhere
    return src[:a] + " " + str(other) + " " + src[a:]


def char_mutation(rng: random.Random, src: str) -> str:
    i = rng.randrange(len(src) + 1)
    kind = rng.randrange(3)
    if kind == 0:
        j = min(len(src), i + rng.randrange(1, 20))
        return src[:i] + src[j:]
    if kind == 1:
        j = min(len(src), i + rng.randrange(1, 40))
        return src[:i] + src[i:j][::-1] + src[j:]
    return src[:i] + rng.choice(SNIPPETS) + src[i:]


def run(src: str) -> None:
    result = check_source(src, "fuzz.tile")
    for d in result.diagnostics:
        assert d.severity in Severity
        assert d.message
        if d.severity is Severity.ERROR:
            assert d.code and d.code.startswith("E")


@pytest.mark.parametrize("chunk", range(12))
def test_token_mutations(chunk):
    rng = random.Random(1000 + chunk)
    for _ in range(N_TOKEN // 12):
        src = rng.choice(SOURCES)
        for _ in range(rng.randrange(1, 4)):
            src = token_mutation(rng, src) if src.strip() else src
        run(src)


@pytest.mark.parametrize("chunk", range(9))
def test_char_mutations(chunk):
    rng = random.Random(2000 + chunk)
    for _ in range(N_CHAR // 9):
        src = rng.choice(SOURCES)
        for _ in range(rng.randrange(1, 4)):
            src = char_mutation(rng, src)
        run(src)


def test_enough_mutations():
    assert N_TOKEN + N_CHAR >= 2000


def test_deep_nesting_is_a_diagnostic():
    run("const X = " + "(" * 5000 + "1" + ")" * 5000 + ";")
    run("fn f() {" + "{" * 3000 + "}" * 3000 + "}")
    run("const X = " + "-" * 20000 + "1;")
