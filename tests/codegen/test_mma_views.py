"""A load reaching a tensor-core product through views (a reshape dropping leading unit axes,
a transpose) is still copied straight into the product's shared-memory image with cp.async
(lower/mma_operands.py), on wgmma (sm_90a) and mma.sync (sm_80, through registers); results
on the emulator against NumPy, ragged edges zero-padded."""

from __future__ import annotations

import numpy as np
import pytest

from wgmma_support import run

VIEWS = """
@launch(reqntid = (128, 1, 1))
kernel views(a: Array[f16, 3], b: Array[f16, 3], c: Array[f32, 3]) {
    let h = bid(0);
    let ta = reshape(load(a, index = (h, 0, 0), shape = (1, 64, 64), padding = 0), (64, 64));
    let tb = reshape(load(b, index = (h, 0, 0), shape = (1, 64, 64), padding = 0), (64, 64));
    // b is (N, K) in memory: its transpose is the (K, N) operand
    let r = mma(ta, transpose(tb), zeros((64, 64), f32)) * 0.5;
    store(c, index = (h, 0, 0), tile = reshape(r, (1, 64, 64)));
}
"""

STORE_BETWEEN = """
@launch(reqntid = (128, 1, 1))
kernel between(a: Array[f16, 2], b: Array[f16, 2], c: Array[f32, 2]) {
    let ta = load(a, index = (0, 0), shape = (64, 64));
    let tb = transpose(load(b, index = (0, 0), shape = (64, 64)));
    store(b, index = (0, 0), tile = zeros((64, 64), f16));     // the load reads b before
    store(c, index = (0, 0), tile = mma(ta, tb, zeros((64, 64), f32)));
}
"""


def _arrays(heads, rows, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.integers(-4, 5, (heads, rows, 64)).astype(np.float16)
    b = rng.integers(-4, 5, (heads, rows, 64)).astype(np.float16)
    return a, b


@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
def test_reshaped_and_transposed_operands(target):
    a, b = _arrays(2, 50)                  # 50 rows: the tile's last 14 are padding
    arrays = {"a": a, "b": b, "c": np.full((2, 50, 64), np.nan, np.float32)}
    res, _ = run(VIEWS, "views", arrays, (2,), target=target)
    if target == "sm_90a":
        # both operands copied by cp.async, neither loaded into registers
        assert "cp.async.cg.shared.global" in res.ptx
        assert "ld.global" not in res.ptx
    pa = np.zeros((2, 64, 64)); pa[:, :50] = a
    pb = np.zeros((2, 64, 64)); pb[:, :50] = b
    want = (pa @ pb.transpose(0, 2, 1) * 0.5)[:, :50]
    assert np.array_equal(arrays["c"], want)


def test_store_between_keeps_the_load_before_it():
    rng = np.random.default_rng(3)
    a = rng.integers(-4, 5, (64, 64)).astype(np.float16)
    b = rng.integers(-4, 5, (64, 64)).astype(np.float16)
    arrays = {"a": a, "b": b.copy(), "c": np.full((64, 64), np.nan, np.float32)}
    run(STORE_BETWEEN, "between", arrays, (1,))
    assert np.array_equal(arrays["c"], a.astype(np.float64) @ b.astype(np.float64).T)
    assert not arrays["b"].any()
