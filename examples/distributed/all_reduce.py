#!/usr/bin/env python3
"""Run all_reduce.tile on emulated worlds of 2, 4 and 8 ranks (ragged lengths) and check that
every rank gets NumPy's float32 sum over ranks, in rank order, bit for bit."""

import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))   # run from a checkout

import tilelang.distributed as td  # noqa: E402


def run(n: int, length: int, rng, w=None) -> None:
    """On `w` (a world of this process, or under torchrun this process's rank of one)."""
    w = w or td.world(n)
    x = w.symmetric((length,), "f32")
    blocks = -(-length // 128)
    pad = w.symmetric((2 * blocks * n,), "u32")
    data = [rng.standard_normal(length).astype(np.float32) for _ in range(n)]
    for r in w.ranks:                        # under torchrun: this process's rank only
        x.write(r, data[r])
    ys = [np.full(length, np.nan, np.float32) for _ in range(n)]
    k = w.kernel(os.path.join(HERE, "all_reduce.tile"), "all_reduce")
    w.launch_all(k, blocks, lambda r: (x, ys[r], pad))
    want = np.zeros(length, np.float32)
    for d in data:                           # the kernel's order: rank 0 first, in f32
        want = want + d
    for r in w.ranks:
        assert np.array_equal(ys[r], want), f"{n} ranks, rank {r}: differs from NumPy"
        assert not pad.on(r).any(), f"{n} ranks, rank {r}: the pad is not back to zero"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", default="2,4,8", help="world sizes, comma-separated")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(7)           # the same on every rank: the same data
    lengths = {2: 300, 4: 129, 8: 517}
    if td.under_torchrun():                  # one rank per process (docs/distributed.md)
        w = td.init()
        run(w.size, lengths.get(w.size, 200), rng, w)
        print(f"all_reduce: rank {w.rank} of {w.size}, {lengths.get(w.size, 200)} elements: "
              f"ok (torchrun)")
        return 0
    for n in (int(s) for s in args.ranks.split(",")):
        run(n, lengths.get(n, 200), rng)
        print(f"all_reduce: {n} ranks, {lengths.get(n, 200)} elements: ok (emulated world)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
