#!/usr/bin/env python3
"""Run all_reduce_multimem.tile on emulated worlds of 2, 4 and 8 ranks (ragged lengths) and
check that every rank's y is NumPy's float32 sum over ranks. The emulator's multimem.ld_reduce
adds the ranks' values in rank order, so the check is bit for bit; a GPU's switch may add them
in another order (compare with a tolerance there)."""

import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))   # run from a checkout

import tilelang.distributed as td  # noqa: E402

TILE = 128


def run(n: int, length: int, rng, w=None) -> None:
    """On `w` (a world of this process, or under torchrun this process's rank of one)."""
    w = w or td.world(n)
    x = w.symmetric((length,), "f32")
    y = w.symmetric((length,), "f32")
    tiles = -(-length // TILE)
    blocks = -(-tiles // n)                      # each rank reduces 1/n of the tiles
    pad = w.symmetric((2 * blocks * n,), "u32")
    data = [rng.standard_normal(length).astype(np.float32) for _ in range(n)]
    for r in w.ranks:                            # under torchrun: this process's rank only
        x.write(r, data[r])
        y.write(r, np.full(length, np.nan, np.float32))
    k = w.kernel(os.path.join(HERE, "all_reduce_multimem.tile"), "all_reduce_multimem")
    w.launch_all(k, blocks, lambda r: (x, y, pad))
    want = np.zeros(length, np.float32)
    for d in data:                               # the emulator's order: rank 0 first, in f32
        want = want + d
    for r in w.ranks:
        assert np.array_equal(y.on(r), want), f"{n} ranks, rank {r}: differs from NumPy"
        assert np.array_equal(x.on(r), data[r]), f"{n} ranks, rank {r}: x changed"
        assert not pad.on(r).any(), f"{n} ranks, rank {r}: the pad is not back to zero"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", default="2,4,8", help="world sizes, comma-separated")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(11)             # the same on every rank: the same data
    lengths = {2: 300, 4: 129, 8: 1100}
    if td.under_torchrun():                      # one rank per process (docs/distributed.md)
        w = td.init()
        length = lengths.get(w.size, 200)
        run(w.size, length, rng, w)
        print(f"all_reduce_multimem: rank {w.rank} of {w.size}, {length} elements: "
              f"ok (torchrun)")
        return 0
    for n, length in zip((int(s) for s in args.ranks.split(",")), (300, 129, 1100)):
        run(n, length, rng)
        print(f"all_reduce_multimem: {n} ranks, {length} elements: ok (emulated world)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
