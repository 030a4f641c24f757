"""`tilec fmt`: the one canonical layout of Tile source.

Four-space indentation, one statement per line, `{` on the line of its header, `} else {`,
each attribute on a line of its own, spaces around binary operators, `=`, `->` and after `,`
and `:`, none inside brackets. A statement wider than `WIDTH` (100) columns is wrapped at its
longest bracket group, one element per line with a trailing comma. Comments stay where they
were (on a line of their own, or after code), and so do single blank lines between statements
and items; literals keep their spelling.

The formatter works on the token stream with its comments (`tokens`), laid out by `layout`;
the program is parsed before and after, and a result that parses to a different program is an
internal error: nothing is written.
"""

from __future__ import annotations

from ..frontend.limits import deep_recursion
from .layout import WIDTH, LayoutError, layout
from .tokens import LexError, tokenize

__all__ = ["WIDTH", "FormatError", "format_source"]


class FormatError(Exception):
    """The formatter would have changed the program, or could not lay it out: a bug of the
    formatter, reported as an internal error."""


def format_source(text: str, file: str = "<input>", width: int = WIDTH) -> str:
    """The canonical layout of `text`. Raises `TileSyntaxError` when `text` does not parse and
    `FormatError` when the layout does not parse back to the same program."""
    from tilelang.diagnostics import TileSyntaxError
    from tilelang.frontend.parser import parse

    try:
        before = parse(text, file)
    except RecursionError:
        raise FormatError(f"{file}: the file nests too deeply for the compiler; it is left as "
                          f"it was") from None
    try:
        with deep_recursion(20_000):
            out = layout(tokenize(text), width)
    except RecursionError:
        raise FormatError(f"{file}: the file nests too deeply to be formatted; it is left as "
                          f"it was") from None
    except (LexError, LayoutError) as e:
        raise FormatError(f"internal error: {file}: the formatter could not lay out the file "
                          f"({e}); the file is left as it was") from None
    try:
        after = parse(out, file)
    except (TileSyntaxError, RecursionError) as e:
        first = e.diagnostics[0] if getattr(e, "diagnostics", None) else e
        raise FormatError(f"internal error: {file}: the formatted text does not parse "
                          f"({getattr(first, 'message', first)}); the file is left as it "
                          f"was") from None
    if after != before:
        raise FormatError(f"internal error: {file}: formatting would change the program; the "
                          f"file is left as it was")
    return out
