#!/usr/bin/env python3
"""Run softmax.tile (one row per block) on rows of uneven length and check it against
NumPy."""

import sys

import numpy as np

from example_support import Example


def main(argv=None) -> int:
    ex = Example("softmax.tile", __doc__.splitlines()[0], argv)
    rows, cols = 9, 777
    x_h = (ex.rng.standard_normal((rows, cols)) * 10).astype(np.float32)
    x, y = ex.put(x_h), ex.put(np.zeros((rows, cols), np.float32))
    ex.module.softmax_rows[(rows,)](x, y, N=1024)          # N covers a row
    e = np.exp(x_h.astype(np.float64) - x_h.max(axis=1, keepdims=True))
    want = e / e.sum(axis=1, keepdims=True)
    assert np.allclose(ex.get(y), want, rtol=1e-5, atol=1e-7), "softmax differs from NumPy"
    return ex.done(f"softmax {rows}x{cols}")


if __name__ == "__main__":
    sys.exit(main())
