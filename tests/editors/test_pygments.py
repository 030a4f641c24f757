"""The Pygments lexer: golden tokens, every shipped .tile file without an Error token, and
lossless round-trips of random input."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pygments import lexers
from pygments.token import (
    Comment,
    Error,
    Keyword,
    Name,
    Number,
    Operator,
    Punctuation,
    String,
    Token,
    Whitespace,
)

from editor_helpers import HERE, SAMPLE, tile_files
from tilelang.highlight import TileLexer

LEXER = TileLexer(stripnl=False, ensurenl=False)


def toks(src: str) -> list[tuple]:
    """Tokens of `src` without whitespace tokens."""
    return [(t, v) for t, v in LEXER.get_tokens(src) if t is not Whitespace]


# --- golden tokens, construct by construct -------------------------------------------------
GOLDEN = [
    # comments
    ("// line comment", [(Comment.Single, "// line comment")]),
    ("/* a\n * b */x", [(Comment.Multiline, "/*"), (Comment.Multiline, " a\n "),
                        (Comment.Multiline, "*"), (Comment.Multiline, " b "),
                        (Comment.Multiline, "*/"), (Name, "x")]),
    ("a // b", [(Name, "a"), (Comment.Single, "// b")]),  # `//` is never floor division
    # integers
    ("42", [(Number.Integer, "42")]),
    ("1_000_000", [(Number.Integer, "1_000_000")]),
    ("0x2A", [(Number.Hex, "0x2A")]),
    ("0x_ff_FF", [(Number.Hex, "0x_ff_FF")]),
    ("0b101", [(Number.Bin, "0b101")]),
    ("0B1_0", [(Number.Bin, "0B1_0")]),
    # floats: the grammar's FLOAT terminal, plus inf and nan
    ("1.0", [(Number.Float, "1.0")]),
    ("2.5e-3", [(Number.Float, "2.5e-3")]),
    ("1e9", [(Number.Float, "1e9")]),
    ("1E+9", [(Number.Float, "1E+9")]),
    ("1_000.000_5e1_0", [(Number.Float, "1_000.000_5e1_0")]),
    ("inf", [(Number.Float, "inf")]),
    ("-inf", [(Operator, "-"), (Number.Float, "inf")]),
    ("nan", [(Number.Float, "nan")]),
    # forms the grammar does not have lex as what the grammar sees
    ("1.", [(Number.Integer, "1"), (Punctuation, ".")]),
    (".5", [(Punctuation, "."), (Number.Integer, "5")]),
    # strings with C escapes
    ('"a\\n\\t\\"b\\\\"', [(String.Double, '"'), (String.Double, "a"), (String.Escape, "\\n"),
                          (String.Escape, "\\t"), (String.Escape, '\\"'), (String.Double, "b"),
                          (String.Escape, "\\\\"), (String.Double, '"')]),
    ('"\\x41\\101\\0"', [(String.Double, '"'), (String.Escape, "\\x41"),
                         (String.Escape, "\\101"), (String.Escape, "\\0"), (String.Double, '"')]),
    ('"\\q"', [(String.Double, '"'), (Error, "\\"), (String.Double, "q"), (String.Double, '"')]),
    ('"open\nx', [(String.Double, '"'), (String.Double, "open"), (Error, "\n"), (Name, "x")]),
    # keywords
    ("kernel vadd(", [(Keyword.Declaration, "kernel"), (Name.Function, "vadd"),
                      (Punctuation, "(")]),
    ("fn gelu", [(Keyword.Declaration, "fn"), (Name.Function, "gelu")]),
    ("kernel matmul", [(Keyword.Declaration, "kernel"), (Name.Function, "matmul")]),
    ("fn for", [(Keyword.Declaration, "fn"), (Keyword, "for")]),  # a keyword is never a name
    ("fn\nf", [(Keyword.Declaration, "fn"), (Name, "f")]),
    ("let var const static", [(Keyword.Declaration, "let"), (Keyword.Declaration, "var"),
                              (Keyword.Declaration, "const"), (Keyword.Declaration, "static")]),
    ("if else for in while break continue return",
     [(Keyword, w) for w in "if else for in while break continue return".split()]),
    ("import from as", [(Keyword.Namespace, "import"), (Keyword.Namespace, "from"),
                        (Keyword.Namespace, "as")]),
    ("and or not", [(Operator.Word, "and"), (Operator.Word, "or"), (Operator.Word, "not")]),
    ("true false", [(Keyword.Constant, "true"), (Keyword.Constant, "false")]),
    ("letter iffy fn_x", [(Name, "letter"), (Name, "iffy"), (Name, "fn_x")]),
    # types
    ("Tile[f32, 128, 64]", [(Keyword.Type, "Tile"), (Punctuation, "["), (Keyword.Type, "f32"),
                            (Punctuation, ","), (Number.Integer, "128"), (Punctuation, ","),
                            (Number.Integer, "64"), (Punctuation, "]")]),
    ("Array[bf16, 2]", [(Keyword.Type, "Array"), (Punctuation, "["), (Keyword.Type, "bf16"),
                        (Punctuation, ","), (Number.Integer, "2"), (Punctuation, "]")]),
    ("i16(5) f8e4m3 f8e5m2 tf32 bool", [
        (Keyword.Type, "i16"), (Punctuation, "("), (Number.Integer, "5"), (Punctuation, ")"),
        (Keyword.Type, "f8e4m3"), (Keyword.Type, "f8e5m2"), (Keyword.Type, "tf32"),
        (Keyword.Type, "bool")]),
    ("f33 i8x", [(Name, "f33"), (Name, "i8x")]),
    # built-ins and member access
    ("exp(t - max(t, axis = 1))", [
        (Name.Builtin, "exp"), (Punctuation, "("), (Name, "t"), (Operator, "-"),
        (Name.Builtin, "max"), (Punctuation, "("), (Name, "t"), (Punctuation, ","),
        (Name, "axis"), (Operator, "="), (Number.Integer, "1"), (Punctuation, ")"),
        (Punctuation, ")")]),
    ("x.shape[0]", [(Name, "x"), (Punctuation, "."), (Name.Attribute, "shape"),
                    (Punctuation, "["), (Number.Integer, "0"), (Punctuation, "]")]),
    ("math.tanh", [(Name, "math"), (Punctuation, "."), (Name.Attribute, "tanh")]),
    # attributes
    ("@launch(maxntid = (256, 1, 1))", [
        (Name.Decorator, "@"), (Name.Decorator, "launch"), (Punctuation, "("),
        (Name, "maxntid"), (Operator, "="), (Punctuation, "("), (Number.Integer, "256"),
        (Punctuation, ","), (Number.Integer, "1"), (Punctuation, ","), (Number.Integer, "1"),
        (Punctuation, ")"), (Punctuation, ")")]),
    ("  @host\nfn f", [(Name.Decorator, "@"), (Name.Decorator, "host"),
                       (Keyword.Declaration, "fn"), (Name.Function, "f")]),
    ("@custom_attr", [(Name.Decorator, "@"), (Name.Decorator, "custom_attr")]),
    ("maxnreg = by_target(sm_90a = 168)", [
        (Name, "maxnreg"), (Operator, "="), (Name.Builtin.Pseudo, "by_target"),
        (Punctuation, "("), (Name, "sm_90a"), (Operator, "="), (Number.Integer, "168"),
        (Punctuation, ")")]),
    # `@` in an expression is the matrix product
    ("a @ b", [(Name, "a"), (Operator, "@"), (Name, "b")]),
    # operators, longest first
    ("a **= b <<= c >>= d -> e", [
        (Name, "a"), (Operator, "**="), (Name, "b"), (Operator, "<<="), (Name, "c"),
        (Operator, ">>="), (Name, "d"), (Operator, "->"), (Name, "e")]),
    ("+= -= *= /= %= &= |= ^= @=", [(Operator, o) for o in "+= -= *= /= %= &= |= ^= @=".split()]),
    ("== != <= >= < > << >> ** ~", [(Operator, o) for o in "== != <= >= < > << >> ** ~".split()]),
    ("+ - * / % & | ^ =", [(Operator, o) for o in "+ - * / % & | ^ =".split()]),
    ("; : , . ( ) [ ] { }", [(Punctuation, p) for p in "; : , . ( ) [ ] { }".split()]),
    # characters the language does not have
    ("a ! $", [(Name, "a"), (Error, "!"), (Error, "$")]),
]


@pytest.mark.parametrize("src,expected", GOLDEN, ids=[g[0] for g in GOLDEN])
def test_golden_tokens(src, expected):
    assert toks(src) == expected


def _dump(src: str) -> str:
    lines = []
    for t, v in LEXER.get_tokens(src):
        if t is not Whitespace:
            lines.append(f"{str(t)[6:] or 'Token'}\t{v!r}")
    return "\n".join(lines) + "\n"


def test_golden_sample_file():
    """The token stream of the fixture covering every construct, against its golden dump.
    Regenerate with TILE_UPDATE_GOLDEN=1 after an intended change, and review the diff."""
    golden = HERE / "golden" / "sample.tokens"
    got = _dump(SAMPLE.read_text(encoding="utf-8"))
    if os.environ.get("TILE_UPDATE_GOLDEN"):
        golden.parent.mkdir(exist_ok=True)
        golden.write_text(got, encoding="utf-8")
    assert got == golden.read_text(encoding="utf-8")


@pytest.mark.parametrize("path", tile_files(), ids=lambda p: p.name)
def test_shipped_files_lex_without_errors(path):
    src = path.read_text(encoding="utf-8")
    errors = [(i, v) for i, t, v in LEXER.get_tokens_unprocessed(src) if t in Error]
    assert errors == []
    assert "".join(v for _, v in LEXER.get_tokens(src)) == src


def test_registration():
    """The lexer is found by name, alias, file name and MIME type (via the entry point)."""
    assert lexers.get_lexer_by_name("tile").__class__.__name__ == "TileLexer"
    assert lexers.find_lexer_class_for_filename("kernels/vadd.tile") is TileLexer
    assert lexers.get_lexer_for_mimetype("text/x-tile").__class__ is TileLexer
    assert lexers.find_lexer_class_by_name("tile") is TileLexer
    assert TileLexer.name == "Tile" and TileLexer.filenames == ["*.tile"]


# --- round-trips ---------------------------------------------------------------------------
FRAGMENTS = [
    "kernel", "fn", "let", "var", "const", "static", "if", "else", "for", "in", "while",
    "return", "and", "not", "true", "f32", "bf16", "Tile", "Array", "load", "max", "inf",
    "nan", "by_target", "x", "_a1", "42", "0x2A", "0b101", "1_000", "1.0", "2.5e-3", "1e9",
    "@launch", "@host", "@", "//", "/*", "*/", "*", "/", '"', '\\', '\\n', '\\"', "\n", " ",
    "\t", "(", ")", "[", "]", "{", "}", ";", ":", ",", ".", "->", "**=", "<<", ">>=", "!=",
    "==", "=", "+", "-", "~", "%", "&", "|", "^", "<", ">", "!", "$", "#", "'", "é", "\r",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=40).map("".join))
def test_roundtrip_token_soup(src):
    joined = "".join(v for _, _, v in LEXER.get_tokens_unprocessed(src))
    assert joined == src
    # indices are consistent with the values
    pos = 0
    for i, _, v in LEXER.get_tokens_unprocessed(src):
        assert i == pos
        pos += len(v)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_roundtrip_arbitrary_text(src):
    assert "".join(v for _, _, v in LEXER.get_tokens_unprocessed(src)) == src
    # get_tokens normalizes only \r\n and \r to \n
    norm = src.replace("\r\n", "\n").replace("\r", "\n")
    assert "".join(v for _, v in LEXER.get_tokens(src)) == norm


VALID_TOKENS = [
    "kernel", "fn", "let", "x", "f32", "Tile", "load", "inf", "42", "0x2A", "0b1", "1_0",
    "1.5", "2e-3", "@", "+", "**=", "->", "(", ")", "{", "}", ";", "==", "~", '"s\\n"',
    "// c\n", "/* c\n * */",
]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(VALID_TOKENS), min_size=1, max_size=30).map(" ".join))
def test_valid_tokens_never_error(src):
    assert not [v for t, v in LEXER.get_tokens(src) if t in Error]
    assert all(t in Token for t, _ in LEXER.get_tokens(src))
