"""Imports, kernel `const` parameters (-D, defaults, symbols), `--emit typed-ast`.

Constant embedding follows seed 001_45fa852e188b7288.txt ("Constant Embedding"): a `const`
parameter acts as the literal it is replaced by."""

import os
import subprocess
import sys
import pathlib

import pytest

from tilelang.diagnostics import Severity, render_all
from tilelang.driver import check_file, check_source
from tilelang.options import CompileOptions

ROOT = pathlib.Path(__file__).resolve().parents[2]


def errors(r):
    return [d for d in r.diagnostics if d.severity is Severity.ERROR]


def write(tmp_path, files: dict[str, str]):
    for name, text in files.items():
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def test_stdlib_import_and_call(tmp_path):
    write(tmp_path, {"k.tile": "import std.math;\nfrom std.math import gelu as g;\n"
                               "kernel k(a: Array[f32, 1]) {\n"
                               "    let t = load(a, index = (0,), shape = (64,), padding = 0.0);\n"
                               "    store(a, index = (0,), tile = g(t) + math.silu(t) + "
                               "math.clamp(t, -1.0, 1.0));\n}\n"})
    r = check_file(str(tmp_path / "k.tile"))
    assert r.ok, render_all(r.diagnostics)


def test_import_from_the_files_folder_and_include_path(tmp_path):
    write(tmp_path, {"main.tile": "import helpers;\nimport lib.extra as x;\n"
                                  "kernel k() { let _a = helpers.two() + x.three(); }\n",
                     "helpers.tile": "fn two() { return 2; }\n",
                     "inc/lib/extra.tile": "fn three() { return 3; }\n"})
    r = check_file(str(tmp_path / "main.tile"))
    assert [d.code for d in errors(r)] == ["E0601"]  # lib.extra is only under -I inc
    r = check_file(str(tmp_path / "main.tile"),
                   CompileOptions(include_dirs=[str(tmp_path / "inc")]))
    assert r.ok, render_all(r.diagnostics)
    rec = {x.name: x for x in r.typed.records}
    assert str(rec["_a"].const) == "5"


def test_import_cycle_lists_the_modules(tmp_path):
    write(tmp_path, {"a.tile": "import b;\nkernel k() { }\n",
                     "b.tile": "import c;\nfn fb() { return 1; }\n",
                     "c.tile": "import b;\nfn fc() { return 2; }\n"})
    r = check_file(str(tmp_path / "a.tile"))
    (e,) = errors(r)
    assert e.code == "E0602"
    assert e.message == "import cycle: b → c → b"


def test_missing_module_lists_folders(tmp_path):
    write(tmp_path, {"a.tile": "import nope.mod;\nkernel k() { }\n"})
    inc = tmp_path / "some" / "where"  # an -I folder must exist (E0271 otherwise)
    inc.mkdir(parents=True)
    r = check_file(str(tmp_path / "a.tile"), CompileOptions(include_dirs=[str(inc)]))
    (e,) = errors(r)
    assert e.code == "E0601" and "looked for `nope/mod.tile` in:" in e.notes[0]
    assert str(tmp_path) in e.notes[0] and str(inc) in e.notes[0]
    assert "stdlib" in e.notes[0]


def test_defines_give_const_values():
    src = ("kernel k(a: Array[f32, 1], const T: i32) {\n"
           "    let t = load(a, index = (0,), shape = (T,), padding = 0.0);\n"
           "    store(a, index = (0,), tile = t);\n}\n")
    r = check_source(src, "k.tile", CompileOptions(defines={"T": "256"}))
    assert r.ok
    rec = {x.name: x for x in r.typed.records}
    assert str(rec["t"].type) == "Tile[f32, 256]"
    r = check_source(src, "k.tile", CompileOptions(defines={"T": "100"}))
    assert [d.code for d in errors(r)] == ["E0301"]
    r = check_source(src, "k.tile", CompileOptions(defines={"T": "2.5"}))
    assert [d.code for d in errors(r)] == ["E0243"]
    r = check_source(src, "k.tile", CompileOptions(defines={"T": "4096 * 1024 * 1024"}))
    assert [d.code for d in errors(r)] == ["E0243"]  # does not fit in i32


def test_symbolic_const_keeps_shapes_symbolic_with_a_note():
    src = ("kernel k(a: Array[f32, 2], const BM: i32) {\n"
           "    let t = load(a, index = (0, 0), shape = (BM, 2 * BM), padding = 0.0);\n"
           "    static for i in range(BM) { }\n"
           "    let _u = undefined;\n}\n")
    r = check_source(src, "k.tile")
    rec = {x.name: x for x in r.typed.records}
    assert str(rec["t"].type) == "Tile[f32, BM, (2 * BM)]"
    assert not errors(r)
    (note,) = [d for d in r.diagnostics if d.severity is Severity.NOTE]
    assert note.code == "N0201" and note.span.line == 3
    assert note.message.startswith("the rest of `k` is checked once `BM` has a value")
    # with a value, the rest is checked too
    r = check_source(src, "k.tile", CompileOptions(defines={"BM": "16"}))
    assert [d.code for d in errors(r)] == ["E0201"]


def tilec(*args):
    env = dict(os.environ)
    env.pop("NO_COLOR", None)
    return subprocess.run([sys.executable, "-m", "tilelang.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=60, env=env)


def test_emit_typed_ast(tmp_path):
    r = tilec("--emit", "typed-ast", ROOT / "examples" / "softmax.tile")
    assert r.returncode == 0, r.stderr
    assert r.stdout == (
        "kernel softmax_rows\n"
        "  7:21     param x: Array[f32, 2]\n"
        "  7:39     param y: Array[f32, 2]\n"
        "  7:57     const N: int literal = 1024\n"
        "  8:9      let   r: i32\n"
        "  9:9      let   t: Tile[f32, 1, 1024]\n"
        "  10:9     let   e: Tile[f32, 1, 1024]\n")


def test_check_with_define_on_the_command_line():
    r = tilec("check", "-D", "TILE=100", ROOT / "examples" / "vadd.tile")
    assert r.returncode == 1 and "error[E0301]" in r.stderr
    r = tilec("check", "-D", "TILE=512", ROOT / "examples" / "vadd.tile")
    assert r.returncode == 0, r.stderr


def test_warnings_do_not_fail_the_build(tmp_path):
    f = tmp_path / "w.tile"
    f.write_text("kernel k() { let unused = 1; }\n")
    r = tilec("check", f)
    assert r.returncode == 0 and "warning[W0201]: unused variable `unused`" in r.stderr
