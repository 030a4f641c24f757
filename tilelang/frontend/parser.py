"""Source text → AST.

Two parsers build the same AST. The fast one (`lexer` + `descent`: recursive descent with
precedence climbing) reads well-formed source and needs nothing beyond the standard library.
Whenever it declines (a syntax error, anything `tree_to_ast` would diagnose), the text is parsed
again on the Lark path (`lark_parse`: the grammar in `grammar/tile.lark`, its
shipped LALR tables and error recovery), which reports every error exactly as it always has.
Lark is imported only then. docs/frontend.md says why there are two and what holds them equal.
"""

from __future__ import annotations

from ..diagnostics import register_codes, remember_source
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
