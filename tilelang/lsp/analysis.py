"""One check of one version of a document: what every feature of the server reads.

The check is the compiler's own entry point (``tilelang.driver.check_source``, as ``tilec
check``). It runs on the server's worker thread only, never on the thread that answers
requests, and a document over ``MAX_CHECKED_CHARS`` is not checked at all.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from lsprotocol import types as lsp
from pygls.uris import to_fs_path

from tilelang.diagnostics import Diagnostic, Severity

from .diagnostics import SOURCE, convert_all
from .positions import UTF16, split_lines

log = logging.getLogger(__name__)

#: Documents longer than this (in characters) get one informational diagnostic instead of a
#: check: checking costs some microseconds per character, and nobody writes a 1 MiB kernel file.
MAX_CHECKED_CHARS = 1 << 20


@dataclass
class Analysis:
    """The result of checking `text`: the parsed module (None when it does not parse), the
    checked program (None when the checker did not run) and the published diagnostics."""
    uri: str
    text: str
    module: object | None = None
    typed: object | None = None
    diagnostics: list[lsp.Diagnostic] = field(default_factory=list)
    checked: bool = True  # False: not checked (too large, or its check is still running)
    #: While the check of the current text runs: the module of the last check of the document,
    #: whose items still name the right signatures (hover, completion), not positions.
    earlier_module: object | None = None
    _lines: list[str] | None = None

    @property
    def lines(self) -> list[str]:
        if self._lines is None:
            self._lines = split_lines(self.text)
        return self._lines


def path_of(uri: str) -> str:
    try:
        return to_fs_path(uri) or uri
    except Exception:  # an odd URI is still a name for the compiler's messages
        return uri


def too_large(text: str) -> bool:
    return len(text) > MAX_CHECKED_CHARS


def too_large_note(text: str) -> lsp.Diagnostic:
    zero = lsp.Position(line=0, character=0)
    return lsp.Diagnostic(
        range=lsp.Range(start=zero, end=zero), severity=lsp.DiagnosticSeverity.Information,
        source=SOURCE,
        message=f"this document has {len(text):,} characters, more than the language server "
                f"checks ({MAX_CHECKED_CHARS:,}); run `tilec check` on it instead")


def analyze(text: str, uri: str, encoding: str = UTF16) -> Analysis:
    """Check `text` as the contents of `uri`. Never raises: a compiler bug becomes an E9999
    diagnostic, so one bad document cannot take the server down."""
    if too_large(text):
        return Analysis(uri, text, diagnostics=[too_large_note(text)], checked=False)
    from tilelang.driver import check_source

    path = path_of(uri)
    module = typed = None
    try:
        result = check_source(text, path)
        diags = list(result.diagnostics)
        module, typed = result.module, result.typed
    except Exception as exc:  # a compiler bug must not take the server down
        log.error("check_source failed on %s: %s: %s", uri, type(exc).__name__, exc)
        diags = [Diagnostic(Severity.ERROR, "E9999",
                            f"internal compiler error: {type(exc).__name__}: {exc}",
                            help="this is a bug in tilec; please report it with the input file")]
    try:
        lsp_diags = convert_all(diags, path, uri, text, encoding)
    except Exception as exc:  # pragma: no cover - a conversion bug must not lose the document
        log.error("diagnostics of %s not converted: %s: %s", uri, type(exc).__name__, exc)
        lsp_diags = []
    return Analysis(uri, text, module, typed, lsp_diags)
