"""`tilec fmt` of Markdown files: the ```tile code blocks that parse as a module are laid out
like .tile files; blocks that do not parse (fragments: a lone statement, an expression, an
example of an error) and all other text stay as they are."""

from __future__ import annotations

import re

from . import WIDTH, format_source

_BLOCK = re.compile(r"^(?P<fence>```+)tile[ \t]*\n(?P<code>.*?)^(?P=fence)[ \t]*$", re.S | re.M)


def format_markdown(text: str, file: str = "<input>", width: int = WIDTH) -> str:
    """`text` with each ```tile block that parses formatted; raises `FormatError` as
    `format_source` does."""
    from tilelang.diagnostics import TileError

    def one(m: re.Match) -> str:
        code = m.group("code")
        try:
            out = format_source(code, file, width)
        except (TileError, RecursionError):
            return m.group(0)
        return m.group(0).replace(code, out, 1) if out else m.group(0)

    return _BLOCK.sub(one, text)
