"""Cross-warp reductions alternate between two shared-memory slots, so consecutive reductions
need one barrier each instead of two, and the first one needs no leading barrier
(KernelEmitter.exchange_slot). The emulator's race checker runs every kernel here: a barrier
left out where a thread could still read the slot would be reported as a race. Branches,
loops and argmax (two exchanges per reduction) keep their barriers where they are needed."""

from __future__ import annotations

import numpy as np
import pytest

from tilelang.driver import compile_kernel
from tilelang.options import CompileOptions
from tilelang.emulator import EmulatorDevice


def _build(tmp_path, text: str, name: str = "k"):
    return compile_kernel(text, str(tmp_path / "k.tile"), name, options=CompileOptions(),
                          link=False)


def _run(ck, arrays, grid, scalars=()):
    dev = EmulatorDevice(race_check=True)
    fn = dev.load_module(ck.ptx).get_function(ck.artifact.name)
    args, ptrs = [], []
    for a in arrays:
        p = dev.to_device(a)
        ptrs.append(p)
        args += [p, *[np.int64(n) for n in a.shape],
                 *[np.int64(s // a.itemsize) for s in a.strides]]
    args += list(scalars)
    rep = dev.launch(fn, grid, ck.artifact.block, args)
    assert rep.race_check == "checked: no shared-memory race", rep.race_check
    return [dev.from_device(p, a.shape, a.dtype) for p, a in zip(ptrs, arrays)]


SOFTMAX = """
kernel k(x: Array[f32, 2], y: Array[f32, 2]) {
    let r = bid(0);
    let t = load(x, index = (r, 0), shape = (1, 512), padding = -inf);
    let e = exp(t - max(t, axis = 1, keepdims = true));
    store(y, index = (r, 0), tile = e / sum(e, axis = 1, keepdims = true));
}
"""


def test_two_reductions_two_barriers(tmp_path):
    ck = _build(tmp_path, SOFTMAX)
    assert ck.ptx.count("bar.sync") == 2            # was 4: one leading barrier each
    x = np.random.default_rng(0).standard_normal((6, 512)).astype(np.float32)
    _, y = _run(ck, [x, np.zeros_like(x)], (6, 1, 1))
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=2e-5)


def test_three_reductions_reuse_the_first_slot(tmp_path):
    text = """
kernel k(x: Array[f32, 2], y: Array[f32, 2]) {
    let r = bid(0);
    let t = load(x, index = (r, 0), shape = (1, 512), padding = 0.0);
    let a = sum(t, axis = 1, keepdims = true);
    let b = max(t - a, axis = 1, keepdims = true);
    let c = min(t * b, axis = 1, keepdims = true);
    store(y, index = (r, 0), tile = t * 0.0 + a + b + c);
}
"""
    ck = _build(tmp_path, text)
    assert ck.ptx.count("bar.sync") == 3
    x = np.random.default_rng(1).standard_normal((4, 512)).astype(np.float32)
    _, y = _run(ck, [x, np.zeros_like(x)], (4, 1, 1))
    a = x.sum(axis=1, keepdims=True, dtype=np.float64).astype(np.float32)
    b = (x - a).max(axis=1, keepdims=True)
    c = (x * b).min(axis=1, keepdims=True)
    np.testing.assert_allclose(y[:, :1], a + b + c, rtol=1e-4, atol=1e-4)


def test_reductions_in_branches_and_loops_keep_their_barriers(tmp_path):
    text = """
kernel k(x: Array[f32, 2], y: Array[f32, 2], n: i32) {
    let r = bid(0);
    let t = load(x, index = (r, 0), shape = (1, 512), padding = 0.0);
    var acc = sum(t, axis = 1, keepdims = true);
    if r % 2 == 0 {
        acc = acc + max(t, axis = 1, keepdims = true);
    } else {
        acc = acc - min(t, axis = 1, keepdims = true);
    }
    for i in range(n) {
        acc = acc + sum(t * acc, axis = 1, keepdims = true) * 0.001;
    }
    store(y, index = (r, 0), tile = t * 0.0 + acc + max(t, axis = 1, keepdims = true));
}
"""
    ck = _build(tmp_path, text)
    x = np.random.default_rng(2).standard_normal((4, 512)).astype(np.float32)
    _, y = _run(ck, [x, np.zeros_like(x)], (4, 1, 1), [np.int32(3)])
    x64 = x.astype(np.float64)
    acc = x64.sum(axis=1, keepdims=True)
    for r in range(4):
        acc[r] += x64[r].max() if r % 2 == 0 else -x64[r].min()
    for _ in range(3):
        acc = acc + (x64 * acc).sum(axis=1, keepdims=True) * 0.001
    np.testing.assert_allclose(y[:, :1], acc + x64.max(axis=1, keepdims=True), rtol=1e-4)


@pytest.mark.parametrize("fn", ["argmax", "argmin"])
def test_argreductions_exchange_twice(tmp_path, fn):
    text = f"""
kernel k(x: Array[f32, 2], y: Array[i32, 2]) {{
    let r = bid(0);
    let t = load(x, index = (r, 0), shape = (1, 512), padding = 0.0);
    let m = max(t, axis = 1, keepdims = true);
    store(y, index = (r, 0), tile = {fn}(t - m, axis = 1, keepdims = true));
}}
"""
    ck = _build(tmp_path, text)
    x = np.random.default_rng(3).standard_normal((3, 512)).astype(np.float32)
    _, y = _run(ck, [x, np.zeros((3, 1), np.int32)], (3, 1, 1))
    want = getattr(np, fn)(x, axis=1)
    assert y[:, 0].tolist() == want.tolist()
