"""A launch compiles one kernel with its own `const` values (docs/python-api.md): the other
kernels of the module are not checked under those values, so their errors are not reported
for it; launching the other kernel with the same values still reports its own error."""

from __future__ import annotations

import numpy as np
import pytest

import tilelang
from rt_support import fresh_runtime  # noqa: F401 (autouse fixture)
from tilelang.diagnostics import TileError
from tilelang.driver import compile_source

SRC = """kernel good(a: Array[f32, 1], const T: i32 = 16) {
    let t = load(a, index = (0,), shape = (T - 8,));
    store(a, index = (0,), tile = t * 2.0);
}
kernel bad(a: Array[f32, 1], const T: i32 = 16) {
    let t = load(a, index = (0,), shape = (T,));
    store(a, index = (0,), tile = t);
}
"""


def test_the_compile_of_one_kernel_checks_only_it():
    res = compile_source(SRC, "two.tile", kernels=["good"], consts={"T": 24}, until="tir")
    assert res.diagnostics == [] and "good" in res.tir and "bad" not in res.tir
    res = compile_source(SRC, "two.tile", kernels=["bad"], consts={"T": 24}, until="tir")
    assert [(d.code, d.span.line) for d in res.diagnostics] == [("E0301", 6)]
    res = compile_source(SRC, "two.tile", consts={"T": 24}, until="tir")    # the whole module
    assert [(d.code, d.span.line) for d in res.diagnostics] == [("E0301", 6)]


def test_launching_one_kernel_reports_only_its_errors(tmp_path):
    path = tmp_path / "two.tile"
    path.write_text(SRC)
    mod = tilelang.compile(str(path), backend="emulator", cache_dir=str(tmp_path / "cache"))
    a = np.arange(32, dtype=np.float32)
    want = a.copy()
    want[:16] *= 2
    mod.good[1](a, T=24)
    np.testing.assert_array_equal(a, want)
    with pytest.raises(TileError) as e:
        mod.bad[1](a, T=24)
    assert e.value.diagnostics[0].code == "E0301"
    assert e.value.diagnostics[0].span.line == 6
