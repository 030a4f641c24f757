"""On a real GPU (skipped without one): the precision modes' documented error bounds
(docs/numerics.md) hold for the hardware's own `.approx` instructions, which the emulator
evaluates exactly — so this is where the hardware's share of each bound is checked. The exact
values are correctly rounded to float64 (tests/correctly_rounded.py), not NumPy's, whose
transcendentals vary between CPUs."""

from __future__ import annotations

import numpy as np
import pytest

import tilelang
from correctly_rounded import correctly_rounded

pytestmark = pytest.mark.gpu

SRC = """
kernel k(x: Array[f32, 1], y: Array[f32, 1], z: Array[f32, 1]) {
    let t = load(x, index = (bid(0),), shape = (1024,), padding = 1.0);
    let u = load(y, index = (bid(0),), shape = (1024,), padding = 1.0);
    store(z, index = (bid(0),), tile = OP);
}
"""
# op -> (expression, input range)
OPS = {
    "exp": ("exp(t)", (-87.0, 87.0)),
    "exp2": ("exp2(t)", (-125.0, 125.0)),
    "log": ("log(t)", (1e-30, 1e30)),
    "log2": ("log2(t)", (1e-30, 1e30)),
    "sin": ("sin(t)", (-100 * np.pi, 100 * np.pi)),
    "cos": ("cos(t)", (-100 * np.pi, 100 * np.pi)),
    "tanh": ("tanh(t)", (-10.0, 10.0)),
    "rsqrt": ("rsqrt(t)", (1e-30, 1e30)),
    "sigmoid": ("sigmoid(t)", (-80.0, 80.0)),
    "/": ("t / u", (-1e3, 1e3)),
}


def _bound(op, mode, x, exact):
    ax, ae = np.abs(x.astype(np.float64)), np.abs(exact)
    approx = op in {"ieee": (), "fast": ("exp", "exp2", "sigmoid", "rsqrt", "/"),
                    "approx": tuple(OPS)}[mode]
    ulp = np.abs(np.spacing(exact.astype(np.float32))).astype(np.float64)
    if not approx:
        return (0.5 if op == "/" else 3) * ulp
    if op in ("exp", "sigmoid"):
        return (2.0 ** -22 + ax * 2.0 ** -23 + 2.0 ** -23) * ae
    if op in ("exp2", "rsqrt"):
        return 2.0 ** -22 * ae + ulp
    if op == "/":
        return 2 * ulp
    if op in ("log", "log2"):
        return 2.0 ** -22 + 2.0 ** -22 * ae
    if op in ("sin", "cos"):
        return np.full_like(ae, 2.0 ** -20.5)
    return 2.0 ** -10.98 * ae


@pytest.fixture(autouse=True)
def cache_in_tmp(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))


@pytest.mark.parametrize("mode", ["ieee", "fast", "approx"])
@pytest.mark.parametrize("op", list(OPS))
def test_hardware_within_documented_bounds(tmp_path, op, mode):
    expr, (lo, hi) = OPS[op]
    src = tmp_path / "k.tile"
    src.write_text(SRC.replace("OP", expr))
    mod = tilelang.compile(str(src), backend="cuda", precision=mode)
    rng = np.random.default_rng(1)
    n = 8192
    if lo > 0:
        x = np.exp(rng.uniform(np.log(lo), np.log(hi), n)).astype(np.float32)
    else:
        x = rng.uniform(lo, hi, n).astype(np.float32)
    y = (rng.uniform(0.5, 2.0, n) * rng.choice([-1, 1], n)).astype(np.float32)
    dz = mod.empty(n, "f32")
    mod.k[n // 1024](mod.to_device(x), mod.to_device(y), dz)
    mod.backend.synchronize()
    got = dz.numpy().astype(np.float64)
    with np.errstate(all="ignore"):
        exact = (x.astype(np.float64) / y if op == "/"
                 else correctly_rounded(op, [x], np.float64))
    normal = np.isfinite(exact) & (np.abs(exact) >= 2.0 ** -126) & (np.abs(exact) < 2.0 ** 127)
    err = np.abs(got - exact)
    bad = normal & ~(err <= _bound(op, mode, x, exact))
    assert not bad.any(), (op, mode, x[bad][:4], got[bad][:4], exact[bad][:4])
