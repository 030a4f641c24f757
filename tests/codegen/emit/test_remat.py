"""Rematerialization (emit/remat.py): a tile built from `arange`, splats and scalars is
computed again in the layout its consumer wants instead of being exchanged into it. Results
on the emulator against NumPy (under the race checker) with and without it, and what it saves
in the PTX; a chain longer than the limit is exchanged as before."""

from __future__ import annotations

import re

import numpy as np
import pytest

from tilelang.codegen.emit import remat
from wgmma_support import run

# a (1, 64) key mask and a (64, 1) row position, combined and applied to a product's
# accumulator (the scores of attention): the mask is made in its own layouts
MASKED = """
@launch(reqntid = (128, 1, 1))
kernel masked(a: Array[f16, 2], b: Array[f16, 2], c: Array[f32, 2], n: i32, m: i32) {
    let ta = load(a, index = (0, 0), shape = (64, 64));
    let tb = load(b, index = (0, 0), shape = (64, 64));
    let s = mma(ta, tb, zeros((64, 64), f32));
    let cols = expand_dims(arange(64), 0);
    let rows = expand_dims(arange(64) + m, 1);
    let keep = (cols < n) & (cols <= rows);
    store(c, index = (0, 0), tile = where(keep, s, -1.0) * 2.0);
}
"""


def _masked(target, n, m, off=False, monkeypatch=None):
    if off:
        monkeypatch.setattr(remat, "pure", lambda kern, op: False)
    rng = np.random.default_rng(n)
    a = rng.integers(-3, 4, (64, 64)).astype(np.float16)
    b = rng.integers(-3, 4, (64, 64)).astype(np.float16)
    arrays = {"a": a, "b": b, "c": np.full((64, 64), np.nan, np.float32)}
    res, _ = run(MASKED, "masked", arrays, (1,), scalars=[np.int32(n), np.int32(m)],
                 target=target, race_check=True)
    s = a.astype(np.float64) @ b.astype(np.float64)
    cols, rows = np.arange(64)[None, :], np.arange(64)[:, None] + m
    want = np.where((cols < n) & (cols <= rows), s, -1.0) * 2.0
    assert np.array_equal(arrays["c"], want)
    return res.ptx


@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
def test_mask_recomputed_in_the_accumulator_layout(target, monkeypatch):
    ptx = _masked(target, 40, 3)
    with monkeypatch.context() as mp:
        before = _masked(target, 40, 3, off=True, monkeypatch=mp)
    # without rematerialization the (1, 64) and (64, 1) tiles (or their combination) go
    # through shared memory into the accumulator's layout: more stores, loads and barriers
    for pattern in (r"\bbar\.sync", r"\bst\.shared"):
        assert len(re.findall(pattern, ptx)) < len(re.findall(pattern, before)), pattern


def test_broadcast_source_layout():
    # the wanted layout less the stretched axes renames into the wanted one
    from tilelang.codegen.layouts import convert as C
    from tilelang.codegen.layouts.distributed import blocked
    dst = blocked((64, 64), 4, 128)
    for shape in [(1, 64), (64, 1), (64,)]:
        src = remat.broadcast_source(dst, shape)
        assert src.shape == shape
        assert remat.renames(src, C.need_of(dst, shape)) is not None


def test_long_chains_are_exchanged(monkeypatch):
    # past MAX_COST ops per element a tile is not recomputed (the results are the same)
    monkeypatch.setattr(remat, "MAX_COST", 1)
    _masked("sm_90a", 17, 0)
