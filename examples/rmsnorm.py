#!/usr/bin/env python3
"""Run rmsnorm.tile on rows of uneven length and check it against NumPy."""

import sys

import numpy as np

from example_support import Example


def main(argv=None) -> int:
    ex = Example("rmsnorm.tile", __doc__.splitlines()[0], argv)
    rows, cols, eps = 7, 300, 1e-6
    x_h = ex.rng.standard_normal((rows, cols)).astype(np.float32)
    w_h = ex.rng.standard_normal(cols).astype(np.float32)
    x, w, y = ex.put(x_h), ex.put(w_h), ex.put(np.zeros((rows, cols), np.float32))
    ex.module.rmsnorm[(rows,)](x, w, y, np.float32(eps), N=512)
    x64 = x_h.astype(np.float64)
    want = x64 / np.sqrt((x64 ** 2).mean(axis=1, keepdims=True) + eps) * w_h
    assert np.allclose(ex.get(y), want, rtol=1e-5, atol=1e-6), "rmsnorm differs from NumPy"
    return ex.done(f"rmsnorm {rows}x{cols}")


if __name__ == "__main__":
    sys.exit(main())
