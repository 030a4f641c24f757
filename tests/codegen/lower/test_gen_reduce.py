"""Reductions through generate: along each axis and over everything, keepdims or not, for
several dtypes and thread counts (in-thread, shuffle and cross-warp levels), argmax/argmin
ties and NaN. Emulator == interpreter, interpreter == NumPy."""

from __future__ import annotations

import numpy as np
import pytest

from gen_support import run_both, same
from tilelang.ir.builder import KernelBuilder
from tilelang.sema.types import BOOL, F16, F32, I8, I32, U8, U32, ArrayType

NP = {"f32": np.float32, "f16": np.float16, "i32": np.int32, "i8": np.int8, "bool": np.bool_,
      "u8": np.uint8}
DT = {"f32": F32, "f16": F16, "i32": I32, "i8": I8, "bool": BOOL, "u8": U8}


def reduce_kernel(kind, dtype, shape, axis, keepdims, threads, out_dtype):
    """out = kind(load(x), axis, keepdims), stored whole (scalar results via scatter)."""
    kb = KernelBuilder("red", attributes={"reqntid": (threads, 1, 1)})
    x = kb.param("x", ArrayType(dtype, len(shape)))
    kw = {"keepdims": True} if keepdims else {}
    if axis is not None:
        kw["axis"] = axis
    rank_out = len(shape) if keepdims else (len(shape) - 1 if axis is not None else 0)
    out = kb.param("out", ArrayType(out_dtype, max(rank_out, 1)))
    t = kb.op("load", x, index=(0,) * len(shape), shape=shape,
              padding=False if dtype == BOOL else 0)
    r = kb.op(kind, t, **kw)
    if rank_out == 0:
        kb.op("scatter", out, kb.constant(0, I32), r)
    else:
        kb.op("store", out, index=(0,) * rank_out, tile=r)
    return kb.finish()


def np_reduce(kind, x, axis, keepdims):
    if kind in ("argmax", "argmin"):
        f = np.argmax if kind == "argmax" else np.argmin
        if axis is None:
            v = np.int32(f(x.reshape(-1)))
            return np.full((1,) * x.ndim, v) if keepdims else v
        return f(x, axis=axis, keepdims=keepdims).astype(np.int32)
    if kind in ("sum", "prod"):
        acc = np.float64 if x.dtype.kind == "f" else (np.uint32 if x.dtype.kind == "u"
                                                    else np.int32)
        r = getattr(np, kind)(x.astype(acc), axis=axis, keepdims=keepdims)
        return r
    return getattr(np, kind)(x, axis=axis, keepdims=keepdims)


def result_dtype(kind, dt):
    if kind.startswith("arg"):
        return I32
    if kind in ("sum", "prod"):
        return {"i8": I32, "bool": I32, "u8": U32}.get(dt, DT[dt])
    return DT[dt]


CASES = [
    # kind, dtype, shape, axis, keepdims, threads
    ("sum", "f32", (8, 64), 1, False, 128),
    ("sum", "f32", (8, 64), 0, True, 128),
    ("sum", "f32", (64, 8), 0, False, 64),
    ("sum", "f32", (32, 32), None, False, 256),
    ("sum", "f32", (32, 32), None, True, 32),
    ("max", "f32", (16, 128), 1, True, 128),
    ("min", "f32", (128, 16), 0, False, 128),
    ("prod", "f32", (4, 8), 1, False, 16),
    ("sum", "f16", (16, 64), 1, False, 128),
    ("max", "f16", (2, 256), None, False, 64),
    ("sum", "i8", (8, 32), 0, False, 128),
    ("sum", "bool", (4, 64), 1, False, 64),
    ("max", "i32", (32, 32), 1, False, 1024),
    ("min", "u8", (64,), 0, False, 32),
    ("sum", "i32", (1024,), None, False, 128),
    ("sum", "f32", (16, 64), 1, False, 48),        # a partial last warp
    ("max", "f32", (16, 64), None, False, 24),     # fewer threads than a warp, not 2^k
    ("argmax", "f32", (16, 64), 1, False, 128),
    ("argmin", "f32", (64, 16), 0, True, 128),
    ("argmax", "i32", (32, 32), None, False, 128),
    ("argmin", "f16", (8, 8), None, True, 32),
]


@pytest.mark.parametrize("kind,dt,shape,axis,keepdims,threads", CASES)
def test_reduction(kind, dt, shape, axis, keepdims, threads):
    rng = np.random.default_rng(hash((kind, dt, shape)) % 2**32)
    npdt = NP[dt]
    if dt == "bool":
        x = rng.integers(0, 2, shape).astype(np.bool_)
    elif npdt(0).dtype.kind in "iu":
        lo = 0 if npdt(0).dtype.kind == "u" else -100
        x = rng.integers(lo, 100, shape).astype(npdt)
        if kind.startswith("arg"):
            x = rng.integers(0, 5, shape).astype(npdt)   # many ties: the first one wins
    else:
        x = rng.standard_normal(shape).astype(npdt)
        if kind == "prod":
            x = (1 + rng.random(shape) / 4).astype(npdt)
        if kind.startswith("arg"):
            x = np.round(x).astype(npdt)                 # ties
    want = np.asarray(np_reduce(kind, x, axis, keepdims))
    out_dt = result_dtype(kind, dt)
    k = reduce_kernel(kind, DT[dt], shape, axis, keepdims, threads, out_dt)
    out = np.zeros(max(want.size, 1), out_dt.np_dtype).reshape(want.shape or (1,))
    (_, oe), (_, orf), r, _ = run_both(k, [x, out], (1, 1, 1))
    tol = {"f16": (2e-3, 1e-3), "f32": (1e-5, 1e-5)}.get(dt, (0, 0))
    want = want.reshape(orf.shape).astype(orf.dtype)
    same(orf, want, *tol)
    same(oe, orf, *tol)
    warps = threads // 32
    spread = shape if axis is None else (shape[axis],)
    if np.prod(spread) >= 2 * threads * 16 // np.dtype(npdt).itemsize and warps > 1:
        assert "shfl.sync.bfly" in r.ptx


def test_reduction_nan_propagates_and_argmax_takes_first_nan():
    kb = KernelBuilder("nan", attributes={"reqntid": (64, 1, 1)})
    x, out = kb.param("x", ArrayType(F32, 1)), kb.param("out", ArrayType(F32, 1))
    idx = kb.param("idx", ArrayType(I32, 1))
    t = kb.op("load", x, index=(0,), shape=(256,), padding=0.0)
    kb.op("scatter", out, kb.constant(0, I32), kb.op("max", t))
    kb.op("scatter", out, kb.constant(1, I32), kb.op("min", t))
    kb.op("scatter", out, kb.constant(2, I32), kb.op("sum", t))
    kb.op("scatter", idx, kb.constant(0, I32), kb.op("argmax", t))
    kb.op("scatter", idx, kb.constant(1, I32), kb.op("argmin", t))
    k = kb.finish()
    x = np.arange(256, dtype=np.float32)
    x[77] = x[200] = np.nan
    (_, oe, ie), (_, orf, irf), _, _ = run_both(k, [x, np.zeros(3, np.float32),
                                                     np.zeros(2, np.int32)], (1, 1, 1))
    assert np.isnan(orf).all() and np.isnan(oe).all()
    assert irf.tolist() == [77, 77] and ie.tolist() == [77, 77]


def test_sum_of_large_tile_many_registers():
    """A 64 x 64 f32 tile over 128 threads: 32 registers each, all three levels."""
    k = reduce_kernel("sum", F32, (64, 64), 1, False, 128, F32)
    x = np.random.default_rng(9).standard_normal((64, 64)).astype(np.float32)
    (_, oe), (_, orf), r, _ = run_both(k, [x, np.zeros(64, np.float32)], (1, 1, 1))
    np.testing.assert_allclose(orf, x.astype(np.float64).sum(1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(oe, orf, rtol=1e-5, atol=1e-5)
