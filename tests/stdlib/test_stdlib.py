"""The standard library (stdlib/std/*.tile, docs/stdlib.md): every function on the reference
interpreter and on the emulator's run of the generated PTX, against NumPy."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tilelang.sema.builtins_random import randint4x, uniform as ref_uniform

from stdlib_support import compile_text, run_emulator, run_interp

RUNNERS = pytest.mark.parametrize("runner", [run_interp, run_emulator],
                                  ids=["interp", "emulator"])

MATH = """
import std.math;
kernel k(x: Array[f32, 1], y: Array[f32, 2]) {
    let t = load(x, index = (bid(0),), shape = (256,), padding = 0.0);
    store(y, index = (0, bid(0)), tile = expand_dims(math.gelu_exact(t), 0));
    store(y, index = (1, bid(0)), tile = expand_dims(math.softplus(t), 0));
    store(y, index = (2, bid(0)), tile = expand_dims(math.mish(t), 0));
    store(y, index = (3, bid(0)), tile = expand_dims(math.leaky_relu(t, 0.1), 0));
    store(y, index = (4, bid(0)), tile = expand_dims(math.elu(t, 1.5), 0));
    store(y, index = (5, bid(0)), tile = expand_dims(math.hard_sigmoid(t), 0));
    store(y, index = (6, bid(0)), tile = expand_dims(math.lerp(t, t * t, 0.25), 0));
    store(y, index = (7, bid(0)), tile = expand_dims(math.gelu(t), 0));
    store(y, index = (8, bid(0)), tile = expand_dims(math.silu(t), 0));
    store(y, index = (9, bid(0)), tile = expand_dims(math.clamp(t, -1.0, 2.0), 0));
}
"""


def _math_refs(x):
    x = x.astype(np.float64)
    erf = np.vectorize(math.erf)
    sp = np.logaddexp(0.0, x)
    return [0.5 * x * (1 + erf(x / math.sqrt(2))), sp, x * np.tanh(sp),
            np.where(x > 0, x, 0.1 * x), np.where(x > 0, x, 1.5 * np.expm1(x)),
            np.clip(x / 6 + 0.5, 0, 1), x + 0.25 * (x * x - x),
            0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))),
            x / (1 + np.exp(-x)), np.clip(x, -1, 2)]


@RUNNERS
def test_math(runner):
    n = 300
    x = (np.random.default_rng(1).standard_normal(n) * 4).astype(np.float32)
    x[:4] = [0.0, -0.0, 30.0, -30.0]
    y = np.zeros((10, n), np.float32)
    res = compile_text(MATH, "m.tile")
    runner(res, "k", {"x": x, "y": y}, (2,))
    for i, want in enumerate(_math_refs(x)):
        np.testing.assert_allclose(y[i], want, rtol=2e-6, atol=2e-6, err_msg=f"row {i}")


NN = """
import std.nn;
kernel k(x: Array[f32, 2], sm: Array[f32, 2], lsm: Array[f32, 2], ln: Array[f32, 2],
         rms: Array[f32, 2], w: Array[f32, 1], b: Array[f32, 1], tg: Array[i32, 1],
         st: Array[f32, 2]) {
    let r = bid(0);
    nn.softmax_row(x, sm, r, 64);
    nn.log_softmax_row(x, lsm, r, 64);
    nn.layernorm_row(x, ln, w, b, r, 1e-5, 64);
    nn.rmsnorm_row(x, rms, w, r, 1e-5, 64);
    let s = nn.row_welford(x, r, 64);
    store(st, offset = (r, 0), tile = s[0]);
    store(st, offset = (r, 1), tile = s[1]);
    let t = load(tg, offset = (r,), shape = (1,)).reshape(());
    store(st, offset = (r, 2), tile = nn.cross_entropy_row(x, r, t, 64));
    store(st, offset = (r, 3), tile = nn.row_logsumexp(x, r, 64));
}
"""


@RUNNERS
@pytest.mark.parametrize("cols", [200, 64, 1])
def test_nn(runner, cols):
    rows = 3
    rng = np.random.default_rng(cols)
    x = (rng.standard_normal((rows, cols)) * 3 + 100).astype(np.float32)  # a large mean
    w, b = rng.standard_normal(cols).astype(np.float32), rng.standard_normal(cols).astype(np.float32)
    tg = rng.integers(0, cols, rows).astype(np.int32)
    out = {k: np.zeros((rows, cols), np.float32) for k in ("sm", "lsm", "ln", "rms")}
    st = np.zeros((rows, 4), np.float32)
    res = compile_text(NN, "nn.tile")
    runner(res, "k", {"x": x, **out, "w": w, "b": b, "tg": tg, "st": st}, (rows,))
    x64 = x.astype(np.float64)
    lse = np.log(np.exp(x64 - x64.max(1, keepdims=True)).sum(1, keepdims=True)) + \
        x64.max(1, keepdims=True)
    mean, var = x64.mean(1, keepdims=True), x64.var(1, keepdims=True)
    np.testing.assert_allclose(out["sm"], np.exp(x64 - lse), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(out["lsm"], x64 - lse, rtol=1e-5, atol=2e-5)
    np.testing.assert_allclose(out["ln"], (x64 - mean) / np.sqrt(var + 1e-5) * w + b,
                               rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(out["rms"], x64 / np.sqrt((x64 ** 2).mean(1, keepdims=True)
                                                         + 1e-5) * w, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(st[:, 0], mean[:, 0], rtol=1e-6)
    np.testing.assert_allclose(st[:, 1], var[:, 0] * cols, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(st[:, 2], lse[:, 0] - x64[np.arange(rows), tg], rtol=1e-5,
                               atol=2e-5)
    np.testing.assert_allclose(st[:, 3], lse[:, 0], rtol=1e-6)


RANDOM = """
import std.random;
kernel k(seed: i64, y: Array[f32, 2], keep: Array[i32, 1]) {
    let o = bid(0) * 256 + arange(256);
    store(y, index = (0, bid(0)), tile = expand_dims(random.uniform(seed, o, -2.0, 3.0), 0));
    store(y, index = (1, bid(0)), tile = expand_dims(random.normal(seed, o, 1.0, 0.5), 0));
    store(y, index = (2, bid(0)), tile = expand_dims(
        random.dropout(astype(o, f32) + 1.0, 0.25, seed, o), 0));
    store(keep, index = (bid(0),), tile = astype(random.bernoulli(seed, o, 0.3), i32));
}
"""


@RUNNERS
def test_random(runner):
    n, seed = 512, 99
    y, keep = np.zeros((3, n), np.float32), np.zeros(n, np.int32)
    res = compile_text(RANDOM, "r.tile")
    runner(res, "k", {"seed": np.int64(seed), "y": y, "keep": keep}, (n // 256,))
    o = np.arange(n)
    w = randint4x(seed, o.astype(np.int32))
    u = ref_uniform(w[0]).astype(np.float64)
    np.testing.assert_allclose(y[0], -2 + 5 * u, rtol=1e-6, atol=1e-6)
    u1 = np.maximum(u, 1e-7)
    z = np.sqrt(-2 * np.log(u1)) * np.cos(2 * np.pi * ref_uniform(w[1]))
    np.testing.assert_allclose(y[1], 1 + 0.5 * z, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(y[2], np.where(u > 0.25, (o + 1) / 0.75, 0), rtol=1e-6)
    np.testing.assert_array_equal(keep, (u < 0.3).astype(np.int32))
    assert 0.2 < (y[2] == 0).mean() < 0.3


GRID = """
import std.grid;
kernel k(out: Array[i32, 2], const NM: i32 = 5, const NN: i32 = 3, const G: i32 = 2) {
    let p = bid(0);
    let g = grid.grouped(p, NM, NN, G);
    let r = grid.row_major(p, NN);
    store(out, offset = (p, 0), tile = full((1, 1), g[0], i32));
    store(out, offset = (p, 1), tile = full((1, 1), g[1], i32));
    store(out, offset = (p, 2), tile = full((1, 1), r[0], i32));
    store(out, offset = (p, 3), tile = full((1, 1), r[1], i32));
    store(out, offset = (p, 4), tile = full((1, 1), grid.persistent_count(22), i32));
    store(out, offset = (p, 5), tile = full((1, 1), grid.tiles(1000, 128), i32));
}
"""


def _grouped(pid, num_m, num_n, group_m):  # Triton's matmul tutorial
    in_group = group_m * num_n
    first_m = (pid // in_group) * group_m
    size_m = min(num_m - first_m, group_m)
    return first_m + (pid % in_group) % size_m, (pid % in_group) // size_m


@RUNNERS
def test_grid(runner):
    nm, nn_, g = 5, 3, 2
    out = np.zeros((nm * nn_, 6), np.int32)
    res = compile_text(GRID, "g.tile")
    runner(res, "k", {"out": out}, (nm * nn_,))
    for p in range(nm * nn_):
        assert tuple(out[p, :2]) == _grouped(p, nm, nn_, g)
        assert tuple(out[p, 2:4]) == (p // nn_, p % nn_)
        assert out[p, 4] == len(range(p, 22, nm * nn_))
        assert out[p, 5] == 8
    # every output tile is visited once
    assert len({tuple(r) for r in out[:, :2]}) == nm * nn_
