"""Re-checking only what an edit changed (tilelang/lsp/incremental.py): the document parsed
item by item gives the module and the diagnostics a whole parse gives, an edit inside one item
parses only that item again, imported files are parsed once per content, and the server's
check reports what `tilec check` reports."""

from __future__ import annotations

import importlib.util

import pytest

pytest.importorskip("pygls", reason="pygls is not installed (pip install 'tilec[lsp]')")

from editor_helpers import ROOT  # noqa: E402
from tilelang.diagnostics import TileError  # noqa: E402
from tilelang.driver import check_source  # noqa: E402
from tilelang.frontend.parser import parse  # noqa: E402
from tilelang.lsp import analysis, incremental  # noqa: E402
from tilelang.lsp.incremental import ItemCache, item_chunks  # noqa: E402

FILES = sorted(p for p in ROOT.rglob("*.tile") if "node_modules" not in p.parts)


def _fuzz_inputs(n: int) -> list[str]:
    spec = importlib.util.spec_from_file_location(
        "frontend_fuzz_inputs", ROOT / "tests" / "frontend" / "test_fuzz.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return [mod.make(1, i) for i in range(n)]


def _outcome(fn, text: str):
    try:
        return "ok", fn(text)
    except TileError as e:
        return "error", [(d.code, d.message, d.span) for d in e.diagnostics]
    except RecursionError:
        return "deep", None


def test_item_chunks():
    text = ('// a comment ; {\nconst A = 1; /* } ; */ fn f() { let s = "}"; }\n'
            'kernel k() {}\n  @launch(x = 1) kernel z() { (1); }\n')
    got = [(text[s:e], line, col) for s, e, line, col in item_chunks(text)]
    assert got == [("const A = 1;", 2, 1), ('fn f() { let s = "}"; }', 2, 24),
                   ("kernel k() {}", 3, 1), ("@launch(x = 1) kernel z() { (1); }", 4, 3)]
    # unbalanced text: the rest is one chunk, whose parse reports it
    odd = "fn f() { ) const B = 2;"
    assert [odd[s:e] for s, e, _, _ in item_chunks(odd)] == [odd]
    assert [t[0:2] for t in item_chunks("/* never closed")] == [(0, 15)]
    assert item_chunks("") == [] and item_chunks("  // only\n") == []


def test_item_parse_equals_whole_parse():
    texts = [p.read_text("utf-8") for p in FILES] + _fuzz_inputs(80)
    for text in texts:
        whole = _outcome(lambda t: parse(t, "/tmp/x.tile"), text)
        items = _outcome(lambda t: ItemCache().parse(t, "/tmp/x.tile"), text)
        if whole[0] == "deep" or items[0] == "deep":
            continue
        assert whole == items, text[:200]


def test_an_edit_inside_one_item_parses_that_item_again():
    base = (ROOT / "examples" / "attention.tile").read_text("utf-8")
    cache = ItemCache()
    first = cache.parse(base, "/tmp/a.tile")
    n = len(item_chunks(base))
    assert (cache.parsed, cache.reused) == (n, 0)
    edited = base.replace("let m = bid(0);", "let m = bid(0) + 0;", 1)
    assert edited != base
    second = cache.parse(edited, "/tmp/a.tile")
    assert (cache.parsed, cache.reused) == (n + 1, n - 1)
    assert second == parse(edited, "/tmp/a.tile") and second != first
    # a line added above every item: all are parsed again, at their new places
    moved = cache.parse("\n" + base, "/tmp/a.tile")
    assert cache.parsed == 2 * n + 1
    assert moved.items[0].span.line == first.items[0].span.line + 1


def test_imports_are_parsed_once_per_content(tmp_path, monkeypatch):
    lib = tmp_path / "lib.tile"
    lib.write_text("fn twice(x) {\n    return x + x;\n}\n")
    main = tmp_path / "main.tile"
    text = "import lib;\nkernel k(a: Array[f32, 1]) {\n" \
           "    store(a, index = 0, tile = lib.twice(load(a, index = 0, shape = 4)));\n}\n"
    parsed = []
    real_parse = incremental.parse
    monkeypatch.setattr(incremental, "parse",
                        lambda t, p="<input>": parsed.append(p) or real_parse(t, p))
    for _ in range(3):
        a = analysis.analyze(text, f"file://{main}")
        assert a.diagnostics == []
    assert parsed.count(str(lib.resolve())) == 1
    lib.write_text("fn twice(x) {\n    return 2 * x;\n}\n")  # new content: parsed again
    assert analysis.analyze(text, f"file://{main}").diagnostics == []
    assert parsed.count(str(lib.resolve())) == 2
    lib.write_text("fn twice(x) {\n    return 2 * ;\n}\n")  # a syntax error in the import
    diags = analysis.analyze(text, f"file://{main}").diagnostics
    assert [d.code for d in diags] == ["E0101"]


def test_the_servers_check_reports_what_tilec_check_reports():
    texts = [(str(p), p.read_text("utf-8")) for p in FILES]
    texts += [(f"/tmp/fuzz{i}.tile", t) for i, t in enumerate(_fuzz_inputs(50))]
    for path, text in texts:
        want = check_source(text, path)
        module, typed, diags, _ = analysis._check(text, path, f"file://{path}")
        assert [(d.code, d.message, d.span) for d in diags] == \
            [(d.code, d.message, d.span) for d in want.diagnostics], path
        assert (module is None) == (want.module is None)
