"""`gather` within a tile, `pad` and `cat` of unequal tiles (lower/rearrange.py) from source, on
the emulator and the reference interpreter, against NumPy: every dtype class, ragged sources
(an array smaller than the tile, padded by `load`), and no local memory."""

from __future__ import annotations

import numpy as np
import pytest

from index_support import NP, build, data, emulate, facts_of, interpret
from tilelang.interp import InterpreterError

KERNEL = """
@launch(maxntid = (THREADS, 1, 1))
kernel k(X: Array[DT, 2], I: Array[i32, 2], G: Array[DT, 2], P: Array[DT, 2],
         C: Array[DT, 2], F: DT, const THREADS: i32) {
    let t = load(X, index = (0, 0), shape = (8, 16));
    let idx = load(I, index = (0, 0), shape = (8, 32));
    store(G, index = (0, 0), tile = gather(t, idx, axis = 1));
    store(P, index = (0, 0), tile = pad(t[0:4, :], ((1, 3), (3, 13)), value = F));
    store(C, index = (0, 0), tile = cat(t[:, 0:4], t, axis = 1, padding = F));
}
"""


def expected(tile, idx, fill):
    c = np.full((8, 32), fill, tile.dtype)
    c[:, :4], c[:, 4:20] = tile[:, :4], tile
    return dict(G=np.take_along_axis(tile, idx, 1),
                P=np.pad(tile[:4], ((1, 3), (3, 13)), constant_values=fill), C=c)


def run_all(dt, x, threads=128, fill=None):
    tile = np.zeros((8, 16), NP[dt])
    tile[:x.shape[0], :x.shape[1]] = x
    idx = (np.arange(8 * 32).reshape(8, 32) * 7 % 16).astype(np.int32)
    f = NP[dt](fill if fill is not None else (1 if dt == "bool" else 3))
    out = dict(G=np.zeros((8, 32), NP[dt]), P=np.zeros((8, 32), NP[dt]),
               C=np.zeros((8, 32), NP[dt]))
    res = build(KERNEL.replace("DT", dt), {"THREADS": threads}, facts_of("k", {"X": x, **out}))
    assert "ld.local" not in res.ptx and "st.local" not in res.ptx
    for run in (emulate, interpret):
        args = dict(X=x.copy(), I=idx.copy(), F=f, **{k: v.copy() for k, v in out.items()})
        run(res, "k", args, (1,))
        for k, w in expected(tile, idx, f).items():
            np.testing.assert_array_equal(args[k], w, err_msg=f"{run.__name__} {k}")


@pytest.mark.parametrize("dt", sorted(NP))
def test_every_dtype(dt):
    run_all(dt, data((8, 16), dt))


@pytest.mark.parametrize("threads", [32, 64, 256])
def test_thread_counts(threads):
    run_all("f32", data((8, 16), "f32"), threads)


def test_ragged_source():
    """A (5, 11) array in an (8, 16) tile: the padded positions take part as zeros."""
    run_all("f32", data((5, 11), "f32"))


def test_cat_of_equal_tiles_still_moves_no_data():
    src = """
kernel k(X: Array[f32, 1], Y: Array[f32, 1]) {
    let t = load(X, index = (0,), shape = (128,));
    store(Y, index = (0,), tile = cat(t, t * 2.0));
}
"""
    res = build(src, {})
    assert "bar.sync" not in res.ptx and "st.shared" not in res.ptx
    x = data((128,), "f32")
    for run in (emulate, interpret):
        args = dict(X=x.copy(), Y=np.zeros(256, np.float32))
        run(res, "k", args, (1,))
        np.testing.assert_array_equal(args["Y"], np.concatenate([x, x * 2]))


GATHER_1D = """
kernel k(X: Array[f32, 1], I: Array[i64, 1], Y: Array[f32, 1]) {
    let t = load(X, index = (0,), shape = (64,));
    store(Y, index = (0,), tile = gather(t, load(I, index = (0,), shape = (256,)), axis = 0));
}
"""


def test_gather_index_outside_the_tile():
    """The interpreter reports it; the device reads position index mod n."""
    res = build(GATHER_1D, {})
    x = data((64,), "f32")
    idx = (np.arange(256) * 5 % 64).astype(np.int64)
    idx[7] = 70
    args = dict(X=x.copy(), I=idx.copy(), Y=np.zeros(256, np.float32))
    with pytest.raises(InterpreterError, match=r"`gather`: indices\(7,\) is 70, outside 0\.\.63"):
        interpret(res, "k", args, (1,))
    emulate(res, "k", args, (1,))
    np.testing.assert_array_equal(args["Y"], x[idx % 64])
