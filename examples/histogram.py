#!/usr/bin/env python3
"""Run histogram.tile's three kernels (ragged key counts, values out of range) against np.bincount."""

import sys

import numpy as np

from example_support import Example


def main(argv=None) -> int:
    ex = Example("histogram.tile", __doc__.splitlines()[0], argv)
    n, bins = 3000, 64
    x_h = ex.rng.integers(-5, bins + 5, n).astype(np.int32)   # some outside [0, bins)
    x, counts = ex.put(x_h), ex.put(np.zeros(bins, np.int32))
    ex.module.histogram[(-(-n // 1024),)](x, counts, TILE=1024)
    inside = x_h[(x_h >= 0) & (x_h < bins)]
    want = np.bincount(inside, minlength=bins)
    assert np.array_equal(ex.get(counts), want), "histogram differs from np.bincount"

    # block-private: a fused (512, 64) compare-and-sum per block; 3000 keys leave the last
    # block 440 of 512
    private = ex.put(np.zeros(bins, np.int32))
    ex.module.histogram_private[(-(-n // 512),)](x, private, TILE=512, BINS=bins)
    assert np.array_equal(ex.get(private), want), "histogram_private differs from np.bincount"

    # weighted, (1024, 256): integer weights, so every f32 sum is exact in any order
    m, wbins = 2500, 256
    y_h = ex.rng.integers(0, wbins, m).astype(np.int32)
    w_h = ex.rng.integers(-8, 9, m).astype(np.float32)
    sums = ex.put(np.zeros(wbins, np.float32))
    ex.module.histogram_weighted[(-(-m // 1024),)](ex.put(y_h), ex.put(w_h), sums,
                                                    TILE=1024, BINS=wbins)
    want_w = np.bincount(y_h, weights=w_h, minlength=wbins).astype(np.float32)
    assert np.array_equal(ex.get(sums), want_w), "histogram_weighted differs from np.bincount"
    return ex.done(f"histograms of {n} values in {bins} bins and {m} weighted in {wbins}")


if __name__ == "__main__":
    sys.exit(main())
