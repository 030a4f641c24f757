#!/usr/bin/env python3
"""Run persistent.tile with fewer blocks than tiles and check it against NumPy."""

import sys

import numpy as np

from example_support import Example


def main(argv=None) -> int:
    ex = Example("persistent.tile", __doc__.splitlines()[0], argv)
    n, blocks = 20_000, 3                      # 20 tiles of 1,024 over 3 blocks
    x_h = ex.rng.standard_normal(n).astype(np.float32)
    y_h = ex.rng.standard_normal(n).astype(np.float32)
    x, y, out = ex.put(x_h), ex.put(y_h), ex.put(np.zeros(n, np.float32))
    ex.module.axpy_persistent[(blocks,)](x, y, out, np.float32(2.5), TILE=1024)
    # the default precision mode contracts alpha * x + y into one fma (docs/numerics.md,
    # Contraction): one rounding of the exact value. In float64 the product (2.5 times a
    # 24-bit significand) is exact, and so is the sum wherever x * 2.5 and y are within 2^26
    # of each other in magnitude, as standard normal samples are (checked: Fast2Sum's error)
    p, q = np.float64(2.5) * x_h, y_h.astype(np.float64)
    s = p + q
    assert np.all(np.where(np.abs(p) >= np.abs(q), (s - p) - q, (s - q) - p) == 0)
    want = s.astype(np.float32)
    assert np.array_equal(ex.get(out), want), "persistent axpy differs from NumPy"
    return ex.done(f"persistent axpy, {n} elements over {blocks} blocks")


if __name__ == "__main__":
    sys.exit(main())
