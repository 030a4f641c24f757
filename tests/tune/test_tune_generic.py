"""autotune of a generic kernel (docs/language.md §10.3) on the emulator: each dtype of the
arrays is its own launch key and its trials compile that dtype's specializations."""

from __future__ import annotations

import numpy as np
import pytest

import tilelang
from tilelang.tune import autotune

ml_dtypes = pytest.importorskip("ml_dtypes")

SRC = """
kernel twice(x: Array[T, 1], y: Array[T, 1], const T: dtype, const TILE: i32 = 128) {
    let t = load(x, index = (bid(0),), shape = (TILE,), padding = 0);
    store(y, index = (bid(0),), tile = t + t);
}
"""


def test_each_dtype_is_tuned_with_its_own_specializations():
    mod = tilelang.compile(SRC, backend="emulator", cache=False)
    tuned = autotune(mod.twice, space={"TILE": [128, 256]}, workers=0, cache=False,
                     grid=lambda m: (tilelang.cdiv(m["x"].shape[0], m["TILE"]),),
                     progress=False)
    keys = []
    for dt in (np.float16, ml_dtypes.bfloat16, np.int32):
        x = (np.arange(300) % 50).astype(dt)
        y = np.zeros_like(x)
        tuned(x, y)
        assert np.array_equal(y, x + x), dt
        res = tuned.last
        assert [t.status for t in res.trials] == ["ok", "ok"]
        keys.append(res.key["arrays"]["x"][0])
    assert keys == ["f16", "bf16", "i32"]
