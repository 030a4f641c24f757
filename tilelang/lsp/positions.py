"""Positions between the compiler and the client.

The compiler's spans are 1-based with columns counted in code points. LSP positions are 0-based
with columns counted in the units of the negotiated position encoding: UTF-16 code units unless
the client offered another (Neovim offers UTF-8 first, for instance). Every function takes the
encoding as ``"utf-16"`` (the default), ``"utf-8"`` or ``"utf-32"``.
"""

from __future__ import annotations

from lsprotocol import types as lsp

from tilelang.diagnostics import Span

UTF16 = "utf-16"


def char_units(c: str, encoding: str = UTF16) -> int:
    """How many units of `encoding` the code point `c` takes (a lone surrogate counts as one
    UTF-16 unit and as three UTF-8 bytes, the way editors that keep them count them)."""
    o = ord(c)
    if encoding == "utf-32":
        return 1
    if encoding == "utf-8":
        return 1 if o < 0x80 else 2 if o < 0x800 else 3 if o < 0x10000 else 4
    return 2 if o > 0xFFFF else 1


def text_units(text: str, encoding: str = UTF16) -> int:
    if encoding == "utf-32" or text.isascii():
        return len(text)
    return sum(char_units(c, encoding) for c in text)


def split_lines(text: str) -> list[str]:
    """The document's lines as the compiler counts them (a CR before the newline stays part of
    the line, so columns agree with the compiler's)."""
    return text.split("\n")


def to_lsp_position(lines: list[str], line: int, col: int, encoding: str = UTF16) -> lsp.Position:
    """The LSP position of the compiler's 1-based (line, code-point column)."""
    ln = max(line - 1, 0)
    text = lines[ln] if ln < len(lines) else ""
    return lsp.Position(line=ln, character=text_units(text[: max(col - 1, 0)], encoding))


def from_lsp_position(lines: list[str], pos: lsp.Position,
                      encoding: str = UTF16) -> tuple[int, int]:
    """The 0-based (line, code-point index) of an LSP position; a character past the end of its
    line means the end of the line (as the protocol says), a line past the end of the document
    keeps its number (callers check it against ``len(lines)``)."""
    text = lines[pos.line] if 0 <= pos.line < len(lines) else ""
    if encoding == "utf-32" or text.isascii():
        return pos.line, min(max(pos.character, 0), len(text))
    units = 0
    for i, c in enumerate(text):
        if units >= pos.character:
            return pos.line, i
        units += char_units(c, encoding)
    return pos.line, len(text)


def span_to_range(lines: list[str], span: Span | None, encoding: str = UTF16) -> lsp.Range:
    if span is None:
        zero = lsp.Position(line=0, character=0)
        return lsp.Range(start=zero, end=zero)
    start = to_lsp_position(lines, span.line, span.col, encoding)
    end = to_lsp_position(lines, span.end_line, span.end_col, encoding)
    if (end.line, end.character) < (start.line, start.character):
        end = start
    return lsp.Range(start=start, end=end)
