"""A warning where `//` inside an open bracket looks like Python's floor division.

`//` always starts a comment in Tile (docs/language.md, "Comments"). Inside an open `(` or
`[` the expression goes on past the line end, so `let h = (n // 2` followed by `+ 1);` on the
next line is `(n + 1)`: valid, and not what was meant. A comment is suspect when the code
before it ends with an operand and the comment text starts like one (a number, a bracket, or
a name followed by an operator or the line end); prose such as `(x,  // the row` is not."""

from __future__ import annotations

import re

from ..diagnostics import Diagnostic, Severity, Span, register_codes

register_codes({"W0101": "a `//` comment inside an open bracket cuts an expression"})

# strings, block comments (blanked, keeping newlines), line comments, brackets
_PIECES = re.compile(r'"(?:[^"\\\n]|\\[^\n])*"|/\*[\s\S]*?\*/|//[^\n]*|[()\[\]{}]|\n')
_OPERAND_END = re.compile(r"[A-Za-z0-9_)\]]\s*$")
_OPERAND_START = re.compile(r"\s*(?:[0-9(]|[A-Za-z_]\w*\s*(?:[-+*/%)\],;&|^<>=]|$))")


def floor_division_comments(text: str, path: str) -> list[Diagnostic]:
    """W0101 for each `//` comment that cuts an expression inside an open bracket."""
    if "//" not in text:
        return []
    out: list[Diagnostic] = []
    opened: list[str] = []
    line, line_start = 1, 0
    for m in _PIECES.finditer(text):
        tok = m.group()
        if tok == "\n":
            line, line_start = line + 1, m.end()
        elif tok[:2] == "/*":
            line_start = m.start() + 1 + tok.rfind("\n") if "\n" in tok else line_start
            line += tok.count("\n")
        elif tok in "([{":
            opened.append(tok)
        elif tok in ")]}":
            if opened:
                opened.pop()
        elif tok[:2] == "//" and opened and opened[-1] != "{":
            before = text[line_start:m.start()]
            if _OPERAND_END.search(before) and _OPERAND_START.match(tok[2:]):
                col = m.start() - line_start + 1
                out.append(Diagnostic(
                    Severity.WARNING, "W0101", "`//` starts a comment here, inside an open "
                    f"`{opened[-1]}`: the rest of the line is ignored and the expression "
                    "continues on the next line", Span(path, line, col, line, col + len(tok)),
                    help="floor division is `floordiv(a, b)` (`//` always starts a comment); "
                         "if this is a comment, put it after the closing bracket"))
    return out
