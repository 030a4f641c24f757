#!/usr/bin/env python3
"""Run batched_matmul.tile and check it against NumPy's batched @."""

import sys

import numpy as np

from example_support import Example


def main(argv=None) -> int:
    ex = Example("batched_matmul.tile", __doc__.splitlines()[0], argv)
    z, m, n, k = 3, 64, 96, 40
    a_h = ex.rng.standard_normal((z, m, k)).astype(np.float16)
    b_h = ex.rng.standard_normal((z, k, n)).astype(np.float16)
    a, b, c = ex.put(a_h), ex.put(b_h), ex.put(np.zeros((z, m, n), np.float32))
    ex.module.bmm[(-(-m // 64), -(-n // 64), z)](a, b, c)
    want = a_h.astype(np.float64) @ b_h.astype(np.float64)
    assert np.allclose(ex.get(c), want, rtol=1e-3, atol=1e-3), "bmm differs from NumPy"
    return ex.done(f"batched matmul {z} x ({m}x{k} @ {k}x{n})")


if __name__ == "__main__":
    sys.exit(main())
