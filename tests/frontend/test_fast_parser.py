"""The fast parser (`lexer` + `descent`) against the Lark path it stands in for.

On every .tile file of the repository, every ```tile block of the docs, generated programs and
a corpus of mutated sources (600 by default, 20,000 more with `-m slow`): whenever the fast
parser accepts a text, Lark accepts it too and builds the same AST with the same spans, literal
spellings and name spans (a deep comparison, not the AST's `==`, which ignores spans); the fast
lexer's tokens are Lark's; the precedence table is the grammar's chain of rules; and the
well-formed sources of the project do take the fast path (a parser that always declined would
pass the rest)."""

from __future__ import annotations

import contextlib
import math
import pathlib
import re
import sys
from dataclasses import fields, is_dataclass

import pytest

from tilelang.diagnostics import Span, TileSyntaxError
from tilelang.frontend import descent, lark_parse, lexer, precedence
from tilelang.frontend import parser as front
from tilelang.frontend.limits import PARSE_FRAMES, NestingTooDeep

from test_fuzz import make
from test_roundtrip import Gen
from tilelang.frontend.printer import print_module

ROOT = pathlib.Path(__file__).resolve().parents[2]
FILES = sorted(p for p in ROOT.rglob("*.tile") if ".git" not in p.parts)
FENCE = re.compile(r"^```tile[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
DOC_BLOCKS = [b for p in sorted(ROOT.glob("docs/*.md")) + [ROOT / "README.md"]
              for b in FENCE.findall(p.read_text("utf-8"))]


@contextlib.contextmanager
def deep_stack():
    """Lark accepts nesting deeper than Python's default limit lets `deep` walk (how deep the
    stack already is depends on what ran before); Python frames take no C stack in 3.11+, so a
    higher limit for the comparison is safe."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 20_000))
    try:
        yield
    finally:
        sys.setrecursionlimit(limit)


def deep(x):
    """Everything a node holds, spans included, as plain nested tuples."""
    if isinstance(x, Span):
        return ("Span", x.file, x.line, x.col, x.end_line, x.end_col)
    if is_dataclass(x):
        return (type(x).__name__,) + tuple((f.name, deep(getattr(x, f.name))) for f in fields(x))
    if isinstance(x, tuple):
        return tuple(deep(v) for v in x)
    if isinstance(x, float) and math.isnan(x):
        return "nan"
    return (type(x).__name__, x)


def lark_result(text: str):
    try:
        return lark_parse.parse(text, "t.tile")
    except TileSyntaxError:
        return None
    except RecursionError:
        return None


def fast_result(text: str):
    try:
        return descent.parse_module(text, "t.tile")
    except lexer.Fallback:
        return None
    except NestingTooDeep:      # refused (E0112) with no AST, as Lark's deep trees are
        return None


def agree(text: str) -> bool:
    """The fast parser accepts only what Lark accepts, with an identical AST. True when the
    fast path took the text."""
    fast = fast_result(text)
    if fast is None:
        return False
    with deep_stack():          # a long `not not ...` chain nests deeper than Python's default
        slow = lark_result(text)   # limit lets Lark's tree building go: that is no rejection
    assert slow is not None, f"the fast parser accepted what Lark rejects:\n{text[:600]}"
    with deep_stack():
        same = deep(fast) == deep(slow)
    assert same, f"different ASTs for:\n{text[:600]}"
    return True


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_repository_file(path):
    text = path.read_text("utf-8")
    took = agree(text)
    if lark_result(text) is not None and "golden" not in path.parts:
        assert took, "a well-formed file of the project left the fast path"


def test_doc_blocks():
    assert len(DOC_BLOCKS) > 20
    for block in DOC_BLOCKS:
        for text in (block, f"fn __doc__() {{\n{block}\n}}", f"fn __doc__() {{ let __doc = {block}; }}"):
            agree(text)


def test_generated_programs():
    taken = 0
    for seed in range(300):
        text = print_module(Gen(seed).module())
        taken += agree(text)
    assert taken > 250          # the canonical printer's output is plainly well-formed


def test_mutated_corpus():
    taken = sum(agree(make(5, index)) for index in range(600))
    assert taken > 40           # some mutations stay well-formed and take the fast path


@pytest.mark.slow
@pytest.mark.parametrize("chunk", range(10))
def test_mutated_corpus_full(chunk, request):
    """20,000 more mutations (a few minutes): only with `-m slow`."""
    if "slow" not in request.config.option.markexpr.replace("not slow", ""):
        pytest.skip("the full corpus needs `-m slow`")
    for index in range(chunk * 2000, (chunk + 1) * 2000):
        agree(make(6, index))


# Spellings the printer never produces: parentheses and trailing commas everywhere, comments,
# odd spacing, literals of every kind, keyword-like names.
CORNERS = [
    "const X = ((a)) + (b) * ((c,)) - (a, b,)[0];",
    "const X = (a).b(c)[d,].e ** -f ** g;",
    "const X = not not a == (b) and c or (d if e else f if g else h);",
    "const X = a if b else c;\nconst Y = ~-+a @ b % c // comment\n;",
    "const X = 0x_FF + 0b1_0 + 1_000 + 1.5e-3 + 2E+4 + 3.0 + 0 + 1e5 + inf + nan;",
    'const S = "a\\n\\t\\x41\\"\\\\" ;',
    "const X = f(a = 1, b = (2), c = g(x = 3,),);",
    "/* block\n comment */ const /* in */ X /* between */ = 1;",
    "kernel k(a: Array[f32, 2,], const N: i32 = 1, b, c: (i32, f32,), d: ()) { }",
    "fn f() -> (i32,) { return (1,); }\nfn g() -> () { return; }",
    "@launch(maxntid = (128, 1, 1),)\n@host\n@x()\nfn f(x,) { let (a, b,) = x; var (c,) = (1,);"
    " a += 1; b.c[0] **= 2; x = y, z,; x, y; return a, b; }",
    "import std.math as m;\nfrom std.nn import a, b as c,;\nfrom x import y;",
    "kernel k() { static for i in range(4) { if a { } else if b { } else { { } } }"
    " while x < 3 { break; continue; } for j in a, b { } }",
    "const X = a.b.c(d)(e)[f][g];",
    "kernel k() {\r\n\tlet x = 1;\f\n}\n",
    "fn f() { return; }\n\n\n",
    "",
]


@pytest.mark.parametrize("text", CORNERS)
def test_corner_spellings(text):
    assert agree(text), "expected the fast path to take this well-formed text"


# Texts the fast path must leave to Lark (which diagnoses them or builds what it builds).
DECLINED = [
    "const X = 01;", "const X = 1e999;", 'const S = "\\q";', "const X = a < b < c;",
    "fn f() { f() = 1; }", "const X = f(a = 1, a = 2);", "const X = f(a = 1, 2);",
    "const X = 1 +;", "const X = é;", "const X = 'a';", "const X = 1 /* open",
    "const X = 1", "fn f() { let x = 1 }",
]


@pytest.mark.parametrize("text", DECLINED)
def test_declined(text):
    assert fast_result(text) is None
    # parse() gives exactly the Lark path's result or diagnostics.
    try:
        expected = lark_parse.parse(text, "t.tile")
    except TileSyntaxError as e:
        with pytest.raises(TileSyntaxError) as got:
            front.parse(text, "t.tile")
        assert [str(d) for d in got.value.diagnostics] == [str(d) for d in e.diagnostics]
    else:
        got = front.parse(text, "t.tile")
        with deep_stack():
            assert deep(got) == deep(expected)


def lark_tokens(text: str):
    out = []
    for t in lark_parse._lark().lex(text):
        out.append((t.type if t.type in ("NAME", "DEC_INT", "HEX_INT", "BIN_INT", "FLOAT",
                                         "STRING") else str(t), str(t), t.line, t.column))
    return out


def fast_tokens(text: str):
    kinds, texts, lines, cols = lexer.tokenize(text)
    return list(zip(kinds, texts, lines, cols))[:-1]


@pytest.mark.parametrize("index", range(0, 400, 7))
def test_lexer_matches_lark(index):
    for text in (make(3, index), FILES[index % len(FILES)].read_text("utf-8")):
        try:
            expected = lark_tokens(text)
        except Exception:           # noqa: BLE001 - Lark refuses it: so must the fast lexer
            with pytest.raises(lexer.Fallback):
                lexer.tokenize(text)
            continue
        try:
            got = fast_tokens(text)
        except lexer.Fallback:      # may decline only what has an unclosed `/*`
            assert "/*" in text
            continue
        except NestingTooDeep:      # only where Lark's tokens nest deeper than the stack
            assert _deepest(expected) > PARSE_FRAMES
            continue
        assert got == expected


def _deepest(tokens) -> int:
    """The most brackets open, or prefix operators in a row, in a token list."""
    depth = run = most = 0
    for kind, *_ in tokens:
        depth += (kind in "([{") - (kind in ")]}")
        run = run + 1 if kind in ("-", "+", "~", "not") else 0
        most = max(most, depth, run)
    return most


def test_keywords_are_the_grammars():
    assert lexer.KEYWORDS == lark_parse.keywords()


def test_operators_are_the_grammars():
    quoted = {t.pattern.value for t in lark_parse._lark().terminals
              if t.pattern.type == "str" and not t.pattern.value.isidentifier()}
    assert set(lexer.OPERATORS) == quoted and len(lexer.OPERATORS) == len(quoted)


def _chain():
    """The grammar's expression levels from `or_test` down: (rule, operators) per level."""
    grammar = lark_parse.grammar_text()
    rules = {}
    for m in re.finditer(r"^[?!]?(\w+):(.*?)(?=^[?!]?\w+:|^//|\Z)", grammar, re.S | re.M):
        rules[m.group(1)] = m.group(2)

    def ops_of(body: str) -> tuple[str, ...]:
        out = []
        for word in re.findall(r'"([^"]+)"|\b([a-z_]+_op)\b', body):
            lit, sub = word
            if lit:
                out.append(lit)
            elif sub in rules:
                out += re.findall(r'"([^"]+)"', rules[sub])
        return tuple(dict.fromkeys(out))

    chain, rule = [], "or_test"
    while rule in rules:
        body = rules[rule]
        alternatives = [a.strip() for a in body.split("|")]
        first = alternatives[0].split()[0]
        chain.append((rule, ops_of("|".join(alternatives[1:]))))
        rule = first if first != rule else None
        if rule == "postfix":
            break
    return chain


def test_precedence_table_is_the_grammars():
    table = [(rule, tuple(ops)) for rule, ops, _ in precedence.LEVELS]
    chain = _chain()
    assert [r for r, _ in chain] == [r for r, _ in table]
    for (rule, ops), (_, want) in zip(chain, table):
        # The table lists exactly the level's operators (the `if` of a conditional and the
        # `**` after a postfix are the only other tokens these rules hold).
        assert set(want) == set(ops) - {"if", "else"}, rule


def test_parse_does_not_import_lark_for_a_clean_file():
    import subprocess
    import sys
    code = ("import sys; from tilelang.frontend.parser import parse; "
            "parse(open(sys.argv[1]).read(), sys.argv[1]); "
            "print(any(m == 'lark' or m.startswith('lark.') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code, str(ROOT / "examples" / "softmax.tile")],
                         capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "False"


def test_a_long_flat_chain_below_the_limit_still_parses():
    text = "const X = " + "1 + " * (PARSE_FRAMES - 10) + "1;"
    assert fast_result(text) is not None


def test_nesting_the_lark_path_followed_takes_the_fast_path():
    """The fast parser runs with `PARSE_FRAMES` of stack: it parses nesting the Lark path used
    to be needed for (400 parentheses) and builds Lark's AST."""
    text = "const X = " + "(" * 700 + "1" + ")" * 700 + ";"
    fast = fast_result(text)
    assert fast is not None
    with deep_stack():
        assert deep(fast) == deep(lark_parse.parse(text, "t.tile"))


@pytest.mark.parametrize("text", [
    "kernel k(a: Array[f32, 1]) {\n" + "if true {\n" * 5000,            # unclosed: a syntax error too
    "kernel k(a: Array[f32, 1]) {\n" + "if true {\n" * 2000 + "}\n" * 2001,
    "const X = " + "(" * (PARSE_FRAMES + 1) + "1;",
    "const X = " + "(" * 2000 + "1" + ")" * 2000 + ";",
    "const X = " + "- " * (PARSE_FRAMES + 5) + "1;",
    "const X = " + "not " * 4000 + "true;",
    "const X = $;\n" + "{" * (PARSE_FRAMES + 1),                      # a lexical error first
    "const X = " + "2 ** " * 3000 + "1;",
    "const X = " + "1 + " * (PARSE_FRAMES + 1) + "1;",               # a left-deep chain
    "const X = " + "a and " * (PARSE_FRAMES + 1) + "b;",
])
def test_nesting_beyond_the_stack_is_refused_without_the_lark_path(text, monkeypatch):
    """Deeper than the fast parser's stack: `parse` refuses (a RecursionError: E0112 for every
    caller) and never reparses on the Lark path, whose recovery is quadratic in the depth."""
    monkeypatch.setattr(lark_parse, "parse", lambda *a: pytest.fail("took the Lark path"))
    with pytest.raises(NestingTooDeep):
        front.parse(text, "t.tile")


def test_brackets_in_strings_and_comments_do_not_count():
    text = ('const S = "' + "(" * (PARSE_FRAMES + 10) + '"; // ' + "{" * (PARSE_FRAMES + 10)
            + "\nconst T = 1; /* " + "[" * (PARSE_FRAMES + 10) + " */\n")
    assert len(front.parse(text, "t.tile").items) == 2
    comment = "// " + "- " * (PARSE_FRAMES + 10) + "\nconst T = 1;\n"
    assert len(front.parse(comment, "t.tile").items) == 1
