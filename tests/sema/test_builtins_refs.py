"""The registry's NumPy references, each against an independent NumPy (or plain Python)
computation. References are called the way the interpreter calls them: `Builtin.evaluate`
with the bound arguments (for the typing-derived hints) and the values by parameter name."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest

from tilelang.sema.builtins import BUILTINS, GridContext, lookup, lookup_operator
from tilelang.sema.builtins_dtype import F8_DECODE, from_bits, to_bits
from tilelang.sema.builtins_debug import TileAssertionError
from tilelang.sema.types import (BF16, F8E4M3, F8E5M2, F16, I8, I32, U8, round_to_bf16,
                                 round_to_f8e4m3)
from correctly_rounded import correctly_rounded
from test_builtins import A, C, D, FN, RT, STR, T, TUP, bind, bind_call

rng = np.random.default_rng(20261122)


def ev(name, pos, values, **kw):
    """Evaluate built-in `name` typed with ArgInfos `pos`/`kw` on `values` (by param name)."""
    bound = bind(name, *pos, **kw)
    bound.builtin.result_type(bound)
    return bound.builtin.evaluate(bound, values)


def ev_op(spelling, pos, values):
    b = lookup_operator(spelling)
    bound = bind_call(b, list(pos), {}, None)
    b.result_type(bound)
    return b.evaluate(bound, values)


# ---------------------------------------------------------------------------------------------
# memory

def _padded(a: np.ndarray, tile, pad) -> np.ndarray:
    """The array padded with `pad` up to whole tiles (plus one spare tile on each axis)."""
    target = [(-(-n // t) + 1) * t for n, t in zip(a.shape, tile)]
    return np.pad(a, [(0, t - n) for t, n in zip(target, a.shape)], constant_values=pad)


def test_load_edges_of_1000x777_with_128x64_tiles():
    a = rng.standard_normal((1000, 777)).astype(np.float32)
    big = _padded(a, (128, 64), -7.5)
    pos = (A("f32", 2), RT(T("i32"), T("i32")), TUP(128, 64))
    for i, j in [(0, 0), (7, 12), (7, 0), (0, 12), (3, 5), (8, 0), (0, 13), (8, 13)]:
        t = ev("load", pos, {"A": a, "index": (i, j), "shape": (128, 64), "padding": -7.5},
               padding=C(-7.5))
        want = big[i * 128:(i + 1) * 128, j * 64:(j + 1) * 64]
        assert t.shape == (128, 64) and t.dtype == np.float32
        np.testing.assert_array_equal(t, want)
    # edge tile (7, 12): rows 896..999 and columns 768..776 are real
    t = ev("load", pos, {"A": a, "index": (7, 12), "shape": (128, 64), "padding": None})
    assert (t[104:, :] == 0).all() and (t[:, 9:] == 0).all()
    np.testing.assert_array_equal(t[:104, :9], a[896:, 768:])


def test_load_order_and_bf16_padding():
    a = rng.standard_normal((40, 24)).astype(np.float32)
    t = ev("load", (A("f32", 2), RT(C(1), C(0)), TUP(16, 32)),
           {"A": a, "index": (1, 0), "shape": (16, 32), "padding": 1.0, "order": (1, 0)},
           padding=C(1.0), order=TUP(1, 0))
    want = np.ones((16, 32), np.float32)
    want[:8, :] = a.T[16:24, :32]  # rows 16..31 of the transposed view; 8 exist
    np.testing.assert_array_equal(t, want)
    b = round_to_bf16(a)
    t = ev("load", (A("bf16", 2), RT(C(2), C(0)), TUP(16, 32)),
           {"A": b, "index": (2, 0), "shape": (16, 32), "padding": 0.1}, padding=C(0.1))
    assert t[8, 0] == np.float32(0.10009765625)  # padding rounded to bf16
    np.testing.assert_array_equal(t[:8, :24], b[32:40, :])


def test_store_drops_outside():
    a = np.zeros((1000, 777), np.float32)
    tile = rng.standard_normal((128, 64)).astype(np.float32)
    pos = (A("f32", 2), RT(T("i32"), T("i32")), T("f32", 128, 64))
    assert ev("store", pos, {"A": a, "index": (7, 12), "tile": tile}) is None
    want = np.zeros((1000 + 128, 777 + 64), np.float32)
    want[896:1024, 768:832] = tile
    np.testing.assert_array_equal(a, want[:1000, :777])
    ev("store", pos, {"A": a, "index": (9, 0), "tile": tile})  # wholly outside: no effect
    np.testing.assert_array_equal(a, want[:1000, :777])
    view = np.zeros((64, 64), np.float32)[::2, ::2]  # a strided view is written through
    ev("store", (A("f32", 2), RT(C(0), C(0)), T("f32", 16, 16)),
       {"A": view, "index": (1, 1), "tile": np.ones((16, 16), np.float32)})
    assert view[16:, 16:].all() and not view[:16].any()


def test_num_tiles():
    a = np.zeros((1000, 777), np.float16)
    for axis, want in ((0, math.ceil(1000 / 128)), (1, math.ceil(777 / 64))):
        assert ev("num_tiles", (A("f16", 2),), {"A": a, "axis": axis, "shape": (128, 64)},
                  axis=C(axis), shape=TUP(128, 64)) == want


def test_dim_and_stride_of_a_strided_view():
    a = np.zeros((10, 24), np.float32)[::2, 1::3]         # shape (5, 8), strides (48, 3)
    assert ev("dim", (A("f32", 2),), {"A": a, "axis": 1}, axis=C(1)) == 8
    assert ev("dim", (A("f32", 2),), {"A": a, "axis": 0}, axis=C(0)) == 5
    assert ev("stride", (A("f32", 2),), {"A": a, "axis": 0}, axis=C(0)) == 48
    assert ev("stride", (A("f32", 2),), {"A": a, "axis": 1}, axis=C(1)) == 3


def test_is_none_reference():
    # the checker folds `is_none` (it never reaches the interpreter); its reference agrees
    assert ev("is_none", (A("f32", 1),), {"A": None}) is True
    assert ev("is_none", (A("f32", 1),), {"A": np.zeros(3, np.float32)}) is False


def test_list_item_and_len_references():
    from test_builtins import LST
    ws = [np.arange(6, dtype=np.float32).reshape(2, 3), np.ones((4, 1), np.float32)]
    assert ev("len", (LST("f32", 2),), {"L": ws}) == 2
    assert ev("list_item", (LST("f32", 2), T("i32")), {"L": ws, "index": np.int32(1)}) is ws[1]
    # outside the list: an empty array of the rank (every access masked off, as compiled)
    for i in (-1, 2):
        got = ev("list_item", (LST("f32", 2), T("i32")), {"L": ws, "index": np.int32(i)})
        assert got.shape == (0, 0) and got.dtype == np.float32


def test_gather_with_mask_and_out_of_bounds():
    a = rng.standard_normal((30, 20)).astype(np.float32)
    rows = rng.integers(-3, 33, size=(16, 1))
    cols = rng.integers(-3, 23, size=(1, 8))
    mask = rng.random((16, 8)) < 0.7
    t = ev("gather", (A("f32", 2), RT(T("i32", 16, 1), T("i32", 1, 8))),
           {"A": a, "indices": (rows, cols), "mask": mask, "padding": -1.0},
           mask=T("bool", 16, 8), padding=C(-1.0))
    want = np.empty((16, 8), np.float32)
    for r in range(16):
        for c in range(8):
            i, j = rows[r, 0], cols[0, c]
            inside = 0 <= i < 30 and 0 <= j < 20
            want[r, c] = a[i, j] if inside and mask[r, c] else -1.0
    np.testing.assert_array_equal(t, want)


def test_scatter_masks_bounds_and_last_write_wins():
    a = np.zeros(10, np.int32)
    idx = np.array([1, 3, 3, -1, 12, 5, 1, 7])
    val = np.arange(8, dtype=np.int32) + 100
    mask = np.array([True, True, True, True, True, True, True, False])
    ev("scatter", (A("i32", 1), T("i32", 8), T("i32", 8)),
       {"A": a, "indices": idx, "value": val, "mask": mask}, mask=T("bool", 8))
    want = np.zeros(10, np.int32)
    for k in range(8):  # sequential writes: the later one wins
        if mask[k] and 0 <= idx[k] < 10:
            want[idx[k]] = val[k]
    np.testing.assert_array_equal(a, want)
    assert a[1] == 106 and a[7] == 0


def test_atomic_add_returns_old_values_in_order():
    a = rng.standard_normal(16).astype(np.float32)
    a0 = a.copy()
    idx = rng.integers(0, 16, size=64)
    val = rng.standard_normal(64).astype(np.float32)
    old = ev("atomic_add", (A("f32", 1), T("i32", 64), T("f32", 64)),
             {"A": a, "indices": idx, "value": val})
    final = a0.astype(np.float64).copy()
    np.add.at(final, idx, val.astype(np.float64))
    np.testing.assert_allclose(a, final, rtol=1e-5, atol=1e-5)
    # old value of element k: start value plus the earlier contributions to the same address
    for k in range(64):
        earlier = val[:k][idx[:k] == idx[k]].astype(np.float64).sum()
        assert old[k] == pytest.approx(a0[idx[k]] + earlier, rel=1e-5, abs=1e-5)


def test_atomic_add_f16_rounds_each_step():
    a = np.array([2048.0], np.float16)
    ev("atomic_add", (A("f16", 1), T("i32", 4), C(1.0)),
       {"A": a, "indices": np.zeros(4, np.int64), "value": 1.0})
    assert a[0] == 2048.0  # 2048 + 1 rounds back to 2048 in f16, four times


@pytest.mark.parametrize("dt", ["f32", "f64"])
def test_float_atomic_max_min_are_the_float_order(dt):
    """Float max/min (the device's integer operations on the bits) equal NumPy's on numbers,
    with -0.0 below +0.0; `fence` evaluates to nothing."""
    npdt = np.float32 if dt == "f32" else np.float64
    vals = np.array([3.5, -1.0, -7.25, 0.0, -0.0, 2.0, -1e30, 1e30, -0.5], npdt)
    for opname, fn in (("max", np.maximum), ("min", np.minimum)):
        a = np.array([-2.0, 1.0, -0.0, 0.0], npdt)
        idx = np.arange(len(vals)) % 4
        old = ev(f"atomic_{opname}", (A(dt, 1), T("i32", 9), T(dt, 9)),
                 {"A": a, "indices": idx, "value": vals})
        want = np.array([-2.0, 1.0, -0.0, 0.0], npdt)
        for k in range(len(vals)):
            assert old[k] == want[idx[k]]
            want[idx[k]] = fn(want[idx[k]], vals[k])
        np.testing.assert_array_equal(a, want)
    a = np.array([0.0, -0.0], npdt)
    ev("atomic_max", (A(dt, 1), T("i32", 2), T(dt, 2)),
       {"A": a, "indices": np.array([0, 1]), "value": np.array([-0.0, 0.0], npdt)})
    assert not np.signbit(a).any()        # max(+0, -0) = max(-0, +0) = +0
    assert ev("fence", (), {}, sem=STR("sc"), scope=STR("system")) is None


@pytest.mark.parametrize("opname,fn", [
    ("max", max), ("min", min), ("and", lambda x, y: x & y), ("or", lambda x, y: x | y),
    ("xor", lambda x, y: x ^ y), ("xchg", lambda x, y: y)])
def test_int_atomics(opname, fn):
    a = rng.integers(-50, 50, size=8).astype(np.int32)
    a0 = a.copy()
    idx = np.array([0, 1, 1, 9, 2, 0, 7, -2])
    val = rng.integers(-50, 50, size=8).astype(np.int32)
    mask = np.array([1, 1, 1, 1, 0, 1, 1, 1], bool)
    old = ev(f"atomic_{opname}", (A("i32", 1), T("i32", 8), T("i32", 8)),
             {"A": a, "indices": idx, "value": val, "mask": mask}, mask=T("bool", 8))
    mem = [int(v) for v in a0]
    want_old = []
    for k in range(8):
        if mask[k] and 0 <= idx[k] < 8:
            want_old.append(mem[idx[k]])
            mem[idx[k]] = fn(mem[idx[k]], int(val[k]))
        else:
            want_old.append(0)
    assert old.tolist() == want_old and a.tolist() == mem


def test_atomic_cas():
    a = np.array([5, 6, 7], np.int32)
    old = ev("atomic_cas", (A("i32", 1), T("i32", 4), T("i32", 4), T("i32", 4)),
             {"A": a, "indices": np.array([0, 1, 0, 2]), "expected": np.array([5, 0, 9, 7]),
              "value": np.array([9, 1, 10, 70])})
    assert old.tolist() == [5, 6, 9, 7] and a.tolist() == [10, 6, 70]


# ---------------------------------------------------------------------------------------------
# grid

def test_grid_refs():
    ctx = GridContext(block=(3, 1, 2), grid=(8, 4, 3), cluster=(2, 2, 1))
    assert [ev("bid", (C(ax),), {"axis": ax, "ctx": ctx}) for ax in range(3)] == [3, 1, 2]
    assert [ev("num_blocks", (C(ax),), {"axis": ax, "ctx": ctx}) for ax in range(3)] == \
        [8, 4, 3]
    assert ev("cluster_rank", (), {"ctx": ctx}) == 1 + 2 * 1  # x=1, y=1 in a 2x2 cluster
    assert ev("cluster_size", (), {"ctx": ctx}) == 4
    for a, b in [(1000, 128), (1024, 128), (0, 5), (-7, 2), (7, -2), (1, 1)]:
        assert ev("cdiv", (T("i32"), T("i32")), {"a": np.int32(a), "b": np.int32(b)}) == \
            math.ceil(a / b)


# ---------------------------------------------------------------------------------------------
# creation and shape

def test_creation_refs():
    np.testing.assert_array_equal(ev("arange", (C(8),), {"n": 8, "dtype": I32}),
                                  np.arange(8, dtype=np.int32))
    t = ev("full", (TUP(2, 4), C(0.1), D("bf16")), {"shape": (2, 4), "value": 0.1,
                                                     "dtype": BF16})
    assert t.shape == (2, 4) and (t == np.float32(0.10009765625)).all()
    t = ev("full", (TUP(4,), T("i32")), {"shape": (4,), "value": np.int32(-3)})
    assert t.dtype == np.int32 and t.tolist() == [-3] * 4
    assert ev("zeros", (TUP(2, 2), D("f16")), {"shape": (2, 2), "dtype": F16}).dtype == \
        np.float16
    assert ev("ones", (TUP(4),), {"shape": (4,)}).tolist() == [1.0] * 4


def test_shape_refs():
    x = rng.standard_normal((2, 4, 8)).astype(np.float32)
    np.testing.assert_array_equal(ev("reshape", (T("f32", 2, 4, 8), TUP(8, 8)),
                                     {"x": x, "shape": (8, 8)}), x.reshape(8, 8))
    np.testing.assert_array_equal(ev("permute", (T("f32", 2, 4, 8), TUP(2, 0, 1)),
                                     {"x": x, "dims": (2, 0, 1)}),
                                  np.moveaxis(x, 2, 0))
    np.testing.assert_array_equal(ev("transpose", (T("f32", 2, 4, 8),), {"x": x}),
                                  np.einsum("abc->acb", x))
    assert ev("expand_dims", (T("f32", 2, 4, 8), C(-1)), {"x": x, "axis": -1}).shape == \
        (2, 4, 8, 1)
    y = rng.standard_normal((1, 8)).astype(np.float32)
    np.testing.assert_array_equal(ev("broadcast_to", (T("f32", 1, 8), TUP(4, 8)),
                                     {"x": y, "shape": (4, 8)}), np.repeat(y, 4, axis=0))
    c = ev("cat", (T("f32", 2, 4, 8), T("f32", 2, 4, 8)), {"a": x, "b": -x, "axis": 1},
           axis=C(1))
    assert c.shape == (2, 8, 8)
    np.testing.assert_array_equal(c[:, 4:], -x)
    m = np.arange(8 * 16).reshape(8, 16)
    e = ev("extract", (T("i32", 8, 16), TUP(1, 1), TUP(4, 8)),
           {"x": m, "index": (1, 1), "shape": (4, 8)})
    np.testing.assert_array_equal(e, [[r * 16 + c for c in range(8, 16)] for r in range(4, 8)])



@pytest.mark.parametrize("dt", ["f32", "f16", "i8", "u32", "bool"])
def test_take_is_numpy_take_of_one_position(dt):
    x = (np.arange(4 * 8 * 2) * 7 % 23).reshape(4, 8, 2).astype(T(dt).type.dtype.np_dtype)
    for axis in range(3):
        for i in range(x.shape[axis]):
            got = ev("take", (T(dt, 4, 8, 2), T("i32")), {"x": x, "index": np.int32(i),
                                                           "axis": axis}, axis=C(axis))
            want = x[(slice(None),) * axis + (i,)]
            assert got.dtype == x.dtype and got.shape == want.shape
            np.testing.assert_array_equal(got, want)
    s = ev("take", (T(dt, 8), T("i32")), {"x": x[0, :, 0], "index": np.int32(5), "axis": 0})
    assert s.shape == () and s == x[0, 5, 0]


def test_take_outside_the_axis_is_an_error():
    x = np.arange(8, dtype=np.float32)
    for i in (8, -1):
        with pytest.raises(IndexError, match=rf"index {i} is outside 0..7 \(axis 0 of a tile "
                                             r"of shape \(8,\)\)"):
            ev("take", (T("f32", 8), T("i32")), {"x": x, "index": np.int32(i), "axis": 0})


def test_array_subscript_reads_one_element_and_checks_every_axis():
    a = np.arange(12, dtype=np.float32).reshape(3, 4) * 0.5
    pos = (A("f32", 2), RT(T("i32"), T("i64")), STR("a[i, j]"))
    for i in range(3):
        for j in range(4):
            got = ev_op("[]", pos, {"A": a, "index": (np.int32(i), np.int64(j)),
                                    "text": "a[i, j]"})
            assert got.shape == () and got.dtype == np.float32 and got == a[i, j]
    for idx, axis in (((3, 0), 0), ((0, 4), 1), ((-1, 0), 0)):
        with pytest.raises(IndexError, match=rf"`a\[i, j\]`: index \({idx[0]}, {idx[1]}\) is "
                                             rf"outside the array's shape \(3, 4\) \(axis "
                                             rf"{axis}\)"):
            ev_op("[]", pos, {"A": a, "index": idx, "text": "a[i, j]"})



def _pairs(*ps):
    from tilelang.sema.constants import ConstTuple, loose
    from tilelang.sema.builtins import arg_of_const
    return arg_of_const(ConstTuple(tuple(ConstTuple((loose(a), loose(b))) for a, b in ps)))


def test_pad_is_numpy_pad_with_a_constant():
    x = np.arange(4 * 8, dtype=np.int16).reshape(4, 8) - 9
    got = ev("pad", (T("i16", 4, 8), _pairs((1, 3), (0, 8))),
             {"x": x, "widths": ((1, 3), (0, 8)), "value": np.int16(-2)}, value=T("i16"))
    np.testing.assert_array_equal(got, np.pad(x, ((1, 3), (0, 8)), constant_values=-2))
    assert got.dtype == np.int16
    y = np.arange(6, dtype=np.float32)[:4]
    got = ev("pad", (T("f32", 4), TUP(2, 2)), {"x": y, "widths": (2, 2), "value": None})
    np.testing.assert_array_equal(got, [0, 0, 0, 1, 2, 3, 0, 0])


def test_cat_of_unequal_tiles_rounds_the_extent_up_and_fills():
    a = np.arange(16, dtype=np.float32).reshape(2, 8)
    b = -np.arange(8, dtype=np.float32).reshape(2, 4) - 1
    got = ev("cat", (T("f32", 2, 8), T("f32", 2, 4)), {"a": a, "b": b, "axis": 1,
                                                       "padding": np.float32(0.5)},
             axis=C(1), padding=T("f32"))
    want = np.full((2, 16), 0.5, np.float32)
    want[:, :8], want[:, 8:12] = a, b
    np.testing.assert_array_equal(got, want)
    same = ev("cat", (T("i8", 4), T("i8", 4)), {"a": np.arange(4, dtype=np.int8),
                                                "b": np.arange(4, dtype=np.int8), "axis": 0,
                                                "padding": None})
    np.testing.assert_array_equal(same, [0, 1, 2, 3, 0, 1, 2, 3])


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_within_a_tile_is_take_along_axis(axis):
    t = rng.standard_normal((8, 16)).astype(np.float32)
    shape = (4, 16) if axis == 0 else (8, 32)
    idx = rng.integers(0, t.shape[axis], size=shape).astype(np.int32)
    got = ev("gather", (T("f32", 8, 16), T("i32", *shape)),
             {"A": t, "indices": idx, "mask": None, "padding": None, "axis": axis},
             axis=C(axis))
    np.testing.assert_array_equal(got, np.take_along_axis(t, idx, axis))
    idx[1, 2] = t.shape[axis]
    with pytest.raises(IndexError, match=rf"`gather`: indices\(1, 2\) is {t.shape[axis]}, "
                                         rf"outside 0\.\.{t.shape[axis] - 1}"):
        ev("gather", (T("f32", 8, 16), T("i32", *shape)),
           {"A": t, "indices": idx, "mask": None, "padding": None, "axis": axis},
           axis=C(axis))


# ---------------------------------------------------------------------------------------------
# dtype

def test_dtype_queries_fold_and_evaluate():
    """`is_floating`, `is_integer` and `bits` on every dtype: the fold (what the checker
    uses) and the reference agree with the dtype table of docs/language.md §3.1."""
    from tilelang.sema.types import ALL_DTYPES
    table_bits = {"bool": 1, "i8": 8, "i16": 16, "i32": 32, "i64": 64, "u8": 8, "u16": 16,
                  "u32": 32, "u64": 64, "f16": 16, "bf16": 16, "f32": 32, "f64": 64,
                  "tf32": 32, "f8e4m3": 8, "f8e5m2": 8, "f4e2m1": 4, "f6e2m3": 6, "f6e3m2": 6,
                  "ue8m0": 8, "f4e2m1x2": 8}
    floats = {"f16", "bf16", "f32", "f64", "tf32", "f8e4m3", "f8e5m2", "f4e2m1", "f6e2m3",
              "f6e3m2", "ue8m0"}
    for dt in ALL_DTYPES:
        for name, want in (("is_floating", dt.name in floats),
                           ("is_integer", dt.name[0] in "iu" and dt.name not in floats),
                           # packed FP4 is neither: bytes of two f4e2m1 values
                           ("bits", table_bits[dt.name])):
            b = lookup(name)
            bound = bind(name, D(dt.name))
            assert b.fold(bound, None).value == want, (name, dt)
            assert ev(name, (D(dt.name),), {"dtype": dt}) == want, (name, dt)


def test_astype_semantics():
    x = np.array([1e10, -1e10, np.nan, 2.7, -2.7, 127.9, -128.9], np.float32)
    assert ev("astype", (T("f32", 8), D("i8")), {"x": x, "dtype": I8}).tolist() == \
        [127, -128, 0, 2, -2, 127, -128]
    assert ev("astype", (T("f32", 8), D("u8")), {"x": x, "dtype": U8}).tolist() == \
        [255, 0, 0, 2, 0, 127, 0]
    w = np.array([300, -1, 128, 255], np.int32)
    assert ev("astype", (T("i32", 4), D("i8")), {"x": w, "dtype": I8}).tolist() == \
        [300 - 256, -1, -128, -1]
    assert ev("astype", (T("i32", 4), D("bool")), {"x": np.array([0, 2, -1, 0]),
                                                   "dtype": BUILTINS["bool"].extra["dtype"]}
              ).tolist() == [False, True, True, False]
    f8 = ev("astype", (T("f32", 8), D("f8e4m3")), {"x": x, "dtype": F8E4M3})
    assert f8[0] == 448.0 and f8[1] == -448.0 and np.isnan(f8[2])


def test_bitcast_bits():
    x = rng.standard_normal(64).astype(np.float32)
    np.testing.assert_array_equal(
        ev("bitcast", (T("f32", 64), D("u32")), {"x": x, "dtype": BUILTINS["u32"].extra[
            "dtype"]}), x.view(np.uint32))
    b = round_to_bf16(x)
    bits = ev("bitcast", (T("bf16", 64), D("i16")), {"x": b, "dtype": BUILTINS["i16"].extra[
        "dtype"]})
    np.testing.assert_array_equal(bits.view(np.uint16),
                                  (b.view(np.uint32) >> 16).astype(np.uint16))
    back = ev("bitcast", (T("i16", 64), D("bf16")), {"x": bits, "dtype": BF16})
    np.testing.assert_array_equal(back, b)
    h = x.astype(np.float16)
    np.testing.assert_array_equal(
        ev("bitcast", (T("f16", 64), D("u16")), {"x": h, "dtype": BUILTINS["u16"].extra[
            "dtype"]}), h.view(np.uint16))


@pytest.mark.parametrize("dt", [F8E4M3, F8E5M2])
def test_f8_bit_patterns_round_trip(dt):
    codes = np.arange(256, dtype=np.uint8)
    vals = from_bits(codes, dt)
    finite = ~np.isnan(vals)
    np.testing.assert_array_equal(to_bits(vals[finite], dt), codes[finite])
    # decoding agrees with the rounding helper: every decoded value is representable
    if dt is F8E4M3:
        ok = np.isfinite(vals)
        np.testing.assert_array_equal(round_to_f8e4m3(vals[ok]), vals[ok])
        assert F8_DECODE["f8e4m3"][0x7E] == 448.0 and np.isnan(F8_DECODE["f8e4m3"][0x7F])
    else:
        assert F8_DECODE["f8e5m2"][0x7C] == np.inf and F8_DECODE["f8e5m2"][0x7B] == 57344.0


def test_constructor_refs():
    assert ev("i16", (C(5),), {"x": 5}) == 5
    assert ev("f16", (C(0.1),), {"x": 0.1}) == np.float16(0.1)
    assert ev("bf16", (C(0.1),), {"x": 0.1}) == np.float32(0.10009765625)


# ---------------------------------------------------------------------------------------------
# math

def test_float_unary_refs():
    x = rng.uniform(0.1, 3.0, 256).astype(np.float32)
    # exact values rounded to float64 (NumPy's own transcendentals vary between CPUs)
    cases = {n: correctly_rounded(n, [x], np.float64)
             for n in ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "tanh",
                       "sigmoid", "erf")}
    for name, want in cases.items():
        got = ev(name, (T("f32", 256),), {"x": x})
        assert got.dtype == np.float32, name
        np.testing.assert_allclose(got, want, rtol=2e-6, err_msg=name)
        h = ev(name, (T("f16", 256),), {"x": x.astype(np.float16)})
        assert h.dtype == np.float16
        np.testing.assert_allclose(h.astype(np.float64), want, rtol=2e-3, atol=1e-3,
                                   err_msg=name)
    # f16 is evaluated in f32 and rounded once: exp(10) = 22026.47 -> 22032 in f16
    assert ev("exp", (T("f16"),), {"x": np.float16(10.0)}) == np.float16(22026.465794806718)


def test_numeric_unary_refs():
    x = np.array([-2.5, -0.5, 0.5, 2.5], np.float32)
    assert ev("floor", (T("f32", 4),), {"x": x}).tolist() == [-3, -1, 0, 2]
    assert ev("ceil", (T("f32", 4),), {"x": x}).tolist() == [-2, -0.0, 1, 3]
    i = np.array([-128, -3, 0, 5], np.int8)
    assert ev("abs", (T("i8", 4),), {"x": i}).tolist() == [-128, 3, 0, 5]  # wraps
    assert ev("floor", (T("i8", 4),), {"x": i}).tolist() == i.tolist()


def test_rounding_and_classification_refs():
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, -0.7, np.nan], np.float32)
    for name in ("round", "rint"):     # half to even, as NumPy
        got = ev(name, (T("f32", 8),), {"x": x})
        np.testing.assert_array_equal(got, [-2, -2, -0.0, 0, 2, 2, -1, np.nan])
    np.testing.assert_array_equal(ev("trunc", (T("f32", 8),), {"x": x}),
                                  [-2, -1, -0.0, 0, 1, 2, -0.0, np.nan])
    assert ev("sign", (T("i8", 3),), {"x": np.array([-7, 0, 9], np.int8)}).tolist() == [-1, 0, 1]
    s = ev("sign", (T("f32", 8),), {"x": x})
    assert s[:7].tolist() == [-1, -1, -1, 1, 1, 1, -1] and np.isnan(s[7])
    assert ev("isnan", (T("f32", 8),), {"x": x}).tolist() == [False] * 7 + [True]
    y = np.array([np.inf, -np.inf, 1.0, np.nan], np.float32)
    assert ev("isinf", (T("f32", 4),), {"x": y}).tolist() == [True, True, False, False]
    assert ev("isfinite", (T("f32", 4),), {"x": y}).tolist() == [False, False, True, False]
    assert ev("isfinite", (T("i32", 2),), {"x": np.array([1, 2], np.int32)}).tolist() == [True] * 2
    c = ev("copysign", (T("f32", 2), T("f32", 2)), {"a": np.float32([1, -2]),
                                                    "b": np.float32([-0.0, 3])})
    assert c.tolist() == [-1.0, 2.0]
    f = ev("fmod", (T("f32", 2), C(3.0)), {"a": np.float32([-7, 7.5]), "b": 3.0})
    assert f.tolist() == [-1.0, 1.5]        # the sign of a, not of b as `%`
    h = ev("hypot", (T("f32", 2), T("f32", 2)), {"a": np.float32([3, 1e30]),
                                                 "b": np.float32([4, 1e30])})
    np.testing.assert_allclose(h, [5.0, 1e30 * math.sqrt(2)], rtol=1e-7)
    d = ev("div", (T("i32", 2), C(4)), {"a": np.int32([1, 3]), "b": 4, "precision": "ieee"})
    assert d.dtype == np.float32 and d.tolist() == [0.25, 0.75]
    v = np.float32([1e-8, 0.5, 3.0])
    for name, rtol in (("log1p", 1e-7), ("expm1", 1e-7), ("log10", 1e-6)):
        np.testing.assert_allclose(ev(name, (T("f32", 3),), {"x": v}),
                                   correctly_rounded(name, [v], np.float64), rtol=rtol)
    np.testing.assert_allclose(ev("cbrt", (T("f32", 2),), {"x": np.float32([-27, 8])}), [-3, 2])
    u = np.float32([-0.5, 0.25])
    for name in ("tan", "atan", "asin", "acos", "sinh", "cosh", "asinh", "atanh", "acosh"):
        u = np.float32([1.5, 3.0] if name == "acosh" else [-0.5, 0.25])
        np.testing.assert_allclose(ev(name, (T("f32", 2),), {"x": u}),
                                   correctly_rounded(name, [u], np.float64), rtol=1e-6,
                                   err_msg=name)


def test_binary_math_refs():
    a = rng.standard_normal(64).astype(np.float32)
    b = rng.standard_normal(64).astype(np.float32)
    a[0] = np.nan
    mn = ev("minimum", (T("f32", 64), T("f32", 64)), {"a": a, "b": b})
    assert np.isnan(mn[0])
    np.testing.assert_array_equal(mn[1:], np.where(a[1:] < b[1:], a[1:], b[1:]))
    mx = ev("maximum", (T("u8", 4), C(3)), {"a": np.array([1, 5, 3, 250], np.uint8), "b": 3})
    assert mx.dtype == np.uint8 and mx.tolist() == [3, 5, 3, 250]
    p = ev("pow", (T("f32", 64), C(2)), {"a": np.abs(b), "b": 2})
    np.testing.assert_allclose(p, b.astype(np.float64) ** 2, rtol=1e-6)
    at = ev("atan2", (T("f32", 64), T("f32", 64)), {"y": a[1:], "x": b[1:]})
    np.testing.assert_allclose(at, correctly_rounded("atan2", [a[1:], b[1:]], np.float64),
                               rtol=1e-6)
    c = rng.standard_normal(64).astype(np.float32)
    f = ev("fma", (T("f32", 64), T("f32", 64), T("f32", 64)), {"a": a[1:], "b": b[1:],
                                                              "c": c[1:]})
    exact = a[1:].astype(np.float64) * b[1:] + c[1:]
    np.testing.assert_array_equal(f, exact.astype(np.float32))
    fd = ev("floordiv", (T("i32", 4), C(-3)), {"a": np.array([7, -7, 0, 9], np.int32), "b": -3})
    assert fd.tolist() == [7 // -3, -7 // -3, 0, 9 // -3]  # floors, like Python
    w = ev("where", (T("bool", 4), T("i32", 4), C(-1)),
           {"cond": np.array([1, 0, 1, 0], bool), "x": np.arange(4, dtype=np.int32), "y": -1})
    assert w.tolist() == [0, -1, 2, -1] and w.dtype == np.int32


# ---------------------------------------------------------------------------------------------
# operators

def test_arithmetic_operator_refs():
    x = rng.integers(-128, 128, 64).astype(np.int8)
    y = rng.integers(-128, 128, 64).astype(np.int8)
    y[y == 0] = 3
    got = ev_op("+", (T("i8", 64), T("i8", 64)), {"a": x, "b": y})
    assert got.dtype == np.int8
    assert got.tolist() == [((int(u) + int(v) + 128) % 256) - 128 for u, v in zip(x, y)]
    assert ev_op("//", (T("i8", 64), T("i8", 64)), {"a": x, "b": y}).tolist() == \
        [int(u) // int(v) if int(u) // int(v) < 128 else int(u) // int(v) - 256
         for u, v in zip(x, y)]
    assert ev_op("%", (T("i8", 64), T("i8", 64)), {"a": x, "b": y}).tolist() == \
        [int(u) % int(v) for u, v in zip(x, y)]
    q = ev_op("/", (T("i32", 4), C(2)), {"a": np.array([1, 2, 3, -7], np.int32), "b": 2})
    assert q.dtype == np.float32 and q.tolist() == [0.5, 1.0, 1.5, -3.5]
    z = ev_op("//", (T("i32", 2), T("i32", 2)), {"a": np.array([5, 5], np.int32),
                                                 "b": np.array([0, 2], np.int32)})
    assert z.tolist() == [0, 2]
    h = ev_op("*", (T("i32", 2), C(0.5)), {"a": np.array([3, 16777217], np.int32), "b": 0.5})
    assert h.dtype == np.float32 and h.tolist() == [1.5, 8388608.0]  # i32 -> f32 first
    p = ev_op("**", (T("i32", 5), T("i32", 5)), {"a": np.array([2, 1, -1, -1, 3], np.int32),
                                                 "b": np.array([3, -4, -3, -2, -1], np.int32)})
    assert p.tolist() == [8, 1, -1, 1, 0]
    f = ev_op("-", (T("f16", 2), C(1)), {"a": np.array([2048.0, 0.5], np.float16), "b": 1})
    assert f.dtype == np.float16 and f.tolist() == [2047.0, -0.5]
    b16 = ev_op("+", (T("bf16", 1), C(1.0)), {"a": np.array([256.0], np.float32), "b": 1.0})
    assert b16.tolist() == [256.0]  # 257 is not a bf16


def test_bitwise_and_shift_refs():
    x = np.array([-8, 1, 255, 7], np.int32)
    s = np.array([1, 31, 32, -1], np.int32)
    assert ev_op("<<", (T("i32", 4), T("i32", 4)), {"a": x, "b": s}).tolist() == \
        [-16, -2 ** 31, 0, 0]
    assert ev_op(">>", (T("i32", 4), T("i32", 4)), {"a": x, "b": s}).tolist() == \
        [-4, 0, 0, 0]
    assert ev_op(">>", (T("i32", 1), C(40)), {"a": np.array([-5], np.int32), "b": 40}) \
        .tolist() == [-1]  # sign fill
    u = np.array([0xF0, 0x0F], np.uint8)
    assert ev_op("~", (T("u8", 2),), {"x": u}).tolist() == [0x0F, 0xF0]
    assert ev_op("^", (T("u8", 2), C(0xFF)), {"a": u, "b": 0xFF}).tolist() == [0x0F, 0xF0]
    bb = np.array([True, False])
    assert ev_op("&", (T("bool", 2), T("bool", 2)), {"a": bb, "b": bb[::-1]}).tolist() == \
        [False, False]
    assert ev_op("~", (T("bool", 2),), {"x": bb}).tolist() == [False, True]


def test_comparison_and_logic_refs():
    x = np.array([0.5, 1.0, np.nan], np.float32)
    assert ev_op("<", (T("f32", 3), C(1)), {"a": x, "b": 1}).tolist() == [True, False, False]
    assert ev_op("!=", (T("f32", 3), C(1)), {"a": x, "b": 1}).tolist() == [True, False, True]
    # i8 compared with a loose int that fits: compared in i8
    assert ev_op(">=", (T("i8", 2), C(-1)), {"a": np.array([-1, -2], np.int8), "b": -1}
                 ).tolist() == [True, False]
    assert ev_op("and", (T("bool"), T("bool")), {"a": True, "b": False}) == False  # noqa: E712
    assert ev_op("not", (T("bool"),), {"x": False}) == True  # noqa: E712
    assert ev_op("u-", (T("u8", 1),), {"x": np.array([1], np.uint8)}).tolist() == [255]


# ---------------------------------------------------------------------------------------------
# reduce / scan

def test_sum_of_f16_accumulates_in_f32():
    x = np.ones(4096, np.float16)
    naive = np.float16(0)
    for v in x:  # f16 accumulation stalls at 2048
        naive = np.float16(naive + v)
    assert naive == 2048.0
    s = ev("sum", (T("f16", 4096),), {"x": x})
    assert s.dtype == np.float16 and s == 4096.0


def test_reduction_refs():
    x = rng.standard_normal((8, 16)).astype(np.float32)
    s = ev("sum", (T("f32", 8, 16),), {"x": x, "axis": 1, "keepdims": True},
           axis=C(1), keepdims=C(True))
    np.testing.assert_allclose(s[:, 0], [math.fsum(r) for r in x.astype(np.float64)],
                               rtol=1e-5)
    assert s.shape == (8, 1)
    i8 = rng.integers(-128, 128, (4, 64)).astype(np.int8)
    s = ev("sum", (T("i8", 4, 64),), {"x": i8, "axis": 1}, axis=C(1))
    assert s.dtype == np.int32 and s.tolist() == [sum(int(v) for v in r) for r in i8]
    p = ev("prod", (T("f32", 8, 16),), {"x": x[:, :4], "axis": 0}, axis=C(0))
    np.testing.assert_allclose(p, [math.prod(c) for c in x[:, :4].T.astype(np.float64)],
                               rtol=1e-5)
    assert ev("max", (T("f32", 8, 16),), {"x": x}) == max(map(float, x.ravel()))
    assert ev("min", (T("f32", 8, 16),), {"x": x, "axis": 0}, axis=C(0)).tolist() == \
        [min(map(float, c)) for c in x.T]
    y = np.array([[1, 5, 5, 0], [7, 7, 2, 9]], np.float32)
    assert ev("argmax", (T("f32", 2, 4),), {"x": y, "axis": 1}, axis=C(1)).tolist() == [1, 3]
    assert ev("argmin", (T("f32", 2, 4),), {"x": y, "axis": 0}, axis=C(0)).tolist() == \
        [0, 0, 1, 0]
    am = ev("argmax", (T("f32", 2, 4),), {"x": y})
    assert am.dtype == np.int32 and am == 7  # flat row-major index
    assert ev("argmax", (T("f32", 2, 4),), {"x": y, "keepdims": True},
              keepdims=C(True)).shape == (1, 1)


def test_scan_refs():
    x = rng.integers(0, 200, (3, 8)).astype(np.uint8)
    c = ev("cumsum", (T("u8", 3, 8),), {"x": x, "axis": 1}, axis=C(1))
    assert c.dtype == np.uint32
    assert c.tolist() == [[sum(int(v) for v in r[:k + 1]) for k in range(8)] for r in x]
    f = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    assert ev("cumprod", (T("f32", 2, 2),), {"x": f}).tolist() == [[1, 2], [3, 8]]


def test_sort_refs():
    """Stable, NaN the largest, -0.0 == +0.0; checked against Python's sorted()."""
    x = np.array([[2.0, np.nan, -0.0, 1.0, 0.0, 2.0, np.nan, -1.0]], np.float32)

    def key(desc):
        def k(i):
            v = float(x[0, i])
            nan = v != v
            return ((not nan) if desc else nan, 0.0 if nan else (-v if desc else v), i)
        return k
    asc = sorted(range(8), key=key(False))
    desc = sorted(range(8), key=key(True))
    assert ev("argsort", (T("f32", 1, 8),), {"x": x}).tolist() == [asc]
    assert ev("argsort", (T("f32", 1, 8),), {"x": x, "descending": True},
              descending=C(True)).tolist() == [desc]
    s = ev("sort", (T("f32", 1, 8),), {"x": x})
    np.testing.assert_array_equal(s, x[:, asc])
    v, i = ev("topk", (T("f32", 1, 8), C(4)), {"x": x, "k": 4})
    assert i.tolist() == [desc[:4]] and i.dtype == np.int32
    np.testing.assert_array_equal(v, x[:, desc[:4]])
    u = np.array([7, 0, 65535, 7, 1], np.uint16)
    assert ev("argsort", (T("u16", 5),), {"x": u, "descending": True},
              descending=C(True)).tolist() == [2, 0, 3, 4, 1]


def test_combine_refs():
    """`reduce`/`scan` take the combine as a function of two tuples of arrays."""
    def add(a, b):
        return (a[0] + b[0],)

    def first_max(a, b):
        take = (b[0] > a[0]) | ((b[0] == a[0]) & (b[1] < a[1]))
        return np.where(take, b[0], a[0]), np.where(take, b[1], a[1])

    x = rng.integers(-5, 5, (3, 8)).astype(np.int32)
    idx = np.broadcast_to(np.arange(8, dtype=np.int32), (3, 8))
    assert ev("reduce", (T("i32", 3, 8), FN("i32")), {"x": x, "combine": add, "axis": 1},
              axis=C(1)).tolist() == x.sum(axis=1).tolist()
    assert ev("reduce", (T("i32", 3, 8), FN("i32")), {"x": x, "combine": add}) == x.sum()
    v, j = ev("reduce", (RT(T("i32", 3, 8), T("i32", 3, 8)), FN("i32", "i32")),
              {"x": (x, idx), "combine": first_max, "axis": 1, "keepdims": True},
              axis=C(1), keepdims=C(True))
    assert v.shape == (3, 1) and j[:, 0].tolist() == x.argmax(axis=1).tolist()
    s = ev("scan", (T("i32", 3, 8), FN("i32")), {"x": x, "combine": add, "axis": 1},
           axis=C(1))
    assert s.tolist() == np.cumsum(x, axis=1).tolist()
    r = ev("scan", (T("i32", 3, 8), FN("i32")),
           {"x": x, "combine": add, "axis": 1, "reverse": True}, axis=C(1), reverse=C(True))
    assert r.tolist() == np.flip(np.cumsum(np.flip(x, 1), axis=1), 1).tolist()


# ---------------------------------------------------------------------------------------------
# matmul

def test_mma_f16_into_f32_and_f16():
    a = rng.standard_normal((32, 16)).astype(np.float16)
    b = rng.standard_normal((16, 8)).astype(np.float16)
    acc = rng.standard_normal((32, 8)).astype(np.float32)
    r = ev("mma", (T("f16", 32, 16), T("f16", 16, 8), T("f32", 32, 8)),
           {"a": a, "b": b, "acc": acc})
    want = np.array([[math.fsum([float(a[i, k]) * float(b[k, j]) for k in range(16)]
                                + [float(acc[i, j])]) for j in range(8)] for i in range(32)])
    np.testing.assert_array_equal(r, want.astype(np.float32))
    r16 = ev("mma", (T("f16", 32, 16), T("f16", 16, 8), T("f16", 32, 8)),
             {"a": a, "b": b, "acc": acc.astype(np.float16)})
    assert r16.dtype == np.float16


def test_mma_scaled_mx_and_nvfp4_against_exact_sums():
    """Each element times the scale of its block of K (32 for ue8m0, 16 for f8e4m3 scales),
    summed exactly (fsum) with the accumulator and rounded once to f32."""
    from tilelang.sema.types import round_to_dtype, DTYPES as DT
    for elem, scale, v in (("f8e4m3", "ue8m0", 32), ("f6e3m2", "ue8m0", 32),
                           ("f4e2m1", "f8e4m3", 16)):
        m, k, n = 4, 64, 3
        a = round_to_dtype(rng.standard_normal((m, k)) * 3, DT[elem])
        b = round_to_dtype(rng.standard_normal((k, n)) * 3, DT[elem])
        sa = round_to_dtype(2.0 ** rng.integers(-6, 6, (m, k // v)), DT[scale])
        sb = round_to_dtype(2.0 ** rng.integers(-6, 6, (k // v, n)), DT[scale])
        if scale == "f8e4m3":                       # NVFP4 scales need not be powers of two
            sa = round_to_dtype(np.abs(rng.standard_normal((m, k // v))) + 0.1, DT[scale])
        acc = rng.standard_normal((m, n)).astype(np.float32)
        r = ev("mma_scaled", (T(elem, m, k), T(scale, m, k // v), T(elem, k, n),
                              T(scale, k // v, n), T("f32", m, n)),
               {"a": a, "a_scale": sa, "b": b, "b_scale": sb, "acc": acc})
        want = [[math.fsum([float(a[i, q]) * float(sa[i, q // v]) * float(b[q, j]) *
                            float(sb[q // v, j]) for q in range(k)] + [float(acc[i, j])])
                 for j in range(n)] for i in range(m)]
        np.testing.assert_array_equal(r, np.array(want).astype(np.float32), err_msg=elem)


def test_packed_fp4_mma_scaled_and_unpack_f4():
    """Packed FP4 (f4e2m1x2): `unpack_f4` gives every code's value (the even element in bits
    0-3, against ml_dtypes), along either axis; `mma_scaled` of packed operands (a packed along
    its rows' K, b along its columns' K) equals the unpacked product exactly."""
    import ml_dtypes
    from tilelang.sema.types import round_to_dtype, DTYPES as DT
    codes = np.arange(256, dtype=np.uint8).reshape(16, 16)
    lo = codes & 0xF
    hi = codes >> 4
    val = lambda c: c.astype(np.uint8).view(ml_dtypes.float4_e2m1fn).astype(np.float32)  # noqa
    u = ev("unpack_f4", (T("f4e2m1x2", 16, 16),), {"x": codes})
    assert u.shape == (16, 32)
    np.testing.assert_array_equal(u[:, 0::2], val(lo))
    np.testing.assert_array_equal(u[:, 1::2], val(hi))
    assert np.signbit(u[0, 16]) and u[0, 16] == 0          # code 8 is -0
    u0 = ev("unpack_f4", (T("f4e2m1x2", 16, 16),), {"x": codes, "axis": 0})
    np.testing.assert_array_equal(u0[0::2], val(lo))
    np.testing.assert_array_equal(u0[1::2], val(hi))
    m, k, n = 4, 64, 3
    a = round_to_dtype(rng.standard_normal((m, k)) * 3, DT["f4e2m1"])
    b = round_to_dtype(rng.standard_normal((k, n)) * 3, DT["f4e2m1"])
    sa = round_to_dtype(np.abs(rng.standard_normal((m, k // 16))) + 0.1, DT["f8e4m3"])
    sb = round_to_dtype(np.abs(rng.standard_normal((k // 16, n))) + 0.1, DT["f8e4m3"])
    acc = rng.standard_normal((m, n)).astype(np.float32)
    code = lambda x: x.astype(ml_dtypes.float4_e2m1fn).view(np.uint8)  # noqa: E731
    ap = code(a[:, 0::2]) | (code(a[:, 1::2]) << 4)
    bp = code(b[0::2]) | (code(b[1::2]) << 4)
    r = ev("mma_scaled", (T("f4e2m1x2", m, k // 2), T("f8e4m3", m, k // 16),
                          T("f4e2m1x2", k // 2, n), T("f8e4m3", k // 16, n), T("f32", m, n)),
           {"a": ap, "a_scale": sa, "b": bp, "b_scale": sb, "acc": acc})
    want = [[math.fsum([float(a[i, q]) * float(sa[i, q // 16]) * float(b[q, j]) *
                        float(sb[q // 16, j]) for q in range(k)] + [float(acc[i, j])])
             for j in range(n)] for i in range(m)]
    np.testing.assert_array_equal(r, np.array(want).astype(np.float32))


def test_matmul_i8_wraps_into_i32_and_operator():
    a = np.full((4, 64), 127, np.int8)
    b = np.full((64, 2), 127, np.int8)
    r = ev("matmul", (T("i8", 4, 64), T("i8", 64, 2)), {"a": a, "b": b})
    assert r.dtype == np.int32 and (r == 127 * 127 * 64).all()
    f = ev_op("@", (T("f32", 2, 2), T("f32", 2, 2)),
              {"a": np.array([[1, 2], [3, 4]], np.float32), "b": np.eye(2, dtype=np.float32)})
    assert f.tolist() == [[1, 2], [3, 4]]


# ---------------------------------------------------------------------------------------------
# random (the algorithm itself: tests/stdlib/test_random_builtins.py)

def test_random_refs():
    offs = np.array([0, 1, 2, 3], np.int32)
    i = ev("randint", (T("i64"), T("i32", 4)), {"seed": np.int64(0), "offset": offs})
    assert i.dtype == np.uint32 and int(i[0]) == 0x6627E8D5  # Philox-4x32-10 of all zeros
    u = ev("rand", (T("i64"), T("i32", 4)), {"seed": np.int64(0), "offset": offs})
    want = np.where(i.view(np.int32) < 0, ~i.view(np.int32), i.view(np.int32))
    np.testing.assert_array_equal(u, want.astype(np.float32) * np.float32(4.6566127342e-10))
    n = ev("randn", (T("i64"), T("i32", 4)), {"seed": np.int64(0), "offset": offs})
    assert n.dtype == np.float32 and np.all(np.abs(n) < 6)


# ---------------------------------------------------------------------------------------------
# debug

def test_print_and_assert_refs():
    out = io.StringIO()
    b = lookup("print")
    bound = bind("print", STR("x = {} {{y}} {}"), T("i32"), T("f32", 2))
    text = b.evaluate(bound, {"fmt": "x = {} {{y}} {}", "file": out},
                      varargs=(np.int32(3), np.array([0.5, 1.0], np.float32)))
    assert text == "x = 3 {y} [0.5 1. ]" and out.getvalue() == text + "\n"
    ev("assert", (T("bool", 2),), {"cond": np.array([True, True])})
    with pytest.raises(TileAssertionError, match="bad row"):
        ev("assert", (T("bool", 2), STR("bad row")),
           {"cond": np.array([True, False]), "msg": "bad row"})
    assert ev("static_assert", (C(True),), {"cond": True}) is None


@pytest.mark.parametrize("name", ["peer", "rank", "world_size", "signal", "wait_until",
                                  "barrier", "multimem_store", "multimem_reduce"])
def test_distributed_references_say_they_need_a_world(name):
    # the interpreter runs one device: these run on tilelang.distributed's world
    from tilelang.diagnostics import TileError
    with pytest.raises(TileError, match=rf"^error: `{name}` needs a world of devices: the "
                       r"reference "
                       r"interpreter runs one device; run the kernel on "
                       r"tilelang.distributed.world\(n\) \(docs/distributed.md\)$"):
        BUILTINS[name].ref()


def test_every_builtin_reference_is_exercised_here():
    import pathlib
    text = pathlib.Path(__file__).read_text()
    missing = [n for n in BUILTINS if f'"{n}"' not in text
               and n not in ("i8", "u16", "u32", "u64", "i32", "i64", "f32", "f64", "tf32",
                             "f8e4m3", "f8e5m2", "f4e2m1", "f6e2m3", "f6e3m2", "ue8m0",
                             "f4e2m1x2", "bool", "atomic_max", "atomic_min",
                             "atomic_and", "atomic_or", "atomic_xor", "atomic_xchg")]
    # dtype constructors share one reference (convert_values); the int atomics are
    # parametrized by name above
    assert missing == []
