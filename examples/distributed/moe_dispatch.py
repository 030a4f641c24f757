#!/usr/bin/env python3
"""Run moe_dispatch.tile (an all-to-all by expert) on emulated worlds of 2, 4 and 8 ranks with
ragged token counts (one rank with none, two launches with increasing epochs) and check what
every rank received against NumPy: the rows each sender routed to it, in any order."""

import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))   # run from a checkout

import tilelang.distributed as td  # noqa: E402

H = 128


def _rows(a):
    """The rows of a, in a canonical order (the kernel's slots are taken in any order)."""
    return a[np.lexsort(a.T[::-1])] if len(a) else a


def run(n: int, tokens: list, rng, w=None) -> None:
    """On `w` (a world of this process, or under torchrun this process's rank of one)."""
    w = w or td.world(n)
    cap = max(tokens)
    recv = w.symmetric((n, cap, H), "f32")
    counts = w.symmetric((n,), "i32")
    done = w.symmetric((n,), "u32")
    kern = w.kernel(os.path.join(HERE, "moe_dispatch.tile"), "moe_dispatch")
    for epoch in (1, 2):
        for r in w.ranks:                    # the receivers' counts start at zero
            counts.write(r, np.zeros(n, np.int32))
        x = [rng.standard_normal((t, H)).astype(np.float32) for t in tokens]
        dest = [rng.integers(0, n, t).astype(np.int32) for t in tokens]
        w.launch_all(kern, max(cap, 1), lambda r: (x[r], dest[r], recv, counts, done, epoch))
        for d in w.ranks:                    # under torchrun: this process's rank only
            got_counts = counts.on(d)
            got = recv.on(d)
            for s in range(n):
                want = x[s][dest[s] == d]
                assert got_counts[s] == len(want), f"{n} ranks: rank {d} counted " \
                    f"{got_counts[s]} rows from rank {s}, not {len(want)}"
                assert np.array_equal(_rows(got[s, :len(want)]), _rows(want)), \
                    f"{n} ranks: the rows rank {d} received from rank {s} differ from NumPy"
            assert (done.on(d) == epoch * max(cap, 1)).all()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", default="2,4,8", help="world sizes, comma-separated")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(13)
    plans = {2: [5, 3], 4: [7, 0, 2, 9], 8: [3, 1, 4, 1, 5, 0, 2, 6]}
    if td.under_torchrun():                  # one rank per process (docs/distributed.md)
        w = td.init()
        run(w.size, plans.get(w.size, [3] * w.size), rng, w)
        print(f"moe_dispatch: rank {w.rank} of {w.size}, tokens "
              f"{plans.get(w.size, [3] * w.size)}: ok (torchrun)")
        return 0
    for n in (int(s) for s in args.ranks.split(",")):
        run(n, plans.get(n, [3] * n), rng)
        print(f"moe_dispatch: {n} ranks, tokens {plans.get(n, [3] * n)}: ok (emulated world)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
