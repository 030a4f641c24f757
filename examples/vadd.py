#!/usr/bin/env python3
"""Run vadd.tile on a length that is not a multiple of the tile and check it against NumPy."""

import sys

import numpy as np

from example_support import Example


def main(argv=None) -> int:
    ex = Example("vadd.tile", __doc__.splitlines()[0], argv)
    n = 10_007
    a_h = ex.rng.standard_normal(n).astype(np.float32)
    b_h = ex.rng.standard_normal(n).astype(np.float32)
    a, b, c = ex.put(a_h), ex.put(b_h), ex.put(np.zeros(n, np.float32))
    ex.module.vadd[lambda meta: (-(-n // meta["TILE"]),)](a, b, c, TILE=1024)
    assert np.array_equal(ex.get(c), a_h + b_h), "vadd differs from NumPy"
    return ex.done(f"vadd of {n} elements")


if __name__ == "__main__":
    sys.exit(main())
