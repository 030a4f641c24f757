"""The language server under load and misuse (issue 12, item 10), through the real server
process over stdio: checks off the request path, no stale diagnostics, an answer to every
request, at most 50 diagnostics per file, a clear message without pygls."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

pytest.importorskip("pygls", reason="pygls is not installed (pip install 'tilec[lsp]')")

from lsprotocol import types as lsp  # noqa: E402
from pygls.uris import from_fs_path  # noqa: E402

from editor_helpers import ROOT  # noqa: E402
from lsp_wire import Wire  # noqa: E402
from tilelang import lsp as tls  # noqa: E402

INVALID_PARAMS, INVALID_REQUEST, NOT_INITIALIZED, PARSE_ERROR = -32602, -32600, -32002, -32700
GOOD = ("kernel f(a: Array[f32, 1]) {\n    let i = bid(0);\n"
        "    store(a, index = (i,), tile = load(a, index = (i,), shape = (4,), "
        "padding = 0.0));\n}\n")
BROKEN = "kernel f(a: Array[f32, 1] {\n}\n"


def many_warnings(n: int, error: bool = True) -> str:
    body = "".join(f"    let x{i} = 1;\n" for i in range(n))
    return ("kernel k(a: Array[f32, 1]) {\n" + body
            + ("    let bad: i32 = 1.5;\n" if error else "") + "}\n")


def slow_document(copies: int) -> str:
    """A valid document whose check takes a while (`copies` kernels)."""
    return "\n".join(GOOD.replace("kernel f(", f"kernel f{i}(") for i in range(copies))


def open_doc(w: Wire, uri: str, text: str, version: int = 1) -> None:
    w.notify("textDocument/didOpen", {"textDocument": {
        "uri": uri, "languageId": "tile", "version": version, "text": text}})


def change(w: Wire, uri: str, text: str, version: int) -> None:
    w.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                        "contentChanges": [{"text": text}]})


def hover_params(uri: str, line, character) -> dict:
    return {"textDocument": {"uri": uri}, "position": {"line": line, "character": character}}


@pytest.fixture
def wire():
    w = Wire()
    yield w
    w.kill()


def no_traceback(w: Wire) -> None:
    err = w.stderr.decode(errors="replace")
    assert "Traceback" not in err and 'File "' not in err, err[-3000:]


# --- the cap ---------------------------------------------------------------------------------
def test_at_most_50_diagnostics_errors_first_and_a_note():
    diags = tls.check_document(many_warnings(120), "file:///tmp/many.tile")
    assert len(diags) == tls.MAX_DIAGNOSTICS == 50
    assert diags[0].severity == lsp.DiagnosticSeverity.Error  # errors first
    assert all(d.severity == lsp.DiagnosticSeverity.Warning for d in diags[1:49])
    note = diags[-1]
    assert note.severity == lsp.DiagnosticSeverity.Information
    # 121 diagnostics in all, 49 shown
    assert note.message.startswith("72 more diagnostics are not shown (the language server "
                                   "sends at most 50 per file)")
    # thousands of unused variables were thousands of diagnostics (5,998 in the issue)
    flood = tls.check_document(many_warnings(2000, error=False), "file:///tmp/many.tile")
    assert len(flood) == 50 and flood[-1].message.startswith("1951 more diagnostics")
    # exactly 50 are all shown, without a note
    exact = tls.check_document(many_warnings(50, error=False), "file:///tmp/many.tile")
    assert len(exact) == 50 and all(d.code == "W0201" for d in exact)


def test_document_over_the_size_limit_gets_one_note():
    text = "// " + "x" * tls.MAX_CHECKED_CHARS + "\n"
    a = tls.analyze(text, "file:///tmp/huge.tile")
    assert not a.checked and len(a.diagnostics) == 1
    assert a.diagnostics[0].severity == lsp.DiagnosticSeverity.Information
    assert f"{len(text):,} characters, more than the language server checks" in \
        a.diagnostics[0].message


def test_positions_in_every_encoding():
    lines = ["// é🙂 load"]
    # `load` starts after 6 code points: "// é🙂 "
    assert tls.to_lsp_position(lines, 1, 7, "utf-16").character == 7
    assert tls.to_lsp_position(lines, 1, 7, "utf-8").character == 10
    assert tls.to_lsp_position(lines, 1, 7, "utf-32").character == 6
    for enc, ch in (("utf-16", 7), ("utf-8", 10), ("utf-32", 6)):
        assert tls.from_lsp_position(lines, lsp.Position(line=0, character=ch), enc) == (0, 6)
        assert tls.word_at(lines, lsp.Position(line=0, character=ch), enc)[0] == "load"
    assert tls.word_at(lines, lsp.Position(line=5, character=0)) is None


# --- the session -----------------------------------------------------------------------------
def test_requests_answered_while_a_huge_document_is_open(wire, tmp_path):
    """A 4 MB document is not checked (one note) and does not delay requests; a document
    whose check takes seconds does not delay requests either."""
    wire.initialize()
    huge_uri = from_fs_path(str(tmp_path / "huge.tile"))
    huge = ("let x = load(a, index = (i,), shape = (4,));\n" * 100_000)[:4_000_000]
    t0 = time.monotonic()
    open_doc(wire, huge_uri, huge)
    r = wire.call("textDocument/hover", hover_params(huge_uri, 7, 10))
    huge_hover_s = time.monotonic() - t0
    assert "load(A, index" in r["result"]["contents"]["value"]
    t0 = time.monotonic()
    r = wire.call("textDocument/hover", hover_params(huge_uri, 80_000, 10))
    huge_hover2_s = time.monotonic() - t0
    assert "load(A, index" in r["result"]["contents"]["value"]
    d = wire.diagnostics(huge_uri)
    assert len(d["diagnostics"]) == 1 and "more than the language server checks" in \
        d["diagnostics"][0]["message"]

    # a document that takes a while to check: requests on another document go on
    slow_uri = from_fs_path(str(tmp_path / "slow.tile"))
    small_uri = from_fs_path(str(tmp_path / "small.tile"))
    open_doc(wire, small_uri, GOOD)
    wire.diagnostics(small_uri)
    open_doc(wire, slow_uri, slow_document(250))
    t0 = time.monotonic()
    r = wire.call("textDocument/completion", hover_params(small_uri, 1, 13))
    completion_s = time.monotonic() - t0
    assert "bid" in [c["label"] for c in r["result"]["items"]]
    t0 = time.monotonic()
    r = wire.call("textDocument/hover", hover_params(small_uri, 1, 13))
    hover_s = time.monotonic() - t0
    assert "bid(" in r["result"]["contents"]["value"]
    # the document being checked itself: answered from what needs no check, within the wait
    t0 = time.monotonic()
    r = wire.call("textDocument/hover", hover_params(slow_uri, 1, 13))
    own_hover_s = time.monotonic() - t0
    assert "bid(" in r["result"]["contents"]["value"]
    slow = wire.diagnostics(slow_uri, timeout=120)
    assert slow["diagnostics"] == [] and slow["version"] == 1
    print(f"hover on a 4 MB document {huge_hover_s * 1e3:.0f} ms (with its didOpen), "
          f"{huge_hover2_s * 1e3:.0f} ms (open already); "
          f"completion / hover while another document is checked "
          f"{completion_s * 1e3:.0f} / {hover_s * 1e3:.0f} ms, hover on that document "
          f"{own_hover_s * 1e3:.0f} ms")
    # generous: these only fail when the server really blocks on the check
    assert huge_hover_s < 5 and huge_hover2_s < 2 and completion_s < 2 and hover_s < 2
    assert own_hover_s < 2
    assert wire.close() == 0
    no_traceback(wire)


def test_newer_version_discards_an_older_check(wire, tmp_path):
    """Version 1 takes long to check; version 2 arrives meanwhile: version 1's diagnostics are
    never published, version 2's are; rapid changes are checked once, after the pause."""
    wire.initialize()
    uri = from_fs_path(str(tmp_path / "k.tile"))
    slow_broken = slow_document(200) + "\nlet oops = ;\n"
    # sent back to back: the check of version 1 cannot finish before version 2 comes
    open_doc(wire, uri, slow_broken, version=1)
    change(wire, uri, GOOD, version=2)
    d = wire.diagnostics(uri, timeout=120)
    assert d["version"] == 2 and d["diagnostics"] == []
    for v in range(3, 23):
        change(wire, uri, BROKEN if v % 2 else GOOD, version=v)
        time.sleep(0.01)
    d = wire.diagnostics(uri, where=lambda p: p["version"] == 22)
    assert d["diagnostics"] == []
    time.sleep(0.5)
    published = [m["params"]["version"] for m in wire.notifications
                 if m.get("method") == "textDocument/publishDiagnostics"]
    assert 1 not in published
    assert published[-1] == 22
    print(f"published versions: {published}")
    assert len(published) <= 6  # 2 and 22 (and a few more if the machine stalls > 0.2 s)
    assert wire.close() == 0
    no_traceback(wire)


def test_invalid_positions_get_an_answer(wire, tmp_path):
    wire.initialize()
    uri = from_fs_path(str(tmp_path / "k.tile"))
    open_doc(wire, uri, GOOD)
    for method in ("textDocument/hover", "textDocument/completion", "textDocument/definition"):
        for line, character in ((-1, 0), (0, -5), ("x", 0), (0, None), (2**40, 0), (1.5, [])):
            r = wire.call(method, hover_params(uri, line, character))
            assert r["error"]["code"] == INVALID_PARAMS, (method, line, character, r)
            assert f"invalid parameters of {method}" in r["error"]["message"]
        # past the end of the line: the end of the line; past the end of the document: nothing
        for line, character in ((1, 10**6), (10**6, 0), (4, 3)):
            r = wire.call(method, hover_params(uri, line, character))
            assert "error" not in r, r
    assert wire.call("textDocument/hover", hover_params(uri, 10**6, 0))["result"] is None
    r = wire.call("textDocument/hover", hover_params(uri, 1, 10**6))
    assert r["result"] is None  # after `;` there is no word
    r = wire.call("textDocument/hover", {"textDocument": {"uri": uri}})
    assert r["error"]["code"] == INVALID_PARAMS
    r = wire.call("textDocument/hover", None)
    assert r["error"]["code"] == INVALID_PARAMS
    assert wire.close() == 0
    no_traceback(wire)


def test_documents_that_are_not_open(wire, tmp_path):
    wire.initialize()
    on_disk = tmp_path / "disk.tile"
    on_disk.write_text(GOOD, encoding="utf-8")
    disk_uri = from_fs_path(str(on_disk))
    r = wire.call("textDocument/hover", hover_params(disk_uri, 1, 13))
    assert "bid(" in r["result"]["contents"]["value"]
    r = wire.call("textDocument/documentSymbol", {"textDocument": {"uri": disk_uri}})
    assert [s["name"] for s in r["result"]] == ["f"]

    fifo = tmp_path / "fifo.tile"
    os.mkfifo(fifo)
    cases = {
        from_fs_path(str(tmp_path / "missing.tile")): "is not open and cannot be read: "
                                                       "No such file or directory",
        from_fs_path(str(fifo)): "is not open and is not a regular file",
        "file:///dev/zero": "is not open and is not a regular file",
        from_fs_path(str(tmp_path)): "is not open and is not a regular file",
        "untitled:Untitled-1": "is not open (and not a file: URI)",
        "": "is not open (and not a file: URI)",
    }
    for uri, message in cases.items():
        for method in ("textDocument/hover", "textDocument/completion",
                       "textDocument/documentSymbol", "textDocument/definition"):
            r = wire.call(method, hover_params(uri, 0, 0))
            assert r["error"]["code"] == INVALID_PARAMS, (uri, method, r)
            assert r["error"]["message"] == f"document {uri!r} {message}"
            assert "data" not in r["error"]
    assert wire.close() == 0
    no_traceback(wire)


def test_protocol_misuse_gets_an_answer(wire, tmp_path):
    uri = from_fs_path(str(tmp_path / "k.tile"))
    r = wire.call("textDocument/hover", hover_params(uri, 0, 0))
    assert r["error"] == {"code": NOT_INITIALIZED,
                          "message": "textDocument/hover: the server is not initialized yet"}
    wire.send_raw(b"{not json")
    wire.send_raw(b"\xff\xfe")
    wire.send_raw(b"[1, 2]")
    wire.send({"jsonrpc": "2.0", "id": [1], "method": "initialize", "params": {}})
    caps = wire.initialize()["result"]["capabilities"]
    assert caps["hoverProvider"] and caps["positionEncoding"] == "utf-16"
    r = wire.call("initialize", {"processId": None, "rootUri": None, "capabilities": {}})
    assert r["error"]["code"] == INVALID_REQUEST
    assert wire.call("no/such/method", {})["error"]["code"] == -32601
    r = wire.reply(wire.request("textDocument/hover", hover_params(uri, 0, 0), msg_id="s-1"))
    assert r["error"]["code"] == INVALID_PARAMS  # not open, no such file
    assert [m["error"]["code"] for m in wire.null_replies] == \
        [PARSE_ERROR, PARSE_ERROR, INVALID_REQUEST, INVALID_REQUEST]
    assert wire.call("shutdown")["result"] is None
    r = wire.call("textDocument/hover", hover_params(uri, 0, 0))
    assert r["error"] == {"code": INVALID_REQUEST, "message": "the server is shut down"}
    wire.notify("exit")
    assert wire.proc.wait(20) == 0
    no_traceback(wire)


def test_utf8_position_encoding_when_the_client_prefers_it(wire, tmp_path):
    caps = wire.initialize(general={"positionEncodings": ["utf-8", "utf-16"]})
    assert caps["result"]["capabilities"]["positionEncoding"] == "utf-8"
    uri = from_fs_path(str(tmp_path / "k.tile"))
    text = "// é🙂\n" + GOOD
    open_doc(wire, uri, text)
    # `bid` on line 2 (0-based) is after ASCII only; on line 0 the comment has 2 + 4 bytes
    r = wire.call("textDocument/hover", hover_params(uri, 2, 13))
    assert r["result"]["range"] == {"start": {"line": 2, "character": 12},
                                    "end": {"line": 2, "character": 15}}
    assert wire.close() == 0
    no_traceback(wire)


def test_without_pygls_a_message_and_status_1():
    code = ("import sys; sys.modules['pygls'] = None; sys.modules['lsprotocol'] = None\n"
            "from tilelang.cli import main; sys.exit(main(['lsp']))")
    for argv in ([sys.executable, "-c", code],
                 [sys.executable, "-c", code.replace("from tilelang.cli import main; "
                                                     "sys.exit(main(['lsp']))",
                                                     "import runpy; runpy.run_module("
                                                     "'tilelang.lsp', run_name='__main__')")]):
        proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=60,
                              stdin=subprocess.DEVNULL)
        assert proc.returncode == 1, proc.stderr
        assert proc.stderr.startswith("tilec lsp: the language server needs pygls 2: "
                                      "pip install 'tilec[lsp]'")
        assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_shutdown_and_exit_during_a_long_check(wire, tmp_path):
    """`shutdown` is answered and `exit` ends the process while a check is still running."""
    wire.initialize()
    uri = from_fs_path(str(tmp_path / "slow.tile"))
    open_doc(wire, uri, slow_document(300))
    time.sleep(0.2)  # the check has started
    t0 = time.monotonic()
    assert wire.call("shutdown")["result"] is None
    shutdown_s = time.monotonic() - t0
    wire.notify("exit")
    assert wire.proc.wait(20) == 0
    exit_s = time.monotonic() - t0
    print(f"shutdown answered in {shutdown_s * 1e3:.0f} ms, exited after {exit_s:.1f} s")
    assert shutdown_s < 2
    no_traceback(wire)


def test_works_without_llvmlite_and_cuda(tmp_path):
    """The server needs only the `lsp` extra: with llvmlite and the CUDA bindings unimportable
    (a platform without their wheels), a whole session works."""
    blocked = ("llvmlite", "llvmlite.binding", "cuda", "cuda.bindings", "cuda.bindings.driver",
               "cuda.bindings.nvjitlink")
    code = (f"import sys\nfor m in {blocked!r}: sys.modules[m] = None\n"
            "from tilelang.cli import main\nsys.exit(main(['lsp']))")
    w = Wire(command=[sys.executable, "-c", code])
    try:
        w.initialize()
        uri = from_fs_path(str(tmp_path / "k.tile"))
        open_doc(w, uri, BROKEN)
        assert [d["code"] for d in w.diagnostics(uri)["diagnostics"]] == ["E0101"]
        change(w, uri, GOOD, 2)
        assert w.diagnostics(uri, where=lambda p: p["version"] == 2)["diagnostics"] == []
        r = w.call("textDocument/hover", hover_params(uri, 1, 8))
        assert "let i: i32" in r["result"]["contents"]["value"]
        assert w.close() == 0
        no_traceback(w)
    finally:
        w.kill()


def test_a_stray_print_does_not_corrupt_the_protocol(tmp_path):
    """Anything the compiler prints goes to stderr, never into the JSON-RPC stream."""
    code = ("import sys\nfrom tilelang.lsp import scheduler\noriginal = scheduler.analyze\n"
            "def noisy(*a, **k):\n    print('stray output from a check')\n"
            "    return original(*a, **k)\nscheduler.analyze = noisy\n"
            "from tilelang.cli import main\nsys.exit(main(['lsp']))")
    w = Wire(command=[sys.executable, "-c", code])
    try:
        w.initialize()
        uri = from_fs_path(str(tmp_path / "k.tile"))
        open_doc(w, uri, BROKEN)
        assert [d["code"] for d in w.diagnostics(uri)["diagnostics"]] == ["E0101"]
        assert w.close() == 0
        assert w.bad_output == []
        assert "stray output from a check" in w.stderr.decode()
    finally:
        w.kill()


@pytest.mark.parametrize("where,why", [
    ("missing/dir/x.log", "the folder `{tmp}/missing/dir` does not exist"),
    (".", "is a folder"),
    ("fifo", "is a FIFO")])
def test_an_unusable_log_file_is_a_usage_error(tmp_path, capsys, monkeypatch, where, why):
    from tilelang.cli import main
    monkeypatch.chdir(tmp_path)
    if where == "fifo":
        os.mkfifo(tmp_path / "fifo")
    with pytest.raises(SystemExit) as e:
        main(["lsp", "--log-file", where])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == \
        f"tilec lsp: error: --log-file {where}: {why.format(tmp=tmp_path)}"
