"""The reference interpreter on the inputs of issue 12 item 8: the largest tile the checker
allows runs (and matches NumPy) in well under a second, and a malformed grid or cluster is an
InterpreterError naming it, never a TypeError from inside the loop."""

from __future__ import annotations

import time

import numpy as np
import pytest

from tilelang.diagnostics import render_all
from tilelang.driver import compile_source
from tilelang.interp import InterpreterError, run_kernel
from tilelang.sema.types import MAX_TILE_ELEMENTS

SRC = f"""\
kernel k(a: Array[f32, 1], b: Array[f32, 1]) {{
    let t = load(a, index = (bid(0),), shape = ({MAX_TILE_ELEMENTS},), padding = 1.0);
    store(b, index = (bid(0),), tile = t * 2.0 + 1.0);
}}
"""


def _kernel():
    res = compile_source(SRC, "big.tile", until="tir")
    assert res.ok, render_all(res.diagnostics)
    return res.ir


def test_the_largest_tile_runs_in_the_interpreter():
    ir = _kernel()
    n = MAX_TILE_ELEMENTS + 12345              # a second, partial block
    a = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    b = np.zeros_like(a)
    t0 = time.perf_counter()
    run_kernel(ir, [a, b], grid=(2,))
    assert time.perf_counter() - t0 < 5
    np.testing.assert_array_equal(b, a * np.float32(2) + np.float32(1))


@pytest.mark.parametrize("grid, cluster", [
    ((1.5,), (1, 1, 1)), ((-1,), (1, 1, 1)), ((1, 1, 1, 1), (1, 1, 1)), ((), (1, 1, 1)),
    (None, (1, 1, 1)), (("2",), (1, 1, 1)), ((True,), (1, 1, 1)), ((1,), (0, 1, 1)),
    ((1,), (2.0,)),
])
def test_malformed_grid_or_cluster_is_an_interpreter_error(grid, cluster):
    ir = _kernel()
    a = np.zeros(4, np.float32)
    with pytest.raises(InterpreterError, match="grid|cluster"):
        run_kernel(ir, [a, a.copy()], grid=grid, cluster=cluster)


def test_an_empty_grid_runs_no_block():
    ir = _kernel()
    a, b = np.ones(4, np.float32), np.zeros(4, np.float32)
    run_kernel(ir, [a, b], grid=(0, 3))
    assert not b.any()
