#!/usr/bin/env python3
"""Run dropout.tile and check it: the kept elements, their scaling, the rate, and that the
same seed gives the same mask (Philox-4x32-10, written out here in NumPy)."""

import sys

import numpy as np

from example_support import Example


def philox_first_word(seed: int, offsets: np.ndarray) -> np.ndarray:
    """Word 0 of Philox-4x32-10 with key (seed lo, seed hi) and counter (offset, 0, 0, 0)."""
    m = np.uint64(0xFFFFFFFF)
    k0, k1 = np.uint64(seed & 0xFFFFFFFF), np.uint64((seed >> 32) & 0xFFFFFFFF)
    c0 = offsets.astype(np.uint64) & m
    c1 = c2 = c3 = np.zeros_like(c0)
    for _ in range(10):
        p0, p2 = np.uint64(0xD2511F53) * c0, np.uint64(0xCD9E8D57) * c2
        c0, c1, c2, c3 = ((p2 >> np.uint64(32)) ^ c1 ^ k0, p2 & m,
                          (p0 >> np.uint64(32)) ^ c3 ^ k1, p0 & m)
        k0, k1 = (k0 + np.uint64(0x9E3779B9)) & m, (k1 + np.uint64(0xBB67AE85)) & m
    return c0.astype(np.uint32)


def main(argv=None) -> int:
    ex = Example("dropout.tile", __doc__.splitlines()[0], argv)
    n, p, seed = 5000, 0.3, 1234
    x_h = ex.rng.standard_normal(n).astype(np.float32)
    x, y = ex.put(x_h), ex.put(np.zeros(n, np.float32))
    grid = (-(-n // 1024),)
    ex.module.dropout[grid](x, y, np.float32(p), np.int64(seed), TILE=1024)
    got = ex.get(y)
    # rand = (word as i32, negatives complemented) * 4.6566127342e-10 (Triton's conversion)
    i = philox_first_word(seed, np.arange(n)).view(np.int32)
    u = np.where(i < 0, ~i, i).astype(np.float32) * np.float32(4.6566127342e-10)
    want = np.where(u > p, x_h / np.float32(1 - p), 0).astype(np.float32)
    assert np.allclose(got, want, rtol=1e-6, atol=0), "dropout differs from NumPy"
    rate = float((got == 0).mean())
    assert abs(rate - p) < 0.03, f"dropped {rate:.3f}, expected about {p}"
    y2 = ex.put(np.zeros(n, np.float32))
    ex.module.dropout[grid](x, y2, np.float32(p), np.int64(seed), TILE=1024)
    assert np.array_equal(ex.get(y2), got), "the same seed gave another mask"
    return ex.done(f"dropout of {n} elements, p = {p}, dropped {rate:.3f}")


if __name__ == "__main__":
    sys.exit(main())
