"""Hand-built kernels for memory ops: tile loads/stores with padding at the edges of 1-D and
2-D arrays, non-contiguous and negative strides (facts contiguous=False), transposed loads
(`order`), f16/bool/f64 arrays, gather/scatter with masks, num_tiles/dim/stride. Each runs on
the emulator and in the interpreter; both are checked against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

from gen_support import Strided, run_both, same, vector_accesses
from tilelang.codegen.api import ArrayFacts
from tilelang.ir.builder import KernelBuilder
from tilelang.sema.types import BOOL, F16, F32, F64, I32, ArrayType

GENERIC = ArrayFacts(contiguous=False, aligned16=False)
UNALIGNED = ArrayFacts(contiguous=True, aligned16=False)


def copy_kernel(dtype, rank, shape, padding, order=None, threads=128, name="copy"):
    """y[tile i] = load(x, tile i, padding) + 0 along every axis of a `rank`-d grid."""
    kb = KernelBuilder(name, attributes={"maxntid": (threads, 1, 1)})
    x, y = kb.param("x", ArrayType(dtype, rank)), kb.param("y", ArrayType(dtype, rank))
    idx = tuple(kb.op("bid", d) for d in range(rank))
    kw = {"order": order} if order is not None else {}
    t = kb.op("load", x, index=idx, shape=shape, padding=padding, **kw)
    kb.op("store", y, index=idx, tile=t)
    return kb.finish()


def expected_copy(x, yshape, tshape, padding, grid, dtype):
    """What each tile of y receives: x where inside, padding inside y but outside x."""
    want = np.zeros(yshape, dtype)
    for blk in np.ndindex(*grid):
        tile = np.full(tshape, padding, dtype)
        sl_t, sl_x = [], []
        for i, s, n in zip(blk, tshape, x.shape):
            lo, hi = i * s, min(i * s + s, n)
            sl_t.append(slice(0, max(hi - lo, 0)))
            sl_x.append(slice(lo, max(hi, lo)))
        tile[tuple(sl_t)] = x[tuple(sl_x)]
        ys = tuple(slice(i * s, min(i * s + s, n)) for i, s, n in zip(blk, tshape, yshape))
        want[ys] = tile[tuple(slice(0, sl.stop - sl.start) for sl in ys)]
    return want


@pytest.mark.parametrize("n,tile", [(300, 128), (256, 128), (5, 8), (1, 1024)])
def test_1d_padding_at_the_edge(n, tile):
    k = copy_kernel(F32, 1, (tile,), -1.5)
    x = np.arange(n, dtype=np.float32) + 0.25
    grid = (-(-n // tile) + 1,)
    y = np.zeros(grid[0] * tile - tile // 2, np.float32)
    (_, ye), (_, yr), r, _ = run_both(k, [x, y], grid + (1, 1))
    want = expected_copy(x, y.shape, (tile,), -1.5, grid, np.float32)
    same(yr, want)
    same(ye, want)


def test_1d_contiguous_is_vectorized():
    k = copy_kernel(F32, 1, (512,), 0.0)
    x = np.arange(1000, dtype=np.float32)
    (_, ye), _, r, rep = run_both(k, [x, np.zeros(1000, np.float32)], (2, 1, 1))
    same(ye, x)
    assert vector_accesses(r.ptx, "ld") and vector_accesses(r.ptx, "st")


@pytest.mark.parametrize("facts", [None, GENERIC, UNALIGNED])
def test_2d_edges(facts):
    k = copy_kernel(F32, 2, (16, 32), 9.0)
    x = np.random.default_rng(0).standard_normal((37, 70)).astype(np.float32)
    y = np.zeros((40, 80), np.float32)
    grid = (3, 3)
    fx = {"x": facts, "y": facts} if facts else None
    if facts is None:    # default facts need 16-byte rows: pad x's pitch
        xb = np.zeros((37, 72), np.float32)
        xb[:, :70] = x
        xa = Strided(xb, xb[:, :70])
    else:
        xa = x
    (_, ye), (_, yr), r, _ = run_both(k, [xa, y], grid + (1,), facts=fx)
    want = expected_copy(x, y.shape, (16, 32), 9.0, grid, np.float32)
    same(yr, want)
    same(ye, want)


def test_2d_non_contiguous_and_negative_strides():
    k = copy_kernel(F32, 2, (8, 16), -2.0)
    base = np.random.default_rng(1).standard_normal((30, 90)).astype(np.float32)
    xv = base[::-2, 5::3]                          # (15, 29), negative row stride
    ybase = np.full((40, 100), 3.0, np.float32)
    yv = ybase[1::2, ::-2]                         # (20, 50), negative column stride
    grid = (2, 2, 1)
    (xe, ye), (_, yr), r, _ = run_both(k, [Strided(base, xv), Strided(ybase, yv)], grid,
                                       facts={"x": GENERIC, "y": GENERIC})
    want = yv.copy()
    want[:16, :32] = expected_copy(xv, (16, 32), (8, 16), -2.0, (2, 2), np.float32)
    same(yr, want)
    same(ye, want)
    assert not vector_accesses(r.ptx, "ld")


def test_transposed_load_with_order():
    """order=(1, 0): the tile is the (i, j) tile of x viewed transposed."""
    kb = KernelBuilder("tload")
    x, y = kb.param("x", ArrayType(F32, 2)), kb.param("y", ArrayType(F32, 2))
    i, j = kb.op("bid", 0), kb.op("bid", 1)
    t = kb.op("load", x, index=(i, j), shape=(16, 8), padding=0.5, order=(1, 0))
    kb.op("store", y, index=(i, j), tile=t)
    k = kb.finish()
    x = np.random.default_rng(2).standard_normal((20, 24)).astype(np.float32)
    y = np.zeros((32, 24), np.float32)
    (_, ye), (_, yr), _, _ = run_both(k, [x, y], (2, 3, 1))
    want = expected_copy(x.T, (32, 24), (16, 8), 0.5, (2, 3), np.float32)
    same(yr, want)
    same(ye, want)


@pytest.mark.parametrize("dtype,npdt,pad", [(F16, np.float16, 2.5), (F64, np.float64, -3.0),
                                            (BOOL, np.bool_, True), (I32, np.int32, 7)])
def test_other_dtypes(dtype, npdt, pad):
    k = copy_kernel(dtype, 1, (256,), pad)
    rng = np.random.default_rng(3)
    x = (rng.integers(0, 2, 700) if npdt == np.bool_ else rng.standard_normal(700) * 9
         ).astype(npdt)
    y = np.zeros(768, npdt)
    (_, ye), (_, yr), r, _ = run_both(k, [x, y], (3, 1, 1))
    want = expected_copy(x, y.shape, (256,), pad, (3,), npdt)
    same(yr, want)
    same(ye, want)


def perm_scatter(ix: np.ndarray, facts=None) -> None:
    """y[perm[i]] = x[idx[i]] where the gathered value is positive, over blocks of 64, on the
    interpreter and the emulator against NumPy; out-of-range entries of idx read padding."""
    kb = KernelBuilder("perm")
    x, idx, perm, y = (kb.param("x", ArrayType(F32, 1)), kb.param("idx", ArrayType(I32, 1)),
                       kb.param("perm", ArrayType(I32, 1)), kb.param("y", ArrayType(F32, 1)))
    b = kb.op("bid", 0)
    it = kb.op("load", idx, index=(b,), shape=(64,), padding=-1)
    pt = kb.op("load", perm, index=(b,), shape=(64,), padding=-1)
    v = kb.op("gather", x, it, padding=-7.0)
    kb.op("scatter", y, pt, v, mask=kb.op(">", v, 0.0))
    k = kb.finish()
    rng = np.random.default_rng(4)
    n = len(ix)
    x = rng.standard_normal(n).astype(np.float32)
    pm = rng.permutation(n).astype(np.int32)
    y = np.zeros(n, np.float32)
    (_, _, _, ye), (_, _, _, yr), _, _ = run_both(k, [x, ix, pm, y], (2, 1, 1), facts=facts)
    vals = np.where((ix >= 0) & (ix < n), x[np.clip(ix, 0, n - 1)], -7.0)
    want = np.zeros(n, np.float32)
    want[pm[vals > 0]] = vals[vals > 0]
    same(yr, want)
    same(ye, want)


def test_gather_scatter_with_mask_and_out_of_range():
    """y[perm[i]] = x[idx[i]] where mask; idx has out-of-range entries (read padding)."""
    n = 100
    perm_scatter(np.random.default_rng(5).integers(-5, n + 5, n).astype(np.int32))


def test_2d_gather_with_scalar_and_tile_indices():
    kb = KernelBuilder("col")
    x, y = kb.param("x", ArrayType(F32, 2)), kb.param("y", ArrayType(F32, 1))
    c = kb.op("bid", 0)
    rows = kb.op("arange", 32, I32)
    v = kb.op("gather", x, (rows, c))
    kb.op("store", y, index=(c,), tile=kb.op("expand_dims", kb.op("sum", v), 0))
    k = kb.finish()
    x = np.random.default_rng(5).standard_normal((20, 6)).astype(np.float32)
    y = np.zeros(6, np.float32)
    (_, ye), (_, yr), _, _ = run_both(k, [x, y], (6, 1, 1))
    np.testing.assert_allclose(yr, x.sum(0), rtol=1e-5)
    np.testing.assert_allclose(ye, yr, rtol=1e-6)


def test_num_tiles_dim_stride():
    kb = KernelBuilder("meta")
    x, out = kb.param("x", ArrayType(F32, 2)), kb.param("out", ArrayType(I32, 1))
    vals = [kb.op("num_tiles", x, axis=0, shape=(16, 8)), kb.op("num_tiles", x, axis=1,
                                                                   shape=(16, 8)),
            kb.op("dim", x, axis=0), kb.op("dim", x, axis=1), kb.op("stride", x, axis=0)]
    for i, v in enumerate(vals):
        kb.op("scatter", out, kb.constant(i, I32), v)
    k = kb.finish()
    base = np.zeros((50, 40), np.float32)
    xv = base[:33, :17]
    out = np.zeros(5, np.int32)
    (_, oe), (_, orf), _, _ = run_both(k, [Strided(base, xv), out], (1, 1, 1),
                                       facts={"x": UNALIGNED})
    assert orf.tolist() == [3, 3, 33, 17, 40]
    assert oe.tolist() == [3, 3, 33, 17, 40]
