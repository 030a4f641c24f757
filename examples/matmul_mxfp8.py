#!/usr/bin/env python3
"""Run matmul_mxfp8.tile (f8e4m3 elements with one ue8m0 scale per 32 along K) with small tiles
and check it against NumPy: the values through ml_dtypes, the product in float64."""

import sys

import ml_dtypes
import numpy as np

from example_support import Example


def main(argv=None) -> int:
    ex = Example("matmul_mxfp8.tile", __doc__.splitlines()[0], argv)
    m, n, k, bm, bn, bk = 96, 80, 96, 64, 64, 64          # ragged in M, N and K
    a_h = (ex.rng.standard_normal((m, k)) * 8).astype(ml_dtypes.float8_e4m3fn)
    b_h = (ex.rng.standard_normal((k, n)) * 8).astype(ml_dtypes.float8_e4m3fn)
    # scales 2^-8 .. 2^7 (codes 119 .. 134)
    sa_h = ex.rng.integers(119, 135, (m, k // 32)).astype(np.uint8).view(ml_dtypes.float8_e8m0fnu)
    sb_h = ex.rng.integers(119, 135, (k // 32, n)).astype(np.uint8).view(ml_dtypes.float8_e8m0fnu)
    a, sa, b, sb = (ex.put(x) for x in (a_h, sa_h, b_h, sb_h))
    c = ex.put(np.zeros((m, n), np.float32))
    ex.module.matmul_mxfp8[(-(-m // bm), -(-n // bn))](a, sa, b, sb, c, BM=bm, BN=bn, BK=bk)
    av = a_h.astype(np.float64) * np.repeat(sa_h.astype(np.float64), 32, axis=1)
    bv = b_h.astype(np.float64) * np.repeat(sb_h.astype(np.float64), 32, axis=0)
    want = av @ bv
    # each element times its scale is exact in bf16 and each product exact in f32: only the
    # f32 sums round, at most K roundings of 2^-24 relative to the sum of |terms|
    bound = k * 2.0 ** -24 * (np.abs(av) @ np.abs(bv))
    assert np.all(np.abs(ex.get(c) - want) <= bound), "MXFP8 matmul differs from NumPy"
    return ex.done(f"MXFP8 matmul {m}x{k} @ {k}x{n}")


if __name__ == "__main__":
    sys.exit(main())
