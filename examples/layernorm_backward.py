#!/usr/bin/env python3
"""Run layernorm_backward.tile and check dx, dw and db against NumPy's gradients (derived by
hand, and checked here against finite differences of the forward pass)."""

import sys

import numpy as np

from example_support import Example


def forward(x, w, b, eps):
    mean = x.mean(axis=1, keepdims=True)
    return (x - mean) / np.sqrt(x.var(axis=1, keepdims=True) + eps) * w + b


def main(argv=None) -> int:
    ex = Example("layernorm_backward.tile", __doc__.splitlines()[0], argv)
    rows, cols, eps = 6, 200, 1e-5
    x_h = ex.rng.standard_normal((rows, cols)).astype(np.float32)
    w_h = ex.rng.standard_normal(cols).astype(np.float32)
    dy_h = ex.rng.standard_normal((rows, cols)).astype(np.float32)
    x, w, dy = ex.put(x_h), ex.put(w_h), ex.put(dy_h)
    dx = ex.put(np.zeros((rows, cols), np.float32))
    dw, db = ex.put(np.zeros(cols, np.float32)), ex.put(np.zeros(cols, np.float32))
    ex.module.layernorm_backward[(rows,)](x, w, dy, dx, dw, db, np.float32(eps), N=256)

    x64, w64, g64 = x_h.astype(np.float64), w_h.astype(np.float64), dy_h.astype(np.float64)
    rstd = 1 / np.sqrt(x64.var(axis=1, keepdims=True) + eps)
    xhat = (x64 - x64.mean(axis=1, keepdims=True)) * rstd
    g = g64 * w64
    dx_want = rstd * (g - (g * xhat).mean(axis=1, keepdims=True) * xhat
                      - g.mean(axis=1, keepdims=True))
    # the hand-derived dx against a finite difference of sum(dy * y) for one element
    h = 1e-6
    xp = x64.copy()
    xp[2, 7] += h
    fd = ((g64 * forward(xp, w64, 0, eps)).sum() - (g64 * forward(x64, w64, 0, eps)).sum()) / h
    assert abs(fd - dx_want[2, 7]) < 1e-4 * max(1, abs(fd))
    assert np.allclose(ex.get(dx), dx_want, rtol=1e-4, atol=1e-5), "dx differs from NumPy"
    assert np.allclose(ex.get(dw), (g64 * xhat).sum(axis=0), rtol=1e-4, atol=1e-4), \
        "dw differs from NumPy"
    assert np.allclose(ex.get(db), g64.sum(axis=0), rtol=1e-4, atol=1e-4), "db differs"
    return ex.done(f"layernorm backward {rows}x{cols}")


if __name__ == "__main__":
    sys.exit(main())
