#!/usr/bin/env python3
"""Run histogram.tile (values in and out of range) and check it against np.bincount."""

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
    return ex.done(f"histogram of {n} values in {bins} bins")


if __name__ == "__main__":
    sys.exit(main())
