"""Fused reductions (lower/fused.py, plan/fusion.py): a reduction whose input is made by
element-wise ops and broadcasts used only by it computes that input one register at a time.
Each kernel runs on the emulator and in the reference interpreter against NumPy: the block-
private histogram of a (512, 64) comparison at 128 threads (256 booleans a thread could not
hold), (1024, 256) with a `where` of weights, ragged key counts (padded keys match no bin),
`max`/`min`/`prod` consumers, a fused reduction inside a loop, a stored outer product (full
and edge tiles); the values are bit for bit those of the same kernel with fusion switched off,
and the PTX has no local memory."""

from __future__ import annotations

import numpy as np

from correctly_rounded import fused_multiply_add
import pytest

from gen_support import has_local
from masked_support import compile_for, run
from tilelang.codegen.generate import kernel_plans
from tilelang.codegen.plan import kernel_plan
from tilelang.codegen.plan.fusion import FusionPlan
from tilelang.options import CompileOptions

HIST = """
@launch(reqntid = (128, 1, 1))
kernel hist(x: Array[i32, 1], counts: Array[i32, 2], const TILE: i32 = 512,
            const BINS: i32 = 64) {
    let k = load(x, index = (bid(0),), shape = (TILE,), padding = -1);
    let hits = expand_dims(k, 1) == expand_dims(arange(BINS), 0);
    store(counts, index = (bid(0), 0), tile = expand_dims(sum(hits, axis = 0), 0));
}
"""

WEIGHTED = """
@launch(reqntid = (128, 1, 1))
kernel weighted(x: Array[i32, 1], w: Array[f32, 1], sums: Array[f32, 2],
                const TILE: i32 = 1024, const BINS: i32 = 256) {
    let k = load(x, index = (bid(0),), shape = (TILE,), padding = -1);
    let wk = load(w, index = (bid(0),), shape = (TILE,), padding = 0.0);
    let hits = expand_dims(k, 1) == expand_dims(arange(BINS), 0);
    let s = sum(where(hits, expand_dims(wk, 1), 0.0), axis = 0);
    store(sums, index = (bid(0), 0), tile = expand_dims(s, 0));
}
"""

# per row of a: OP over j of a[i] * b[j] + c, the product never held
OUTER = """
@launch(reqntid = (128, 1, 1))
kernel outer(a: Array[f32, 1], b: Array[f32, 1], y: Array[f32, 1], c: f32,
             const M: i32 = 64, const N: i32 = 512) {
    let x = load(a, index = (bid(0),), shape = (M,), padding = 0.0);
    let z = load(b, index = (0,), shape = (N,), padding = 0.0);
    let p = expand_dims(x, 1) * expand_dims(z, 0) + c;
    store(y, index = (bid(0),), tile = OP(p, axis = 1));
}
"""

LOOP = """
@launch(reqntid = (128, 1, 1))
kernel hist_loop(x: Array[i32, 1], counts: Array[i32, 1], const TILE: i32 = 512) {
    var c = zeros((64,), i32);
    for i in range(0, cdiv(x.shape[0], TILE)) {
        let k = load(x, index = (i,), shape = (TILE,), padding = -1);
        c = c + sum(expand_dims(k, 1) == expand_dims(arange(64), 0), axis = 0);
    }
    store(counts, index = (0,), tile = c);
}
"""


def _blocks(n: int, tile: int) -> int:
    return -(-n // tile)


def _per_block(keys: np.ndarray, tile: int, bins: int, weights=None) -> np.ndarray:
    out = []
    for s in range(0, len(keys), tile):
        k = keys[s:s + tile]
        w = None if weights is None else weights[s:s + tile]
        inside = (k >= 0) & (k < bins)
        out.append(np.bincount(k[inside], None if w is None else w[inside], minlength=bins))
    return np.array(out)


@pytest.mark.parametrize("n", [4 * 512, 3000, 100])
def test_block_private_histogram_512x64_at_128_threads(n):
    rng = np.random.default_rng(n)
    x = rng.integers(-5, 69, n).astype(np.int32)        # some outside [0, 64)
    args = {"x": x, "counts": np.full((_blocks(n, 512), 64), -7, np.int32)}
    res = compile_for(HIST, "hist", args)
    assert not has_local(res.codegen.ptx)
    emu, ref = run(res, "hist", args, (_blocks(n, 512),))
    want = _per_block(x, 512, 64)
    np.testing.assert_array_equal(ref["counts"], want)
    np.testing.assert_array_equal(emu["counts"], want)


@pytest.mark.parametrize("n", [2048, 2500])
def test_weighted_histogram_1024x256_with_where(n):
    rng = np.random.default_rng(n)
    x = rng.integers(0, 256, n).astype(np.int32)
    w = rng.integers(-8, 9, n).astype(np.float32)       # integers: exact sums in any order
    args = {"x": x, "w": w, "sums": np.zeros((_blocks(n, 1024), 256), np.float32)}
    res = compile_for(WEIGHTED, "weighted", args)
    assert not has_local(res.codegen.ptx)
    emu, ref = run(res, "weighted", args, (_blocks(n, 1024),))
    want = _per_block(x, 1024, 256, w.astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(ref["sums"], want)
    np.testing.assert_array_equal(emu["sums"], want)


def _outer_args(m_rows: int):
    rng = np.random.default_rng(m_rows)
    # near 1, so that a product of 512 stays finite
    return {"a": (rng.standard_normal(m_rows) * 1e-3).astype(np.float32),
            "b": (rng.random(512) + 0.5).astype(np.float32),
            "y": np.zeros(m_rows, np.float32), "c": np.float32(1.0)}


@pytest.mark.parametrize("op", ["sum", "max", "min", "prod"])
def test_consumers_against_numpy(op):
    """64 x 512 over 128 threads (256 per thread), made from a (64, 1) and a (1, 512) tile:
    the pass picks the layout (plan/fusion.py, R5). The elements are the f32 products NumPy
    computes; `max` and `min` of them are exact, sums and products within rounding (the
    tree's order is not NumPy's)."""
    src = OUTER.replace("OP", op)
    args = _outer_args(64 * 3 - 5)                      # a ragged last block
    res = compile_for(src, "outer", args)
    assert not has_local(res.codegen.ptx)
    emu, ref = run(res, "outer", args, (3,))
    p = args["a"][:, None] * args["b"][None, :] + np.float32(1.0)
    if op in ("max", "min"):
        want = getattr(np, op)(p, axis=1)
        np.testing.assert_array_equal(ref["y"], want)
        np.testing.assert_array_equal(emu["y"], want)
    else:
        want = getattr(np, op)(p.astype(np.float64), axis=1)
        np.testing.assert_allclose(ref["y"], want, rtol=2e-5)
        np.testing.assert_allclose(emu["y"], want, rtol=2e-5)


# the (M, N) rows are loaded: the input keeps their layout (R5)
ROWS = """
@launch(reqntid = (128, 1, 1))
kernel rows(a: Array[f32, 2], b: Array[f32, 1], y: Array[f32, 1], c: f32,
            const M: i32 = 32, const N: i32 = 512) {
    let t = load(a, index = (bid(0), 0), shape = (M, N), padding = 0.0);
    let z = load(b, index = (0,), shape = (N,), padding = 0.0);
    store(y, index = (bid(0),), tile = OP(t * expand_dims(z, 0) + c, axis = 1));
}
"""


@pytest.mark.parametrize("op", ["sum", "max", "prod"])
def test_same_bits_as_the_tile_kept_whole(op, monkeypatch):
    """Fused in the layout the input has written out, the combines and their order are the
    tree's: bit for bit the kernel with fusion switched off, and NumPy within rounding."""
    rng = np.random.default_rng(3)
    args = {"a": (rng.standard_normal((80, 512)) * 1e-3).astype(np.float32),
            "b": (rng.random(512) + 0.5).astype(np.float32),
            "y": np.zeros(80, np.float32), "c": np.float32(1.0)}
    src = ROWS.replace("OP", op)
    res = compile_for(src, "rows", args)
    fused, ref = run(res, "rows", args, (3,))
    p = args["a"].astype(np.float64) * args["b"] + 1.0
    np.testing.assert_allclose(ref["y"], getattr(np, op)(p, axis=1), rtol=2e-5)
    monkeypatch.setattr(kernel_plan, "plan_fusion", lambda *a: FusionPlan())
    plain = run(compile_for(src, "rows", args), "rows", args, (3,))[0]
    assert fused["y"].tobytes() == plain["y"].tobytes()
    assert res.codegen.ptx != compile_for(src, "rows", args).codegen.ptx   # it was fused


def test_fused_reduction_inside_a_loop():
    n = 3000
    x = np.random.default_rng(1).integers(-3, 70, n).astype(np.int32)
    args = {"x": x, "counts": np.zeros(64, np.int32)}
    res = compile_for(LOOP, "hist_loop", args)
    emu, ref = run(res, "hist_loop", args, (1,))
    want = np.bincount(x[(x >= 0) & (x < 64)], minlength=64)
    np.testing.assert_array_equal(ref["counts"], want)
    np.testing.assert_array_equal(emu["counts"], want)


STORE = """
@launch(reqntid = (128, 1, 1))
kernel outer_store(a: Array[f32, 1], b: Array[f32, 1], y: Array[f32, 2],
                   const M: i32 = 512, const N: i32 = 64) {
    let x = load(a, index = (bid(0),), shape = (M,), padding = 0.0);
    let z = load(b, index = (0,), shape = (N,), padding = 0.0);
    store(y, index = (bid(0), 0), tile = expand_dims(x, 1) * expand_dims(z, 0) + 1.0);
}
"""


@pytest.mark.parametrize("rows,cols", [(1024, 64), (1000, 64), (1024, 50)])
def test_stored_outer_product_512x64_at_128_threads(rows, cols):
    """256 f32 a thread as written: stored one vector at a time; a ragged last block (rows)
    or ragged rows (cols) take the predicated edge path."""
    rng = np.random.default_rng(rows + cols)
    args = {"a": rng.standard_normal(rows).astype(np.float32),
            "b": rng.standard_normal(cols).astype(np.float32),
            "y": np.full((rows, cols), 7.0, np.float32)}
    res = compile_for(STORE, "outer_store", args)
    assert not has_local(res.codegen.ptx)
    emu, ref = run(res, "outer_store", args, (_blocks(rows, 512),))
    # the interpreter rounds the product, then the sum (NumPy's f32 arithmetic is the same);
    # the compiled kernel's default precision mode contracts them into one fma
    # (docs/numerics.md, "Contraction")
    a, b = args["a"][:, None], args["b"][None, :]
    np.testing.assert_array_equal(ref["y"], a * b + np.float32(1.0))
    np.testing.assert_array_equal(emu["y"], fused_multiply_add(a, b, np.float32(1.0),
                                                               np.float32))


MEMBERS = """
@launch(reqntid = (128, 1, 1))
kernel members(x: Array[i32, 1], a: Array[f32, 1], b: Array[f32, 1], counts: Array[i32, 1],
               y: Array[f32, 1], d: f32) {
    let k = load(x, index = (bid(0),), shape = (512,), padding = -1);
    let wide = broadcast_to(expand_dims(k, 1), (512, 64));
    let hit = astype(wide == expand_dims(arange(64), 0), i32) * 2;
    store(counts, index = (bid(0),), tile = sum(hit, axis = 0));
    let u = load(a, index = (bid(0),), shape = (64,), padding = 0.0);
    let v = load(b, index = (0,), shape = (512,), padding = 0.0);
    store(y, index = (bid(0),), tile = sum((expand_dims(u, 1) - expand_dims(v, 0)) / d,
                                           axis = 1));
}
"""


@pytest.mark.parametrize("precision", ["fast", "ieee"])
def test_broadcast_to_astype_and_a_shared_divisor(precision):
    """`broadcast_to`, `astype` and a scalar constant as members; `/` by a scalar leaf: one
    reciprocal and a multiply per element in the fast mode, a division each in ieee (as
    elementwise.py); both within rounding of NumPy."""
    rng = np.random.default_rng(5)
    x = rng.integers(-2, 66, 512 * 2).astype(np.int32)
    args = {"x": x, "a": rng.standard_normal(128).astype(np.float32),
            "b": rng.standard_normal(512).astype(np.float32),
            "counts": np.zeros(128, np.int32), "y": np.zeros(128, np.float32),
            "d": np.float32(3.0)}
    src = MEMBERS.replace("@launch(", f'@launch(precision = "{precision}", ')
    res = compile_for(src, "members", args)
    assert ("div.rn.f32" in res.codegen.ptx) == (precision == "ieee")
    emu, ref = run(res, "members", args, (2,))
    want = 2 * _per_block(x, 512, 64).reshape(-1)
    want_y = ((np.float64(args["a"])[:, None] - args["b"][None, :]) / 3.0).sum(axis=1)
    for got in (emu, ref):
        np.testing.assert_array_equal(got["counts"], want)
        np.testing.assert_allclose(got["y"], want_y, rtol=1e-4, atol=1e-4)


def test_a_block_of_96_threads():
    """Layouts use 64 of 96 threads; the other 32 repeat them and are gated off the side
    effects (exact mode): the fused sum's and the fused store's results are unchanged."""
    src = HIST.replace("reqntid = (128, 1, 1)", "reqntid = (96, 1, 1)") \
        .replace("TILE: i32 = 512", "TILE: i32 = 256")
    n = 700
    x = np.random.default_rng(96).integers(-5, 69, n).astype(np.int32)
    args = {"x": x, "counts": np.zeros((_blocks(n, 256), 64), np.int32)}
    res = compile_for(src, "hist", args)
    emu, ref = run(res, "hist", args, (_blocks(n, 256),))
    want = _per_block(x, 256, 64)
    np.testing.assert_array_equal(ref["counts"], want)
    np.testing.assert_array_equal(emu["counts"], want)

    st = STORE.replace("reqntid = (128, 1, 1)", "reqntid = (96, 1, 1)") \
        .replace("M: i32 = 512", "M: i32 = 256")
    sargs = {"a": np.arange(300, dtype=np.float32), "b": np.arange(64, dtype=np.float32),
             "y": np.zeros((300, 64), np.float32)}
    emu, ref = run(compile_for(st, "outer_store", sargs), "outer_store", sargs, (2,))
    want = sargs["a"][:, None] * sargs["b"][None, :] + np.float32(1.0)
    np.testing.assert_array_equal(ref["y"], want)
    np.testing.assert_array_equal(emu["y"], want)


SHAPES = """
@launch(reqntid = (128, 1, 1))
kernel shapes(x: Array[i32, 1], inside: Array[i32, 1], kept: Array[i32, 2],
              cube: Array[f32, 2]) {
    let k = load(x, index = (bid(0),), shape = (512,), padding = -1);
    let hits = expand_dims(k, 1) == expand_dims(arange(64), 0);
    let atleast = expand_dims(k, 1) >= expand_dims(arange(64), 0);
    // over every axis: the keys in [0, 64)
    store(inside, index = (bid(0),), tile = expand_dims(sum(hits), 0));
    // keepdims: a (1, 64) row of the keys at least each bin
    store(kept, index = (bid(0), 0), tile = sum(atleast, axis = 0, keepdims = true));
    // three axes, the middle one reduced, made of (8, 1, 1), (1, 64, 1) and (1, 1, 32)
    let a = astype(expand_dims(expand_dims(arange(8), 1), 2), f32);
    let b = astype(expand_dims(expand_dims(arange(64), 0), 2), f32);
    let c = astype(expand_dims(expand_dims(arange(32), 0), 1), f32);
    store(cube, index = (bid(0), 0), tile = max(a * 64.0 - b + c * 0.5, axis = 1));
}
"""


def test_all_axes_keepdims_and_three_axes():
    n = 1000
    x = np.random.default_rng(7).integers(-9, 73, n).astype(np.int32)
    args = {"x": x, "inside": np.zeros(2, np.int32), "kept": np.zeros((2, 64), np.int32),
            "cube": np.zeros((16, 32), np.float32)}
    res = compile_for(SHAPES, "shapes", args)
    ((_, plan),) = kernel_plans(res.ir, CompileOptions())
    assert [g.consumer.name for g in plan.fusion.groups] == ["sum", "sum", "max"]
    emu, ref = run(res, "shapes", args, (2,))
    per = _per_block(x, 512, 64)
    i, j, m = np.ogrid[:8, :64, :32]
    cube = (i * 64.0 - j + m * 0.5).max(axis=1).astype(np.float32)
    atleast = np.array([[(x[s:s + 512] >= b).sum() for b in range(64)] for s in (0, 512)])
    for got in (emu, ref):
        np.testing.assert_array_equal(got["inside"], per.sum(axis=1))
        np.testing.assert_array_equal(got["kept"], atleast)
        np.testing.assert_array_equal(got["cube"], np.concatenate([cube, cube]))
