"""The precedence and associativity table (Python's order, language reference §Expressions)."""

import pytest

from tilelang.diagnostics import TileSyntaxError
from tilelang.frontend import ast as A
from tilelang.frontend.parser import parse_expr

a, b, c = A.Name("a"), A.Name("b"), A.Name("c")


def B(op, l, r):
    return A.BinOp(op, l, r)


# Each row: source, expected tree. Together they fix every adjacent pair of levels.
TABLE = [
    ("a if b else c if a else b", A.IfExpr(b, a, A.IfExpr(a, c, b))),
    ("a or b if c else a", A.IfExpr(c, A.BoolOp("or", a, b), a)),
    ("a or b and c", A.BoolOp("or", a, A.BoolOp("and", b, c))),
    ("a or b or c", A.BoolOp("or", A.BoolOp("or", a, b), c)),
    ("a and not b", A.BoolOp("and", a, A.UnaryOp("not", b))),
    ("not a == b", A.UnaryOp("not", A.Compare("==", a, b))),
    ("a < b | c", A.Compare("<", a, B("|", b, c))),
    ("a | b ^ c", B("|", a, B("^", b, c))),
    ("a ^ b & c", B("^", a, B("&", b, c))),
    ("a & b << c", B("&", a, B("<<", b, c))),
    ("a << b + c", B("<<", a, B("+", b, c))),
    ("a >> b >> c", B(">>", B(">>", a, b), c)),
    ("a + b * c", B("+", a, B("*", b, c))),
    ("a - b - c", B("-", B("-", a, b), c)),
    ("a * b @ c", B("@", B("*", a, b), c)),
    ("a @ b / c % a", B("%", B("/", B("@", a, b), c), a)),
    ("-a * b", B("*", A.UnaryOp("-", a), b)),
    ("-a ** 2", A.UnaryOp("-", B("**", a, A.IntLit(2)))),
    ("~a ** b", A.UnaryOp("~", B("**", a, b))),
    ("a ** b ** c", B("**", a, B("**", b, c))),
    ("a ** -b", B("**", a, A.UnaryOp("-", b))),
    ("(-a) ** 2", B("**", A.UnaryOp("-", a), A.IntLit(2))),
    ("- - a", A.UnaryOp("-", A.UnaryOp("-", a))),
    ("a.b(c)[0] ** 2", B("**", A.Index(A.Call(A.Member(a, "b"), (A.Arg(c),)), (A.IntLit(0),)),
                         A.IntLit(2))),
    ("(a + b) * c", B("*", B("+", a, b), c)),
    ("a * (b + c)", B("*", a, B("+", b, c))),
    ("not a or b", A.BoolOp("or", A.UnaryOp("not", a), b)),
    ("a == b and b != c", A.BoolOp("and", A.Compare("==", a, b), A.Compare("!=", b, c))),
]


@pytest.mark.parametrize("src,tree", TABLE, ids=[s for s, _ in TABLE])
def test_precedence(src, tree):
    assert parse_expr(src) == tree


@pytest.mark.parametrize("src", ["a < b < c", "a == b == c", "a < b >= c"])
def test_chained_comparisons_are_rejected(src):
    with pytest.raises(TileSyntaxError) as e:
        parse_expr(src)
    assert e.value.code == "E0109"


def test_parenthesised_comparison_chain_is_allowed():
    assert parse_expr("(a < b) == c") == A.Compare("==", A.Compare("<", a, b), c)
