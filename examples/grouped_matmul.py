#!/usr/bin/env python3
"""Run grouped_matmul.tile (a mixture-of-experts grouped GEMM over lists of arrays, ragged
experts, some empty) and check every expert's product against NumPy."""

import sys

import numpy as np

from example_support import Example


def main(argv=None) -> int:
    ex = Example("grouped_matmul.tile", __doc__.splitlines()[0], argv)
    k, n, bm, bn = 80, 96, 64, 64
    rows = [70, 0, 130, 1, 0, 64]              # tokens routed to each expert: ragged, two none
    a_h = [ex.rng.standard_normal((m, k)).astype(np.float16) for m in rows]
    b_h = [(ex.rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float16) for _ in rows]
    a, b = [ex.put(x) for x in a_h], [ex.put(x) for x in b_h]
    c = [ex.put(np.full((m, n), np.nan, np.float32)) for m in rows]
    grid = (-(-max(rows) // bm), -(-n // bn), len(rows))
    ex.module.grouped_matmul[grid](a, b, c)
    for e, (x, w, out) in enumerate(zip(a_h, b_h, c)):
        want = x.astype(np.float64) @ w.astype(np.float64)
        assert np.allclose(ex.get(out), want, rtol=1e-3, atol=1e-3), \
            f"expert {e} ({rows[e]} rows) differs from NumPy"
    return ex.done(f"{len(rows)} experts, rows {rows}, K={k}, N={n}")


if __name__ == "__main__":
    sys.exit(main())
