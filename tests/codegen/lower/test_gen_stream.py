"""Streamed stores (lower/stream.py): `store(y, tile = f(load(a), load(b), t))` emitted one
vector at a time. Each kernel runs on the emulator and in the interpreter against NumPy — full
and ragged tiles, weights broadcast into rows, in-place updates, scalar (non-vector) arrays —
and the PTX shows the interleaving (a store before the last load) where it applies and its
absence where it may not (a store to memory between the load and the streamed store, a loaded
value used twice). Registers of a 4,096-wide vadd on nvJitLink: one vector
per operand live instead of 2 x 32 registers."""

from __future__ import annotations

import re

import numpy as np
import pytest

from gen_support import Strided
from masked_support import compile_for, kernel_body, run
from tilelang.codegen.api import ArrayFacts
from tilelang.targets import get_target

VADD = """
kernel vadd(a: Array[f32, 1], b: Array[f32, 1], c: Array[f32, 1], const T: i32 = 4096) {
    let i = bid(0);
    let x = load(a, index = (i,), shape = (T,), padding = 0.0);
    let y = load(b, index = (i,), shape = (T,), padding = 1.0);
    store(c, index = (i,), tile = x * 2.0 + y);
}
"""

RMS = """
kernel rms(x: Array[f32, 2], w: Array[f32, 1], y: Array[f32, 2], eps: f32,
           const N: i32 = 1024) {
    let r = bid(0);
    let t = load(x, index = (r, 0), shape = (1, N), padding = 0.0);
    let ms = sum(t * t, axis = 1, keepdims = true) / astype(x.shape[1], f32);
    let scale = load(w, index = (0,), shape = (N,), padding = 0.0);
    store(y, index = (r, 0), tile = t * rsqrt(ms + eps) * scale);
}
"""


def _loads_first(ptx: str, name: str) -> int:
    """Global loads before the first global store in the PTX text (the full-tile path comes
    first): one per streamed operand when streamed, every vector of the tile when not."""
    body = kernel_body(ptx, name)
    first = re.search(r"\bst\.global\b", body)
    return len(re.findall(r"\bld\.global\b", body[:first.start()]))


@pytest.mark.parametrize("n", [3 * 4096, 3 * 4096 - 5, 100])
def test_vadd_streams_full_and_ragged_tiles(n):
    rng = np.random.default_rng(n)
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    c = np.full(n, 9.0, np.float32)
    args = {"a": a, "b": b, "c": c}
    res = compile_for(VADD, "vadd", args)
    assert _loads_first(res.codegen.ptx, "vadd") == 2        # 8 + 8 vectors unstreamed
    emu, ref = run(res, "vadd", args, (-(-n // 4096),))
    want = a * np.float32(2.0) + b
    np.testing.assert_array_equal(ref["c"], want)
    np.testing.assert_array_equal(emu["c"], want)


def test_vadd_registers_one_vector_per_operand():
    from tilelang.codegen.target.link import link_ptx
    args = {k: np.zeros(4096, np.float32) for k in "abc"}
    res = compile_for(VADD, "vadd", args)
    try:
        regs = link_ptx(res.codegen.ptx, get_target("sm_90a")).resources["vadd"].registers
    except OSError as e:
        pytest.skip(f"nvJitLink unavailable: {e}")
    assert regs <= 40, regs                 # 2 x 32 loaded registers before streaming


@pytest.mark.parametrize("cols", [1024, 1000])
def test_rows_with_broadcast_weights(cols):
    """The weights (N,) stream into the (1, N) rows; the row itself, reduced first, is a
    materialized operand."""
    rng = np.random.default_rng(cols)
    x = rng.standard_normal((5, cols)).astype(np.float32)
    w = rng.standard_normal(cols).astype(np.float32)
    y = np.zeros((5, cols), np.float32)
    args = {"x": x, "w": w, "y": y, "eps": np.float32(1e-5)}
    res = compile_for(RMS, "rms", {"x": x, "w": w, "y": y})
    assert _loads_first(res.codegen.ptx, "rms") == 3   # the row's 2 vectors, then w's
    emu, ref = run(res, "rms", args, (5,))
    x64 = x.astype(np.float64)
    want = x64 / np.sqrt((x64 * x64).mean(axis=1, keepdims=True) + 1e-5) * w
    np.testing.assert_allclose(emu["y"], want, rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(ref["y"], want, rtol=2e-5, atol=1e-6)


def test_in_place_update():
    """c = c * 2 + b: the stored array is a streamed load too; each vector is read before it
    is written."""
    src = """
kernel upd(b: Array[f32, 1], c: Array[f32, 1]) {
    let i = bid(0);
    let x = load(c, index = (i,), shape = (2048,), padding = 0.0);
    let y = load(b, index = (i,), shape = (2048,), padding = 0.0);
    store(c, index = (i,), tile = x * 2.0 + y);
}
"""
    rng = np.random.default_rng(1)
    b = rng.standard_normal(5000).astype(np.float32)
    c = rng.standard_normal(5000).astype(np.float32)
    args = {"b": b, "c": c}
    res = compile_for(src, "upd", args)
    assert _loads_first(res.codegen.ptx, "upd") == 2
    emu, ref = run(res, "upd", args, (3,))
    want = c * np.float32(2.0) + b
    np.testing.assert_array_equal(ref["c"], want)
    np.testing.assert_array_equal(emu["c"], want)


def test_a_store_in_between_keeps_the_load_before_it():
    """t is loaded, then its tile of a is overwritten, then b gets t + 1: the old values."""
    src = """
kernel keep(a: Array[f32, 1], b: Array[f32, 1]) {
    let i = bid(0);
    let t = load(a, index = (i,), shape = (2048,), padding = 0.0);
    store(a, index = (i,), tile = zeros((2048,), dtype = f32));
    store(b, index = (i,), tile = t + 1.0);
}
"""
    rng = np.random.default_rng(2)
    a = rng.standard_normal(4096).astype(np.float32)
    b = np.zeros(4096, np.float32)
    args = {"a": a, "b": b}
    res = compile_for(src, "keep", args)
    emu, ref = run(res, "keep", args, (2,))
    for out in (emu, ref):
        np.testing.assert_array_equal(out["b"], a + np.float32(1.0))
        np.testing.assert_array_equal(out["a"], np.zeros(4096, np.float32))


def test_a_value_used_twice_is_not_streamed():
    src = """
kernel twice(a: Array[f32, 1], b: Array[f32, 1], c: Array[f32, 1]) {
    let i = bid(0);
    let t = load(a, index = (i,), shape = (2048,), padding = 0.0);
    store(b, index = (i,), tile = t + 1.0);
    store(c, index = (i,), tile = t * 3.0);
}
"""
    rng = np.random.default_rng(3)
    a = rng.standard_normal(2048).astype(np.float32)
    args = {"a": a, "b": np.zeros(2048, np.float32), "c": np.zeros(2048, np.float32)}
    res = compile_for(src, "twice", args)
    assert _loads_first(res.codegen.ptx, "twice") == 4      # t's 4 vectors first
    emu, ref = run(res, "twice", args, (1,))
    for out in (emu, ref):
        np.testing.assert_array_equal(out["b"], a + np.float32(1.0))
        np.testing.assert_array_equal(out["c"], a * np.float32(3.0))


def test_one_vector_per_thread_shares_one_inside_test():
    """T = 512 over 128 threads: one 4-wide vector per thread. Streamed, its two loads and the
    store sit under one uniform inside-test: one conditional branch per copy of the body (the
    full launch's and the virtual-thread loop's), not one per access."""
    rng = np.random.default_rng(7)
    n = 512 * 3 + 200                                       # a ragged last tile
    a, b = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    args = {"a": a, "b": b, "c": np.zeros(n, np.float32)}
    res = compile_for(VADD, "vadd", args, defines={"T": 512})
    ptx = res.codegen.ptx
    assert _loads_first(ptx, "vadd") == 2
    body = ptx[ptx.index(".entry vadd"):]
    tests = re.findall(r"@%p\d+ bra\s+(\$L__BB\d+_\d+);", body)
    # the ntid test, the loop's entry test and back edge, and one inside-test per copy
    assert len(tests) == 5, tests
    emu, ref = run(res, "vadd", args, (4,))
    for out in (emu, ref):
        np.testing.assert_array_equal(out["c"], a * np.float32(2.0) + b)


def test_strided_arrays_stream_element_by_element():
    """Non-contiguous views (and c claimed no better): one-element groups, offsets from the
    stride parameters. With c's vectors the layouts would differ: the plain store then."""
    rng = np.random.default_rng(4)
    base_a = rng.standard_normal(3 * 5000).astype(np.float32)
    base_b = rng.standard_normal(2 * 5000).astype(np.float32)
    a, b = Strided(base_a, base_a[::3]), Strided(base_b, base_b[::-2])
    c = np.zeros(5000, np.float32)
    generic = ArrayFacts(contiguous=False, aligned16=False, extent16=False, small=True)
    src = VADD.replace("4096", "1024")
    res = compile_for(src, "vadd", {"a": a, "b": b, "c": c},
                      facts={"a": generic, "b": generic, "c": generic})
    assert _loads_first(res.codegen.ptx, "vadd") == 2        # one element of each
    emu, ref = run(res, "vadd", {"a": a, "b": b, "c": c}, (5,))
    want = base_a[::3] * np.float32(2.0) + base_b[::-2]
    np.testing.assert_array_equal(ref["c"], want)
    np.testing.assert_array_equal(emu["c"], want)
    mixed = compile_for(src, "vadd", {"a": a, "b": b, "c": c},
                        facts={"a": generic, "b": generic, "c": ArrayFacts(extent16=False)})
    assert _loads_first(mixed.codegen.ptx, "vadd") == 16
    emu, _ = run(mixed, "vadd", {"a": a, "b": b, "c": c}, (5,))
    np.testing.assert_array_equal(emu["c"], want)


@pytest.mark.parametrize("dt,npdt,pad", [("f16", np.float16, "2.0"), ("f64", np.float64, "7.0"),
                                         ("i8", np.int8, "-3"), ("bool", np.bool_, "true"),
                                         ("u16", np.uint16, "9")])
def test_ragged_copies_of_every_dtype(dt, npdt, pad):
    """A copy streams too (the tile is the load): 16 x 256 tiles, 32 elements per thread,
    over a ragged (37, 300) array into a larger one; padding where y is outside x."""
    src = f"""
kernel copy(x: Array[{dt}, 2], y: Array[{dt}, 2]) {{
    let t = load(x, index = (bid(0), bid(1)), shape = (16, 256), padding = {pad});
    store(y, index = (bid(0), bid(1)), tile = t);
}}
"""
    rng = np.random.default_rng(7)
    x = (rng.integers(0, 2, (37, 300)) if dt == "bool"
         else rng.integers(-50, 50, (37, 300))).astype(npdt)
    y = np.zeros((40, 310), npdt)
    res = compile_for(src, "copy", {"x": x, "y": y})
    assert _loads_first(res.codegen.ptx, "copy") == 1
    emu, ref = run(res, "copy", {"x": x, "y": y}, (3, 2))
    want = np.full(y.shape, np.asarray(True if pad == "true" else float(pad)).astype(npdt))
    want[:37, :300] = x
    np.testing.assert_array_equal(ref["y"], want)
    np.testing.assert_array_equal(emu["y"], want)
