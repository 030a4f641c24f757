#!/usr/bin/env python3
"""Run matmul_persistent.tile (one block per SM looping over output tiles in grouped order)
with small tiles and fewer blocks than tiles, and check it against NumPy."""

import sys

import numpy as np

from example_support import Example


def main(argv=None) -> int:
    ex = Example("matmul_persistent.tile", __doc__.splitlines()[0], argv)
    m, n, k, bm, bn, bk = 200, 136, 100, 64, 64, 32      # 4 x 3 tiles, ragged on every side
    blocks = 5                                         # a GPU launches its SM count
    if ex.backend.name == "cuda":
        m, n, k, bm, bn, bk = 1000, 1000, 520, 128, 128, 64
        blocks = 132                                   # an H100 / H200's SMs
        if ex.torch is not None:
            blocks = ex.torch.cuda.get_device_properties(0).multi_processor_count
    a_h = (ex.rng.integers(-8, 9, (m, k)) / 8).astype(np.float16)
    b_h = (ex.rng.integers(-8, 9, (k, n)) / 8).astype(np.float16)
    a, b, c = ex.put(a_h), ex.put(b_h), ex.put(np.full((m, n), np.nan, np.float32))
    ex.module.matmul_persistent[(blocks,)](a, b, c, BM=bm, BN=bn, BK=bk, GROUP_M=2)
    want = a_h.astype(np.float64) @ b_h.astype(np.float64)
    # eighths of small integers: every product and sum is exact in f32
    assert np.array_equal(ex.get(c), want), "persistent matmul differs from NumPy"
    return ex.done(f"persistent matmul {m}x{k} @ {k}x{n} over {blocks} blocks")


if __name__ == "__main__":
    sys.exit(main())
