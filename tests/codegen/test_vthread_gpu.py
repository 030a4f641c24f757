"""On a real GPU (marked `gpu`: skipped cleanly without one): the versioned virtual-thread body
(walk.py) and the 32-bit tile end of a start i * 2^k (lower/memory.py) that
examples/vadd.tile gets, against NumPy: full launches with ragged and over-launched grids, the
short and 2-D blocks that take the virtual-thread loop, and tile indices whose 32-bit start
wraps. The emulator runs the same cases in test_gen_vthread.py and test_gen_tile_end.py."""

from __future__ import annotations

import os

import numpy as np
import pytest

import tilelang

pytestmark = pytest.mark.gpu

BACKEND = "cuda"
VADD = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "vadd.tile")

SHIFTED = """
kernel shifted(x: Array[f32, 1], y: Array[f32, 1], z: Array[f32, 1], d: i32) {
    let i = bid(0) + d;
    let t = load(x, index = (i,), shape = (256,), padding = -1.5);
    store(y, index = (i,), tile = t + 1.0);
    store(z, index = (bid(0),), tile = t);
}
"""


@pytest.fixture(scope="module")
def vadd(tmp_path_factory):
    return tilelang.compile(VADD, backend=BACKEND,
                            cache_dir=str(tmp_path_factory.mktemp("cache")))


@pytest.fixture(scope="module")
def shifted(tmp_path_factory):
    return tilelang.compile(SHIFTED, backend=BACKEND,
                            cache_dir=str(tmp_path_factory.mktemp("cache")))


def sync(mod):
    mod.backend.synchronize()


@pytest.mark.parametrize("n,extra", [(1000, 0), (16384, 0), (16384, 3), (2**20 + 3, 5)])
@pytest.mark.parametrize("block", [None, (32, 1, 1), (64, 2, 1)])
def test_vadd_256(vadd, n, extra, block):
    """TILE = 256 (a versioned body): the launch's declared 128 threads, or a smaller or 2-D
    block; `extra` blocks past the end store nothing."""
    rng = np.random.default_rng(n)
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    c = vadd.to_device(np.full(n, -7.0, np.float32))
    grid = -(-n // 256) + extra
    vadd.vadd[grid](vadd.to_device(a), vadd.to_device(b), c, TILE=256, block=block)
    sync(vadd)
    np.testing.assert_array_equal(c.numpy(), a + b)


@pytest.mark.parametrize("tile", [1024, 4096])
def test_vadd_larger_tiles(vadd, tile):
    """1,024 (versioned) and 4,096 (one shared body) over a ragged length."""
    n = 5 * tile + 77
    rng = np.random.default_rng(tile)
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    for block in (None, (96, 1, 1)):
        c = vadd.to_device(np.zeros(n, np.float32))
        vadd.vadd[-(-n // tile) + 1](vadd.to_device(a), vadd.to_device(b), c, TILE=tile,
                                     block=block)
        sync(vadd)
        np.testing.assert_array_equal(c.numpy(), a + b)


@pytest.mark.parametrize("d", [0, 2, 3, 4, -1, 2**23, 2**24, 2**24 + 1, 2**31 - 3, -2**31])
def test_wrapping_starts(shifted, d):
    """Tile indices bid + d whose 32-bit start (bid + d) * 256 wraps, some of them to an
    element inside the array: padding read, nothing stored."""
    n, grid = 1000, 3
    x = np.random.default_rng(3).standard_normal(n).astype(np.float32)
    y0 = np.full(n + 3, 5.0, np.float32)
    y, z = shifted.to_device(y0), shifted.to_device(np.zeros(grid * 256, np.float32))
    shifted.shifted[grid](shifted.to_device(x), y, z, d)
    sync(shifted)
    want_z = np.full(grid * 256, -1.5, np.float32)
    want_y = y0.copy()
    for blk in range(grid):
        g = (blk + d) * 256 + np.arange(256)
        inx = (g >= 0) & (g < n)
        want_z[blk * 256:(blk + 1) * 256][inx] = x[g[inx]]
        iny = (g >= 0) & (g < n + 3)
        want_y[g[iny]] = want_z[blk * 256:(blk + 1) * 256][iny] + np.float32(1)
    np.testing.assert_array_equal(z.numpy(), want_z)
    np.testing.assert_array_equal(y.numpy(), want_y)
