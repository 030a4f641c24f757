#!/usr/bin/env python3
"""Run cumsum.tile (rows of several chunks) and check it against NumPy."""

import sys

import numpy as np

from example_support import Example


def main(argv=None) -> int:
    ex = Example("cumsum.tile", __doc__.splitlines()[0], argv)
    rows, cols = 4, 700
    x_h = ex.rng.integers(-8, 9, (rows, cols)).astype(np.float32)   # exact sums in f32
    x, y = ex.put(x_h), ex.put(np.zeros((rows, cols), np.float32))
    ex.module.cumsum_rows[(rows,)](x, y, BN=256)
    assert np.array_equal(ex.get(y), np.cumsum(x_h, axis=1)), "cumsum differs from NumPy"
    return ex.done(f"cumsum {rows}x{cols}")


if __name__ == "__main__":
    sys.exit(main())
