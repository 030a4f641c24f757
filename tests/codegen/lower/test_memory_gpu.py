"""On a real GPU (marked `gpu`: skipped cleanly without one): the predicated edge, masked and
offset accesses and the atomics with memory orders, against NumPy. The spin lock and the
"last block reduces" patterns of docs/language.md run with many blocks at once, which is what
the orders are for (the emulator and the interpreter order blocks more strongly)."""

from __future__ import annotations

import numpy as np
import pytest

import tilelang

pytestmark = pytest.mark.gpu

SOURCE = """
kernel ragged(x: Array[f32, 2], y: Array[f32, 2]) {
    let t = load(x, index = (bid(0), bid(1)), shape = (16, 64), padding = -1.0);
    store(y, index = (bid(0), bid(1)), tile = t * 2.0);
}

kernel lower(x: Array[f32, 2], y: Array[f32, 2], r0: i32, c0: i32) {
    let rows = expand_dims(arange(32, i32) + bid(0) * 32, 1);
    let cols = expand_dims(arange(64, i32), 0);
    let t = load(x, offset = (r0 + bid(0) * 32, c0), shape = (32, 64), padding = 3.0);
    store(y, index = (bid(0), 0), tile = t, mask = rows >= cols);
}

kernel fmax(a: Array[f32, 1], v: Array[f32, 1]) {
    let t = load(v, index = (bid(0),), shape = (256,), padding = -inf);
    atomic_max(a, arange(256, i32) % 16, t);
    atomic_min(a, arange(256, i32) % 16 + 16, t);
}

kernel total(x: Array[f32, 1], part: Array[f32, 1], count: Array[i32, 1],
             out: Array[f32, 1]) {
    let s = sum(load(x, index = (bid(0),), shape = (1024,)));
    store(part, index = (bid(0),), tile = expand_dims(s, 0));
    let ticket = atomic_add(count, 0, 1);
    if ticket == num_blocks(0) - 1 {
        let p = load(part, index = (0,), shape = (512,));
        store(out, index = (0,), tile = expand_dims(sum(p), 0));
    }
}

kernel locked(x: Array[f32, 2], acc: Array[f32, 1], lock: Array[i32, 1]) {
    let t = reshape(load(x, index = (bid(0), 0), shape = (1, 256)), (256,));
    while atomic_cas(lock, 0, 0, 1, sem = "acquire") != 0 {}
    store(acc, index = (0,), tile = load(acc, index = (0,), shape = (256,)) + t);
    atomic_xchg(lock, 0, 0, sem = "release");
}
"""


@pytest.fixture(scope="module")
def mod(tmp_path_factory):
    return tilelang.compile(SOURCE, backend="cuda",
                            cache_dir=str(tmp_path_factory.mktemp("cache")))


def sync(mod):
    mod.backend.synchronize()


@pytest.mark.parametrize("rows,cols", [(37, 70), (64, 64), (5, 129)])
def test_ragged_edges(mod, rows, cols):
    x = np.random.default_rng(rows).standard_normal((rows, cols)).astype(np.float32)
    y = mod.to_device(np.zeros((rows, cols), np.float32))
    mod.ragged[(-(-rows // 16), -(-cols // 64))](mod.to_device(x), y)
    sync(mod)
    np.testing.assert_array_equal(y.numpy(), x * 2)


@pytest.mark.parametrize("r0,c0", [(0, 0), (3, 1), (-2, 7)])
def test_masked_store_at_offsets(mod, r0, c0):
    x = np.random.default_rng(5).standard_normal((70, 90)).astype(np.float32)
    y0 = np.full((64, 64), 9.0, np.float32)
    y = mod.to_device(y0)
    mod.lower[2](mod.to_device(x), y, r0, c0)
    sync(mod)
    want = y0.copy()
    for i in range(64):
        for j in range(64):
            if i >= j:
                r, c = r0 + i, c0 + j
                want[i, j] = x[r, c] if 0 <= r < 70 and 0 <= c < 90 else 3.0
    np.testing.assert_array_equal(y.numpy(), want)


def test_float_atomic_max_min(mod):
    v = (np.random.default_rng(6).standard_normal(300 * 256) * 100).astype(np.float32)
    a0 = np.concatenate([np.full(16, -np.inf), np.full(16, np.inf)]).astype(np.float32)
    a = mod.to_device(a0)
    mod.fmax[300](a, mod.to_device(v))
    sync(mod)
    lanes = v.reshape(300, 256)
    want = np.concatenate([lanes.reshape(-1, 16).max(0), lanes.reshape(-1, 16).min(0)])
    np.testing.assert_array_equal(a.numpy(), want)


def test_last_block_reduces(mod):
    x = np.random.default_rng(7).integers(-9, 9, 500 * 1024).astype(np.float32)
    part, count = mod.to_device(np.zeros(500, np.float32)), mod.to_device(np.zeros(1, np.int32))
    out = mod.to_device(np.zeros(1, np.float32))
    mod.total[500](mod.to_device(x), part, count, out)
    sync(mod)
    assert count.numpy()[0] == 500 and out.numpy()[0] == x.sum()


def test_spin_lock(mod):
    x = np.random.default_rng(8).integers(-9, 9, (2000, 256)).astype(np.float32)
    acc, lock = mod.to_device(np.zeros(256, np.float32)), mod.to_device(np.zeros(1, np.int32))
    mod.locked[2000](mod.to_device(x), acc, lock)
    sync(mod)
    np.testing.assert_array_equal(acc.numpy(), x.sum(0))
    assert lock.numpy()[0] == 0
