"""`str(TileError)` is what `tilec` prints, uncoloured (issue 12, item 12): every
diagnostic with code, location, the source line with carets, notes and help; the structured
list stays in `.diagnostics`."""

from __future__ import annotations

import numpy as np
import pytest

import tilelang
from rt_support import fresh_runtime  # noqa: F401 (autouse fixture)
from tilelang.diagnostics import Severity, TileError

TWO_ERRORS = """kernel k(a: Array[f32, 1]) {
    let x = yy;
    let y = zz;
}
"""


def test_compile_errors_render_like_the_cli(tmp_path):
    with pytest.raises(TileError) as e:
        tilelang.compile(TWO_ERRORS, backend="emulator", cache_dir=str(tmp_path))
    assert str(e.value) == """\
error[E0201]: cannot find `yy` in this scope
 --> <string>:2:13
  |
2 |     let x = yy;
  |             ^^
  |
  = help: declare it with `let` or `var`, or import it

error[E0201]: cannot find `zz` in this scope
 --> <string>:3:13
  |
3 |     let y = zz;
  |             ^^
  |
  = help: declare it with `let` or `var`, or import it"""
    diags = e.value.diagnostics
    assert [(d.code, d.span.line, d.span.col, d.severity) for d in diags] == \
        [("E0201", 2, 13, Severity.ERROR), ("E0201", 3, 13, Severity.ERROR)]
    assert e.value.args[0] == "cannot find `yy` in this scope"
    assert "\x1b[" not in str(e.value)


def test_text_matches_tilec_check(tmp_path):
    """The same file through `tilec check` (stderr) and through Python (str)."""
    import subprocess
    import sys
    f = tmp_path / "bad.tile"
    f.write_text(TWO_ERRORS)
    r = subprocess.run([sys.executable, "-m", "tilelang.cli", "check", str(f)],
                       capture_output=True, text=True, env={"NO_COLOR": "1", "PATH": ""},
                       cwd=str(tmp_path))
    with pytest.raises(TileError) as e:
        tilelang.compile(str(f), backend="emulator", cache_dir=str(tmp_path / "c"))
    assert r.returncode == 1
    assert r.stderr.startswith(str(e.value) + "\n")
    assert f" --> {f}:2:13" in str(e.value)


def test_snippet_is_the_errors_own_source(tmp_path):
    """A later `<string>` module must not change the lines an earlier error shows."""
    with pytest.raises(TileError) as first:
        tilelang.compile("kernel k(a: Array[f32, 1]) {\n    let q = nope;\n}\n",
                         backend="emulator", cache_dir=str(tmp_path))
    with pytest.raises(TileError):
        tilelang.compile("kernel k(a: Array[f32, 1]) {\n    something else entirely;\n}\n",
                         backend="emulator", cache_dir=str(tmp_path))
    assert "2 |     let q = nope;\n  |             ^^^^" in str(first.value)


def test_runtime_errors_point_at_the_parameter(tmp_path):
    mod = tilelang.compile("examples/vadd.tile", backend="interp", cache_dir=str(tmp_path))
    f = np.zeros(8, np.float32)
    with pytest.raises(tilelang.KernelArgumentError) as e:
        mod.vadd[1](f, np.zeros(8, np.float64), f)
    assert str(e.value) == """\
error[E0911]: argument `b` of kernel `vadd` (b: Array[f32, 1]) has dtype f64, expected f32
 --> examples/vadd.tile:8:31
  |
8 | kernel vadd(a: Array[f32, 1], b: Array[f32, 1], c: Array[f32, 1], const TILE: i32 = 1024) {
  |                               ^^^^^^^^^^^^^^^^
  |
  = help: convert it first, e.g. `x.astype(...)` / `x.to(...)` to f32"""


def test_errors_without_a_span():
    with pytest.raises(tilelang.RuntimeUsageError) as e:
        tilelang.get_backend("tpu")
    assert str(e.value) == (
        "error[E0921]: unknown back end `tpu`\n  = help: the back ends are `cuda` (a GPU "
        "through the CUDA driver; `cuda:N` for device N), `emulator` (the CPU PTX emulator) "
        "and `interp` (the reference interpreter)")
    assert str(TileError([])) == "error"


def test_errors_survive_pickling(tmp_path):
    """multiprocessing and pytest-xdist pickle exceptions: the diagnostics come along."""
    import pickle
    with pytest.raises(TileError) as e:
        tilelang.compile(TWO_ERRORS, backend="emulator", cache_dir=str(tmp_path))
    back = pickle.loads(pickle.dumps(e.value))
    assert type(back) is type(e.value) and back.diagnostics == e.value.diagnostics
    with pytest.raises(tilelang.KernelArgumentError) as k:
        tilelang.compile("examples/vadd.tile", backend="interp",
                         cache_dir=str(tmp_path)).vadd[1](1, 2, 3)
    back = pickle.loads(pickle.dumps(k.value))
    assert isinstance(back, TypeError) and str(back).startswith("error[E0914]: argument `a`")
    assert str(TileError("plain words")) == "error: plain words"
