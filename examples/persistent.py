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
    want = np.float32(2.5) * x_h + y_h
    assert np.array_equal(ex.get(out), want), "persistent axpy differs from NumPy"
    return ex.done(f"persistent axpy, {n} elements over {blocks} blocks")


if __name__ == "__main__":
    sys.exit(main())
