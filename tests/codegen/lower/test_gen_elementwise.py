"""Element-wise lowering with broadcasting: scalars (parameters, bid, loose and strict
constants), size-1 axes on either side, mixed dtypes with promotion, where, astype, creation
(zeros/ones/full/arange)."""

from __future__ import annotations

import numpy as np

from correctly_rounded import correctly_rounded
from gen_support import run_both, same
from tilelang.ir.builder import KernelBuilder
from tilelang.sema.types import BOOL, F16, F32, I32, ArrayType, scalar


def test_broadcast_rows_columns_and_scalars():
    """y = x * s + row - col + bid (x: 16 x 64, row: 1 x 64, col: 16 x 1, s: f32 param)."""
    kb = KernelBuilder("bcast")
    x, row = kb.param("x", ArrayType(F32, 2)), kb.param("row", ArrayType(F32, 2))
    col, y = kb.param("col", ArrayType(F32, 2)), kb.param("y", ArrayType(F32, 2))
    s = kb.param("s", scalar(F32))
    b = kb.op("bid", 0)
    tx = kb.op("load", x, index=(b, 0), shape=(16, 64), padding=0.0)
    tr = kb.op("load", row, index=(0, 0), shape=(1, 64), padding=0.0)
    tc = kb.op("load", col, index=(b, 0), shape=(16, 1), padding=0.0)
    v = kb.op("-", kb.op("+", kb.op("*", tx, s), tr), tc)
    v = kb.op("+", v, kb.op("astype", b, F32))
    kb.op("store", y, index=(b, 0), tile=v)
    k = kb.finish()
    rng = np.random.default_rng(0)
    X = rng.standard_normal((32, 64)).astype(np.float32)
    R = rng.standard_normal((1, 64)).astype(np.float32)
    C = rng.standard_normal((32, 1)).astype(np.float32)
    Y = np.zeros((32, 64), np.float32)
    (*_, ye, _), (*_, yr, _), _, _ = run_both(k, [X, R, C, Y, np.float32(1.5)], (2, 1, 1))
    want = X * np.float32(1.5) + R - C + (np.arange(32) // 16)[:, None].astype(np.float32)
    same(yr, want)
    # the GPU code (default mode "fast") contracts x * s + row into one fma: one rounding of
    # the exact value, which float64 holds here (a 26-bit product plus a normal sample)
    fused = (X.astype(np.float64) * 1.5 + R.astype(np.float64)).astype(np.float32)
    same(ye, fused - C + (np.arange(32) // 16)[:, None].astype(np.float32))


def test_outer_broadcast_without_a_full_operand():
    """(1, 32) + (16, 1) -> (16, 32): neither operand has the result's shape."""
    kb = KernelBuilder("outer")
    y = kb.param("y", ArrayType(I32, 2))
    r = kb.op("expand_dims", kb.op("arange", 32, I32), 0)
    c = kb.op("expand_dims", kb.op("*", kb.op("arange", 16, I32), 100), 1)
    kb.op("store", y, index=(0, 0), tile=kb.op("+", r, c))
    k = kb.finish()
    (ye,), (yr,), _, _ = run_both(k, [np.zeros((16, 32), np.int32)], (1, 1, 1))
    want = np.arange(32)[None, :] + 100 * np.arange(16)[:, None]
    same(yr, want)
    same(ye, want)


def test_integer_ops_where_and_casts():
    kb = KernelBuilder("ints")
    a, out = kb.param("a", ArrayType(I32, 1)), kb.param("out", ArrayType(I32, 2))
    f = kb.param("f", ArrayType(F16, 1))
    t = kb.op("load", a, index=(0,), shape=(128,), padding=0)
    rows = [kb.op("floordiv", t, 7), kb.op("%", t, -5), kb.op("<<", t, 3),
            kb.op("where", kb.op(">", t, 10), t, kb.op("u-", t)),
            kb.op("astype", kb.op("load", f, index=(0,), shape=(128,), padding=0.0), I32),
            kb.op("astype", kb.op("&", kb.op(">", t, 0), kb.op("<", t, 50)), I32),
            kb.op("+", t, kb.op("cdiv", kb.op("-", kb.op("bid", 0), 9), 4)), kb.op("maximum", t, 3)]
    for i, v in enumerate(rows):
        kb.op("store", out, index=(i, 0), tile=kb.op("expand_dims", v, 0))
    k = kb.finish()
    rng = np.random.default_rng(1)
    A = rng.integers(-100, 100, 128).astype(np.int32)
    Fh = (rng.standard_normal(128) * 40).astype(np.float16)
    O = np.zeros((8, 128), np.int32)
    (_, oe, _), (_, orf, _), _, _ = run_both(k, [A, O, Fh], (1, 1, 1))
    want = np.stack([A // 7, A % -5, A << 3, np.where(A > 10, A, -A),
                     np.trunc(Fh.astype(np.float64)).astype(np.int32),
                     ((A > 0) & (A < 50)).astype(np.int32), A - 2, np.maximum(A, 3)])
    same(orf, want)
    same(oe, want)


def test_float_math_and_mixed_promotion():
    kb = KernelBuilder("fmath")
    x, y = kb.param("x", ArrayType(F16, 1)), kb.param("y", ArrayType(F32, 1))
    t = kb.op("load", x, index=(0,), shape=(256,), padding=1.0)       # f16
    e = kb.op("exp", kb.op("*", t, 0.5))                                # f16
    s = kb.op("+", kb.op("astype", e, F32), kb.op("sqrt", kb.op("abs", kb.op("astype", t, F32))))
    kb.op("store", y, index=(0,), tile=kb.op("/", s, 3))
    k = kb.finish()
    X = np.linspace(-4, 4, 256).astype(np.float16)
    Y = np.zeros(256, np.float32)
    (_, ye), (_, yr), _, _ = run_both(k, [X, Y], (1, 1, 1))
    # f16 exp is exp in f32 rounded to f16 (docs/numerics.md); the f32 value correctly rounded
    e = correctly_rounded("exp", [X.astype(np.float32) * np.float32(0.5)],
                          np.float32).astype(np.float16)
    want = (e.astype(np.float32) + np.sqrt(np.abs(X.astype(np.float32)))) / np.float32(3)
    np.testing.assert_allclose(yr, want, rtol=1e-6)
    np.testing.assert_allclose(ye, yr, rtol=2e-6)


def test_creation_ops():
    kb = KernelBuilder("create")
    out = kb.param("out", ArrayType(F32, 2))
    n = kb.param("n", scalar(I32))
    rows = [kb.op("zeros", (64,), F32), kb.op("ones", (64,), F32),
            kb.op("full", (64,), kb.op("astype", n, F32)), kb.op("full", (64,), 2.5, F32),
            kb.op("astype", kb.op("arange", 64, I32), F32), kb.op("arange", 64, F32),
            kb.op("astype", kb.op("full", (64,), True), F32),
            kb.op("astype", kb.op("full", (64,), n), F32)]
    for i, v in enumerate(rows):
        kb.op("store", out, index=(i, 0), tile=kb.op("expand_dims", v, 0))
    k = kb.finish()
    O = np.full((8, 64), -1, np.float32)
    (oe, _), (orf, _), _, _ = run_both(k, [O, np.int32(7)], (1, 1, 1))
    ar = np.arange(64, dtype=np.float32)
    want = np.stack([np.zeros(64), np.ones(64), np.full(64, 7), np.full(64, 2.5), ar, ar,
                     np.ones(64), np.full(64, 7)]).astype(np.float32)
    same(orf, want)
    same(oe, want)


def test_bool_tiles_round_trip():
    kb = KernelBuilder("bools")
    x, m = kb.param("x", ArrayType(F32, 1)), kb.param("m", ArrayType(BOOL, 1))
    t = kb.op("load", x, index=(0,), shape=(64,), padding=0.0)
    old = kb.op("load", m, index=(0,), shape=(64,), padding=False)
    kb.op("store", m, index=(0,), tile=kb.op("^", kb.op(">", t, 0.0), old))
    k = kb.finish()
    X = np.random.default_rng(2).standard_normal(64).astype(np.float32)
    M = np.random.default_rng(3).integers(0, 2, 64).astype(np.bool_)
    (_, me), (_, mr), _, _ = run_both(k, [X, M], (1, 1, 1))
    same(mr, (X > 0) ^ M)
    same(me, (X > 0) ^ M)
