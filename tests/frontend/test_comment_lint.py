"""W0101: a `//` comment that cuts an expression inside an open bracket (tilelang/frontend/
parser.py). `//` always starts a comment in Tile, so `(n // 2` continued on the next line
silently computes something else; prose comments inside brackets are left alone."""

from __future__ import annotations

from tilelang.diagnostics import Severity, render_all
from tilelang.driver import check_source, compile_source
from tilelang.frontend.parser import floor_division_comments

CUT = """kernel k(a: Array[f32, 1], n: i32) {
    let h = (n // 2
        + 1);
    let t = load(a, index = (h,), shape = (16,));
    store(a, index = (0,), tile = t);
}
"""

WARNING = """warning[W0101]: `//` starts a comment here, inside an open `(`: the rest of the line is ignored and the expression continues on the next line
 --> cut.tile:2:16
  |
2 |     let h = (n // 2
  |                ^^^^
  |
  = help: floor division is `floordiv(a, b)` (`//` always starts a comment); if this is a comment, put it after the closing bracket"""


def test_the_cut_expression_is_a_warning_with_a_span():
    r = check_source(CUT, "cut.tile")
    assert [d.severity for d in r.diagnostics] == [Severity.WARNING]
    assert render_all(r.diagnostics) == WARNING


def test_compiling_warns_too():
    res = compile_source(CUT, "cut.tile", until="tir")
    assert [d.code for d in res.diagnostics] == ["W0101"]


def test_comments_that_are_not_expressions_are_quiet():
    quiet = [
        "let h = floordiv(n,   // the count\n    2);",
        "let h = (n  // the row we want\n    );",
        "let h = (n + 1); // (n // 2 in a comment after the code",
        'let s = ("a // b"\n);',
        "let h = (n /* a // b */\n + 1);",
        "if x { // 2 more\n}",
        "let h = n; // 2",
    ]
    for text in quiet:
        assert floor_division_comments(text, "q.tile") == [], text


def test_lines_and_columns_follow_block_comments_and_brackets():
    text = "/* one\n two */ let a = [x,\n  (y // 3\n  )];\nlet b = (z\n  // 4\n);"
    got = [(d.span.line, d.span.col, d.span.end_col, d.message.split("open ")[1][:3])
           for d in floor_division_comments(text, "p.tile")]
    assert got == [(3, 6, 10, "`(`")]
