"""Argument checks (each error names the parameter and the kernel) and exact packing: scalars
at their own width, arrays as address + extents + strides (docs/abi.md)."""

from __future__ import annotations

import struct

import numpy as np
import pytest

import tilelang
from rt_support import FakeCompiler, fresh_runtime, source  # noqa: F401 (autouse fixture)
from tilelang.codegen.api import ArrayFacts
from tilelang.runtime.args import extract, facts_key
from tilelang.runtime.facts import facts_of
from tilelang.runtime.dlpack import read_dlpack
from tilelang.runtime.emulator_backend import EmulatorBackend
from tilelang.runtime.errors import KernelArgumentError
from tilelang.runtime.packing import layout
from tilelang.runtime.signature import ParamInfo


@pytest.fixture
def mod(tmp_path):
    return tilelang.compile(source("vadd", "scalars", "needs_const", "copy2d"),
                            backend="emulator", compiler=FakeCompiler(), cache_dir=str(tmp_path))


def err(fn):
    with pytest.raises(KernelArgumentError) as e:
        fn()
    d = e.value.diagnostics[0]
    return d.code, d.message, d.help


F = np.zeros(16, np.float32)


def test_argument_count(mod):
    assert err(lambda: mod.vadd[1](F, F)) == (
        "E0910", "kernel `vadd` takes 3 arguments (a, b, c), got 2",
        "const parameters are not passed positionally: give them as keywords or with "
        "`.specialize(...)`")
    assert err(lambda: mod.vadd[1](F, F, F, 1024))[1] == \
        "kernel `vadd` takes 3 arguments (a, b, c), got 4"


def test_dtype(mod):
    assert err(lambda: mod.vadd[1](F, np.zeros(16, np.float64), F)) == (
        "E0911", "argument `b` of kernel `vadd` (b: Array[f32, 1]) has dtype f64, expected f32",
        "convert it first, e.g. `x.astype(...)` / `x.to(...)` to f32")
    assert err(lambda: mod.vadd[1](np.zeros(4, np.complex64), F, F))[1] == \
        "argument `a` of kernel `vadd` (a: Array[f32, 1]) has dtype a dtype Tile has no name " \
        "for, expected f32"


def test_rank(mod):
    assert err(lambda: mod.vadd[1](F, F, np.zeros((2, 3), np.float32))) == (
        "E0912", "argument `c` of kernel `vadd` (c: Array[f32, 1]) has rank 2 (shape (2, 3)), "
        "expected rank 1", "reshape the argument to the kernel's rank")
    assert err(lambda: mod.copy2d[1](np.float32(1.0), F))[0] == "E0914"


def test_not_an_array(mod):
    assert err(lambda: mod.vadd[1]([1.0, 2.0], F, F)) == (
        "E0914", "argument `a` of kernel `vadd` (a: Array[f32, 1]) is a list, not an array",
        "pass a torch tensor, a CuPy array, a DLPack array, a NumPy array (on the emulator) or "
        "a tilelang DeviceArray")
    assert err(lambda: mod.vadd[1](F, None, F)) == (
        "E0914", "argument `b` of kernel `vadd` (b: Array[f32, 1]) is None, but the parameter "
        "is not optional", "pass an array, or declare `b: Optional[Array[f32, 1]]` and test "
        "`is_none(b)` in the kernel")


class FakeCudaArray:
    """Speaks __cuda_array_interface__ like CuPy/numba device arrays."""

    def __init__(self, shape, typestr="<f4", strides=None, ptr=0x7F0000000000):
        self.cai = {"shape": shape, "typestr": typestr, "data": (ptr, False),
                    "strides": strides, "version": 3}

    @property
    def __cuda_array_interface__(self):
        return self.cai


def test_cuda_array_on_the_emulator(mod):
    assert err(lambda: mod.vadd[1](F, FakeCudaArray((16,)), F)) == (
        "E0913", "argument `b` of kernel `vadd` (b: Array[f32, 1]) is in CUDA device memory "
        "(rt_support.FakeCudaArray), but the kernel runs on the emulator back end"
        .replace("rt_support", __name__),
        "the emulator runs on host memory: pass a NumPy array, or a DeviceArray made with "
        "`tilelang.to_device(..., backend='emulator')`")


def test_device_array_of_another_device(mod):
    other = EmulatorBackend()
    d = tilelang.DeviceArray.from_host(other, F)
    code, msg, _ = err(lambda: mod.vadd[1](F, F, d))
    assert code == "E0913"
    assert msg == "argument `c` of kernel `vadd` (c: Array[f32, 1]) is a DeviceArray of " \
        "another emulator device (EmulatorBackend(sm_90))"


def test_scalar_errors(mod):
    out = np.zeros(10, np.uint64)
    good = dict(a=1, b=2, c=3, d=4, e=1.0, f=2.0, g=3.0, h=True, k=1.0, m=5)

    def call(**over):
        v = {**good, **over}
        return lambda: mod.scalars[1](out, *v.values())
    assert err(call(a=200)) == ("E0915", "argument `a` of kernel `scalars` (a: i8): 200 does "
                                "not fit i8 (range -128..127)", "pass a value representable "
                                "as i8")
    assert err(call(b=-1))[1] == \
        "argument `b` of kernel `scalars` (b: u16): -1 does not fit u16 (range 0..65535)"
    assert err(call(c=1.5))[1] == \
        "argument `c` of kernel `scalars` (c: i32): expected an integer, got float 1.5"
    assert err(call(d=np.float64(2.0)))[1] == \
        "argument `d` of kernel `scalars` (d: i64): expected an integer, got float 2.0"
    assert err(call(e=70000.0))[1] == \
        "argument `e` of kernel `scalars` (e: f16): 70000.0 overflows f16 (largest finite 65504)"
    assert err(call(f="x"))[1] == \
        "argument `f` of kernel `scalars` (f: f32): expected a number, got a str"
    assert err(call(h=2))[1] == \
        "argument `h` of kernel `scalars` (h: bool): expected a bool (or 0/1), got int 2"
    assert err(call(k=None))[1] == \
        "argument `k` of kernel `scalars` (k: bf16): expected a number, got a NoneType"
    assert err(call(m=2**64))[1] == \
        "argument `m` of kernel `scalars` (m: u64): 18446744073709551616 does not fit u64 " \
        "(range 0..18446744073709551615)"


def test_const_errors(mod):
    assert err(lambda: mod.vadd.specialize(TILES=64)) == (
        "E0916", "kernel `vadd` has no const parameter `TILES`",
        "its const parameters are: `TILE`")
    assert err(lambda: mod.vadd[1](F, F, F, TILE=1.5))[1] == \
        "const parameter `TILE` of kernel `vadd` is i32; 1.5 is not a valid value"
    assert err(lambda: mod.vadd[1](F, F, F, TILE=True))[0] == "E0916"
    assert err(lambda: mod.needs_const[1](np.zeros(64, np.int32))) == (
        "E0916", "kernel `needs_const` needs a value for `const N: i32`, which has no default",
        "pass it at the launch (`needs_const[grid](..., N=...)`) or with "
        "`.specialize(N=...)`")
    out = np.zeros(64, np.int32)
    mod.needs_const[1](out, N=5)
    np.testing.assert_array_equal(out, np.arange(64))


def test_scalars_packed_at_exact_width(mod):
    out = np.zeros(10, np.uint64)
    mod.scalars[1](out, -128, 65535, -2**31, 2**63 - 1, 65504.0, 3.25, 2.0**-1074, True,
                   1.01171875, 2**64 - 1)
    ints = out.view(np.int64)
    floats = out.view(np.float64)
    assert ints[0] == -128 and out[1] == 65535 and ints[2] == -2**31 and ints[3] == 2**63 - 1
    assert floats[4] == 65504.0 and floats[5] == 3.25 and floats[6] == 2.0**-1074
    assert out[7] == 1
    # bf16 keeps 7 fraction bits: 1 + 3 * 2^-8 is halfway, rounds to the even 1 + 2^-6
    assert floats[8] == 1.015625
    assert out[9] == 2**64 - 1


def test_numpy_scalars_and_python_numbers(mod):
    out = np.zeros(10, np.uint64)
    mod.scalars[1](out, np.int8(-3), np.uint16(7), np.int32(-9), np.int64(11), np.float16(0.5),
                   np.float32(0.25), 2, 0, 3, np.uint64(2**63))
    assert list(out.view(np.int64)[:4]) == [-3, 7, -9, 11]
    assert list(out.view(np.float64)[[4, 5, 6, 8]]) == [0.5, 0.25, 2.0, 3.0]
    assert out[7] == 0 and out[9] == 2**63


def test_layout_natural_alignment():
    params = (ParamInfo("x", "array", "f32", 2), ParamInfo("a", "scalar", "i8"),
              ParamInfo("b", "scalar", "f16"), ParamInfo("c", "scalar", "f64"),
              ParamInfo("d", "scalar", "bool"), ParamInfo("e", "scalar", "i32"))
    lay = layout(params)
    assert lay.offsets == (0, 8, 16, 24, 32, 40, 42, 48, 56, 60)
    assert lay.sizes == (8, 8, 8, 8, 8, 1, 2, 8, 1, 4)
    assert lay.size == 64
    assert struct.calcsize(lay.fmt) == 64


def test_extract_numpy_views():
    a = np.zeros((4, 6), np.float32)
    v = extract(a[:, ::2])
    assert (v.ptr, v.shape, v.strides, v.dtype, v.where) == \
        (a.ctypes.data, (4, 3), (6, 2), "f32", "host")
    v = extract(a[::-1])
    assert v.strides == (-6, 1) and v.ptr == a.ctypes.data + 3 * 24
    assert extract([1, 2]) is None and extract(3.0) is None


def test_extract_cuda_array_interface():
    v = extract(FakeCudaArray((3, 5), "<f2", (20, 2), ptr=0x1000))
    assert (v.ptr, v.shape, v.strides, v.dtype, v.where) == (0x1000, (3, 5), (10, 1), "f16",
                                                             "cuda")
    v = extract(FakeCudaArray((3, 5), "|u1"))
    assert v.strides == (5, 1) and v.dtype == "u8"
    assert extract(FakeCudaArray((3,), "<f4", (6,))).strides is None     # 1.5 elements


def test_extract_torch_like_tensor():
    class Dt:
        def __str__(self):
            return "torch.bfloat16"

    class Dev:
        index = 1

    class Tensor:
        dtype, is_cuda, device, shape = Dt(), True, Dev(), (2, 3)

        def data_ptr(self):
            return 0x2000

        def stride(self):
            return (1, 2)
    Tensor.__module__ = "torch"
    v = extract(Tensor())
    assert (v.ptr, v.shape, v.strides, v.dtype, v.where, v.device_id) == \
        (0x2000, (2, 3), (1, 2), "bf16", "cuda", 1)


def test_dlpack_reader_matches_numpy():
    a = np.arange(24, dtype=np.int16).reshape(4, 6)
    for view in (a, a[:, ::2], a[1:, 2:]):
        _, data, shape, strides, dt, dev = read_dlpack(view)
        assert data == view.ctypes.data
        assert shape == view.shape
        assert strides == tuple(s // 2 for s in view.strides)
        assert dt == (0, 16, 1) and dev[0] == 1


def test_facts_key():
    assert facts_key(256, (8, 8), (8, 1), 4) == "caes"      # 32-byte rows
    assert facts_key(256, (8, 8), (6, 1), 4) == "c-es"      # 24-byte rows
    assert facts_key(256, (8, 8), (1, 8), 4) == "--es"
    assert facts_key(260, (8,), (1,), 4) == "c-es"
    assert facts_key(256, (8, 1), (3, 7), 4) == "c--s"      # last extent 1: stride unused
    assert facts_key(256, (1, 8), (3, 1), 4) == "caes"      # first extent 1: stride unused
    assert facts_key(256, (), (), 4) == "caes"
    assert facts_key(256, (8, 6), (8, 1), 4) == "ca-s"      # 24-byte last extent


@pytest.mark.parametrize("shape,strides,is_small", [
    (((1 << 31) - 1,), (1,), True),         # offsets 0 .. 2^31 - 2
    ((1 << 31,), (1,), False),              # offsets fit, the extent 2^31 does not
    ((1 << 31 | 1,), (1,), False),          # offset 2^31 does not fit
    ((1 << 30, 2), (2, 1), True),           # (2^30 - 1) * 2 + 1 = 2^31 - 1
    ((1 << 30, 3), (3, 1), False),          # (2^30 - 1) * 3 + 2 > 2^31 - 1
    ((2, 1 << 30), (-(1 << 30), 1), True),  # span 2^31 - 1 either way
    ((2, 1 << 30), (-(1 << 30), 2), False),
    ((1 << 30,), (0,), True),               # a broadcast: every element at offset 0
    ((1 << 40,), (0,), False),              # ... but an extent of 2^31 or more
    ((0, 1 << 40), (1 << 40, 1), True),     # empty: nothing to reach
    ((3,), (1 << 30,), False),              # 2 * 2^30
])
def test_small_fact(shape, strides, is_small):
    """`s`: every element's offset from the address, in elements, fits in a signed 32-bit
    integer and every extent is below 2^31, so the kernel computes offsets (and bounds along
    axes that start at an i32) in 32 bits; the rank-1 fast reader agrees."""
    span = 0 if 0 in shape else sum((n - 1) * abs(s) for n, s in zip(shape, strides))
    assert (span < 1 << 31 and (0 in shape or max(shape) < 1 << 31)) == is_small
    key = facts_key(256, shape, strides, 4)
    assert key.rstrip("n").endswith("s") == is_small and len(key.rstrip("n")) == 3 + is_small
    if len(shape) == 1:
        assert facts_of(256, shape, strides, 4) == key
    assert ArrayFacts.from_key(key).small == is_small
    assert ArrayFacts.from_key(key).key() == key


@pytest.mark.parametrize("shape,strides,itemsize,mappable", [
    ((8, 8), (8, 1), 4, True),
    ((8, 8), (-8, 1), 4, False),            # rows reversed
    ((8, 8), (0, 1), 4, False),             # a broadcast row
    ((1, 8), (0, 1), 4, True),              # extent 1: its stride is never used
    ((1, 8), (-5, 1), 4, True),
    ((8,), (-1,), 4, False),                # a[::-1]
    ((8,), (0,), 2, False),
    ((1,), (0,), 2, True),
    ((), (), 4, True),
    ((2, 8), (1 << 38, 1), 4, False),       # 2^40 bytes: past a tensor map's strides
    ((2, 8), ((1 << 38) - 4, 1), 4, True),
    ((1 << 32, 1), (1, 1), 2, False),       # 2^32 elements: past a tensor map's extents
    (((1 << 32) - 1, 1), (1, 1), 2, True),
])
def test_tensor_map_fact(shape, strides, itemsize, mappable):
    """`n`: no tensor map describes the array (a zero or negative stride over an extent
    above 1, an extent of 2^32 or a stride of 2^40 bytes), so a kernel for it never uses TMA
    on it; the rank-1 fast reader agrees, and ordinary keys are unchanged."""
    key = facts_key(256, shape, strides, itemsize)
    assert key.endswith("n") != mappable
    assert ArrayFacts.from_key(key).tensor_map == mappable
    assert ArrayFacts.from_key(key).key() == key
    if len(shape) == 1:
        assert facts_of(256, shape, strides, itemsize) == key
    assert facts_key(256, (8, 8), (8, 1), 4) == "caes"


def _key(a: np.ndarray, address: int = 256) -> str:
    """facts_key of a NumPy array (or view) placed at `address`."""
    return facts_key(address, a.shape, tuple(s // a.itemsize for s in a.strides), a.itemsize)


@pytest.mark.parametrize("dtype,cols,extent16", [
    (np.float16, 64, True), (np.float16, 65, False), (np.float16, 8, True),
    (np.float16, 4, False), (np.float32, 4, True), (np.float32, 6, False),
    (np.float64, 2, True), (np.float64, 3, False), (np.int8, 16, True), (np.int8, 48, True),
    (np.int8, 15, False), (np.int8, 24, False)])
def test_extent16_from_numpy_arrays(dtype, cols, extent16):
    """`e`: the last extent in bytes is a multiple of 16 (rank 1 and 2, views of wider rows
    too), whatever the other facts."""
    e = "e" if extent16 else "-"
    assert _key(np.zeros((5, cols), dtype)) == "c" + ("a" if extent16 else "-") + e + "s"
    assert _key(np.zeros(cols, dtype)) == "ca" + e + "s"
    wide = np.zeros((5, 128), dtype)                 # 16-byte aligned rows
    assert _key(wide[:, :cols]) == "ca" + e + "s"
    # not contiguous: e still measured; a negative stride: no tensor map
    assert _key(wide[:, ::-1][:, :cols]) == "-a" + e + "sn"


def test_extent16_of_a_view_of_aligned_rows():
    """The issue's case: a (M, 65) view of a (M, 72) f16 buffer is contiguous and aligned,
    and its chunks of 16 bytes do not tile its rows."""
    buf = np.zeros((100, 72), np.float16)
    assert _key(buf) == "caes"
    assert _key(buf[:, :65]) == "ca-s"
    assert _key(buf[:, :64]) == "caes"
