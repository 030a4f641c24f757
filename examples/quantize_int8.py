#!/usr/bin/env python3
"""Run quantize_int8.tile and check the scales and the int8 values against NumPy, and the
round trip q * scale against x."""

import sys

import numpy as np

from example_support import Example


def main(argv=None) -> int:
    ex = Example("quantize_int8.tile", __doc__.splitlines()[0], argv)
    rows, cols = 6, 500
    x_h = (ex.rng.standard_normal((rows, cols)) * 3).astype(np.float32)
    x_h[5] = 0.0                                            # an all-zero row
    x, q = ex.put(x_h), ex.put(np.zeros((rows, cols), np.int8))
    scale = ex.put(np.zeros(rows, np.float32))
    ex.module.quantize_rows[(rows,)](x, q, scale, N=512)
    amax = np.maximum(np.abs(x_h).max(axis=1), np.float32(1e-30))
    s_want = (amax / np.float32(127)).astype(np.float32)
    q_want = np.rint(x_h / s_want[:, None]).astype(np.int8)
    s_got, q_got = ex.get(scale), ex.get(q)
    assert np.array_equal(s_got, s_want), "scales differ from NumPy"
    assert np.array_equal(q_got, q_want), "int8 values differ from NumPy"
    err = np.abs(q_got * s_got[:, None] - x_h).max(axis=1)
    assert np.all(err <= s_want / 2 * 1.0001), "the round trip is off by more than half a step"
    return ex.done(f"int8 quantization of {rows}x{cols}")


if __name__ == "__main__":
    sys.exit(main())
