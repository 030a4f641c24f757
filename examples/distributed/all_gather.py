#!/usr/bin/env python3
"""Run all_gather.tile on emulated worlds of 2, 4 and 8 ranks (ragged lengths, two launches
with increasing epochs) and check every rank's gathered rows against NumPy."""

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
    blocks = -(-length // 128)
    out = w.symmetric((n, length), "f32")
    flags = w.symmetric((n * blocks,), "u32")
    k = w.kernel(os.path.join(HERE, "all_gather.tile"), "all_gather")
    for epoch in (1, 2):                     # flags are reused: a new epoch per launch
        data = [rng.standard_normal(length).astype(np.float32) for _ in range(n)]
        w.launch_all(k, blocks, lambda r: (data[r], out, flags, epoch))
        want = np.stack(data)
        for r in w.ranks:                    # under torchrun: this process's rank only
            assert np.array_equal(out.on(r), want), f"{n} ranks, rank {r}: differs from NumPy"
            assert (flags.on(r) == epoch).all(), f"{n} ranks, rank {r}: a flag was not set"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", default="2,4,8", help="world sizes, comma-separated")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(11)          # the same on every rank: the same data
    lengths = {2: 300, 4: 200, 8: 131}
    if td.under_torchrun():                  # one rank per process (docs/distributed.md)
        w = td.init()
        run(w.size, lengths.get(w.size, 150), rng, w)
        print(f"all_gather: rank {w.rank} of {w.size}, {lengths.get(w.size, 150)} elements "
              f"per rank: ok (torchrun)")
        return 0
    for n in (int(s) for s in args.ranks.split(",")):
        run(n, lengths.get(n, 150), rng)
        print(f"all_gather: {n} ranks, {lengths.get(n, 150)} elements per rank: ok "
              f"(emulated world)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
