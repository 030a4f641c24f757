"""Language-server garbage (issue 12): seeded random messages to one real server process over
stdio -- malformed JSON-RPC, wrong parameter types, unknown methods, random positions, odd
documents (NULs, lone surrogates, CRLF, BOM, megabyte lines), out-of-order versions, edits the
protocol library cannot read (negative positions), requests before ``initialize`` and after
``shutdown``. The server must stay alive, answer every request with a result or a JSON-RPC
error, never print a traceback (on stderr, nor in its ``--log-file``: bad input is no bug),
notice the documents whose edits it missed, and still work afterwards.

About 160 messages by default; ``-m slow`` sends 600 and about 1,800 (two more seeds).
"""

from __future__ import annotations

import json
import random
import string
import time

import pytest

pytest.importorskip("pygls", reason="pygls is not installed (pip install 'tilec[lsp]')")

from pygls.uris import from_fs_path  # noqa: E402

from editor_helpers import ROOT  # noqa: E402
from lsp_wire import Wire  # noqa: E402

FEATURES = ("textDocument/hover", "textDocument/completion", "textDocument/definition",
            "textDocument/documentSymbol", "textDocument/signatureHelp",
            "textDocument/documentHighlight", "textDocument/prepareRename",
            "textDocument/references", "textDocument/rename", "textDocument/inlayHint",
            "textDocument/codeAction", "textDocument/semanticTokens/full",
            "textDocument/foldingRange", "textDocument/formatting")
OTHER_METHODS = ("textDocument/formatting", "textDocument/references", "workspace/symbol",
                 "workspace/executeCommand", "textDocument/semanticTokens/full",
                 "textDocument/codeAction", "window/showMessage", "$/setTrace",
                 "workspace/didChangeConfiguration", "textDocument/didSave",
                 "textDocument/didClose", "workspace/didChangeWorkspaceFolders",
                 "window/workDoneProgress/cancel", "$/cancelRequest", "$/progress",
                 "initialize", "initialized", "textDocument/didOpen", "textDocument/didChange")
SEEDS = [pytest.param(12, 160, id="seed12-160"),
         pytest.param(26, 600, id="seed26-600", marks=pytest.mark.slow),
         pytest.param(1012, 1800, id="seed1012-1800", marks=pytest.mark.slow)]


def sources() -> list[str]:
    files = sorted((ROOT / "examples").glob("*.tile")) + sorted((ROOT / "stdlib").rglob("*.tile"))
    return [p.read_text(encoding="utf-8") for p in files] or ["kernel f() {}\n"]


class Garbage:
    """The message generator: each call of `next()` returns (kind, body bytes, request id or
    None); a request id is a string ("fz-N"), so replies cannot collide with odd ids."""

    def __init__(self, seed: int, tmp_path):
        self.r = random.Random(seed)
        self.texts = sources()
        self.uris = [from_fs_path(str(tmp_path / f"doc{i}.tile")) for i in range(4)] + [
            from_fs_path(str(tmp_path / "never-opened.tile")), "untitled:Untitled-1",
            "file:///dev/zero", "", "file://", "http://example.com/x.tile", "file:///%zz"]
        (tmp_path / "ondisk.tile").write_text(self.texts[0], encoding="utf-8")
        self.uris.append(from_fs_path(str(tmp_path / "ondisk.tile")))
        self.versions = {u: 0 for u in self.uris}
        self.open_texts: dict[str, str] = {}  # what the server has open, as far as we know
        self.n = 0

    # --- values ------------------------------------------------------------------------------
    def number(self):
        r = self.r
        return r.choice([0, 1, 2, 7, 40, -1, -2**31, 2**31 - 1, 2**31, 2**53, 2**64, 10**30,
                         1.5, -0.0, r.randint(-5, 200), r.randint(0, 10**6)])

    def junk(self, depth: int = 0):
        r = self.r
        kind = r.randrange(8 if depth < 3 else 5)
        if kind == 0:
            return None
        if kind == 1:
            return r.choice([True, False])
        if kind == 2:
            return self.number()
        if kind in (3, 4):
            return self.text(r.randint(0, 30))
        if kind == 5:
            return [self.junk(depth + 1) for _ in range(r.randint(0, 4))]
        if kind == 6:
            return {self.text(r.randint(1, 8)): self.junk(depth + 1)
                    for _ in range(r.randint(0, 4))}
        return {"textDocument": self.junk(depth + 1), "position": self.junk(depth + 1)}

    def text(self, n: int) -> str:
        r = self.r
        alphabet = string.printable + "\0\ufeff\u00e9\U0001F642\ud800\udfff\u2028\r"
        return "".join(r.choice(alphabet) for _ in range(n))

    def document(self) -> str:
        r = self.r
        base = r.choice(self.texts)
        kind = r.randrange(11)
        if kind == 0:
            return ""
        if kind == 10:  # nesting deeper than the compiler recurses
            n = r.choice([50, 3000, 20000])
            return ("kernel k(a: Array[f32, 1]) {\n    let x = " + "(" * n + "1" + ")" * n
                    + ";\n}\n")
        if kind == 1:
            return "\ufeff" + base
        if kind == 2:
            return base.replace("\n", "\r\n")
        if kind == 3:  # NULs and lone surrogates
            i = r.randrange(len(base) + 1)
            return base[:i] + r.choice(["\0", "\ud800", "\udfff", "\0\0\ud83d"]) + base[i:]
        if kind == 4:  # a cut
            return base[:r.randrange(len(base) + 1)]
        if kind == 5:
            return self.text(r.randint(0, 400))
        if kind == 6:  # a long line, sometimes over the size limit
            return "// " + "x" * r.choice([10_000, 300_000, (1 << 20) + 10]) + "\n" + base
        if kind == 7:  # random edits
            chars = list(base)
            for _ in range(r.randint(1, 6)):
                if chars:
                    chars[r.randrange(len(chars))] = r.choice("{}()[];,.@:=<>+-*/ \n\"'0123x")
            return "".join(chars)
        if kind == 8:
            return "\n".join([base] * r.randint(2, 6))
        return base

    def position(self, uri: str | None = None):
        r = self.r
        lines = self.open_texts.get(uri, "").split("\n")
        if uri in self.open_texts and r.random() < 0.7:  # somewhere in the document
            line = r.randrange(len(lines))
            return {"line": line, "character": r.randint(0, len(lines[line]) + 1)}
        if r.random() < 0.7:
            return {"line": r.randint(0, 60), "character": r.randint(0, 90)}
        return {"line": self.junk_or_number(), "character": self.junk_or_number()}

    def junk_or_number(self):
        return self.number() if self.r.random() < 0.6 else self.junk(2)

    # --- messages ----------------------------------------------------------------------------
    def request(self, method: str, params, msg_id=None):
        self.n += 1
        msg_id = f"fz-{self.n}" if msg_id is None else msg_id
        msg = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not _ABSENT:
            msg["params"] = params
        return msg, msg_id

    def next(self):
        """(kind, body, id to expect a reply for or None)."""
        r = self.r
        kind = r.choice(["feature", "feature", "feature", "open", "change", "change", "close",
                         "malformed", "method", "odd_id", "response", "cancel", "params",
                         "drift"])
        uri = r.choice(self.uris)
        if kind == "close" and r.random() < 0.5:
            kind = "feature"  # fewer closes: most requests should meet open documents
        if kind in ("feature", "change") and self.open_texts and r.random() < 0.7:
            uri = r.choice(sorted(self.open_texts))
        if kind == "feature":
            method = r.choice(FEATURES)
            params = {"textDocument": {"uri": uri}, "position": self.position(uri)}
            where = {"start": self.position(uri), "end": self.position(uri)}
            params.update({  # what the requests past a position take
                "textDocument/references": {"context": {"includeDeclaration": r.random() < .5}},
                "textDocument/rename": {"newName": r.choice(["x", "let", self.text(4)])},
                "textDocument/inlayHint": {"range": where},
                "textDocument/codeAction": {"range": where, "context": {"diagnostics": [
                    {"range": where, "message": f"did you mean `{self.text(3)}`?"}]}},
                "textDocument/formatting": {"options": {"tabSize": 4, "insertSpaces": True}},
            }.get(method, {}))
            msg, msg_id = self.request(method, params)
            return kind, msg, msg_id
        if kind == "open":
            self.versions[uri] = v = self.versions[uri] + 1
            text = self.document()
            self.open_texts.setdefault(uri, text)  # a second open of an open document: ignored
            return kind, {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {
                "textDocument": {"uri": uri, "languageId": "tile", "version": v,
                                 "text": text}}}, None
        if kind == "change":
            v = r.choice([self.versions[uri] + 1, self.versions[uri] - 3, 0, -1, 2**31 - 1])
            self.versions[uri] = max(self.versions[uri], v)
            if r.random() < 0.7:
                changes = [{"text": self.document()}]
                if uri in self.open_texts:
                    self.open_texts[uri] = changes[0]["text"]
            else:  # incremental changes with any range (the server asked for full ones)
                changes = [{"range": {"start": self.position(), "end": self.position()},
                            "text": self.text(r.randint(0, 20))}]
            return kind, {"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
                "textDocument": {"uri": uri, "version": v}, "contentChanges": changes}}, None
        if kind == "drift":  # edits the protocol library cannot read: negative positions
            if self.open_texts:
                uri = r.choice(sorted(self.open_texts))
            self.versions[uri] += 1
            bad = r.choice([{"line": -1, "character": 0}, {"line": 0, "character": -1},
                            {"line": -2**31, "character": -2**31}])
            good = {"line": 0, "character": 0}
            rng = r.choice([{"start": bad, "end": good}, {"start": good, "end": bad}])
            return kind, {"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
                "textDocument": {"uri": uri, "version": self.versions[uri]},
                "contentChanges": [{"range": rng, "text": self.text(5)}]}}, None
        if kind == "close":
            self.open_texts.pop(uri, None)
            return kind, {"jsonrpc": "2.0", "method": "textDocument/didClose",
                          "params": {"textDocument": {"uri": uri}}}, None
        if kind == "malformed":
            body = r.choice([
                b"{", b"", b"null", b"[]", b"[1,2,3]", b'"x"', b"42", b"\xff\xfe\x00",
                b'{"jsonrpc": "2.0", "id": 1, "method": ',
                b'{"jsonrpc": "2.0", "method": "textDocument/hover"}',
                b'{"jsonrpc": "1.0", "id": "v1", "method": "textDocument/hover"}',
                b'{"id": "noversion", "method": "textDocument/hover", "params": {}}',
                b'{"jsonrpc": "2.0", "id": 5, "method": 5}',
                b'{"jsonrpc": "2.0", "id": 1' + b"0" * 5000 + b', "method": "x"}',
                b"[" * 100_000 + b"]" * 100_000,
                json.dumps(self.text(50)).encode("utf-8", "surrogatepass"),
                bytes(r.randrange(256) for _ in range(r.randint(1, 64))),
            ])
            return kind, body, None
        if kind == "method":
            name = r.choice(OTHER_METHODS + (self.text(r.randint(0, 12)), "$/" + self.text(5)))
            if r.random() < 0.5:
                msg, msg_id = self.request(name, self.junk())
                return kind, msg, msg_id
            return kind, {"jsonrpc": "2.0", "method": name, "params": self.junk()}, None
        if kind == "odd_id":  # ids JSON-RPC does not allow: answered with "id": null, if at all
            msg, _ = self.request(r.choice(FEATURES), {"textDocument": {"uri": uri},
                                                      "position": self.position()},
                                  msg_id=r.choice([None, 1.5, [1], {"a": 1}, -0.5]))
            return kind, msg, None
        if kind == "response":  # a reply to a request the server never sent
            return kind, {"jsonrpc": "2.0", "id": r.choice([7, "zz", None]),
                          r.choice(["result", "error"]): self.junk()}, None
        if kind == "cancel":
            return kind, {"jsonrpc": "2.0", "method": "$/cancelRequest",
                          "params": {"id": r.choice([f"fz-{self.n}", self.junk()])}}, None
        # a feature with parameters of the wrong shape
        msg, msg_id = self.request(r.choice(FEATURES), r.choice([
            _ABSENT, None, [], self.junk(), {"textDocument": uri, "position": self.position()},
            {"textDocument": {"uri": self.junk()}, "position": {"line": 0, "character": 0}}]))
        return kind, msg, msg_id


_ABSENT = object()


def _send(w: Wire, body) -> None:
    if isinstance(body, bytes):
        w.send_raw(body)
    else:  # lone surrogates go out as JSON escapes, as a client would send them
        w.send_raw(json.dumps(body).encode("ascii"))


@pytest.mark.parametrize("seed,count", SEEDS)
def test_language_server_garbage(seed, count, tmp_path):
    g = Garbage(seed, tmp_path)
    log = tmp_path / "server.log"
    w = Wire("--log-file", str(log))
    expected: list[str] = []
    kinds: dict[str, int] = {}
    t0 = time.monotonic()
    try:
        # before initialize: requests get ServerNotInitialized, notifications are dropped
        for _ in range(max(count // 20, 5)):
            kind, body, msg_id = g.next()
            _send(w, body)
            if msg_id is not None:
                expected.append(msg_id)
        r = w.initialize()
        assert "capabilities" in r["result"], r
        for _ in range(count):
            kind, body, msg_id = g.next()
            kinds[kind] = kinds.get(kind, 0) + 1
            _send(w, body)
            if msg_id is not None:
                expected.append(msg_id)
            assert w.proc.poll() is None, w.stderr.decode(errors="replace")[-3000:]
        # still working: a fresh document is checked and hovered correctly
        uri = from_fs_path(str(tmp_path / "after.tile"))
        w.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "tile", "version": 1,
            "text": "kernel f(a: Array[f32, 1]) {\n    let i = bid(0);\n}\n"}})
        d = w.diagnostics(uri, timeout=120)
        assert [x["code"] for x in d["diagnostics"]] == ["W0201"]  # `i` is unused
        hov = w.call("textDocument/hover", {"textDocument": {"uri": uri},
                                            "position": {"line": 1, "character": 13}}, 120)
        assert "bid(" in hov["result"]["contents"]["value"]
        # every request answered, with a result or an error
        for msg_id in expected:
            reply = w.reply(msg_id, timeout=120)
            assert ("result" in reply) != ("error" in reply), reply
            if "error" in reply:
                err = reply["error"]
                assert isinstance(err["code"], int) and isinstance(err["message"], str), reply
                assert "Traceback" not in json.dumps(err), reply
        # after shutdown: requests get InvalidRequest
        assert w.call("shutdown", timeout=120)["result"] is None
        for _ in range(max(count // 20, 5)):
            kind, body, msg_id = g.next()
            _send(w, body)
            if msg_id is not None:
                assert w.reply(msg_id)["error"]["code"] == -32600
        w.notify("exit")
        assert w.proc.wait(60) == 0
        internal = [m for m in w.notifications
                    if m.get("method") == "textDocument/publishDiagnostics"
                    and any(x.get("code") == "E9999" for x in m["params"]["diagnostics"])]
        err = w.stderr.decode(errors="replace")
        assert "Traceback" not in err and 'File "' not in err, err[-3000:]
        # the log file keeps tracebacks for bugs only: garbage is expected input
        text = log.read_text(encoding="utf-8", errors="replace")
        assert "Traceback" not in text and 'File "' not in text, \
            text[max(text.find("Traceback") - 2000, 0):][:4000]
        if kinds.get("drift"):  # a drift was noticed (and said) for an open document
            assert "is out of sync with the editor" in text
        assert internal == [], internal[0]["params"]["diagnostics"]
        assert w.bad_output == []
        assert all("id" in m and m["id"] is None and "error" in m for m in w.null_replies)
        useful = sum(1 for i in expected if w.replies[i].get("result"))
        assert useful > 0  # the garbage also reached the features with real documents
        print(f"seed {seed}: {count} messages ({kinds}), {len(expected)} requests answered "
              f"({useful} with a non-empty result), "
              f"{len(w.null_replies)} null-id errors, {time.monotonic() - t0:.1f} s")
    finally:
        w.kill()
