#!/usr/bin/env python3
"""Run ag_matmul.tile (all-gather fused into a matmul) on emulated worlds of 2, 4 and 8 ranks
with ragged shapes and check every rank's product of the gathered A against NumPy."""

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
    a = w.symmetric((m, k), "f16")
    shards = [rng.standard_normal((m, k)).astype(np.float16) for _ in range(n)]
    for r in w.ranks:                        # under torchrun: this process's rank only
        a.write(r, shards[r])
    grid = (-(-m // BM), -(-nn // BN), n)
    pad = w.symmetric((grid[0] * grid[1] * grid[2] * n,), "u32")
    bs = [(rng.standard_normal((k, nn)) / np.sqrt(k)).astype(np.float16) for _ in range(n)]
    cs = [np.full((n, m, nn), np.nan, np.float32) for _ in range(n)]
    kern = w.kernel(os.path.join(HERE, "ag_matmul.tile"), "ag_matmul")
    w.launch_all(kern, grid, lambda r: (a, bs[r], cs[r], pad))
    gathered = np.stack(shards).astype(np.float64)
    for r in w.ranks:
        want = gathered @ bs[r].astype(np.float64)
        assert np.allclose(cs[r], want, rtol=1e-3, atol=1e-3), \
            f"{n} ranks, rank {r}: differs from NumPy"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", default="2,4,8", help="world sizes, comma-separated")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(5)           # the same on every rank: the same data
    shapes = {2: (70, 40, 72), 4: (33, 48, 20), 8: (17, 24, 65)}
    if td.under_torchrun():                  # one rank per process (docs/distributed.md)
        w = td.init()
        m, k, nn = shapes.get(w.size, (20, 16, 24))
        run(w.size, m, k, nn, rng, w)
        print(f"ag_matmul: rank {w.rank} of {w.size}, shards {m}x{k} @ {k}x{nn}: ok (torchrun)")
        return 0
    for n in (int(s) for s in args.ranks.split(",")):
        m, k, nn = shapes.get(n, (20, 16, 24))
        run(n, m, k, nn, rng)
        print(f"ag_matmul: {n} ranks, shards {m}x{k} @ {k}x{nn}: ok (emulated world)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
