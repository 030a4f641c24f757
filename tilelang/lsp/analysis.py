"""One check of one version of a document: what every feature of the server reads.

The check is the compiler's own entry point (``tilelang.driver.check_source``, as ``tilec
check``). It runs on the server's worker thread only, never on the thread that answers
requests, and a document over ``MAX_CHECKED_CHARS`` is not checked at all.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
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
    #: The checker's module loader: the imported modules (their paths and ASTs).
    loader: object | None = None
    #: While the current text does not parse (or is being checked): the last analysis of the
    #: document that parsed, for the names completion offers.
    earlier: "Analysis | None" = None
    _lines: list[str] | None = None
    _index: object | None = None

    @property
    def index(self):
        """Definitions and references of the names of the module (`symbols.Index`)."""
        if self._index is None:
            from .symbols import Index

            self._index = Index(self)
        return self._index

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
    path = path_of(uri)
    module = typed = loader = None
    try:
        module, typed, diags, loader = _check(text, path, uri)
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
    return Analysis(uri, text, module, typed, lsp_diags, loader=loader)


#: Item caches of the documents checked last (checks run on one thread: no lock).
_CACHES: OrderedDict = OrderedDict()
MAX_DOCUMENTS = 16


def _check(text: str, path: str, uri: str):
    """(module, typed program, diagnostics, loader): what `driver.check_source(text, path)`
    gives, with the document parsed item by item and its imports parsed once per content
    (incremental.py)."""
    from tilelang.diagnostics import TileError
    from tilelang.driver import check_source

    from .incremental import ItemCache, check_module

    if not text.strip():  # the driver's own warning for an empty file
        r = check_source(text, path)
        return r.module, r.typed, list(r.diagnostics), None
    cache = _CACHES.pop(uri, None) or ItemCache()
    _CACHES[uri] = cache
    while len(_CACHES) > MAX_DOCUMENTS:
        _CACHES.popitem(last=False)
    try:
        module = cache.parse(text, path)
    except TileError as e:
        return None, None, list(e.diagnostics), None
    except RecursionError:  # the driver says why
        r = check_source(text, path)
        return r.module, r.typed, list(r.diagnostics), None
    try:
        typed, diags, loader = check_module(module)
    except RecursionError:
        r = check_source(text, path)
        return r.module, r.typed, list(r.diagnostics), None
    return module, typed, list(diags), loader
