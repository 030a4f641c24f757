"""The Tile language server (``tilec lsp``, or ``python -m tilelang.lsp``), built on pygls 2.

Features:

* diagnostics: every open document is checked by ``tilelang.driver.check_source`` -- the same
  entry point as ``tilec check`` -- on open, change and save; the diagnostics keep their code,
  help, notes and related spans;
* completion: keywords, dtypes, ``Tile``/``Array``, built-in operations (with their signature
  and documentation from the registry), attributes after ``@``, and the document's own items;
* hover: built-ins (signature and documentation), dtypes, keywords, and the document's
  functions, kernels and constants;
* document symbols (kernels, functions, constants, imports) and go-to-definition of the
  document's top-level names.

Positions: the compiler's spans are 1-based with columns counted in code points; LSP positions
are 0-based with columns in UTF-16 code units. ``to_lsp_position`` / ``from_lsp_position``
convert between the two.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
from typing import Iterable

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path

from tilelang import __version__
from tilelang import highlight as hl
from tilelang.diagnostics import Diagnostic, Severity, Span

log = logging.getLogger(__name__)

SOURCE = "tilec"

KEYWORD_DOCS = {
    "kernel": "`kernel name(params) { ... }` — a kernel: each block of the launch grid runs "
              "the body. A kernel is launched, never called.",
    "fn": "`fn name(params) { ... }` — a tile function: generic in unannotated parameters, "
          "inlined at each call. `@host fn` is also callable from Python.",
    "let": "`let name = value;` — binds an immutable name.",
    "var": "`var name = value;` — a name that may be re-bound (`acc += t;`).",
    "const": "`const NAME: i32 = 64;` — a module-level constant, or a constant-embedded kernel "
             "parameter (one machine kernel per distinct value).",
    "static": "`static for i in range(n) { }` — unrolled at compile time.",
    "if": "`if c { } else if d { } else { }`; also the conditional expression `a if c else b`.",
    "else": "The alternative of an `if` statement or expression.",
    "for": "`for i in range(start, stop, step) { }` — a loop; the step must be positive.",
    "in": "`for i in range(...)`.",
    "while": "`while c { }`.",
    "break": "Leaves the innermost loop.",
    "continue": "Starts the next iteration of the innermost loop.",
    "return": "`return value;` — returns from a function.",
    "import": "`import std.math;` — imports a module (std.* from the standard library).",
    "from": "`from std.nn import softmax_rows;` — imports single names.",
    "as": "Renames an import: `import std.math as m;`.",
    "and": "Logical and (short-circuit on scalars).",
    "or": "Logical or (short-circuit on scalars).",
    "not": "Logical negation.",
    "true": "The boolean constant true.",
    "false": "The boolean constant false.",
}
ATTRIBUTE_DOCS = {
    "launch": "`@launch(key = value, ...)` — the kernel's launch contract: maxntid, reqntid, "
              "minctasm/occupancy, maxnreg, cluster/num_ctas, maxclusterrank, "
              "blocksareclusters, opt_level; any value may be `by_target(sm_90a = ..., "
              "default = ...)`.",
    "host": "`@host fn` — the function is also callable from Python on the host.",
}
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


# --- positions -------------------------------------------------------------------------------
def _utf16_len(text: str) -> int:
    return sum(2 if ord(c) > 0xFFFF else 1 for c in text)


def to_lsp_position(lines: list[str], line: int, col: int) -> lsp.Position:
    """The LSP position of the compiler's 1-based (line, code-point column)."""
    ln = max(line - 1, 0)
    text = lines[ln] if ln < len(lines) else ""
    return lsp.Position(line=ln, character=_utf16_len(text[: max(col - 1, 0)]))


def from_lsp_position(lines: list[str], pos: lsp.Position) -> tuple[int, int]:
    """The 0-based (line, code-point index) of an LSP position."""
    text = lines[pos.line] if pos.line < len(lines) else ""
    units = 0
    for i, c in enumerate(text):
        if units >= pos.character:
            return pos.line, i
        units += 2 if ord(c) > 0xFFFF else 1
    return pos.line, len(text)


def span_to_range(lines: list[str], span: Span | None) -> lsp.Range:
    if span is None:
        zero = lsp.Position(line=0, character=0)
        return lsp.Range(start=zero, end=zero)
    start = to_lsp_position(lines, span.line, span.col)
    end = to_lsp_position(lines, span.end_line, span.end_col)
    if (end.line, end.character) < (start.line, start.character):
        end = start
    return lsp.Range(start=start, end=end)


# --- diagnostics -----------------------------------------------------------------------------
_SEVERITY = {
    Severity.ERROR: lsp.DiagnosticSeverity.Error,
    Severity.WARNING: lsp.DiagnosticSeverity.Warning,
    Severity.NOTE: lsp.DiagnosticSeverity.Information,
}


def _same_file(a: str, b: str) -> bool:
    import os

    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.normpath(a) == os.path.normpath(b)


def to_lsp_diagnostic(diag: Diagnostic, path: str, uri: str, text: str) -> lsp.Diagnostic:
    """One compiler diagnostic as an LSP diagnostic of the document `uri` (whose file is `path`
    and contents `text`). A diagnostic located in another file (an imported module) is shown at
    the top of the document, with its real location as related information."""
    lines = text.split("\n")
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
                                  range=span_to_range(other, span)),
            message=diag.message))
        span = None
    for label in diag.related:
        here = _same_file(label.span.file, path)
        rel_lines = lines if here else _read_lines(label.span.file)
        related.append(lsp.DiagnosticRelatedInformation(
            location=lsp.Location(uri=uri if here else (from_fs_path(label.span.file) or ""),
                                  range=span_to_range(rel_lines, label.span)),
            message=label.message))
    return lsp.Diagnostic(
        range=span_to_range(lines, span),
        message=message,
        severity=_SEVERITY.get(diag.severity, lsp.DiagnosticSeverity.Error),
        code=diag.code,
        source=SOURCE,
        related_information=related or None,
    )


def _read_lines(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().split("\n")
    except (OSError, UnicodeDecodeError):
        return []


def check_document(text: str, uri: str) -> list[lsp.Diagnostic]:
    """Check `text` (the contents of `uri`) with the compiler's check entry point."""
    from tilelang.driver import check_source

    path = to_fs_path(uri) or uri
    try:
        result = check_source(text, path)
        diags = list(result.diagnostics)
    except Exception as exc:  # a compiler bug must not take the server down
        log.exception("check_source failed on %s", uri)
        diags = [Diagnostic(Severity.ERROR, "E9999",
                            f"internal compiler error: {type(exc).__name__}: {exc}",
                            help="this is a bug in tilec; please report it with the input file")]
    return [to_lsp_diagnostic(d, path, uri, text) for d in diags]


# --- the document's own items ----------------------------------------------------------------
def parse_module(text: str, uri: str):
    """The parsed module, or None when the document does not parse."""
    from tilelang.diagnostics import TileError
    from tilelang.frontend.parser import parse

    try:
        return parse(text, to_fs_path(uri) or uri)
    except (TileError, RecursionError):
        return None
    except Exception:  # pragma: no cover - parser bug
        log.exception("parse failed on %s", uri)
        return None


def _type_text(t) -> str:
    if t is None:
        return ""
    try:
        from tilelang.frontend.printer import type_expr

        return type_expr(t)
    except Exception:  # the printer is best effort here
        return getattr(t, "name", "…")


def _expr_text(e) -> str:
    try:
        from tilelang.frontend.printer import expr

        return expr(e)
    except Exception:  # the printer is best effort here
        return "…"


def item_signature(item) -> str:
    from tilelang.frontend import ast

    def params(ps) -> str:
        out = []
        for p in ps:
            s = ("const " if p.is_const else "") + p.name
            if p.type is not None:
                s += f": {_type_text(p.type)}"
            if p.default is not None:
                s += f" = {_expr_text(p.default)}"
            out.append(s)
        return ", ".join(out)

    attrs = "".join(f"@{a.name} " for a in getattr(item, "attrs", ()))
    if isinstance(item, ast.KernelDef):
        return f"{attrs}kernel {item.name}({params(item.params)})"
    if isinstance(item, ast.FnDef):
        ret = f" -> {_type_text(item.ret)}" if item.ret is not None else ""
        return f"{attrs}fn {item.name}({params(item.params)}){ret}"
    if isinstance(item, ast.ConstDef):
        typ = f": {_type_text(item.type)}" if item.type is not None else ""
        return f"const {item.name}{typ} = {_expr_text(item.value)}"
    return type(item).__name__


def _name_span(item) -> Span | None:
    span = getattr(item, "name_span", None)
    if span is None or getattr(span, "line", 0) < 1:
        return getattr(item, "span", None)
    return span


def document_symbols(text: str, uri: str) -> list[lsp.DocumentSymbol]:
    from tilelang.frontend import ast

    module = parse_module(text, uri)
    if module is None:
        return []
    lines = text.split("\n")
    out = []
    for item in module.items:
        if isinstance(item, (ast.KernelDef, ast.FnDef, ast.ConstDef)):
            kind = {ast.KernelDef: lsp.SymbolKind.Function, ast.FnDef: lsp.SymbolKind.Function,
                    ast.ConstDef: lsp.SymbolKind.Constant}[type(item)]
            detail = "kernel" if isinstance(item, ast.KernelDef) else (
                "fn" if isinstance(item, ast.FnDef) else "const")
            name = item.name
        elif isinstance(item, (ast.Import, ast.FromImport)):
            kind, detail = lsp.SymbolKind.Module, "import"
            name = ".".join(item.path)
        else:
            continue
        full = span_to_range(lines, item.span)
        sel = span_to_range(lines, _name_span(item))
        out.append(lsp.DocumentSymbol(name=name, kind=kind, range=full, selection_range=sel,
                                      detail=detail))
    return out


def _top_level_items(text: str, uri: str) -> dict:
    from tilelang.frontend import ast

    module = parse_module(text, uri)
    if module is None:
        return {}
    return {it.name: it for it in module.items
            if isinstance(it, (ast.KernelDef, ast.FnDef, ast.ConstDef))}


# --- completion and hover --------------------------------------------------------------------
def _registry():
    try:
        from tilelang.sema.builtins import BUILTINS
    except ImportError:
        return {}
    return dict(BUILTINS)


def builtin_signature(b) -> str:
    params = [str(p) for p in b.params]
    if getattr(b, "variadic", None):
        params.append(f"*{b.variadic}")
    return f"{b.name}({', '.join(params)})"


def dtype_doc(name: str) -> str:
    try:
        from tilelang.sema.types import DTYPES

        d = DTYPES[name]
    except (ImportError, KeyError):
        return f"dtype `{name}`"
    parts = [f"dtype `{name}`"]
    bits = getattr(d, "bits", None)
    if bits:
        parts.append(f"{bits} bits")
    if getattr(d, "restricted", False):
        parts.append("restricted float: no implicit promotion, convert with `astype`")
    return " — ".join(parts) + f". `{name}(x)` is a strictly typed constant."


def completions(text: str, uri: str, position: lsp.Position) -> list[lsp.CompletionItem]:
    lines = text.split("\n")
    ln, idx = from_lsp_position(lines, position)
    line = lines[ln] if ln < len(lines) else ""
    before = line[:idx]
    prefix = re.search(r"[A-Za-z_][A-Za-z0-9_]*$", before)
    start = idx - (len(prefix.group(0)) if prefix else 0)
    if before[:start].endswith("@"):
        return [lsp.CompletionItem(label=a, kind=lsp.CompletionItemKind.Property,
                                   documentation=_md(ATTRIBUTE_DOCS.get(a, "")))
                for a in hl.ATTRIBUTES]
    if before[:start].endswith("."):
        return []  # members are not known without types
    items: list[lsp.CompletionItem] = []
    for kw in hl.keywords():
        items.append(lsp.CompletionItem(label=kw, kind=lsp.CompletionItemKind.Keyword,
                                        documentation=_md(KEYWORD_DOCS.get(kw, ""))))
    for d in hl.dtypes():
        items.append(lsp.CompletionItem(label=d, kind=lsp.CompletionItemKind.TypeParameter,
                                        detail="dtype", documentation=_md(dtype_doc(d))))
    for t in hl.TYPE_CONSTRUCTORS:
        items.append(lsp.CompletionItem(label=t, kind=lsp.CompletionItemKind.Class,
                                        detail=f"{t}[dtype, ...]"))
    for w in hl.FLOAT_WORDS:
        items.append(lsp.CompletionItem(label=w, kind=lsp.CompletionItemKind.Constant))
    reg = _registry()
    for name in hl.builtins():
        b = reg.get(name)
        items.append(lsp.CompletionItem(
            label=name, kind=lsp.CompletionItemKind.Function,
            detail=builtin_signature(b) if b else "built-in",
            documentation=_md(getattr(b, "doc", "") or "") if b else None))
    for name, item in _top_level_items(text, uri).items():
        from tilelang.frontend import ast

        kind = (lsp.CompletionItemKind.Constant if isinstance(item, ast.ConstDef)
                else lsp.CompletionItemKind.Function)
        items.append(lsp.CompletionItem(label=name, kind=kind, detail=item_signature(item)))
    if prefix:
        p = prefix.group(0)
        items = [i for i in items if i.label.startswith(p)]
    return items


def _md(text: str) -> lsp.MarkupContent | None:
    if not text:
        return None
    return lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=text)


def word_at(text: str, position: lsp.Position) -> tuple[str, int, int, int] | None:
    """(word, line, start, end) of the identifier at `position` (code-point indices)."""
    lines = text.split("\n")
    ln, idx = from_lsp_position(lines, position)
    if ln >= len(lines):
        return None
    for m in _IDENT.finditer(lines[ln]):
        if m.start() <= idx <= m.end():
            return m.group(0), ln, m.start(), m.end()
    return None


def binding_type(text: str, uri: str, word: str, line: int, col: int) -> str | None:
    """The checker's inferred type of the binding `word` visible at (line, col), 1-based:
    the nearest declaration of that name at or before the position."""
    from tilelang.driver import check_source

    path = to_fs_path(uri) or uri
    try:
        result = check_source(text, path)
    except Exception:  # a compiler bug must not take the server down
        log.exception("check_source failed on %s", uri)
        return None
    if result.typed is None:
        return None
    best = None
    for r in result.typed.records:
        if r.name != word or r.span is None or r.kind == "set":
            continue
        if (r.span.line, r.span.col) <= (line, col) and \
                (best is None or (r.span.line, r.span.col) > (best.span.line, best.span.col)):
            best = r
    if best is None:
        return None
    const = f" = {best.const}" if best.const is not None and best.kind != "param" else ""
    return f"```tile\n{best.kind} {word}: {best.type}{const}\n```\n\n*in {best.context}*"


def hover(text: str, uri: str, position: lsp.Position) -> lsp.Hover | None:
    found = word_at(text, position)
    if found is None:
        return None
    word, ln, start, end = found
    lines = text.split("\n")
    line = lines[ln]
    value = None
    if not (start > 0 and line[start - 1] in "@.") and word not in _top_level_items(text, uri):
        value = binding_type(text, uri, word, ln + 1, start + 1)
    if value is not None:
        pass  # a binding's inferred type is the most specific answer
    elif start > 0 and line[start - 1] == "@" and word in ATTRIBUTE_DOCS:
        value = ATTRIBUTE_DOCS[word]
    elif start > 0 and line[start - 1] == ".":
        return None
    elif word in _top_level_items(text, uri):
        item = _top_level_items(text, uri)[word]
        value = f"```tile\n{item_signature(item)}\n```"
    elif word in hl.builtins():
        b = _registry().get(word)
        if b is not None:
            value = f"```tile\n{builtin_signature(b)}\n```\n\n{b.doc}".rstrip()
            value += f"\n\n*built-in ({b.group})*"
        else:
            value = f"built-in `{word}`"
    elif word in hl.dtypes():
        value = dtype_doc(word)
    elif word in hl.keywords():
        value = KEYWORD_DOCS.get(word, f"keyword `{word}`")
    elif word in hl.TYPE_CONSTRUCTORS:
        value = {"Tile": "`Tile[dtype, d0, d1, ...]` — an immutable tile value; every "
                         "dimension is a power of two.",
                 "Array": "`Array[dtype, rank]` — a strided view of global memory."}[word]
    elif word in hl.FLOAT_WORDS:
        value = f"the float constant `{word}`"
    if value is None:
        return None
    rng = lsp.Range(start=to_lsp_position(lines, ln + 1, start + 1),
                    end=to_lsp_position(lines, ln + 1, end + 1))
    return lsp.Hover(contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=value),
                     range=rng)


def definition(text: str, uri: str, position: lsp.Position) -> lsp.Location | None:
    found = word_at(text, position)
    if found is None:
        return None
    word, ln, start, _ = found
    line = text.split("\n")[ln]
    if start > 0 and line[start - 1] in ".@":
        return None
    item = _top_level_items(text, uri).get(word)
    if item is None:
        return None
    return lsp.Location(uri=uri, range=span_to_range(text.split("\n"), _name_span(item)))


# --- the server ------------------------------------------------------------------------------
def create_server() -> LanguageServer:
    server = LanguageServer("tilec-lsp", __version__,
                            text_document_sync_kind=lsp.TextDocumentSyncKind.Full)

    def publish(ls: LanguageServer, uri: str) -> None:
        doc = ls.workspace.get_text_document(uri)
        ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(
            uri=uri, version=doc.version, diagnostics=check_document(doc.source, uri)))

    @server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: LanguageServer, params: lsp.DidOpenTextDocumentParams) -> None:
        publish(ls, params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: LanguageServer, params: lsp.DidChangeTextDocumentParams) -> None:
        publish(ls, params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: LanguageServer, params: lsp.DidSaveTextDocumentParams) -> None:
        publish(ls, params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: LanguageServer, params: lsp.DidCloseTextDocumentParams) -> None:
        ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(
            uri=params.text_document.uri, diagnostics=[]))

    @server.feature(lsp.TEXT_DOCUMENT_COMPLETION,
                    lsp.CompletionOptions(trigger_characters=["@"]))
    def completion(ls: LanguageServer, params: lsp.CompletionParams) -> lsp.CompletionList:
        doc = ls.workspace.get_text_document(params.text_document.uri)
        return lsp.CompletionList(is_incomplete=False,
                                  items=completions(doc.source, doc.uri, params.position))

    @server.feature(lsp.TEXT_DOCUMENT_HOVER)
    def on_hover(ls: LanguageServer, params: lsp.HoverParams) -> lsp.Hover | None:
        doc = ls.workspace.get_text_document(params.text_document.uri)
        return hover(doc.source, doc.uri, params.position)

    @server.feature(lsp.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
    def on_symbols(ls: LanguageServer,
                   params: lsp.DocumentSymbolParams) -> list[lsp.DocumentSymbol]:
        doc = ls.workspace.get_text_document(params.text_document.uri)
        return document_symbols(doc.source, doc.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DEFINITION)
    def on_definition(ls: LanguageServer,
                      params: lsp.DefinitionParams) -> lsp.Location | None:
        doc = ls.workspace.get_text_document(params.text_document.uri)
        return definition(doc.source, doc.uri, params.position)

    return server


def main(argv: Iterable[str] | None = None) -> int:
    """Entry point of ``tilec lsp``: serve over stdio (default) or TCP."""
    p = argparse.ArgumentParser(prog="tilec lsp", description="The Tile language server.")
    p.add_argument("--stdio", action="store_true", help="serve over stdin/stdout (default)")
    p.add_argument("--tcp", action="store_true", help="serve over TCP")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=2087)
    p.add_argument("--log-file", help="write the server's log here")
    args = p.parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.log_file:
        logging.basicConfig(filename=args.log_file, level=logging.DEBUG)
    server = create_server()
    if args.tcp:
        server.start_tcp(args.host, args.port)
    else:
        server.start_io()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
