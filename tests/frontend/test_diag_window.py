"""A source line wider than the snippet shows a window around the carets (issue 12: a
5,000-digit literal printed in full flooded the terminal)."""

from tilelang.diagnostics import SNIPPET_WIDTH, Diagnostic, Severity, Span, render


def _render(line: str, col: int, end_col: int) -> list[str]:
    d = Diagnostic(Severity.ERROR, "E0406", "too large", Span("w.tile", 1, col, 1, end_col))
    return render(d, texts={"w.tile": line + "\n"}).splitlines()


def test_long_line_is_cut_around_the_carets():
    line = "const X: i32 = " + "9" * 5000 + ";"
    out = _render(line, 16, 16 + 5000)
    shown, carets = out[3], out[4]
    assert shown == "1 | const X: i32 = " + "9" * (SNIPPET_WIDTH - 15) + "…"
    assert carets == "  |                " + "^" * (SNIPPET_WIDTH - 15)


def test_caret_far_right_keeps_its_column_in_the_window():
    line = "let x = " + "1 + " * 200 + "zz;"
    col = line.index("zz") + 1
    out = _render(line, col, col + 2)
    shown, carets = out[3][4:], out[4][4:]
    assert shown.startswith("…") and len(shown) == SNIPPET_WIDTH + 1
    assert shown[carets.index("^"):carets.index("^") + 2] == "zz"


def test_short_lines_are_unchanged():
    out = _render("let x = zz;", 9, 11)
    assert out[3] == "1 | let x = zz;" and out[4] == "  |         ^^"
