#!/usr/bin/env python3
"""Run matmul_nvfp4.tile (f4e2m1 elements packed two a byte, one f8e4m3 scale per 16 along K)
with small tiles and check it against NumPy: the values through ml_dtypes, the product in
float64."""

import sys

import ml_dtypes
import numpy as np

import tilelang
from example_support import Example


def main(argv=None) -> int:
    ex = Example("matmul_nvfp4.tile", __doc__.splitlines()[0], argv)
    m, n, k, bm, bn, bk = 96, 80, 80, 64, 64, 64          # ragged in M, N and K
    a_h = (ex.rng.standard_normal((m, k)) * 2).clip(-6, 6).astype(ml_dtypes.float4_e2m1fn)
    b_h = (ex.rng.standard_normal((k, n)) * 2).clip(-6, 6).astype(ml_dtypes.float4_e2m1fn)
    sa_h = ex.rng.uniform(0.01, 400, (m, k // 16)).astype(ml_dtypes.float8_e4m3fn)
    sb_h = ex.rng.uniform(0.01, 400, (k // 16, n)).astype(ml_dtypes.float8_e4m3fn)
    # packed along K: a (m, k / 2) bytes, b (k / 2, n)
    a, sa, b, sb = (ex.put(x) for x in (tilelang.pack_f4(a_h), sa_h,
                                        tilelang.pack_f4(b_h, axis=0), sb_h))
    c = ex.put(np.zeros((m, n), np.float32))
    ex.module.matmul_nvfp4[(-(-m // bm), -(-n // bn))](a, sa, b, sb, c, BM=bm, BN=bn, BK=bk)
    av = a_h.astype(np.float64) * np.repeat(sa_h.astype(np.float64), 16, axis=1)
    bv = b_h.astype(np.float64) * np.repeat(sb_h.astype(np.float64), 16, axis=0)
    want = av @ bv
    # each element times its scale (2 and 4 significant bits) is exact in bf16 and each
    # product exact in f32: only the f32 sums round, at most K roundings of 2^-24 relative to
    # the sum of |terms|
    bound = k * 2.0 ** -24 * (np.abs(av) @ np.abs(bv))
    assert np.all(np.abs(ex.get(c) - want) <= bound), "NVFP4 matmul differs from NumPy"
    return ex.done(f"NVFP4 matmul {m}x{k} @ {k}x{n}")


if __name__ == "__main__":
    sys.exit(main())
