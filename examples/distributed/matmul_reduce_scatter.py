#!/usr/bin/env python3
"""Run matmul_reduce_scatter.tile on emulated worlds of 2, 4 and 8 ranks (ragged shapes, two
launches with increasing epochs) and check each rank's owned row tiles of C against NumPy."""

import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))   # run from a checkout

import tilelang.distributed as td  # noqa: E402

BM = BN = 64


def run(n: int, m: int, k: int, nn: int, rng, w=None) -> None:
    """On `w` (a world of this process, or under torchrun this process's rank of one)."""
    w = w or td.world(n)
    grid = (-(-m // BM), -(-nn // BN))
    part = w.symmetric((m, nn), "f32")
    flags = w.symmetric((n * grid[0] * grid[1],), "u32")
    kern = w.kernel(os.path.join(HERE, "matmul_reduce_scatter.tile"), "matmul_reduce_scatter")
    for epoch in (1, 2):                     # flags are reused: a new epoch per launch
        a = [rng.standard_normal((m, k)).astype(np.float16) for _ in range(n)]
        b = [(rng.standard_normal((k, nn)) / np.sqrt(k * n)).astype(np.float16)
             for _ in range(n)]
        cs = [np.full((m, nn), np.nan, np.float32) for _ in range(n)]
        w.launch_all(kern, grid, lambda r: (a[r], b[r], part, cs[r], flags, epoch))
        want = sum(x.astype(np.float64) @ y.astype(np.float64) for x, y in zip(a, b))
        for r in w.ranks:                    # under torchrun: this process's rank only
            rows = np.zeros(m, bool)
            for i in range(r, grid[0], n):       # the row tiles rank r owns
                rows[i * BM:(i + 1) * BM] = True
            assert np.allclose(cs[r][rows], want[rows], rtol=1e-3, atol=1e-3), \
                f"{n} ranks, rank {r}: differs from NumPy"
            assert np.isnan(cs[r][~rows]).all(), f"{n} ranks, rank {r}: wrote rows it does not own"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", default="2,4,8", help="world sizes, comma-separated")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(3)           # the same on every rank: the same data
    shapes = {2: (150, 40, 72), 4: (300, 24, 20), 8: (520, 16, 33)}
    if td.under_torchrun():                  # one rank per process (docs/distributed.md)
        w = td.init()
        m, k, nn = shapes.get(w.size, (200, 16, 24))
        run(w.size, m, k, nn, rng, w)
        print(f"matmul_reduce_scatter: rank {w.rank} of {w.size}, {m}x{k} @ {k}x{nn} per "
              f"rank: ok (torchrun)")
        return 0
    for n in (int(s) for s in args.ranks.split(",")):
        m, k, nn = shapes.get(n, (200, 16, 24))
        run(n, m, k, nn, rng)
        print(f"matmul_reduce_scatter: {n} ranks, {m}x{k} @ {k}x{nn} per rank: ok "
              "(emulated world)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
