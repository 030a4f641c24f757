"""lower/array_list.py: an entry of a list of arrays (`ws[e]`) works with every memory
operation as an array parameter does — tile loads and stores, gather, scatter, atomics,
`.shape` — and an index outside the list is an empty array; the emulator (the generated PTX)
and the interpreter (the references) agree with NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import tilelang

SRC = """
kernel ops(xs: List[Array[f32, 1]], hist: List[Array[i32, 1]], ys: List[Array[f32, 1]],
           out: Array[f32, 2], const E: i32 = 0) {
    let e = bid(0);
    let x = xs[e];
    let idx = arange(64);
    // gather every other element, scatter it to the end of out's row
    let g = gather(x, (idx * 2,), mask = idx * 2 < x.shape[0], padding = -1.0);
    store(out, index = (e, 0), tile = g.reshape((1, 64)));
    // a histogram of floor(x) mod 8 into hist[e]
    let t = load(x, index = (0,), shape = (128,), padding = -1.0);
    let k = astype(floor(t), i32);
    atomic_add(hist[e], where(k >= 0, k % 8, 0), ones((128,), i32), mask = k >= 0,
               sem = "relaxed");
    // a constant index: past the list, an empty array (nothing is read or written)
    scatter(ys[E], (idx,), full((64,), 99.0, f32));
    store(out, index = (e, 1), tile = full((1, 64), astype(xs[E].shape[0], f32), f32));
}
"""
SIZES = (100, 7, 128, 0)


def inputs(rng):
    xs = [rng.uniform(-2, 20, n).astype(np.float32) for n in SIZES]
    hist = [np.zeros(8, np.int32) for _ in SIZES]
    return xs, hist, np.zeros((len(SIZES), 128), np.float32)


def reference(xs, e_const):
    out = np.zeros((len(SIZES), 128), np.float32)
    hist = [np.zeros(8, np.int32) for _ in SIZES]
    for e, x in enumerate(xs):
        g = np.full(64, -1.0, np.float32)
        n = min(64, (len(x) + 1) // 2)
        g[:n] = x[::2][:n]
        out[e, :64] = g
        t = np.full(128, -1.0, np.float32)
        t[:min(128, len(x))] = x[:128]
        k = np.floor(t).astype(np.int32)
        for v in k[k >= 0]:
            hist[e][v % 8] += 1
        inside = 0 <= e_const < len(xs)
        out[e, 64:] = len(xs[e_const]) if inside else 0
    return out, hist


@pytest.mark.parametrize("backend", ["emulator", "interp"])
@pytest.mark.parametrize("e_const", [len(SIZES) + 1, -1, 2])
def test_list_entries_with_every_memory_operation(backend, e_const, tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path))
    mod = tilelang.compile(SRC, backend=backend)
    rng = np.random.default_rng(7)
    xs, hist, out = inputs(rng)
    before = [x.copy() for x in xs]
    ys = [x.copy() for x in xs]
    mod.ops[(len(SIZES),)](xs, hist, ys, out, E=e_const)
    want_out, want_hist = reference(before, e_const)
    np.testing.assert_array_equal(out, want_out)
    for got, want in zip(hist, want_hist):
        np.testing.assert_array_equal(got, want)
    for e, (x, y, b) in enumerate(zip(xs, ys, before)):
        np.testing.assert_array_equal(x, b)
        if e == e_const:               # a valid constant index: the scatter wrote 99s
            b = b.copy()
            b[:64] = 99.0
        np.testing.assert_array_equal(y, b)


def test_table_loads_are_invariant(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path))
    mod = tilelang.compile(SRC, backend="emulator")
    ptx = mod.ops.compile().ptx
    # every read of a table is a non-coherent (read-only) load; no table word is written
    assert "ld.global.nc" in ptx
