"""Shape ops: reshape, expand_dims, broadcast_to, transpose/permute, extract (free and through
shared memory), cat along each axis; results stored and compared with NumPy."""

from __future__ import annotations

import numpy as np
import pytest

from gen_support import run_both, same
from tilelang.ir.builder import KernelBuilder
from tilelang.sema.types import F32, I32, ArrayType


def shape_kernel(build, in_shape, out_shape, threads=128, dtype=F32):
    """out = build(kb, load(x)) for one tile."""
    kb = KernelBuilder("shape", attributes={"maxntid": (threads, 1, 1)})
    x = kb.param("x", ArrayType(dtype, len(in_shape)))
    y = kb.param("y", ArrayType(dtype, len(out_shape)))
    t = kb.op("load", x, index=(0,) * len(in_shape), shape=in_shape, padding=0)
    kb.op("store", y, index=(0,) * len(out_shape), tile=build(kb, t))
    return kb.finish()


def check(build, in_shape, out_shape, want_fn, threads=128, exact_threads=None):
    k = shape_kernel(build, in_shape, out_shape, threads)
    x = np.arange(np.prod(in_shape), dtype=np.float32).reshape(in_shape) * 1.5 - 7
    y = np.zeros(out_shape, np.float32)
    (_, ye), (_, yr), r, rep = run_both(k, [x, y], (1, 1, 1))
    want = want_fn(x)
    same(yr, want)
    same(ye, want)
    if exact_threads is not None:
        assert (".reqntid" in r.ptx) == exact_threads, r.ptx[:400]
    return r, rep


@pytest.mark.parametrize("src,dst", [((16, 32), (512,)), ((512,), (8, 64)), ((4, 8, 16), (32, 16)),
                                     ((32, 16), (16, 2, 16))])
def test_reshape_moves_no_data(src, dst):
    check(lambda kb, t: kb.op("reshape", t, dst), src, dst, lambda x: x.reshape(dst),
          exact_threads=False)


def test_expand_and_broadcast_to():
    check(lambda kb, t: kb.op("broadcast_to", kb.op("expand_dims", t, 0), (16, 64)), (64,),
          (16, 64), lambda x: np.broadcast_to(x[None, :], (16, 64)))
    check(lambda kb, t: kb.op("broadcast_to", kb.op("expand_dims", t, 1), (64, 8)), (64,),
          (64, 8), lambda x: np.broadcast_to(x[:, None], (64, 8)))


@pytest.mark.parametrize("shape", [(32, 64), (8, 128), (64, 4)])
def test_transpose(shape):
    check(lambda kb, t: kb.op("transpose", t, -2, -1), shape, shape[::-1], lambda x: x.T)


def test_permute_3d():
    check(lambda kb, t: kb.op("permute", t, (2, 0, 1)), (4, 8, 16), (16, 4, 8),
          lambda x: np.transpose(x, (2, 0, 1)))


@pytest.mark.parametrize("index,sub", [((1, 0), (16, 64)), ((0, 1), (32, 32)),
                                       ((3, 1), (8, 32)), ((0, 3), (32, 16))])
def test_extract(index, sub):
    def want(x):
        return x[index[0] * sub[0]:(index[0] + 1) * sub[0],
                 index[1] * sub[1]:(index[1] + 1) * sub[1]]
    check(lambda kb, t: kb.op("extract", t, index, sub), (32, 64), sub, want)


def test_extract_of_register_bits_is_free():
    """A (64, 64) tile over 128 threads keeps rows 8..63 in registers: extracting rows is a
    register selection (no barrier, .maxntid kept)."""
    r, _ = check(lambda kb, t: kb.op("extract", t, (1, 0), (32, 64)), (64, 64), (32, 64),
                 lambda x: x[32:], exact_threads=False)
    assert "bar.sync" not in r.ptx


@pytest.mark.parametrize("axis", [0, 1])
def test_cat(axis):
    def build(kb, t):
        return kb.op("cat", t, kb.op("*", t, 2.0), axis=axis)
    out = (32, 16) if axis == 0 else (16, 32)
    check(build, (16, 16), out, lambda x: np.concatenate([x, 2 * x], axis))


def test_cat_of_differently_laid_out_tiles():
    def build(kb, t):
        return kb.op("cat", t, kb.op("transpose", t, -2, -1), axis=1)
    check(build, (16, 16), (16, 32), lambda x: np.concatenate([x, x.T], 1))


def test_transpose_is_a_relabelling():
    """No data moves: the transposed tile is stored from the same registers."""
    k = shape_kernel(lambda kb, t: kb.op("transpose", t, -2, -1), (32, 32), (32, 32), dtype=I32)
    x = np.arange(1024, dtype=np.int32).reshape(32, 32)
    (_, ye), (_, yr), r, rep = run_both(k, [x, np.zeros((32, 32), np.int32)], (1, 1, 1))
    same(yr, x.T)
    same(ye, x.T)
    assert "bar.sync" not in r.ptx and ".maxntid" in r.ptx


def test_extract_across_threads_uses_padded_shared_memory():
    """Rows 0..3 of a (32, 64) tile live in other threads' lanes: an exchange through
    shared memory with barriers; the padded layout keeps bank conflicts low."""
    r, rep = check(lambda kb, t: kb.op("extract", t, (1, 0), (4, 64)), (32, 64), (4, 64),
                   lambda x: x[4:8], exact_threads=True)
    assert r.ptx.count("bar.sync") >= 2 and ".shared" in r.ptx
    assert rep.shared_requests > 0
    assert rep.bank_conflicts <= rep.shared_requests


def test_transposed_store_in_exact_mode_is_coalesced():
    """With shared memory in use anyway (reqntid), a transposed tile is exchanged once so the
    stores are warp-consecutive 16-byte vectors."""
    kb = KernelBuilder("tstore", attributes={"reqntid": (128, 1, 1)})
    x, y = kb.param("x", ArrayType(F32, 2)), kb.param("y", ArrayType(F32, 2))
    t = kb.op("load", x, index=(0, 0), shape=(64, 64), padding=0.0)
    kb.op("store", y, index=(0, 0), tile=kb.op("transpose", t, -2, -1))
    k = kb.finish()
    X = np.random.default_rng(7).standard_normal((64, 64)).astype(np.float32)
    (_, ye), (_, yr), r, rep = run_both(k, [X, np.zeros_like(X)], (1, 1, 1))
    same(yr, X.T)
    same(ye, X.T)
    assert rep.coalescing_efficiency >= 0.95 and r.ptx.count("st.global.v4") >= 1
