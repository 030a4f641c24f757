"""NumPy layout traps (issue 12, items 4 and 6): arrays whose bytes a kernel would misread
(non-native byte order, structured or object dtypes, misaligned addresses) and arrays whose
stores would be lost or racy (read-only, broadcast) are refused with a diagnostic naming the
parameter; the same arrays where the kernel only reads stay fine."""

from __future__ import annotations

import numpy as np
import pytest

import tilelang
from rt_support import ROOT, FakeCompiler, fresh_runtime, source  # noqa: F401 (autouse fixture)
from tilelang.runtime.device_array import DeviceArray
from tilelang.runtime.errors import ArrayUsageError, KernelArgumentError

RNG = np.random.default_rng(12)


@pytest.fixture
def mod(tmp_path):
    return tilelang.compile(source("vadd", "copy2d"), backend="emulator",
                            compiler=FakeCompiler(), cache_dir=str(tmp_path))


def err(fn):
    with pytest.raises(KernelArgumentError) as e:
        fn()
    d = e.value.diagnostics[0]
    return d.code, d.message, d.help


def vecs(n=64):
    a = RNG.standard_normal(n).astype(np.float32)
    b = RNG.standard_normal(n).astype(np.float32)
    return a, b, np.zeros(n, np.float32)


@pytest.mark.parametrize("order", [">f4", "<f4"])
def test_byte_order(mod, order):
    a, b, c = vecs()
    swapped = a.astype(order)
    if np.dtype(order).isnative:                 # the native spelling is simply f32
        mod.vadd[1](swapped, b, c)
        np.testing.assert_array_equal(c, a + b)
        return
    assert err(lambda: mod.vadd[1](swapped, b, c)) == (
        "E0911", "argument `a` of kernel `vadd` (a: Array[f32, 1]) has big-endian elements "
        "(>f4); kernels read the device's native (little-endian) byte order",
        "convert it first: `x.astype('<f4')` or "
        "`np.ascontiguousarray(x, dtype=x.dtype.newbyteorder('='))`")
    assert not c.any()                           # nothing ran
    mod.vadd[1](swapped.astype("<f4"), b, c)     # the fix the help names works
    np.testing.assert_array_equal(c, a + b)


def test_structured_object_and_misaligned(mod):
    a, b, c = vecs(16)
    rec = np.zeros(16, dtype=[("x", np.float32)])
    assert err(lambda: mod.vadd[1](rec, b, c))[:2] == (
        "E0911", "argument `a` of kernel `vadd` (a: Array[f32, 1]) has the structured dtype "
        "[('x', '<f4')], which is not a Tile dtype")
    obj = np.array([1.0] * 16, dtype=object)
    assert err(lambda: mod.vadd[1](a, obj, c))[:2] == (
        "E0911", "argument `b` of kernel `vadd` (b: Array[f32, 1]) holds Python objects "
        "(dtype object), not numbers")
    raw = np.zeros(16 * 4 + 8, np.uint8)
    start = (-raw.ctypes.data % 4) + 1           # one byte past an f32 boundary
    odd = raw[start:start + 64].view(np.float32)
    assert odd.ctypes.data % 4 == 1
    assert err(lambda: mod.vadd[1](a, b, odd)) == (
        "E0914", "argument `c` of kernel `vadd` (c: Array[f32, 1]) starts at an address that "
        "is not a multiple of its element size (4 bytes)", "pass an aligned copy, e.g. "
        "`x.copy()`")


def test_read_only_output_is_refused_input_is_fine(mod):
    a, b, c = vecs()
    c.setflags(write=False)
    assert err(lambda: mod.vadd[1](a, b, c)) == (
        "E0914", "argument `c` of kernel `vadd` (c: Array[f32, 1]) is a read-only array, but "
        "the kernel writes it", "pass a writable array (e.g. `x.copy()`); read-only arrays "
        "are fine for parameters the kernel only reads")
    a.setflags(write=False)
    b.setflags(write=False)
    out = np.zeros_like(a)
    mod.vadd[1](a, b, out)
    np.testing.assert_array_equal(out, a + b)


def test_broadcast_output_is_refused_input_is_fine(mod):
    a, b, c = vecs()
    shared = np.zeros(1, np.float32)
    racy = np.lib.stride_tricks.as_strided(shared, (64,), (0,))     # writable, stride 0
    assert racy.flags.writeable
    assert err(lambda: mod.vadd[1](a, b, racy)) == (
        "E0914", "argument `c` of kernel `vadd` (c: Array[f32, 1]) is a broadcast view "
        "(stride 0 in dimension 0, shape (64,)), but the kernel writes it: its elements share "
        "memory", "pass an array with memory of its own, e.g. `np.ascontiguousarray(x)` / "
        "`x.contiguous()`")
    assert shared[0] == 0
    two = np.broadcast_to(np.float32(2.0), (64,))          # read-only and stride 0: an input
    mod.vadd[1](two, b, c)
    np.testing.assert_array_equal(c, 2.0 + b)
    grid = np.broadcast_to(RNG.standard_normal(7).astype(np.float32), (5, 7))
    out = np.zeros((5, 7), np.float32)
    mod.copy2d[5](grid, out)
    np.testing.assert_array_equal(out, grid)
    assert err(lambda: mod.copy2d[5](out, np.lib.stride_tricks.as_strided(
        out, (5, 7), (0, 4))))[1].startswith("argument `dst` of kernel `copy2d` (dst: "
                                             "Array[f32, 2]) is a broadcast view (stride 0 in "
                                             "dimension 0, shape (5, 7))")


def test_broadcast_device_array(mod):
    a, b, _ = vecs()
    da, db = mod.to_device(a), mod.to_device(b)
    one = mod.to_device(np.float32([3.0]))
    wide = DeviceArray(mod.backend, one.ptr, (64,), "f32", (0,), one)
    out = mod.empty(64, "f32")
    mod.vadd[1](wide, db, out)                 # stride 0 is fine for an input
    np.testing.assert_array_equal(out.numpy(), 3.0 + b)
    assert err(lambda: mod.vadd[1](da, db, wide))[0] == "E0914"
    assert one.numpy()[0] == 3.0


def test_to_device_converts_byte_order_and_refuses_records():
    be = tilelang.get_backend("emulator")
    x = np.arange(6, dtype=">i4")
    d = tilelang.to_device(x, backend=be)
    assert d.dtype == "i32"
    np.testing.assert_array_equal(d.numpy(), np.arange(6))
    with pytest.raises(ArrayUsageError) as e:
        tilelang.to_device(np.zeros(3, "i4,f4"), backend=be)
    assert e.value.diagnostics[0].message == (
        "the host array has the structured dtype [('f0', '<i4'), ('f1', '<f4')], which is not "
        "a Tile dtype")


@pytest.mark.parametrize("backend", ["emulator", "interp"])
def test_real_kernel_records_what_it_writes(backend, tmp_path):
    """The code generator marks `c` (stored into) and not `a`, `b` (only loaded)."""
    mod = tilelang.compile(f"{ROOT}/examples/vadd.tile", backend=backend,
                           cache_dir=str(tmp_path))
    a, b, c = vecs(300)
    a.setflags(write=False)
    mod.vadd[1](a, b, c)
    np.testing.assert_array_equal(c, a + b)
    c.setflags(write=False)
    with pytest.raises(KernelArgumentError) as e:
        mod.vadd[1](a, b, c)
    assert e.value.diagnostics[0].message == (
        "argument `c` of kernel `vadd` (c: Array[f32, 1]) is a read-only array, but the kernel "
        "writes it")
    if backend == "emulator":
        art = mod.vadd.compile().artifact
        assert [(p.name, p.written) for p in art.params] == \
            [("a", False), ("b", False), ("c", True)]


WRITERS = """
kernel writers(src: Array[i32, 1], idx: Array[i32, 1], out: Array[i32, 1],
               cnt: Array[i32, 1], spare: Array[f32, 2], n: i32) {
    let i = arange(16) + bid(0) * 16;
    let j = gather(idx, (i,), padding = 0);
    let v = gather(src, (j,), padding = 0);
    scatter(out, (i,), v);
    atomic_add(cnt, (i * 0,), v);
    store(out, index = (bid(0),), tile = full((16,), dim(spare, 0) + n, i32));
}
"""


def test_written_flags_follow_stores_scatters_and_atomics():
    """Only `out` (scatter, store) and `cnt` (atomic) are written; gathered arrays and an
    array only measured with `dim` are not."""
    from tilelang.driver import compile_kernel
    ck = compile_kernel(WRITERS, "<writers>", "writers", link=False)
    assert [(p.name, p.written) for p in ck.artifact.params if p.kind == "array"] == [
        ("src", False), ("idx", False), ("out", True), ("cnt", True), ("spare", False)]
