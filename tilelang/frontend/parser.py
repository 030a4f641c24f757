"""Source text → AST.

Two parsers build the same AST. The fast one (`lexer` + `descent`: recursive descent with
precedence climbing) reads well-formed source and needs nothing beyond the standard library.
Whenever it declines (a syntax error, anything `tree_to_ast` would diagnose), the text is parsed
again on the Lark path (`lark_parse`: the grammar in `grammar/tile.lark`, its
shipped LALR tables and error recovery), which reports every error exactly as it always has.
Lark is imported only then. docs/frontend.md says why there are two and what holds them equal.
"""

from __future__ import annotations

import re

from ..diagnostics import Diagnostic, Severity, Span, register_codes, remember_source
from . import ast
from .descent import parse_module
from .lexer import Fallback
from .limits import MAX_ERRORS  # noqa: F401 - re-exported: the language server's cap

CODES = {
    "E0101": "unexpected token",
    "E0102": "unclosed delimiter at end of file",
    "E0103": "mismatched closing delimiter",
    "E0104": "unexpected character",
    "E0105": "unterminated string literal",
    "E0106": "unterminated block comment",
    "E0107": "invalid escape sequence in a string literal",
    "E0108": "invalid number literal",
    "E0109": "chained comparison",
    "E0110": "invalid assignment target",
    "E0111": "missing `;`",
    "E0112": "nesting too deep for the compiler",
    "W0101": "a `//` comment inside an open bracket cuts an expression",
}
register_codes(CODES)

# Names of the Lark path, loaded (with Lark) on first use: `from .parser import keywords` works.
_LARK_PATH = frozenset({"parse_tree", "keywords", "grammar_text", "token_span", "_lark"})


def __getattr__(name: str):
    if name in _LARK_PATH:
        from . import lark_parse
        return getattr(lark_parse, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def parse(text: str, file: str = "<input>") -> ast.Module:
    """Parse a whole module; raises TileSyntaxError listing every syntax error (up to 20)."""
    remember_source(file, text)
    try:
        return parse_module(text, file)
    except Fallback:
        pass
    except RecursionError:   # NestingTooDeep: no stage after the parser could go deeper
        raise
    except Exception:  # noqa: BLE001 - a fast-path bug must cost speed, never a wrong answer;
        pass           # tests/frontend/test_fast_parser.py calls parse_module itself and sees it
    from . import lark_parse
    return lark_parse.parse(text, file)


def parse_expr(text: str, file: str = "<expr>") -> ast.Expr:
    """Parse a single expression (used by `-D NAME=VALUE` and tests)."""
    module = parse(f"const __expr__ = {text};", file)
    item = module.items[0]
    assert isinstance(item, ast.ConstDef)
    return item.value


# ---------------------------------------------------------------------------------------------
# W0101: a warning where `//` inside an open bracket looks like Python's floor division.
#
# `//` always starts a comment in Tile (docs/language.md, "Comments"). Inside an open `(` or
# `[` the expression goes on past the line end, so `let h = (n // 2` followed by `+ 1);` on the
# next line is `(n + 1)`: valid, and not what was meant. A comment is suspect when the code
# before it ends with an operand and the comment text starts like one (a number, a bracket, or
# a name followed by an operator or the line end); prose such as `(x,  // the row` is not.

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
