#!/usr/bin/env python3
"""Run softmax_rows.tile (R rows per block) on a row count that is not a multiple of R and
check it against NumPy."""

import sys

import numpy as np

from example_support import Example


def main(argv=None) -> int:
    ex = Example("softmax_rows.tile", __doc__.splitlines()[0], argv)
    rows, cols, r = 10, 200, 4
    x_h = ex.rng.standard_normal((rows, cols)).astype(np.float32)
    x, y = ex.put(x_h), ex.put(np.zeros((rows, cols), np.float32))
    ex.module.softmax_rows[(-(-rows // r),)](x, y, R=r, N=256)
    e = np.exp(x_h.astype(np.float64) - x_h.max(axis=1, keepdims=True))
    want = e / e.sum(axis=1, keepdims=True)
    assert np.allclose(ex.get(y), want, rtol=1e-5, atol=1e-7), "softmax differs from NumPy"
    return ex.done(f"softmax {rows}x{cols}, {r} rows per block")


if __name__ == "__main__":
    sys.exit(main())
