"""The server's copy of an open document, kept equal to the editor's.

The server asks for whole-text changes (`TextDocumentSyncKind.Full`); a client may still send
ranged edits. They are applied here, to the copy the checker holds, and only when every range
lies in the document the server has (0 <= line, a line at most one past the last, the start
not after the end; a character past the end of its line means the line's end, as the protocol
says). A change that cannot be applied, or that the protocol library could not even read (a
negative position), leaves the copy *out of sync*: the server then says so to the user once
(window/showMessage), clears the document's diagnostics, answers requests about it with
ContentModified, and ignores further ranged edits, until a whole-text change or a new
didOpen resynchronises it (docs/cli.md, `tilec lsp`).
"""

from __future__ import annotations

from typing import Sequence

from .positions import UTF16, from_lsp_position, split_lines


class OutOfSync(Exception):
    """A change that cannot be applied to the server's copy; the message says why."""


def apply_changes(text: str | None, changes: Sequence, encoding: str = UTF16) -> str:
    """`text` after `changes` (LSP content change events, in order). `text` None means the
    copy is already out of sync: only a whole-text change gives a text again."""
    for k, ch in enumerate(changes):
        rng = getattr(ch, "range", None)
        if rng is None:
            text = ch.text
            continue
        if text is None:
            raise OutOfSync("a ranged edit arrived while the server's copy was out of sync")
        text = _apply_range(text, rng, ch.text, encoding, k)
    if text is None:
        raise OutOfSync("no whole text arrived to resynchronise the server's copy")
    return text


def _apply_range(text: str, rng, new: str, encoding: str, k: int) -> str:
    lines = split_lines(text)
    start = _offset(lines, rng.start, encoding, k, "start")
    end = _offset(lines, rng.end, encoding, k, "end")
    if end < start:
        raise OutOfSync(f"edit {k + 1} ends ({_show(rng.end)}) before it starts "
                        f"({_show(rng.start)})")
    return text[:start] + new + text[end:]


def _offset(lines: list[str], pos, encoding: str, k: int, which: str) -> int:
    line, character = pos.line, pos.character
    if line < 0 or character < 0:
        raise OutOfSync(f"edit {k + 1} has a negative {which} ({_show(pos)})")
    if line == len(lines) and character == 0:          # the end of the document
        return sum(len(x) + 1 for x in lines) - 1
    if line >= len(lines):
        raise OutOfSync(f"edit {k + 1}'s {which} ({_show(pos)}) is past the end of the "
                        f"document ({len(lines)} lines)")
    _, idx = from_lsp_position(lines, pos, encoding)
    return sum(len(x) + 1 for x in lines[:line]) + idx


def _show(pos) -> str:
    return f"line {pos.line}, character {pos.character}"
