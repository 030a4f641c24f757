"""warp_tiling: how a block's warps split an mma.sync accumulator (tilelang/codegen/layouts/
mma.py). A warp reads (wm + wn) x K of the operands per product, so the square split wins."""

from __future__ import annotations

import pytest

from tilelang.codegen.layouts.mma import warp_tiling


@pytest.mark.parametrize("shape,threads,want", [
    ((128, 128), 128, (2, 2)),        # 64 x 64 per warp: 32 ldmatrix.x4 per K-step of 64
    ((128, 256), 256, (2, 4)),        # the same warp tile over 8 warps
    ((64, 64), 128, (2, 2)),
    ((128, 64), 128, (4, 1)),         # 32 x 64: as few rows as 2 x 2's 64 x 32 (M first)
    ((16, 256), 128, (1, 4)),         # one m16 tile: the warps go along N
])
def test_warp_tiling_is_as_square_as_it_can_be(shape, threads, want):
    t = warp_tiling(shape, threads)
    assert (t.warps_m, t.warps_n) == want
    # the shared-memory rows a warp reads per k (A's wm rows, B's wn columns) are the fewest
    # any split of the same warps gives
    best = min(shape[0] // wm + shape[1] // (threads // 32 // wm)
               for wm in (1, 2, 4, 8) if threads // 32 % wm == 0 and shape[0] // wm >= 16
               and shape[1] // (threads // 32 // wm) >= 16)
    assert t.wm + t.wn == best
