#!/usr/bin/env python3
"""Run cross_entropy.tile (rows wider than one tile, large logits) and check it against
NumPy."""

import sys

import numpy as np

from example_support import Example


def main(argv=None) -> int:
    ex = Example("cross_entropy.tile", __doc__.splitlines()[0], argv)
    rows, classes = 5, 1000
    z_h = (ex.rng.standard_normal((rows, classes)) * 20 + 50).astype(np.float32)
    t_h = ex.rng.integers(0, classes, rows).astype(np.int32)
    z, t, loss = ex.put(z_h), ex.put(t_h), ex.put(np.zeros(rows, np.float32))
    ex.module.cross_entropy[(rows,)](z, t, loss, BN=256)        # four chunks per row
    z64 = z_h.astype(np.float64)
    m = z64.max(axis=1)
    want = m + np.log(np.exp(z64 - m[:, None]).sum(axis=1)) - z64[np.arange(rows), t_h]
    assert np.allclose(ex.get(loss), want, rtol=1e-5, atol=1e-4), "loss differs from NumPy"
    return ex.done(f"cross-entropy of {rows} rows of {classes} classes")


if __name__ == "__main__":
    sys.exit(main())
