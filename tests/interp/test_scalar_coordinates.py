"""`index = i` (no tuple) on a rank-1 array: the checker accepts it as `index = (i,)`, the code
generator lowers it so, and the reference interpreter must too (it raised a TypeError)."""

from __future__ import annotations

import numpy as np
import pytest

import tilelang

SRC = """
kernel k(x: Array[f32, 1], y: Array[f32, 1]) {
    let t = load(x, index=(bid(0)), shape=(16,));
    store(y, index=bid(0), tile=t * 2.0);
}
"""


@pytest.mark.parametrize("backend", ["interp", "emulator"])
def test_a_bare_integer_index_is_a_one_tuple(backend, tmp_path):
    p = tmp_path / "k.tile"
    p.write_text(SRC)
    mod = tilelang.compile(str(p), backend=backend, cache=False)
    x = np.arange(40, dtype=np.float32)
    y = np.zeros(40, np.float32)
    mod.k[(3,)](x, y)
    np.testing.assert_array_equal(y, x * 2)
