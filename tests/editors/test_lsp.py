"""The language server (tilelang/lsp/): position and diagnostic conversion, completion,
hover, symbols, definitions, and a real JSON-RPC session over stdio with pygls' client."""

from __future__ import annotations

import asyncio
import sys

import pytest

pytest.importorskip("pygls", reason="pygls is not installed (pip install 'tilec[lsp]')")

from lsprotocol import types as lsp  # noqa: E402
from pygls.uris import from_fs_path  # noqa: E402

from editor_helpers import ROOT, example, tile_files  # noqa: E402
from tilelang import lsp as tls  # noqa: E402
from tilelang.diagnostics import Diagnostic, Label, Severity, Span  # noqa: E402

BROKEN = "kernel f(a: Array[f32, 1] {\n}\n"


def pos(line, character):
    return lsp.Position(line=line, character=character)


def test_positions_count_utf16_units():
    lines = ["// 🙂 é", "let x = 1;"]
    # the compiler's column 6 is after "// 🙂 " (5 code points); 🙂 is 2 UTF-16 units
    assert tls.to_lsp_position(lines, 1, 6) == pos(0, 6)
    assert tls.from_lsp_position(lines, pos(0, 6)) == (0, 5)
    assert tls.to_lsp_position(lines, 2, 5) == pos(1, 4)
    assert tls.from_lsp_position(lines, pos(1, 99)) == (1, 10)
    assert tls.span_to_range(lines, None) == lsp.Range(start=pos(0, 0), end=pos(0, 0))


def test_syntax_error_becomes_a_diagnostic_with_related_span():
    (d,) = tls.check_document(BROKEN, "file:///tmp/broken.tile")
    assert d.severity == lsp.DiagnosticSeverity.Error
    assert d.source == "tilec" and d.code == "E0101"
    assert d.range.start == pos(0, 26)
    assert "expected `)`" in d.message
    (rel,) = d.related_information
    assert rel.location.uri == "file:///tmp/broken.tile"
    assert rel.location.range.start == pos(0, 8) and rel.message == "opened here"


def test_diagnostic_fields_help_notes_and_other_files(tmp_path):
    other = tmp_path / "lib.tile"
    other.write_text("fn f() {\n    return 1;\n}\n", encoding="utf-8")
    main = tmp_path / "main.tile"
    text = "import lib;\nlet\n"
    d = Diagnostic(Severity.WARNING, "W0002", "something", Span(str(main), 2, 1, 2, 4),
                   label="here", help="do this", notes=("n1",),
                   related=(Label(Span(str(other), 2, 5, 2, 11), "see"),))
    got = tls.to_lsp_diagnostic(d, str(main), from_fs_path(str(main)), text)
    assert got.severity == lsp.DiagnosticSeverity.Warning
    assert got.range == lsp.Range(start=pos(1, 0), end=pos(1, 3))
    assert got.message == "something (here)\nhelp: do this\nnote: n1"
    (rel,) = got.related_information
    assert rel.location.uri == from_fs_path(str(other))
    assert rel.location.range == lsp.Range(start=pos(1, 4), end=pos(1, 10))
    # a diagnostic inside another file is shown at the top, pointing there
    d2 = Diagnostic(Severity.ERROR, "E0001", "bad import", Span(str(other), 1, 4, 1, 5))
    got2 = tls.to_lsp_diagnostic(d2, str(main), from_fs_path(str(main)), text)
    assert got2.range.start == pos(0, 0)
    assert got2.related_information[0].location.uri == from_fs_path(str(other))


@pytest.mark.parametrize("path", [p for p in tile_files() if p.parent.name == "examples"],
                         ids=lambda p: p.name)
def test_examples_check_clean(path):
    diags = tls.check_document(path.read_text(encoding="utf-8"), from_fs_path(str(path)))
    assert [d for d in diags if d.severity == lsp.DiagnosticSeverity.Error] == []


def test_completion():
    def complete(text, position):
        return tls.completions(tls.analyze(text, "file:///t.tile"), position)

    labels = [c.label for c in complete("let x = lo", pos(0, 10))]
    assert {"load", "log", "log2"} <= set(labels) and all(x.startswith("lo") for x in labels)
    items = {c.label: c for c in complete("", pos(0, 0))}
    assert {"kernel", "fn", "f16", "Tile", "load", "inf"} <= set(items)
    assert items["load"].detail.startswith("load(A, index")
    assert items["load"].kind == lsp.CompletionItemKind.Function
    assert items["kernel"].kind == lsp.CompletionItemKind.Keyword
    assert [c.label for c in complete("@", pos(0, 1))] == ["launch", "host"]
    assert complete("x.", pos(0, 2)) == []
    own = complete("const WIDTH: i32 = 4;\nfn f() { return WI; }", pos(1, 18))
    assert [c.label for c in own] == ["WIDTH"]
    assert own[0].detail == "const WIDTH: i32 = 4"


def test_hover_symbols_definition():
    path = example("matmul.tile")
    text = path.read_text(encoding="utf-8") + "\nfn g() { return matmul; }\n"
    uri = from_fs_path(str(path))
    a = tls.analyze(text, uri)
    h = tls.hover(a, pos(29, 16))  # mma
    assert "mma(a, b, acc)" in h.contents.value and h.range.start == pos(29, 14)
    h = tls.hover(a, pos(15, 9))  # the kernel's own name
    assert "kernel matmul(a: Array[f16, 2]" in h.contents.value
    assert "dtype `f16`" in tls.hover(a, pos(16, 14)).contents.value
    assert "launch contract" in tls.hover(a, pos(10, 3)).contents.value
    assert tls.hover(a, pos(16, 0)) is None  # whitespace
    syms = tls.document_symbols(a)
    assert [(s.name, s.detail) for s in syms] == [("matmul", "kernel"), ("g", "fn")]
    assert syms[0].selection_range == lsp.Range(start=pos(15, 7), end=pos(15, 13))
    loc = tls.definition(a, pos(34, 18))
    assert loc.uri == uri and loc.range.start == pos(15, 7)
    loc = tls.definition(a, pos(23, 8))  # a `let` name: its own definition
    assert loc.uri == uri and loc.range == lsp.Range(start=pos(23, 8), end=pos(23, 9))


def test_stdio_session(tmp_path):
    """A real session: initialize, open a broken document, fix it, complete, hover, list
    symbols, shut down -- through JSON-RPC over the server's stdin/stdout."""
    from pygls.lsp.client import LanguageClient

    doc = tmp_path / "k.tile"
    doc.write_text(BROKEN, encoding="utf-8")
    uri = from_fs_path(str(doc))

    async def session():
        client = LanguageClient("tile-test", "0")
        published: asyncio.Queue = asyncio.Queue()

        @client.feature(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def on_diagnostics(params: lsp.PublishDiagnosticsParams):
            published.put_nowait(params)

        await client.start_io(sys.executable, "-m", "tilelang.cli", "lsp", cwd=str(ROOT))
        try:
            result = await asyncio.wait_for(client.initialize_async(lsp.InitializeParams(
                capabilities=lsp.ClientCapabilities(), process_id=None,
                root_uri=from_fs_path(str(tmp_path)))), 30)
            caps = result.capabilities
            assert list(caps.completion_provider.trigger_characters) == ["@", "."]
            assert caps.hover_provider and caps.document_symbol_provider
            assert caps.definition_provider
            client.initialized(lsp.InitializedParams())

            client.text_document_did_open(lsp.DidOpenTextDocumentParams(
                text_document=lsp.TextDocumentItem(uri=uri, language_id="tile", version=1,
                                                   text=BROKEN)))
            first = await asyncio.wait_for(published.get(), 30)
            assert first.uri == uri and [d.code for d in first.diagnostics] == ["E0101"]

            fixed = ("kernel f(a: Array[f32, 1]) {\n    let i = bid(0);\n"
                     "    store(a, index = (i,), tile = load(a, index = (i,), shape = (4,), "
                     "padding = 0.0));\n}\n")
            client.text_document_did_change(lsp.DidChangeTextDocumentParams(
                text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=2),
                content_changes=[lsp.TextDocumentContentChangeWholeDocument(text=fixed)]))
            second = await asyncio.wait_for(published.get(), 30)
            assert list(second.diagnostics) == [] and second.version == 2

            comp = await asyncio.wait_for(client.text_document_completion_async(
                lsp.CompletionParams(text_document=lsp.TextDocumentIdentifier(uri=uri),
                                     position=pos(1, 13))), 30)
            assert "bid" in [c.label for c in comp.items]

            hov = await asyncio.wait_for(client.text_document_hover_async(lsp.HoverParams(
                text_document=lsp.TextDocumentIdentifier(uri=uri), position=pos(1, 13))), 30)
            assert "bid(" in hov.contents.value

            # a local binding: the checker's inferred type
            hov = await asyncio.wait_for(client.text_document_hover_async(lsp.HoverParams(
                text_document=lsp.TextDocumentIdentifier(uri=uri), position=pos(1, 8))), 30)
            assert "let i: i32" in hov.contents.value

            syms = await asyncio.wait_for(client.text_document_document_symbol_async(
                lsp.DocumentSymbolParams(text_document=lsp.TextDocumentIdentifier(uri=uri))), 30)
            assert [s.name for s in syms] == ["f"]

            client.text_document_did_close(lsp.DidCloseTextDocumentParams(
                text_document=lsp.TextDocumentIdentifier(uri=uri)))
            closed = await asyncio.wait_for(published.get(), 30)
            assert list(closed.diagnostics) == []

            await asyncio.wait_for(client.shutdown_async(None), 30)
        finally:
            client.exit(None)
            try:
                await asyncio.wait_for(client.stop(), 10)
            except asyncio.TimeoutError:  # never leave a server process behind
                client._server.kill()
                raise

    asyncio.run(session())


def test_command_line_help():
    import subprocess

    for argv in (["-m", "tilelang.cli", "lsp", "--help"], ["-m", "tilelang.lsp", "--help"]):
        proc = subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True, text=True,
                              timeout=60)
        assert proc.returncode == 0
        assert "The Tile language server" in proc.stdout and "--tcp" in proc.stdout


def test_hover_shows_inferred_types_of_bindings():
    text = (ROOT / "examples" / "softmax.tile").read_text()
    uri = from_fs_path(str(ROOT / "examples" / "softmax.tile"))
    a = tls.analyze(text, uri)
    t = tls.hover(a, lsp.Position(line=8, character=8)).contents.value
    assert "let t: Tile[f32, 1, 1024]" in t and "kernel softmax_rows" in t
    n = tls.hover(a, lsp.Position(line=6, character=62)).contents.value
    assert "const N: int literal" in n
    # a use resolves to the nearest declaration before it
    e = tls.hover(a, lsp.Position(line=10, character=36)).contents.value
    assert "let e: Tile[f32, 1, 1024]" in e


def test_items_of_the_last_parse_while_the_text_does_not_parse():
    """While a statement is half typed the document does not parse; completion and hover still
    know its items from the last check that parsed (positions from it are not used)."""
    good = tls.analyze("const WIDTH: i32 = 4;\nfn f() { return 1; }\n", "file:///t.tile")
    typing = "const WIDTH: i32 = 4;\nfn f() { return WI }\n"
    a = tls.analyze(typing, "file:///t.tile")
    assert a.module is None and [d.code for d in a.diagnostics] == ["E0101"]
    assert tls.completions(a, pos(1, 18)) == []
    a.earlier_module = good.module
    (c,) = tls.completions(a, pos(1, 18))
    assert c.label == "WIDTH" and c.detail == "const WIDTH: i32 = 4"
    assert "const WIDTH: i32 = 4" in tls.hover(a, pos(0, 8)).contents.value
    assert tls.document_symbols(a) == [] and tls.definition(a, pos(0, 8)) is None
