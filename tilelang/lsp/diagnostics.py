"""Compiler diagnostics as LSP diagnostics, at most ``MAX_DIAGNOSTICS`` per document."""

from __future__ import annotations

import os
import stat

from lsprotocol import types as lsp
from pygls.uris import from_fs_path

from tilelang.diagnostics import Diagnostic, Severity

from .positions import UTF16, span_to_range, split_lines

SOURCE = "tilec"
#: Diagnostics published per document; the compiler's own caps (20 syntax errors, 50 checker
#: errors) leave warnings unbounded, and a client drowns in thousands of them.
MAX_DIAGNOSTICS = 50

_SEVERITY = {
    Severity.ERROR: lsp.DiagnosticSeverity.Error,
    Severity.WARNING: lsp.DiagnosticSeverity.Warning,
    Severity.NOTE: lsp.DiagnosticSeverity.Information,
}
_RANK = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.NOTE: 2}


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return os.path.normpath(a) == os.path.normpath(b)


def _read_lines(path: str) -> list[str]:
    """The lines of another file a diagnostic points into (an imported module); only a regular
    file is read, so a span naming a FIFO or a device cannot block the server."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except (OSError, ValueError):
        return []
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return []
        with os.fdopen(fd, "rb", closefd=False) as f:
            return split_lines(f.read().decode("utf-8", errors="replace"))
    except OSError:
        return []
    finally:
        os.close(fd)


def to_lsp_diagnostic(diag: Diagnostic, path: str, uri: str, text: str,
                      encoding: str = UTF16) -> lsp.Diagnostic:
    """One compiler diagnostic as an LSP diagnostic of the document `uri` (whose file is `path`
    and contents `text`). A diagnostic located in another file (an imported module) is shown at
    the top of the document, with its real location as related information."""
    lines = split_lines(text)
    message = diag.message
    if diag.label:
        message += f" ({diag.label})"
    if diag.help:
        message += f"\nhelp: {diag.help}"
    for note in diag.notes:
        message += f"\nnote: {note}"
    related: list[lsp.DiagnosticRelatedInformation] = []
    span = diag.span
    if span is not None and not _same_file(span.file, path):
        other = _read_lines(span.file)
        related.append(lsp.DiagnosticRelatedInformation(
            location=lsp.Location(uri=from_fs_path(span.file) or span.file,
                                  range=span_to_range(other, span, encoding)),
            message=diag.message))
        span = None
    for label in diag.related:
        here = _same_file(label.span.file, path)
        rel_lines = lines if here else _read_lines(label.span.file)
        related.append(lsp.DiagnosticRelatedInformation(
            location=lsp.Location(uri=uri if here else (from_fs_path(label.span.file) or ""),
                                  range=span_to_range(rel_lines, label.span, encoding)),
            message=label.message))
    return lsp.Diagnostic(
        range=span_to_range(lines, span, encoding),
        message=message,
        severity=_SEVERITY.get(diag.severity, lsp.DiagnosticSeverity.Error),
        code=diag.code,
        source=SOURCE,
        related_information=related or None,
    )


def capped(diags: list[Diagnostic]) -> tuple[list[Diagnostic], int]:
    """The diagnostics to publish (errors first, then warnings, then notes, each in the
    compiler's order) and how many were left out. At most ``MAX_DIAGNOSTICS`` are published in
    all: when there are more, the last place goes to a note saying how many were left out."""
    ordered = sorted(diags, key=lambda d: _RANK.get(d.severity, 0))
    if len(ordered) <= MAX_DIAGNOSTICS:
        return ordered, 0
    return ordered[:MAX_DIAGNOSTICS - 1], len(ordered) - (MAX_DIAGNOSTICS - 1)


def left_out_note(count: int) -> lsp.Diagnostic:
    zero = lsp.Position(line=0, character=0)
    return lsp.Diagnostic(
        range=lsp.Range(start=zero, end=zero),
        message=f"{count} more diagnostics are not shown (the language server sends at most "
                f"{MAX_DIAGNOSTICS} per file); run `tilec check` on the file for all of them",
        severity=lsp.DiagnosticSeverity.Information, source=SOURCE)


def convert_all(diags: list[Diagnostic], path: str, uri: str, text: str,
                encoding: str = UTF16) -> list[lsp.Diagnostic]:
    """The capped list of LSP diagnostics of one document."""
    shown, left = capped(diags)
    out = [to_lsp_diagnostic(d, path, uri, text, encoding) for d in shown]
    if left:
        out.append(left_out_note(left))
    return out
