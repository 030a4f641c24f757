"""The document's items and the language's built-ins as text: what hover, completion
(lsp/features.py) and signature help (lsp/editing.py) both show."""

from __future__ import annotations

from .analysis import Analysis


def type_text(t) -> str:
    if t is None:
        return ""
    try:
        from tilelang.frontend.printer import type_expr

        return type_expr(t)
    except Exception:  # the printer is best effort here
        return getattr(t, "name", "…")


def expr_text(e) -> str:
    try:
        from tilelang.frontend.printer import expr

        return expr(e)
    except Exception:  # the printer is best effort here
        return "…"


def index_for(a: Analysis):
    """The names of the document: of its current text, or while that does not parse (it is
    being typed) of the last text that did (positions may be a little off)."""
    if a.module is not None:
        return a.index
    if a.earlier is not None and a.earlier.module is not None:
        return a.earlier.index
    return None


def file_lines(path: str | None) -> list[str]:
    if not path:
        return []
    from .diagnostics import _read_lines

    return _read_lines(path)


def doc_comment(lines: list[str], item) -> str:
    """The `//` comment lines right above an item (above its attributes), without `//`."""
    span = getattr(item, "span", None)
    if span is None or span.line < 2:
        return ""
    out = []
    k = span.line - 2
    while 0 <= k < len(lines) and lines[k].strip().startswith("//"):
        out.append(lines[k].strip()[2:].strip())
        k -= 1
    return "\n".join(reversed(out)).strip()


def registry():
    try:
        from tilelang.sema.builtins import BUILTINS
    except ImportError:
        return {}
    return dict(BUILTINS)
