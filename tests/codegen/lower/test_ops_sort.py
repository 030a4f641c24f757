"""sort, argsort and topk through generate: the emulator and the interpreter against an
independent stable order (Python's `sorted` on (NaN-last key, index)), exactly, for every dtype
the built-ins claim, with ties, NaN and signed zeros, along each axis, ascending and
descending, and ragged rows through masked loads."""

from __future__ import annotations

import numpy as np
import pytest

from gen_support import run_emulated
from ops_support import from_bf16_bits, rng_for, to_bf16_bits
from tilelang.driver import compile_source
from tilelang.interp import run_kernel
from tilelang.options import CompileOptions

NP = {"f16": np.float16, "bf16": np.float32, "f32": np.float32, "f64": np.float64,
      "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64, "u8": np.uint8,
      "u16": np.uint16, "u32": np.uint32, "u64": np.uint64}


def stable_order(row, descending: bool) -> list[int]:
    """The documented order: keys ascending (descending), NaN the largest, -0.0 == +0.0, ties
    by ascending index; computed with Python's sorted, independently of NumPy's sort."""
    def key(i):
        v = row[i].item()
        nan = v != v
        if descending:
            return (not nan, 0 if nan else -v, i)
        return (nan, 0 if nan else v, i)
    return sorted(range(len(row)), key=key)


def orders(x: np.ndarray, axis: int, descending: bool) -> np.ndarray:
    v = np.moveaxis(x, axis, -1)
    out = np.empty(v.shape, np.int32)
    for idx in np.ndindex(v.shape[:-1]):
        out[idx] = stable_order(v[idx], descending)
    return np.moveaxis(out, -1, axis)


def data(dt: str, shape, rng) -> np.ndarray:
    """Few distinct values (many ties); floats with NaN and both zeros."""
    if dt in ("f16", "bf16", "f32", "f64"):
        x = rng.integers(-6, 6, shape).astype(np.float64) / 2
        flat = x.reshape(-1)
        flat[rng.choice(flat.size, flat.size // 8, replace=False)] = np.nan
        flat[rng.choice(flat.size, flat.size // 8, replace=False)] = -0.0
        return x.astype(NP[dt])
    info = np.iinfo(NP[dt])
    vals = np.array([info.min, info.max, 0, 1, info.max - 1, info.min + 1] +
                    ([-1] if info.min < 0 else [2]), dtype=NP[dt])
    return vals[rng.integers(0, len(vals), shape)]


def compile_k(src: str):
    res = compile_source(src, "<sort>.tile", CompileOptions(target="sm_80"), until="ptx")
    assert res.ok, [str(d) for d in res.diagnostics]
    return res


def run(res, args, bf16=()):
    emu = [to_bf16_bits(a) if i in bf16 else a.copy() for i, a in enumerate(args)]
    run_emulated(res.codegen, "k", emu, (1, 1, 1))
    emu = [from_bf16_bits(a) if i in bf16 else a for i, a in enumerate(emu)]
    ref = [a.copy() for a in args]
    run_kernel(res.ir, ref, (1, 1, 1))
    return emu, ref



# f32, bf16, i8 and u64 run by default (a float through f32 compares, a narrow and a wide
# integer of each signedness); the others with -m slow (~5 s each)
FAST = ("f32", "bf16", "i8", "u64")


@pytest.mark.parametrize("dt", [d if d in FAST else pytest.param(d, marks=pytest.mark.slow)
                                for d in sorted(NP)])
def test_sort_argsort_topk_every_dtype(dt):
    shape, axis = (8, 32), 1
    src = f"""
@launch(reqntid = (128, 1, 1))
kernel k(x: Array[{dt}, 2], s: Array[{dt}, 2], a: Array[i32, 2], d: Array[i32, 2],
         v: Array[{dt}, 2], i: Array[i32, 2]) {{
    let t = load(x, index = (0, 0), shape = (8, 32));
    store(s, index = (0, 0), tile = sort(t));
    store(a, index = (0, 0), tile = argsort(t));
    store(d, index = (0, 0), tile = argsort(t, descending = true));
    let (tv, ti) = topk(t, 4);
    store(v, index = (0, 0), tile = tv);
    store(i, index = (0, 0), tile = ti);
}}
"""
    x = data(dt, shape, rng_for("sort", dt))
    if dt == "bf16":
        x = (x.astype(np.float32).view(np.uint32) & 0xFFFF0000).view(np.float32)
    asc, desc = orders(x, axis, False), orders(x, axis, True)
    args = [x, np.zeros_like(x), np.zeros(shape, np.int32), np.zeros(shape, np.int32),
            np.zeros((8, 4), x.dtype), np.zeros((8, 4), np.int32)]
    emu, ref = run(compile_k(src), args, bf16=(0, 1, 4) if dt == "bf16" else ())
    for out in (emu, ref):
        np.testing.assert_array_equal(out[2], asc)
        np.testing.assert_array_equal(out[3], desc)
        np.testing.assert_array_equal(out[5], desc[:, :4])
        # values: bit-exact where not NaN (-0.0 and +0.0 keep their own sign)
        for got, idx in ((out[1], asc), (out[4], desc[:, :4])):
            want = np.take_along_axis(x, idx, axis)
            assert got.tobytes() == want.tobytes() or (
                np.array_equal(np.isnan(got), np.isnan(want)) and
                np.array_equal(np.signbit(got), np.signbit(want)) and
                np.array_equal(got, want, equal_nan=True))


@pytest.mark.parametrize("shape,axis,threads", [
    ((1024,), 0, 128),       # one warp sorts 1024: 32 registers x 32 lanes
    ((64, 16), 0, 128),      # axis 0: converted to the sort layout
    ((4, 8, 16), 1, 64),     # a middle axis
    ((2, 4), 1, 32),         # lanes replicate
    # warp bits along the axis: exchanges through shared memory (~1 min each: -m slow)
    pytest.param((4096,), 0, 128, marks=pytest.mark.slow),
    pytest.param((2, 2048), 1, 128, marks=pytest.mark.slow),   # 32 regs x 32 lanes x 2 warps
    ((2, 256), 1, 256),      # 8 warps, 2 rows: the row's high bits on warps
])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_shapes_and_axes(shape, axis, threads, descending):
    rank = len(shape)
    z = ", ".join(["0"] * rank) + ("," if rank == 1 else "")
    dflag = "true" if descending else "false"
    src = f"""
@launch(reqntid = ({threads}, 1, 1))
kernel k(x: Array[f32, {rank}], s: Array[f32, {rank}], a: Array[i32, {rank}]) {{
    let t = load(x, index = ({z}), shape = {tuple(shape)});
    store(s, index = ({z}), tile = sort(t, axis = {axis}, descending = {dflag}));
    store(a, index = ({z}), tile = argsort(t, axis = {axis}, descending = {dflag}));
}}
"""
    x = data("f32", shape, rng_for("shapes", shape, axis))
    want = orders(x, axis, descending)
    emu, ref = run(compile_k(src), [x, np.zeros_like(x), np.zeros(shape, np.int32)])
    for out in (emu, ref):
        np.testing.assert_array_equal(out[2], want)
        np.testing.assert_array_equal(out[1], np.take_along_axis(x, want, axis))


def test_topk_of_ragged_rows():
    """Rows shorter than the tile, loaded with padding -inf: the padding sorts after every
    real value (equal -inf values included: ties keep index order) and never reaches the top k
    of a row with at least k elements."""
    src = """
@launch(reqntid = (128, 1, 1))
kernel k(x: Array[f32, 2], v: Array[f32, 2], i: Array[i32, 2]) {
    let t = load(x, index = (0, 0), shape = (16, 64), padding = -inf);
    let (tv, ti) = topk(t, 8);
    store(v, index = (0, 0), tile = tv);
    store(i, index = (0, 0), tile = ti);
}
"""
    rng = rng_for("ragged")
    x = rng.standard_normal((13, 40)).astype(np.float32)
    x[0, :12] = -np.inf
    want = orders(x, 1, True)[:, :8]
    v, i = np.zeros((13, 8), np.float32), np.zeros((13, 8), np.int32)
    emu, ref = run(compile_k(src), [x, v, i])
    for out in (emu, ref):
        np.testing.assert_array_equal(out[2], want)
        np.testing.assert_array_equal(out[1], np.take_along_axis(x, want, 1))


def test_topk_k_must_be_a_power_of_two():
    src = """
kernel k(x: Array[f32, 1]) {
    let (v, i) = topk(load(x, index = (0,), shape = (64,)), 6);
}
"""
    res = compile_source(src, "<bad>.tile", CompileOptions(target="sm_80"), until="tir")
    assert [d.message for d in res.diagnostics if d.severity.name == "ERROR"] == [
        "`topk`: parameter `k` must be a power of two from 1 to 64 (the extent of axis 0), "
        "found 6"]


def test_sort_of_masked_rows():
    """Each row's first n[r] elements, the rest masked off with padding inf: an ascending sort
    puts the padding last, so the first n[r] of each sorted row are the row's own, sorted."""
    src = """
@launch(reqntid = (128, 1, 1))
kernel k(x: Array[f32, 2], n: Array[i32, 1], s: Array[f32, 2], a: Array[i32, 2]) {
    let cols = broadcast_to(expand_dims(arange(32), 0), (16, 32));
    let len = broadcast_to(expand_dims(load(n, index = (0,), shape = (16,)), 1), (16, 32));
    let t = load(x, index = (0, 0), shape = (16, 32), mask = cols < len, padding = inf);
    store(s, index = (0, 0), tile = sort(t, axis = 1));
    store(a, index = (0, 0), tile = argsort(t, axis = 1));
}
"""
    rng = rng_for("masked")
    x = data("f32", (16, 32), rng)
    x[np.isnan(x)] = 1.5                 # NaN sorts after inf: keep it out of this test
    n = rng.integers(0, 33, 16).astype(np.int32)
    emu, ref = run(compile_k(src), [x, n, np.zeros_like(x), np.zeros((16, 32), np.int32)])
    for out in (emu, ref):
        for r in range(16):
            k = int(n[r])
            want = stable_order(x[r, :k], False)
            assert out[3][r, :k].tolist() == want, r
            np.testing.assert_array_equal(out[2][r, :k], x[r, want])
            assert np.isposinf(out[2][r, k:]).all() and sorted(out[3][r, k:]) == \
                list(range(k, 32))
