"""The Tile language server (``tilec lsp``, or ``python -m tilelang.lsp``), built on pygls 2.

* diagnostics: every open document is checked as ``tilec check`` checks it (the same parser
  and checker; ``incremental`` reuses what an edit did not change) on open and save, and after
  a change (at once after a pause, else 0.2 s after the last keystroke); the check
  runs on a worker thread, so requests are answered meanwhile, and a result for a version that
  has since changed is never published. At most 50 diagnostics per file (errors first; the
  50th then says how many were left out); a document over 1 MiB characters is not checked;
* completion (the names in scope, module members, keyword arguments), signature help, hover
  (inferred types, doc comments), inlay hints, document symbols, definition, references,
  rename, semantic tokens, "did you mean" quick fixes, formatting (``tilec fmt``) and folding
  ranges, answered from the check of the current text, or while it runs (or the text does
  not parse) from what needs no check and the names of the last check that parsed;
* every request gets a reply: an invalid position or a document that is neither open nor a
  readable file is an InvalidParams error, a request before ``initialize`` is
  ServerNotInitialized, after ``shutdown`` InvalidRequest, a body that is no JSON a ParseError.

Modules: ``positions`` (compiler spans <-> LSP positions), ``diagnostics`` (conversion and cap),
``analysis`` (one check of one version), ``incremental`` (items parsed one by one, imports once
per content), ``symbols`` (scopes: definitions and uses), ``features`` (completion, hover,
symbols), ``navigation`` (definition, references, rename), ``editing`` (signature help, code
actions, formatting, folding), ``semantic`` (semantic tokens, inlay hints), ``scheduler`` (the
worker thread and debouncing), ``protocol`` (JSON-RPC that answers everything), ``server``.
Only ``main`` is imported eagerly, so that a missing pygls is a message, not a traceback.
"""

from __future__ import annotations

import importlib
import sys
from typing import Iterable

_EXPORTS = {
    "to_lsp_position": "positions", "from_lsp_position": "positions",
    "span_to_range": "positions",
    "to_lsp_diagnostic": "diagnostics", "MAX_DIAGNOSTICS": "diagnostics",
    "Analysis": "analysis", "analyze": "analysis", "MAX_CHECKED_CHARS": "analysis",
    "completions": "features", "hover": "features", "document_symbols": "features",
    "definition": "features", "word_at": "features",
    "create_server": "server", "serve": "server",
}


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def check_document(text: str, uri: str) -> list:
    """The LSP diagnostics of `text` as the contents of `uri` (checked on this thread)."""
    from .analysis import analyze

    return analyze(text, uri).diagnostics


def main(argv: Iterable[str] | None = None) -> int:
    """Entry point of ``tilec lsp`` and ``python -m tilelang.lsp``."""
    try:
        from .server import serve
    except ImportError as e:
        sys.stderr.write(f"tilec lsp: the language server needs pygls 2: "
                         f"pip install 'tilec[lsp]' ({e})\n")
        return 1
    return serve(argv)
