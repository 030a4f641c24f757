"""Indexing inside tiles (`t[i]`, `t[:, j]`, `t[i, j]`, slices) and array subscripts (`A[i, j]`)
from source, on the emulator and the reference interpreter, against NumPy; and what the
lowering emits (docs/codegen.md, "Indexing": selects, shuffles or one shared exchange, never
local memory)."""

from __future__ import annotations

import numpy as np
import pytest

from index_support import NP, build, data, emulate, facts_of, interpret
from tilelang.emulator.errors import DeviceAssertion
from tilelang.interp import InterpreterError


# Block b takes position b of the tile's axes (a run-time index, bid), so one launch covers
# every position; the constant forms ride along.
ROWS = """
@launch(maxntid = (THREADS, 1, 1))
kernel rows(X: Array[DT, 2], R: Array[DT, 2], C: Array[DT, 2], E: Array[DT, 2],
            K: Array[DT, 2], const M: i32, const N: i32, const THREADS: i32) {
    let b = bid(0);
    let t = load(X, index = (0, 0), shape = (M, N));
    store(R, offset = (b, 0), tile = t[b % M].reshape((1, N)));
    store(C, offset = (b, 0), tile = t[:, b % N].reshape((1, M)));
    store(E, offset = (b, 0), tile = full((1, 2), t[b % M, (b * 7) % N], DT));
    store(K, offset = (b, 0), tile = full((1, 2), t[-1, 1], DT));
}
"""

def run_rows(M, N, threads, dt, x):
    """Outputs of ROWS on both back ends, with the NumPy expectation."""
    g = max(M, N)
    res = build(ROWS.replace("DT", dt), {"M": M, "N": N, "THREADS": threads},
                facts_of("rows", {"X": x, "R": np.zeros((g, N), NP[dt])}))
    tile = np.zeros((M, N), NP[dt])
    tile[:x.shape[0], :x.shape[1]] = x
    b = np.arange(g)
    want = dict(R=tile[b % M], C=tile.T[b % N], E=np.repeat(tile[b % M, b * 7 % N][:, None], 2, 1),
                K=np.full((g, 2), tile[-1, 1]))
    for run in (emulate, interpret):
        args = dict(X=x.copy(), R=np.zeros((g, N), NP[dt]), C=np.zeros((g, M), NP[dt]),
                    E=np.zeros((g, 2), NP[dt]), K=np.zeros((g, 2), NP[dt]))
        run(res, "rows", args, (g,))
        for k, w in want.items():
            np.testing.assert_array_equal(args[k], w, err_msg=f"{run.__name__} {k}")
    return res.ptx


@pytest.mark.parametrize("M,N,threads", [(16, 32, 128), (8, 8, 32), (64, 64, 128), (4, 256, 128),
                                         (128, 16, 64), (2, 4, 128)])
def test_positions_of_every_layout_kind(M, N, threads):
    """Axes in registers only, over lanes, over warps, and replicated small tiles."""
    ptx = run_rows(M, N, threads, "f32", data((M, N), "f32"))
    assert "ld.local" not in ptx and "st.local" not in ptx


@pytest.mark.parametrize("dt", sorted(NP))
def test_every_dtype(dt):
    run_rows(16, 32, 128, dt, data((16, 32), dt))


def test_bf16():
    """bf16 (float32 values that bf16 holds exactly; the emulator sees the bits)."""
    res = build(ROWS.replace("DT", "bf16"), {"M": 16, "N": 32, "THREADS": 128})
    x = data((16, 32), "f32")
    b = np.arange(32)
    for run in (emulate, interpret):
        args = dict(X=x.copy(), R=np.zeros((32, 32), np.float32),
                    C=np.zeros((32, 16), np.float32), E=np.zeros((32, 2), np.float32),
                    K=np.zeros((32, 2), np.float32))
        if run is emulate:
            emulate(res, "rows", args, (32,), bf16=tuple("XRCEK"))
        else:
            interpret(res, "rows", args, (32,))
        np.testing.assert_array_equal(args["R"], x[b % 16], err_msg=run.__name__)
        np.testing.assert_array_equal(args["C"], x.T[b % 32], err_msg=run.__name__)
        np.testing.assert_array_equal(args["E"][:, 0], x[b % 16, b * 7 % 32])


def test_ragged_tile_reads_padding():
    """A (13, 27) array loaded into a (16, 32) tile: positions past the array read padding."""
    run_rows(16, 32, 128, "f32", data((13, 27), "f32"))


LOWER = """
@launch(maxntid = (128, 1, 1))
kernel k(X: Array[f32, 2], Y: Array[f32, 1], i: i32) {
    let t = load(X, index = (0, 0), shape = (SHAPE));
    store(Y, index = (0,), tile = SUB.reshape((OUT,)));
}
"""


@pytest.mark.parametrize("shape,sub,shuffles,barriers", [
    ((4, 1024), "t[i]", 0, 0),      # the rows are register bits of every thread: selects only
    ((1, 8), "t[0, i]", 1, 0),      # eight lanes hold the eight elements: one shuffle
    ((64, 64), "t[i]", 0, 2),       # rows over warps: one shared exchange (two barriers)
])
def test_lowering_is_select_then_shuffle_or_one_exchange(shape, sub, shuffles, barriers):
    out = shape[1] if sub == "t[i]" else 1
    res = build(LOWER.replace("SHAPE", f"{shape[0]}, {shape[1]}").replace("SUB", sub)
                .replace("OUT", str(out)), {})
    ptx = res.ptx
    assert ptx.count("shfl.sync.idx") == shuffles
    assert ptx.count("bar.sync") == barriers
    assert "ld.local" not in ptx and "st.local" not in ptx
    x = (np.arange(shape[0] * shape[1], dtype=np.float32) * 0.25 - 3).reshape(shape)
    n = shape[0] if sub == "t[i]" else shape[1]
    for i in (0, n - 1, n // 3):
        args = dict(X=x.copy(), Y=np.zeros(out, np.float32), i=i)
        emulate(res, "k", args, (1,))
        np.testing.assert_array_equal(args["Y"], x[i] if sub == "t[i]" else x[0, i:i + 1])


LANES = """
@launch(maxntid = (128, 1, 1))
kernel k(X: Array[f32, 1], Y: Array[f32, 1], i: i32) {
    let t = load(X, index = (0,), shape = (128,));
    store(Y, index = (0,), tile = full((4,), t[i], f32));
}
"""


def test_index_outside_the_axis():
    """The interpreter reports it; the device reads position i mod n (docs/language.md)."""
    res = build(LANES, {})
    x = np.arange(128, dtype=np.float32)
    args = dict(X=x.copy(), Y=np.zeros(4, np.float32), i=130)
    with pytest.raises(InterpreterError, match=r"index 130 is outside 0\.\.127 \(axis 0 of a "
                                               r"tile of shape \(128,\)\)"):
        interpret(res, "k", args, (1,))
    emulate(res, "k", args, (1,))
    assert (args["Y"] == x[130 % 128]).all()


SLICES = """
kernel k(X: Array[i32, 2], A: Array[i32, 2], B: Array[i32, 1], C: Array[i32, 2],
         U: Array[i32, 2], V: Array[i32, 1]) {
    let t = load(X, index = (0, 0), shape = (16, 32));
    store(A, index = (0, 0), tile = t[4:8, -16:]);
    store(B, index = (0,), tile = t[-3, 8:16]);
    store(C, index = (0, 0), tile = t[:][0:8]);
    store(U, index = (0, 0), tile = t[3:7, 5:13]);
    store(V, index = (0,), tile = t[9, -7:-3]);
}
"""


def test_static_slices():
    res = build(SLICES, {})
    x = (np.arange(512).reshape(16, 32) * 37 % 101 - 50).astype(np.int32)
    for run in (emulate, interpret):
        args = dict(X=x.copy(), A=np.zeros((4, 16), np.int32), B=np.zeros(8, np.int32),
                    C=np.zeros((8, 32), np.int32), U=np.zeros((4, 8), np.int32),
                    V=np.zeros(4, np.int32))
        run(res, "k", args, (1,))
        np.testing.assert_array_equal(args["A"], x[4:8, -16:])
        np.testing.assert_array_equal(args["B"], x[-3, 8:16])
        np.testing.assert_array_equal(args["C"], x[0:8])
        np.testing.assert_array_equal(args["U"], x[3:7, 5:13])     # unaligned: a gather
        np.testing.assert_array_equal(args["V"], x[9, -7:-3])


ELEMENT = """
kernel k(X: Array[DT, 2], Y: Array[DT, 1], i: i32, j: i64) {
    store(Y, index = (0,), tile = full((2,), X[i, j], DT));
}
"""


@pytest.mark.parametrize("dt", ["f32", "f16", "i8", "i64", "bool"])
def test_array_element(dt):
    res = build(ELEMENT.replace("DT", dt), {})
    x = data((5, 7), dt)
    for i, j in ((0, 0), (4, 6), (2, 3)):
        for run in (emulate, interpret):
            args = dict(X=x.copy(), Y=np.zeros(2, NP[dt]), i=i, j=j)
            run(res, "k", args, (1,))
            assert (args["Y"] == x[i, j]).all(), (run.__name__, i, j)


@pytest.mark.parametrize("i,j", [(5, 0), (0, 7), (-1, 2), (1, -1)])
def test_array_element_outside_fails_on_every_back_end(i, j):
    """(0, 7) is inside the allocation (row 1), so only the subscript's own test catches it."""
    res = build(ELEMENT.replace("DT", "f32"), {})
    args = dict(X=data((5, 7), "f32"), Y=np.zeros(2, np.float32), i=i, j=j)
    with pytest.raises(InterpreterError, match=rf"`X\[i, j\]`: index \({i}, {j}\) is outside "
                                               r"the array's shape \(5, 7\)"):
        interpret(res, "k", args, (1,))
    with pytest.raises(DeviceAssertion, match=r"index out of bounds: X\[i, j\]"):
        emulate(res, "k", args, (1,))


PRODUCT = """
@launch(maxntid = (128, 1, 1))
kernel k(A: Array[f16, 2], B: Array[f16, 2], R: Array[f32, 1], C: Array[f32, 1],
         S: Array[f32, 1], i: i32, j: i32) {
    let acc = load(A, index = (0, 0), shape = (64, 32)) @ load(B, index = (0, 0), shape = (32, 64));
    store(R, index = (0,), tile = acc[i]);
    store(C, index = (0,), tile = acc[:, j]);
    store(S, index = (0,), tile = full((2,), acc[i, j], f32));
}
"""


@pytest.mark.parametrize("target,unit", [("sm_90a", "wgmma"), ("sm_80", "mma.sync")])
def test_positions_of_a_tensor_core_accumulator(target, unit):
    """The accumulator's fragment layouts (wgmma on sm_90a, mma.sync on sm_80) index too."""
    from tilelang.driver import compile_source
    from tilelang.options import CompileOptions
    res = compile_source(PRODUCT, "<x>.tile", CompileOptions(target=target), until="ptx")
    assert res.ok and unit in res.ptx and "ld.local" not in res.ptx
    a = (np.arange(64 * 32).reshape(64, 32) % 7 - 3).astype(np.float16)
    b = (np.arange(32 * 64).reshape(32, 64) % 5 - 2).astype(np.float16)
    want = a.astype(np.float32) @ b.astype(np.float32)
    for i, j in ((0, 0), (37, 50), (63, 63)):
        args = dict(A=a, B=b, R=np.zeros(64, np.float32), C=np.zeros(64, np.float32),
                    S=np.zeros(2, np.float32), i=i, j=j)
        emulate(res, "k", args, (1,))
        np.testing.assert_array_equal(args["R"], want[i])
        np.testing.assert_array_equal(args["C"], want[:, j])
        np.testing.assert_array_equal(args["S"], want[i, j])
