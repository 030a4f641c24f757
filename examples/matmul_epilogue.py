#!/usr/bin/env python3
"""Run matmul_epilogue.tile (c = gelu(a @ b + bias) in f16) and check it against NumPy."""

import math
import sys

import numpy as np

from example_support import Example


def main(argv=None) -> int:
    ex = Example("matmul_epilogue.tile", __doc__.splitlines()[0], argv)
    m, n, k = 96, 80, 72                       # not multiples of the 64 x 64 x 32 tiles
    a_h = ex.rng.standard_normal((m, k)).astype(np.float16)
    b_h = (ex.rng.standard_normal((k, n)) / math.sqrt(k)).astype(np.float16)
    bias_h = ex.rng.standard_normal(n).astype(np.float32)
    a, b, bias = ex.put(a_h), ex.put(b_h), ex.put(bias_h)
    for with_bias in (True, False):             # bias is Optional: None drops the add
        c = ex.put(np.zeros((m, n), np.float16))
        ex.module.matmul_bias_gelu[(-(-m // 64), -(-n // 64))](a, b, bias if with_bias
                                                                else None, c)
        z = a_h.astype(np.float64) @ b_h.astype(np.float64) + (bias_h if with_bias else 0)
        want = 0.5 * z * (1 + np.tanh(math.sqrt(2 / math.pi) * (z + 0.044715 * z ** 3)))
        got = ex.get(c).astype(np.float64)
        assert np.allclose(got, want, rtol=2e-3, atol=2e-3), \
            f"matmul epilogue ({'with' if with_bias else 'without'} bias) differs from NumPy"
    return ex.done(f"gelu(a @ b + bias) and gelu(a @ b), {m}x{k} @ {k}x{n}")


if __name__ == "__main__":
    sys.exit(main())
