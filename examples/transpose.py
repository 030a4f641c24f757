#!/usr/bin/env python3
"""Run transpose.tile on a matrix that is not a multiple of the tile and check it."""

import sys

import numpy as np

from example_support import Example


def main(argv=None) -> int:
    ex = Example("transpose.tile", __doc__.splitlines()[0], argv)
    m, n, bm, bn = 100, 70, 32, 32
    x_h = ex.rng.standard_normal((m, n)).astype(np.float32)
    x, y = ex.put(x_h), ex.put(np.zeros((n, m), np.float32))
    ex.module.transpose_2d[(-(-m // bm), -(-n // bn))](x, y, BM=bm, BN=bn)
    assert np.array_equal(ex.get(y), x_h.T), "transpose differs from NumPy"
    return ex.done(f"transpose {m}x{n}")


if __name__ == "__main__":
    sys.exit(main())
