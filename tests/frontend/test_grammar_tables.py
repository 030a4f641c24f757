"""The parser's tables: shipped as plain JSON that matches the grammar, and never a pickle.

Earlier versions gave Lark a pickle cache in $TILELANG_CACHE_DIR, falling back to a predictable
name in the shared temp folder; a file planted there ran code as the next user. These tests
plant such files at every name those versions used and check that nothing runs and nothing is
written."""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import pickle
import subprocess
import sys

import lark
import pytest

from tilelang.frontend import grammar_tables as gt
from tilelang.frontend.parser import _lark, grammar_text
from tilelang.frontend.resources import grammar_dir, grammar_path, stdlib_dir

ROOT = pathlib.Path(__file__).resolve().parents[2]
CORPUS = sorted(ROOT.glob("examples/*.tile")) + sorted(ROOT.glob("stdlib/**/*.tile")) + \
    sorted(ROOT.glob("tests/**/*.tile"))


@pytest.fixture(scope="module")
def built():
    return gt.build(grammar_text())


def shipped_doc() -> dict:
    return json.loads(pathlib.Path(gt.tables_path()).read_text("utf-8"))


def test_grammar_and_stdlib_are_found_at_the_top_of_the_checkout():
    assert pathlib.Path(grammar_dir()) == ROOT / "grammar"
    assert pathlib.Path(stdlib_dir()) == ROOT / "stdlib"
    assert pathlib.Path(grammar_path()).read_text("utf-8") == grammar_text()


def test_shipped_tables_were_made_from_this_grammar(built):
    """Fails after an edit of grammar/tile.lark until `python -m tilelang.frontend.grammar_tables`
    is run (the parser still works meanwhile, built from the grammar in memory)."""
    doc = shipped_doc()
    assert doc["grammar_sha256"] == hashlib.sha256(grammar_text().encode()).hexdigest(), \
        "grammar/tile.tables.json is stale: run python -m tilelang.frontend.grammar_tables"
    if doc["lark"] != lark.__version__:
        pytest.skip(f"tables made with Lark {doc['lark']}, this is {lark.__version__}")
    loaded = gt.load(pathlib.Path(gt.tables_path()).read_text("utf-8"), grammar_text())
    assert loaded is not None
    assert gt.fingerprint(loaded) == gt.fingerprint(built)


def test_the_parser_in_use_is_the_shipped_one():
    if shipped_doc()["lark"] != lark.__version__:
        pytest.skip("tables made with another Lark version")
    assert _lark().source_path == "<deserialized>"


def test_fingerprint_sees_a_different_grammar(built):
    other = gt.build(grammar_text().replace('"while"', '"whilst"'))
    assert gt.fingerprint(other) != gt.fingerprint(built)


def test_loaded_tables_parse_like_the_grammar(built):
    loaded = gt.load(gt.dump(built, grammar_text()), grammar_text())
    assert loaded is not None
    assert [t.name for t in loaded.terminals] == [t.name for t in built.terminals]
    for path in CORPUS:
        text = path.read_text("utf-8")
        try:
            want = built.parse(text)
        except lark.exceptions.UnexpectedInput:
            with pytest.raises(lark.exceptions.UnexpectedInput):
                loaded.parse(text)
            continue
        assert loaded.parse(text) == want, path


def test_json_round_trip_is_exact(built):
    data, memo = built.memo_serialize([lark.lexer.TerminalDef, lark.grammar.Rule])
    doc = json.loads(gt.dump(built, grammar_text()), object_hook=gt._decode)
    assert doc["data"] == data and doc["memo"] == memo


@pytest.mark.parametrize("text", [
    "", "[]", "null", "{}", '{"key": 1}', "not json", '{"key": "%s", "data": 5, "memo": []}',
])
def test_tables_for_another_grammar_or_damaged_are_ignored(text):
    text = text.replace("%s", gt.key(grammar_text()))
    assert gt.load(text, grammar_text()) is None


def test_tables_made_for_another_grammar_are_ignored(built):
    dumped = gt.dump(built, grammar_text())
    assert gt.load(dumped, grammar_text()) is not None
    assert gt.load(dumped, grammar_text() + "\n// edited\n") is None


def test_stale_tables_fall_back_to_the_grammar(monkeypatch, tmp_path):
    (tmp_path / "tile.tables.json").write_text('{"key": "old"}')
    monkeypatch.setattr(gt, "tables_path", lambda: str(tmp_path / "tile.tables.json"))
    p = gt.parser_for(grammar_text())
    assert p.source_path != "<deserialized>"
    assert p.parse("fn f() { return 1; }").data == "start"
    monkeypatch.setattr(gt, "tables_path", lambda: str(tmp_path / "missing.json"))
    assert gt.parser_for(grammar_text()).parse("const X = 1;").data == "start"


# ---- planted pickles ------------------------------------------------------------------------


class _Payload:
    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (exec, (f"open({self.marker!r}, 'w').write('pwned')",))


def _old_cache_names(cache_dir: pathlib.Path, tmp: pathlib.Path) -> list[pathlib.Path]:
    """Every name earlier versions (and Lark's own cache=True) read a pickle from."""
    digest = hashlib.sha256(grammar_text().encode()).hexdigest()[:16]
    names = []
    for ver in {lark.__version__, "1.2.2", "1.3.0", "1.3.1"}:
        names.append(cache_dir / f"grammar-lark{ver}-{digest}.pickle")
        names.append(tmp / f"tilelang-grammar-lark{ver}-{digest}.pickle")
    return names


def _plant(names: list[pathlib.Path], marker: pathlib.Path) -> None:
    # Lark's cache format: a hash line, then pickles; the first pickle is loaded unconditionally.
    blob = b"0" * 64 + b"\n" + pickle.dumps(_Payload(str(marker))) * 2
    for n in names:
        n.parent.mkdir(parents=True, exist_ok=True)
        n.write_bytes(blob)


def _snapshot(folder: pathlib.Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize("cache_dir_kind", ["writable", "unusable"])
def test_planted_grammar_pickles_never_run(tmp_path, cache_dir_kind):
    """`tilec check` and the Python API, with pickles planted at the old cache names in the
    cache folder and in the temp folder (where the old code fell back when the cache folder
    was unusable). The payload would create `marker`."""
    marker = tmp_path / "marker"
    tmp = tmp_path / "tmp"
    cache = tmp_path / "cache"
    _plant(_old_cache_names(cache, tmp), marker)
    if cache_dir_kind == "unusable":
        cache_env = tmp_path / "not-a-folder"
        cache_env.write_text("")
        _plant(_old_cache_names(cache_env.parent / "x", tmp), marker)
    else:
        cache_env = cache
    src = tmp_path / "k.tile"
    src.write_text((ROOT / "examples" / "vadd.tile").read_text())
    before = _snapshot(tmp_path)
    env = {**os.environ, "TILELANG_CACHE_DIR": str(cache_env), "TMPDIR": str(tmp),
           "XDG_CACHE_HOME": str(tmp_path / "xdg"), "HOME": str(tmp_path / "home")}
    runs = [
        [sys.executable, "-c", "import sys; from tilelang.cli import main; sys.exit(main())",
         "check", str(src)],
        [sys.executable, "-c", "import sys, tilelang; from tilelang.driver import check_file\n"
         "from tilelang.diagnostics import TileSyntaxError\n"
         "from tilelang.frontend.parser import parse\n"
         "print(check_file(sys.argv[1]).ok)\n"
         "try: parse('fn f(', 'x.tile')\n"
         "except TileSyntaxError: print('syntax error reported')\n", str(src)],
    ]
    for cmd in runs:
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        assert not marker.exists(), (cmd, r.stdout, r.stderr)
    assert r.stdout.split() == ["True", "syntax", "error", "reported"]
    assert _snapshot(tmp_path) == before  # nothing written, nothing replaced


def test_payload_is_real(tmp_path):
    """The planted file does run code when unpickled the way Lark's cache loader does."""
    marker = tmp_path / "marker"
    (name,) = _old_cache_names(tmp_path, tmp_path)[:1]
    _plant([name], marker)
    with open(name, "rb") as f:
        f.readline()
        pickle.load(f)
    assert marker.read_text() == "pwned"


def test_parser_sources_use_no_pickle_and_no_cache():
    for mod in ("parser.py", "grammar_tables.py", "resources.py", "imports.py"):
        text = (ROOT / "tilelang" / "frontend" / mod).read_text("utf-8")
        assert "import pickle" not in text and "cache=" not in text, mod
