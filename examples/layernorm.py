#!/usr/bin/env python3
"""Run layernorm.tile (one row per block) and check it against NumPy."""

import sys

import numpy as np

from example_support import Example


def main(argv=None) -> int:
    ex = Example("layernorm.tile", __doc__.splitlines()[0], argv)
    rows, cols, eps = 6, 200, 1e-5
    x_h = (ex.rng.standard_normal((rows, cols)) + 5).astype(np.float32)
    w_h = ex.rng.standard_normal(cols).astype(np.float32)
    b_h = ex.rng.standard_normal(cols).astype(np.float32)
    x, w, b = ex.put(x_h), ex.put(w_h), ex.put(b_h)
    y = ex.put(np.zeros((rows, cols), np.float32))
    ex.module.layernorm[(rows,)](x, w, b, y, np.float32(eps), N=256)
    x64 = x_h.astype(np.float64)
    mean, var = x64.mean(axis=1, keepdims=True), x64.var(axis=1, keepdims=True)
    want = (x64 - mean) / np.sqrt(var + eps) * w_h + b_h
    assert np.allclose(ex.get(y), want, rtol=1e-4, atol=1e-5), "layernorm differs from NumPy"
    return ex.done(f"layernorm {rows}x{cols}")


if __name__ == "__main__":
    sys.exit(main())
