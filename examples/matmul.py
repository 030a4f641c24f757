#!/usr/bin/env python3
"""Run matmul.tile (f16 inputs, f32 accumulation; clusters of two blocks) with small tiles and
check it against NumPy."""

import sys

import numpy as np

from example_support import Example


def main(argv=None) -> int:
    ex = Example("matmul.tile", __doc__.splitlines()[0], argv)
    m, n, k, bm, bn, bk = 128, 96, 80, 64, 64, 32
    a_h = ex.rng.standard_normal((m, k)).astype(np.float16)
    b_h = ex.rng.standard_normal((k, n)).astype(np.float16)
    a, b, c = ex.put(a_h), ex.put(b_h), ex.put(np.zeros((m, n), np.float32))
    grid = (-(-m // bm), -(-n // bn))                  # x is a multiple of the cluster's 2
    ex.module.matmul[grid](a, b, c, BM=bm, BN=bn, BK=bk)
    want = a_h.astype(np.float64) @ b_h.astype(np.float64)
    assert np.allclose(ex.get(c), want, rtol=1e-3, atol=1e-3), "matmul differs from NumPy"
    return ex.done(f"matmul {m}x{k} @ {k}x{n}")


if __name__ == "__main__":
    sys.exit(main())
