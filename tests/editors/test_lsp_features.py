"""Every request of the language server past diagnostics, over stdio with the real server
process: completion (locals, parameters, constants, module members, keyword arguments),
signature help, hover with doc comments, inlay hints, definition, references, rename, semantic
tokens, code actions, formatting and folding ranges; then each request again at positions out
of range and on garbage documents, where the server keeps answering."""

from __future__ import annotations

import pytest

pytest.importorskip("pygls", reason="pygls is not installed (pip install 'tilec[lsp]')")

from pygls.uris import from_fs_path  # noqa: E402

from editor_helpers import ROOT  # noqa: E402
from lsp_wire import Wire  # noqa: E402
from tilelang.fmt import format_source  # noqa: E402

STD_MATH = ROOT / "stdlib" / "std" / "math.tile"
SOURCE = """\
import std.math as m;
from std.math import gelu as g, clamp;

const WIDTH: i32 = 4;

// Adds two tiles.
// The second defaults to one.
fn add(x, y: f32 = 1.0) {
    return x + y;
}

kernel k(a: Array[f32, 1], const N: i32 = 4) {
    let t = load(a, index = 0, shape = WIDTH);
    var u = m.silu(t) + add(t, y = 2.0) + g(t);
    for i in range(N) {
        u += clamp(t, 0.0, 1.0) * i;
    }
    store(a, index = 0, tile = u);
}
"""
LINES = SOURCE.split("\n")


def at(line: int, needle: str, nth: int = 1, offset: int = 0) -> dict:
    """The LSP position of the nth `needle` on 0-based `line` of SOURCE."""
    col = -1
    for _ in range(nth):
        col = LINES[line].index(needle, col + 1)
    return {"line": line, "character": col + offset}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    w = Wire()
    w.initialize()
    uri = from_fs_path(str(tmp_path_factory.mktemp("lsp") / "doc.tile"))
    w.notify("textDocument/didOpen", {"textDocument": {
        "uri": uri, "languageId": "tile", "version": 1, "text": SOURCE}})
    diags = w.diagnostics(uri)
    assert diags["diagnostics"] == [], diags
    w.uri = uri
    yield w
    assert w.close() == 0


def call(w: Wire, method: str, **params):
    r = w.call(method, {"textDocument": {"uri": w.uri}, **params})
    assert "error" not in r, r
    return r["result"]


def rng(line: int, start: int, end: int) -> dict:
    return {"start": {"line": line, "character": start}, "end": {"line": line, "character": end}}


# ---- completion -------------------------------------------------------------------------------
def labels(result) -> list[str]:
    return [i["label"] for i in result["items"]]


def test_completion_of_locals_parameters_and_constants(server):
    got = labels(call(server, "textDocument/completion", position=at(15, "u +=")))
    for name in ("t", "u", "i", "a", "N", "WIDTH", "add", "k", "m", "g", "clamp", "load"):
        assert name in got, name
    assert "x" not in got and "y" not in got  # add's parameters are not visible in k
    got = labels(call(server, "textDocument/completion", position=at(12, "let t")))
    assert "a" in got and "t" not in got and "u" not in got  # not declared yet


def test_completion_of_module_members(server):
    items = call(server, "textDocument/completion", position=at(13, "silu"))["items"]
    by = {i["label"]: i for i in items}
    assert {"gelu", "silu", "relu", "square", "clamp", "round_up"} <= set(by)
    assert "load" not in by and "kernel" not in by
    assert by["silu"]["detail"] == "fn silu(x)"
    assert by["silu"]["documentation"]["value"] == "x * sigmoid(x), also called swish."


def test_completion_of_keyword_arguments(server):
    items = call(server, "textDocument/completion", position=at(12, "index"))["items"]
    kw = [i for i in items if i["label"].endswith("=")]
    names = [i["label"] for i in kw]
    assert names[:3] == ["A=", "index=", "shape="] and "padding=" in names
    assert kw[1]["insertText"] == "index = "
    # in a call of a user function: its parameters, less those given before the cursor
    items = call(server, "textDocument/completion", position=at(13, "y = 2.0"))["items"]
    assert [i["label"] for i in items if i["label"].endswith("=")] == ["x=", "y="]
    items = call(server, "textDocument/completion", position=at(13, "2.0)", offset=4))["items"]
    assert [i["label"] for i in items if i["label"].endswith("=")] == []  # after `)`


def test_completion_while_the_document_does_not_parse(tmp_path):
    w = Wire()
    try:
        w.initialize()
        uri = from_fs_path(str(tmp_path / "typing.tile"))
        w.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "tile", "version": 1, "text": SOURCE}})
        w.diagnostics(uri)
        typing = SOURCE.replace("    store(a,", "    let v = m.\n    store(a,")
        w.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2},
                                            "contentChanges": [{"text": typing}]})
        w.diagnostics(uri, where=lambda p: p["version"] == 2)
        r = w.call("textDocument/completion", {"textDocument": {"uri": uri},
                                               "position": {"line": 17, "character": 14}})
        assert "silu" in labels(r["result"])
        r = w.call("textDocument/completion", {"textDocument": {"uri": uri},
                                               "position": {"line": 17, "character": 4}})
        assert {"t", "u", "a"} <= set(labels(r["result"]))
    finally:
        w.close()


# ---- signature help ---------------------------------------------------------------------------
def test_signature_help(server):
    r = call(server, "textDocument/signatureHelp", position=at(12, "0, shape"))
    (sig,) = r["signatures"]
    assert sig["label"].startswith("load(A, index")
    assert r["activeParameter"] == 1
    start, end = sig["parameters"][r["activeParameter"]]["label"]
    assert sig["label"][start:end].startswith("index")
    r = call(server, "textDocument/signatureHelp", position=at(12, "WIDTH"))
    assert r["activeParameter"] == 2  # `shape = ...`: by keyword
    r = call(server, "textDocument/signatureHelp", position=at(13, "2.0"))
    (sig,) = r["signatures"]
    assert sig["label"] == "fn add(x, y: f32 = 1.0)" and r["activeParameter"] == 1
    assert sig["documentation"]["value"] == "Adds two tiles.\nThe second defaults to one."
    r = call(server, "textDocument/signatureHelp", position=at(15, "0.0"))
    assert r["signatures"][0]["label"] == "fn clamp(x, lo, hi)" and r["activeParameter"] == 1
    assert call(server, "textDocument/signatureHelp", position=at(3, "WIDTH")) is None


# ---- hover ------------------------------------------------------------------------------------
def test_hover(server):
    h = call(server, "textDocument/hover", position=at(13, "add"))
    assert h["contents"]["value"] == (
        "```tile\nfn add(x, y: f32 = 1.0)\n```\n\nAdds two tiles.\nThe second defaults to one.")
    h = call(server, "textDocument/hover", position=at(13, "silu"))
    assert h["contents"]["value"] == (
        "```tile\nfn silu(x)\n```\n\nx * sigmoid(x), also called swish.\n\n*from std.math*")
    h = call(server, "textDocument/hover", position=at(13, "g(t)"))
    assert h["contents"]["value"].startswith("```tile\nfn gelu(x)\n```\n\nGaussian error")
    h = call(server, "textDocument/hover", position=at(12, "t ="))
    assert h["contents"]["value"].startswith("```tile\nlet t: Tile[f32, 4]\n```")
    h = call(server, "textDocument/hover", position=at(0, "m;"))
    assert h["contents"]["value"] == f"module `std.math`\n\n`{STD_MATH}`"


# ---- inlay hints ------------------------------------------------------------------------------
def test_inlay_hints(server):
    hints = call(server, "textDocument/inlayHint", range=rng(0, 0, 0) | {
        "end": {"line": len(LINES), "character": 0}})
    got = {(h["position"]["line"], h["position"]["character"]): h["label"] for h in hints}
    assert got[(12, 9)] == ": Tile[f32, 4]"   # let t
    assert got[(13, 9)] == ": Tile[f32, 4]"   # var u
    assert got[(14, 9)] == ": i32"            # for i
    assert got[(7, 8)] == ": Tile[f32, 4]"    # add's x, inferred at its one call
    assert (11, 10) not in got                 # a: its type is written
    only = call(server, "textDocument/inlayHint", range=rng(14, 0, 20))
    assert [h["label"] for h in only] == [": i32"]


# ---- definition, references, rename -----------------------------------------------------------
def test_definition(server):
    loc = call(server, "textDocument/definition", position=at(15, "t,"))
    assert loc == {"uri": server.uri, "range": rng(12, 8, 9)}
    loc = call(server, "textDocument/definition", position=at(14, "N"))
    assert loc == {"uri": server.uri, "range": rng(11, 33, 34)}
    loc = call(server, "textDocument/definition", position=at(13, "y ="))
    assert loc == {"uri": server.uri, "range": rng(7, 10, 11)}  # a keyword argument
    std = from_fs_path(str(STD_MATH))
    std_lines = STD_MATH.read_text().split("\n")
    silu = next(i for i, ln in enumerate(std_lines) if ln.startswith("fn silu"))
    loc = call(server, "textDocument/definition", position=at(13, "silu"))
    assert loc == {"uri": std, "range": rng(silu, 3, 7)}
    gelu = next(i for i, ln in enumerate(std_lines) if ln.startswith("fn gelu"))
    loc = call(server, "textDocument/definition", position=at(13, "g(t)"))
    assert loc == {"uri": std, "range": rng(gelu, 3, 7)}
    loc = call(server, "textDocument/definition", position=at(0, "m;"))
    assert loc == {"uri": std, "range": rng(0, 0, 0)}
    assert call(server, "textDocument/definition", position=at(12, "load")) is None


def test_references(server):
    refs = call(server, "textDocument/references", position=at(12, "t ="),
                context={"includeDeclaration": True})
    assert [(r["range"]["start"]["line"], r["range"]["start"]["character"]) for r in refs] == [
        (12, 8), (13, 19), (13, 28), (13, 44), (15, 19)]
    refs = call(server, "textDocument/references", position=at(12, "t ="),
                context={"includeDeclaration": False})
    assert len(refs) == 4
    refs = call(server, "textDocument/references", position=at(1, "clamp"),
                context={"includeDeclaration": True})
    assert [r["range"]["start"]["line"] for r in refs] == [1, 15]
    refs = call(server, "textDocument/references", position=at(12, "load"),
                context={"includeDeclaration": True})
    assert [r["range"] for r in refs] == [rng(12, 12, 16)]


def test_document_highlight(server):
    got = call(server, "textDocument/documentHighlight", position=at(13, "u ="))
    assert [(h["range"]["start"]["line"], h["range"]["start"]["character"], h["kind"])
            for h in got] == [(13, 8, 3), (15, 8, 2), (17, 31, 2)]  # 3: defined, 2: used
    assert call(server, "textDocument/documentHighlight", position=at(12, "load")) == []


def test_rename(server):
    edit = call(server, "textDocument/rename", position=at(7, "y:"), newName="scale")
    assert sorted((e["range"]["start"]["line"], e["range"]["start"]["character"])
                  for e in edit["changes"][server.uri]) == [(7, 10), (8, 15), (13, 31)]
    assert {e["newText"] for e in edit["changes"][server.uri]} == {"scale"}
    edit = call(server, "textDocument/rename", position=at(0, "m;"), newName="mm")
    assert sorted(e["range"]["start"]["line"] for e in edit["changes"][server.uri]) == [0, 13]
    edit = call(server, "textDocument/rename", position=at(13, "g(t)"), newName="gg")
    assert sorted((e["range"]["start"]["line"], e["range"]["start"]["character"])
                  for e in edit["changes"][server.uri]) == [(1, 29), (13, 42)]
    prep = call(server, "textDocument/prepareRename", position=at(13, "u ="))
    assert prep == {"range": rng(13, 8, 9), "placeholder": "u"}
    assert call(server, "textDocument/prepareRename", position=at(12, "load")) is None
    assert call(server, "textDocument/prepareRename", position=at(13, "silu")) is None
    r = server.call("textDocument/rename", {"textDocument": {"uri": server.uri},
                                            "position": at(13, "u ="), "newName": "let"})
    assert r["error"]["code"] == -32602 and "not a name" in r["error"]["message"]
    r = server.call("textDocument/rename", {"textDocument": {"uri": server.uri},
                                            "position": at(12, "load"), "newName": "ld"})
    assert r["error"]["code"] == -32602 and "cannot be renamed" in r["error"]["message"]


# ---- semantic tokens --------------------------------------------------------------------------
def decode(data: list[int], legend: dict) -> dict:
    out, line, col = {}, 0, 0
    for k in range(0, len(data), 5):
        dl, dc, length, typ, mods = data[k:k + 5]
        line += dl
        col = col + dc if dl == 0 else dc
        names = [m for b, m in enumerate(legend["tokenModifiers"]) if mods >> b & 1]
        out[(line, col)] = (LINES[line][col:col + length], legend["tokenTypes"][typ], names)
    return out


def test_semantic_tokens(server):
    legend = server.replies[1]["result"]["capabilities"]["semanticTokensProvider"]["legend"]
    toks = decode(call(server, "textDocument/semanticTokens/full")["data"], legend)
    assert toks[(0, 0)] == ("import", "keyword", [])
    assert toks[(0, 19)] == ("m", "namespace", ["declaration"])
    assert toks[(3, 6)] == ("WIDTH", "variable", ["declaration", "readonly"])
    assert toks[(5, 0)] == ("// Adds two tiles.", "comment", [])
    assert toks[(7, 3)] == ("add", "function", ["declaration"])
    assert toks[(7, 7)] == ("x", "parameter", ["declaration"])
    assert toks[(11, 12)] == ("Array", "type", ["defaultLibrary"])
    assert toks[(11, 18)] == ("f32", "type", ["defaultLibrary"])
    assert toks[(12, 12)] == ("load", "function", ["defaultLibrary"])
    assert toks[(12, 20)] == ("index", "parameter", [])
    assert toks[(12, 28)] == ("0", "number", [])
    assert toks[(13, 8)] == ("u", "variable", ["declaration"])
    assert toks[(13, 12)] == ("m", "namespace", [])
    assert toks[(13, 14)] == ("silu", "function", [])
    assert toks[(13, 22)] == ("+", "operator", [])
    assert toks[(12, 8)] == ("t", "variable", ["declaration", "readonly"])


# ---- code actions, formatting, folding --------------------------------------------------------
def test_code_action_for_did_you_mean(tmp_path):
    w = Wire()
    try:
        w.initialize()
        uri = from_fs_path(str(tmp_path / "typo.tile"))
        text = "kernel k(a: Array[f32, 1]) {\n    let t = lod(a, index = 0, shape = 4);\n" \
               "    store(a, index = 0, tile = t, paddin = 0.0);\n}\n"
        w.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "tile", "version": 1, "text": text}})
        diags = w.diagnostics(uri)["diagnostics"]
        assert any("did you mean `load`?" in d["message"] for d in diags), diags
        r = w.call("textDocument/codeAction", {
            "textDocument": {"uri": uri}, "range": rng(1, 0, 40),
            "context": {"diagnostics": diags}})
        actions = r["result"]
        fix = next(a for a in actions if a["title"] == "Change to `load`")
        assert fix["kind"] == "quickfix" and fix["isPreferred"] is True
        assert fix["edit"]["changes"][uri] == [{"range": rng(1, 12, 15), "newText": "load"}]
        # a diagnostic without a suggestion gets none
        r = w.call("textDocument/codeAction", {
            "textDocument": {"uri": uri}, "range": rng(1, 0, 1),
            "context": {"diagnostics": [{"range": rng(1, 0, 1), "message": "other"}]}})
        assert r["result"] == []
    finally:
        w.close()


def test_formatting(server, tmp_path):
    r = call(server, "textDocument/formatting", options={"tabSize": 4, "insertSpaces": True})
    assert r == []  # SOURCE is formatted
    w = Wire()
    try:
        w.initialize()
        uri = from_fs_path(str(tmp_path / "ugly.tile"))
        ugly = "fn f(a,b){return a+b;}"
        w.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "tile", "version": 1, "text": ugly}})
        r = w.call("textDocument/formatting", {"textDocument": {"uri": uri},
                                               "options": {"tabSize": 4, "insertSpaces": True}})
        assert r["result"] == [{"range": rng(0, 0, len(ugly)), "newText": format_source(ugly)}]
        w.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2},
                                            "contentChanges": [{"text": "fn f( {"}]})
        r = w.call("textDocument/formatting", {"textDocument": {"uri": uri},
                                               "options": {"tabSize": 4, "insertSpaces": True}})
        assert r["result"] == []  # does not parse: nothing to do (the diagnostics say why)
    finally:
        w.close()


def test_folding_ranges(server):
    got = {(r["startLine"], r["endLine"], r.get("kind"))
           for r in call(server, "textDocument/foldingRange")}
    assert got == {(0, 1, "imports"), (5, 6, "comment"), (7, 8, None), (11, 17, None),
                   (14, 15, None)}


# ---- robustness -------------------------------------------------------------------------------
METHODS = [
    ("textDocument/completion", {}), ("textDocument/signatureHelp", {}),
    ("textDocument/hover", {}), ("textDocument/definition", {}),
    ("textDocument/references", {"context": {"includeDeclaration": True}}),
    ("textDocument/prepareRename", {}), ("textDocument/rename", {"newName": "zz"}),
    ("textDocument/inlayHint", "range"), ("textDocument/semanticTokens/full", None),
    ("textDocument/codeAction", "action"), ("textDocument/formatting", "format"),
    ("textDocument/foldingRange", None), ("textDocument/documentHighlight", {}),
]
POSITIONS = [{"line": 10**6, "character": 0}, {"line": 0, "character": 10**6},
             {"line": 2**31 - 1, "character": 2**31 - 1}, {"line": 12, "character": 13}]
GARBAGE = ["", "\x00\x01\x02", "}}}}{{{{((((", "kernel", "let x = ;;;; fn ( @@@ \"unterminated",
           "/* never closed", "é😀\u202e\ufeff" * 50, "fn f() {" * 300,
           "kernel k(a: Array[f32, 1]) { let t = load(a, index = (" + "(" * 500]


def _params(uri: str, extra, position) -> dict:
    p = {"textDocument": {"uri": uri}}
    if extra == "range":
        p["range"] = {"start": position, "end": position}
    elif extra == "action":
        p["range"] = {"start": position, "end": position}
        p["context"] = {"diagnostics": [{"range": {"start": position, "end": position},
                                         "message": "did you mean `x`?"}]}
    elif extra == "format":
        p["options"] = {"tabSize": 4, "insertSpaces": True}
    elif extra is not None:
        p["position"] = position
        p.update(extra)
    return p


def _ok_or_invalid_params(r: dict) -> None:
    assert "result" in r or r["error"]["code"] == -32602, r
    if "error" in r:
        assert "Traceback" not in r["error"]["message"]


def test_positions_out_of_range(server):
    for method, extra in METHODS:
        for position in POSITIONS:
            _ok_or_invalid_params(server.call(method, _params(server.uri, extra, position)))
    assert call(server, "textDocument/hover", position=at(13, "add"))  # still answering


def test_garbage_documents(tmp_path):
    w = Wire()
    try:
        w.initialize()
        for n, text in enumerate(GARBAGE):
            uri = from_fs_path(str(tmp_path / f"garbage{n}.tile"))
            w.notify("textDocument/didOpen", {"textDocument": {
                "uri": uri, "languageId": "tile", "version": 1, "text": text}})
            w.diagnostics(uri)
            for method, extra in METHODS:
                for position in POSITIONS[:2] + [{"line": 0, "character": 3}]:
                    _ok_or_invalid_params(w.call(method, _params(uri, extra, position)))
        assert w.proc.poll() is None
        assert "Traceback" not in w.stderr.decode(errors="replace")
    finally:
        assert w.close() == 0


def test_a_document_too_large_to_check_gets_quick_empty_answers(tmp_path):
    w = Wire()
    try:
        w.initialize()
        uri = from_fs_path(str(tmp_path / "huge.tile"))
        huge = "const A = 1;\n" * 120_000  # 1.5 MB: over the limit of checked documents
        w.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "tile", "version": 1, "text": huge}})
        td = {"textDocument": {"uri": uri}}
        assert w.call("textDocument/semanticTokens/full", td, timeout=10)["result"] == {
            "data": []}
        assert w.call("textDocument/foldingRange", td, timeout=10)["result"] == []
        assert w.call("textDocument/formatting", {**td, "options": {
            "tabSize": 4, "insertSpaces": True}}, timeout=10)["result"] == []
    finally:
        w.close()


def test_completion_of_tile_and_array_members():
    from lsprotocol import types as lsp

    from tilelang.lsp.analysis import analyze
    from tilelang.lsp.features import completions

    text = ("kernel k(a: Array[f32, 1]) {\n    let t = load(a, index = 0, shape = 4);\n"
            "    let n = t.ndim + a.ndim;\n    store(a, index = 0, tile = t * n);\n}\n")
    a = analyze(text, "file:///tmp/members.tile")
    assert a.diagnostics == []
    def members(items):
        return [i.label for i in items if i.kind == lsp.CompletionItemKind.Property]

    tile = completions(a, lsp.Position(line=2, character=14))
    assert members(tile) == ["shape", "dtype", "ndim"]
    assert "sum" in [i.label for i in tile if i.kind == lsp.CompletionItemKind.Method]
    array = completions(a, lsp.Position(line=2, character=23))
    assert members(array) == ["shape", "stride", "dtype", "ndim"]
    assert members(completions(a, lsp.Position(line=2, character=15))) == ["ndim"]  # `n|`
    from tilelang.lsp.features import hover

    h = hover(a, lsp.Position(line=2, character=15))
    assert h.contents.value == "`ndim` of `t: Tile[f32, 4]` — the number of dimensions " \
        "(a constant)"


def test_semantic_tokens_tell_attributes_from_matrix_products():
    from tilelang.lsp.analysis import analyze
    from tilelang.lsp.semantic import LEGEND, semantic_tokens

    text = ("@launch(num_warps = 4)\n@host\nfn f(a, b) {\n    return a @ b;\n}\n")
    lines = text.split("\n")
    legend = {"tokenTypes": LEGEND.token_types, "tokenModifiers": LEGEND.token_modifiers}
    data = semantic_tokens(analyze(text, "file:///tmp/at.tile")).data
    out, line, col = {}, 0, 0
    for k in range(0, len(data), 5):
        dl, dc, length, typ, _ = data[k:k + 5]
        line += dl
        col = col + dc if dl == 0 else dc
        out[(line, col)] = (lines[line][col:col + length], legend["tokenTypes"][typ])
    assert out[(0, 0)] == ("@", "decorator") and out[(0, 1)] == ("launch", "decorator")
    assert out[(1, 0)] == ("@", "decorator") and out[(1, 1)] == ("host", "decorator")
    assert out[(3, 13)] == ("@", "operator") and out[(3, 15)] == ("b", "parameter")


def test_hover_tells_which_by_target_entry_a_const_took():
    from lsprotocol import types as lsp
    from tilelang.lsp.analysis import analyze
    from tilelang.lsp.features import hover

    text = ("kernel k(a: Array[f32, 1], const N: i32 = by_target(sm_80 = 64, default = 128)) {\n"
            "    store(a, index = (bid(0),), tile = zeros((N,), f32));\n}\n")
    a = analyze(text, "file:///tmp/bt.tile")
    assert a.diagnostics == []
    h = hover(a, lsp.Position(line=0, character=33))              # the parameter `N`
    assert h.contents.value == ("```tile\nconst N: int literal = 128\n```\n\n*in kernel k*"
                                "\n\nfrom `by_target`'s `default` entry, for sm_90a")
    h = hover(a, lsp.Position(line=0, character=45))              # `by_target`
    assert h.contents.value.startswith("`by_target(sm_90a = ..., default = ...)` — a value "
                                       "per target")
