"""A loose constant where a shape op takes a tile (`expand_dims(64, 0)`, `reshape(3, (1,))`):
the checker types it as a rank-0 tile of the context's dtype; the code generator builds that
tile instead of failing with an internal error (found by the check=compile fuzzer)."""

from __future__ import annotations

import numpy as np
import pytest

import tilelang

SRC = """
kernel k(y: Array[i32, 2], z: Array[f32, 1]) {
    store(y, index=(0, 0), tile=broadcast_to(expand_dims(64, 0), (16, 64)));
    store(z, index=(0,), tile=broadcast_to(reshape(2.5, (1,)), (32,)));
}
"""


@pytest.mark.parametrize("backend", ["emulator", "interp"])
def test_shape_ops_of_a_loose_constant(backend, tmp_path):
    p = tmp_path / "k.tile"
    p.write_text(SRC)
    mod = tilelang.compile(str(p), backend=backend, cache=False)
    y = np.zeros((16, 64), np.int32)
    z = np.zeros(32, np.float32)
    mod.k[(1,)](y, z)
    np.testing.assert_array_equal(y, np.full((16, 64), 64, np.int32))
    np.testing.assert_array_equal(z, np.full(32, 2.5, np.float32))
