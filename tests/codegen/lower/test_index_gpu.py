"""On a real GPU (marked `gpu`: skipped cleanly without one; TILELANG_TEST_EMULATED_GPU=1 runs
it on the emulated driver): subscripts of tiles at run-time positions over registers, lanes
and warps, `gather` within a tile, `pad`, `cat` of unequal tiles and array subscripts, with
many blocks at once, against NumPy. (A subscript outside its array fails a device assertion,
which leaves a CUDA context unusable: that case is tested on the emulator, test_gen_index.py.)"""

from __future__ import annotations

import numpy as np
import pytest

import tilelang

pytestmark = pytest.mark.gpu

SOURCE = """
@launch(maxntid = (128, 1, 1))
kernel rows(x: Array[f32, 2], r: Array[f32, 2], c: Array[f32, 2], e: Array[f32, 1]) {
    let b = bid(0);
    let t = load(x, index = (0, 0), shape = (64, 64));
    store(r, offset = (b, 0), tile = t[b].reshape((1, 64)));
    store(c, offset = (b, 0), tile = t[:, b].reshape((1, 64)));
    store(e, offset = (b,), tile = full((1,), t[b, 63 - b] + x[63 - b, b], f32));
}

@launch(maxntid = (128, 1, 1))
kernel moves(x: Array[f32, 2], i: Array[i32, 2], g: Array[f32, 2], p: Array[f32, 2],
             c: Array[f32, 2]) {
    let t = load(x, index = (0, 0), shape = (8, 16));
    store(g, index = (0, 0), tile = gather(t, load(i, index = (0, 0), shape = (8, 32)),
                                           axis = 1));
    store(p, index = (0, 0), tile = pad(t[0:4, :], ((1, 3), (3, 13)), value = -1.0));
    store(c, index = (0, 0), tile = cat(t[:, 0:4], t, axis = 1, padding = 2.0));
}

kernel element(x: Array[f32, 2], y: Array[f32, 1], i: i32, j: i32) {
    store(y, index = (0,), tile = full((2,), x[i, j], f32));
}
"""


@pytest.fixture(scope="module")
def mod(tmp_path_factory):
    return tilelang.compile(SOURCE, backend="cuda",
                            cache_dir=str(tmp_path_factory.mktemp("cache")))


def test_positions(mod):
    x = np.random.default_rng(1).standard_normal((64, 64)).astype(np.float32)
    r, c, e = (mod.to_device(np.zeros(s, np.float32)) for s in ((64, 64), (64, 64), (64,)))
    mod.rows[64](mod.to_device(x), r, c, e)
    mod.backend.synchronize()
    b = np.arange(64)
    np.testing.assert_array_equal(r.numpy(), x)
    np.testing.assert_array_equal(c.numpy(), x.T)
    np.testing.assert_array_equal(e.numpy(), x[b, 63 - b] + x[63 - b, b])


def test_gather_pad_cat(mod):
    x = np.random.default_rng(2).standard_normal((8, 16)).astype(np.float32)
    idx = np.random.default_rng(3).integers(0, 16, (8, 32)).astype(np.int32)
    g, p, c = (mod.to_device(np.zeros((8, 32), np.float32)) for _ in range(3))
    mod.moves[1](mod.to_device(x), mod.to_device(idx), g, p, c)
    mod.backend.synchronize()
    np.testing.assert_array_equal(g.numpy(), np.take_along_axis(x, idx, 1))
    np.testing.assert_array_equal(p.numpy(), np.pad(x[:4], ((1, 3), (3, 13)),
                                                    constant_values=-1))
    want = np.full((8, 32), 2.0, np.float32)
    want[:, :4], want[:, 4:20] = x[:, :4], x
    np.testing.assert_array_equal(c.numpy(), want)


def test_array_subscript_inside(mod):
    x = np.arange(35, dtype=np.float32).reshape(5, 7)
    y = mod.to_device(np.zeros(2, np.float32))
    mod.element[1](mod.to_device(x), y, 4, 6)
    mod.backend.synchronize()
    assert (y.numpy() == 34).all()
