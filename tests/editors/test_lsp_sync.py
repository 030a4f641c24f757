"""The server's copy of an open document follows the editor's (tilelang/lsp/sync.py): ranged
edits are applied exactly; an edit that cannot be applied (a negative position, which the
protocol library cannot even read, a range past the end, an end before the start) leaves the
document out of sync, which the user is told once, requests about it are answered with
ContentModified, and a whole text resynchronises it."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

pytest.importorskip("pygls", reason="pygls is not installed (pip install 'tilec[lsp]')")

from lsprotocol import types as lsp  # noqa: E402
from pygls.uris import from_fs_path  # noqa: E402

from lsp_wire import Wire  # noqa: E402
from tilelang.lsp.sync import OutOfSync, apply_changes  # noqa: E402

CONTENT_MODIFIED = -32801
GOOD = "kernel f(a: Array[f32, 1]) {\n    let i = bid(0);\n}\n"


def edit(sl, sc, el, ec, text):
    return lsp.TextDocumentContentChangePartial(
        range=lsp.Range(start=lsp.Position(line=sl, character=sc),
                        end=lsp.Position(line=el, character=ec)), text=text)


def raw_edit(sl, sc, el, ec, text):
    """An edit lsprotocol cannot build (negative positions), as plain attributes."""
    pos = lambda line, c: SimpleNamespace(line=line, character=c)  # noqa: E731
    return SimpleNamespace(range=SimpleNamespace(start=pos(sl, sc), end=pos(el, ec)), text=text)


def whole(text):
    return lsp.TextDocumentContentChangeWholeDocument(text=text)


def test_ranged_edits_are_applied_exactly():
    t = "ab\ncd\n"
    assert apply_changes(t, [edit(0, 1, 1, 1, "X")]) == "aXd\n"
    assert apply_changes(t, [edit(1, 2, 1, 2, "!"), edit(0, 0, 0, 0, ">")]) == ">ab\ncd!\n"
    assert apply_changes(t, [edit(2, 0, 2, 0, "end")]) == "ab\ncd\nend"    # the last line
    assert apply_changes("ab", [edit(1, 0, 1, 0, "!")]) == "ab!"           # one past the end
    assert apply_changes(t, [edit(0, 99, 0, 99, "!")]) == "ab!\ncd\n"      # past the line: end
    # UTF-16 units: the emoji is two, the é one
    s = "a\U0001F642é=1\n"
    assert apply_changes(s, [edit(0, 3, 0, 4, "e")]) == "a\U0001F642e=1\n"
    assert apply_changes(s, [edit(0, 5, 0, 6, "e")], "utf-8") == "a\U0001F642e=1\n"
    assert apply_changes(t, [edit(0, 0, 0, 1, "z"), whole("new")]) == "new"


@pytest.mark.parametrize("change,why", [
    (raw_edit(-1, 0, 0, 1, "x"), "edit 1 has a negative start (line -1, character 0)"),
    (raw_edit(0, 0, 0, -3, "x"), "edit 1 has a negative end (line 0, character -3)"),
    (edit(7, 0, 7, 0, "x"), "edit 1's start (line 7, character 0) is past the end of the "
                            "document (3 lines)"),
    (edit(1, 1, 0, 0, "x"), "edit 1 ends (line 0, character 0) before it starts (line 1, "
                            "character 1)")])
def test_edits_that_cannot_be_applied_are_refused(change, why):
    with pytest.raises(OutOfSync) as e:
        apply_changes("ab\ncd\n", [change])
    assert str(e.value) == why


def test_out_of_sync_needs_a_whole_text():
    with pytest.raises(OutOfSync, match="a ranged edit arrived while the server's copy was "
                                        "out of sync"):
        apply_changes(None, [edit(0, 0, 0, 0, "x")])
    assert apply_changes(None, [whole("t"), edit(0, 1, 0, 1, "!")]) == "t!"


def _shown(w: Wire) -> list[str]:
    return [m["params"]["message"] for m in w.notifications
            if m.get("method") == "window/showMessage"]


def _hover(w: Wire, uri: str) -> dict:
    return w.call("textDocument/hover", {"textDocument": {"uri": uri},
                                         "position": {"line": 1, "character": 13}})


def _change(w: Wire, uri: str, version: int, *changes) -> None:
    w.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                        "contentChanges": list(changes)})


def _rng(sl, sc, el, ec):
    return {"start": {"line": sl, "character": sc}, "end": {"line": el, "character": ec}}


@pytest.fixture
def wire(tmp_path):
    log = tmp_path / "server.log"
    w = Wire("--log-file", str(log))
    w.log = log
    yield w
    w.kill()


def test_a_drifted_document_is_detected_refused_and_resynchronised(wire, tmp_path):
    wire.initialize()
    uri = from_fs_path(str(tmp_path / "k.tile"))
    wire.notify("textDocument/didOpen", {"textDocument": {
        "uri": uri, "languageId": "tile", "version": 1, "text": GOOD}})
    assert [d["code"] for d in wire.diagnostics(uri)["diagnostics"]] == ["W0201"]
    # a ranged edit applied exactly: `i` is used now, so the warning goes
    n = len(wire.notifications)
    _change(wire, uri, 2, {"range": _rng(2, 0, 2, 0), "text": "    let j = i + 1;\n"})
    d = wire.diagnostics(uri, after=n)
    assert [x["message"].split("\n")[0] for x in d["diagnostics"]] == ["unused variable `j`"]
    assert "bid(" in _hover(wire, uri)["result"]["contents"]["value"]
    # an edit with a negative position: pygls cannot read it, the copy has missed it
    n = len(wire.notifications)
    _change(wire, uri, 3, {"range": _rng(-1, 0, 0, 0), "text": "// x\n"})
    assert wire.diagnostics(uri, after=n)["diagnostics"] == []      # no stale diagnostics
    r = _hover(wire, uri)
    assert r["error"]["code"] == CONTENT_MODIFIED
    assert "is out of sync with the editor's (edit 1 has a negative start (line -1, " \
           "character 0))" in r["error"]["message"]
    assert len(_shown(wire)) == 1 and "could not be applied" in _shown(wire)[0]
    # further ranged edits are not applied to a wrong text; the user is not told twice
    _change(wire, uri, 4, {"range": _rng(0, 0, 0, 0), "text": "x"})
    assert _hover(wire, uri)["error"]["code"] == CONTENT_MODIFIED
    assert len(_shown(wire)) == 1
    # the whole text resynchronises
    n = len(wire.notifications)
    _change(wire, uri, 5, {"text": GOOD})
    assert [x["code"] for x in wire.diagnostics(uri, after=n)["diagnostics"]] == ["W0201"]
    assert "bid(" in _hover(wire, uri)["result"]["contents"]["value"]
    # a range past the end is refused the same way
    _change(wire, uri, 6, {"range": _rng(40, 0, 40, 1), "text": "x"})
    r = _hover(wire, uri)
    assert r["error"]["code"] == CONTENT_MODIFIED and "is past the end of the document" in \
        r["error"]["message"]
    assert len(_shown(wire)) == 2
    assert wire.close() == 0
    log = wire.log.read_text()
    assert "Traceback" not in log and "is out of sync with the editor" in log


def test_the_log_file_keeps_tracebacks_of_bugs_only():
    import logging
    import sys

    from tilelang.lsp.server import _RepeatsOnOneLine
    fmt = _RepeatsOnOneLine("%(levelname)s %(name)s: %(message)s")
    try:
        raise ValueError("boom")
    except ValueError:
        info = sys.exc_info()

    def record(name, msg, *args):
        return logging.LogRecord(name, logging.ERROR, __file__, 1, msg, args, info)
    bad_input = fmt.format(record("pygls.protocol.json_rpc", 'Exception occurred for message '
                                  '"%s"', "fz-1"))
    assert bad_input == 'ERROR pygls.protocol.json_rpc: Exception occurred for message "fz-1"'
    body = fmt.format(record("pygls.protocol.json_rpc", "Unable to deserialize message\n%s",
                             "Traceback (most recent call last):\n  File ..."))
    assert body == "ERROR pygls.protocol.json_rpc: Unable to deserialize message"
    bug = fmt.format(record("tilelang.lsp.server", "hover failed: %s", "ValueError: boom"))
    assert bug.startswith("ERROR tilelang.lsp.server: hover failed: ValueError: boom\n"
                          "Traceback (most recent call last):")
