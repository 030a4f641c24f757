"""`DeviceArray` as an array other libraries can take (issue 12, item 13): `np.asarray`
(a host copy), DLPack (`np.from_dlpack`, torch), the CUDA array interface; bf16 and f8 host
arrays through ml_dtypes."""

from __future__ import annotations

import gc

import ml_dtypes
import numpy as np
import pytest

import tilelang
from rt_support import fresh_runtime  # noqa: F401 (autouse fixture)
from tilelang.runtime import dlpack
from tilelang.runtime.device_array import DeviceArray
from tilelang.runtime.dlpack import KDL_CPU, KDL_CUDA, read_dlpack

# The project supports NumPy 1.24 (pyproject.toml): `copy=` reaches `__array__` from NumPy 2.0,
# and `np.from_dlpack` asks for a (writable) DLPack 1.0 capsule from 2.1.
NUMPY2 = np.lib.NumpyVersion(np.__version__) >= "2.0.0"
NUMPY_ASKS_DLPACK1 = np.lib.NumpyVersion(np.__version__) >= "2.1.0"

RNG = np.random.default_rng(13)
HOST_BACKENDS = ["emulator", "interp"]


@pytest.mark.parametrize("backend", HOST_BACKENDS)
def test_asarray_is_a_host_copy(backend):
    x = RNG.standard_normal((3, 5)).astype(np.float32)
    d = tilelang.to_device(x, backend=backend)
    a = np.asarray(d)
    assert a.dtype == np.float32 and a.shape == (3, 5)
    np.testing.assert_array_equal(a, x)
    np.testing.assert_array_equal(np.asarray(d.T[::2]), x.T[::2])
    np.testing.assert_array_equal(np.asarray(d, dtype=np.float64), x.astype(np.float64))
    if NUMPY2:                                 # `copy=` reaches __array__ from NumPy 2.0
        with pytest.raises(ValueError, match="only by a copy"):
            np.asarray(d, copy=False)


@pytest.mark.parametrize("backend", HOST_BACKENDS)
@pytest.mark.parametrize("versioned", [True, False])
def test_from_dlpack(backend, versioned):
    x = RNG.integers(-100, 100, (4, 6)).astype(np.int32)
    d = tilelang.to_device(x, backend=backend)
    assert d.__dlpack_device__() == (KDL_CPU, 0)
    if versioned:
        y = np.from_dlpack(d)                  # NumPy asks for DLPack 1.0
    else:
        class Legacy:                          # a consumer that only knows the old protocol
            def __dlpack__(self, stream=None):
                return d.__dlpack__(stream=stream)

            def __dlpack_device__(self):
                return d.__dlpack_device__()
        y = np.from_dlpack(Legacy())
    np.testing.assert_array_equal(y, x)
    v = d[1:, ::-2]
    np.testing.assert_array_equal(np.from_dlpack(v), x[1:, ::-2])
    if versioned and NUMPY_ASKS_DLPACK1:       # NumPy 1.24-2.0 ask for the legacy protocol
        y[0, 0] = 12345
        # the interpreter's memory is host memory, shared; the emulator's is exported as a copy
        assert d.numpy()[0, 0] == (12345 if backend == "interp" else x[0, 0])


def test_emulator_refuses_zero_copy():
    d = tilelang.to_device(np.zeros(3, np.float32), backend="emulator")
    with pytest.raises(BufferError, match="only be exported as a copy"):
        d.__dlpack__(copy=False)
    with pytest.raises(BufferError, match="not \\(2, 0\\)"):
        d.__dlpack__(dl_device=(2, 0))
    assert d.__dlpack__(copy=True) is not None


def test_exports_keep_memory_alive_and_are_released():
    gc.collect()
    dlpack.sweep()
    before = len(dlpack._LIVE)
    d = tilelang.to_device(np.arange(1000, dtype=np.float64), backend="interp")
    y = np.from_dlpack(d[10:])
    del d
    gc.collect()                               # the view still holds the allocation
    np.testing.assert_array_equal(y, np.arange(10, 1000))
    cap = tilelang.empty(4, "f32", backend="interp").__dlpack__()   # never consumed
    assert len(dlpack._LIVE) == before + 2
    del y, cap
    gc.collect()
    dlpack.sweep()
    assert len(dlpack._LIVE) == before


ML = {"bf16": ml_dtypes.bfloat16, "f8e4m3": ml_dtypes.float8_e4m3fn,
      "f8e5m2": ml_dtypes.float8_e5m2, "f4e2m1": ml_dtypes.float4_e2m1fn,
      "f6e2m3": ml_dtypes.float6_e2m3fn, "f6e3m2": ml_dtypes.float6_e3m2fn,
      "ue8m0": ml_dtypes.float8_e8m0fnu}
TOP = {"f8e4m3": 448.0, "f4e2m1": 6.0, "f6e2m3": 7.5, "f6e3m2": 28.0}


@pytest.mark.parametrize("backend", HOST_BACKENDS)
@pytest.mark.parametrize("tile", sorted(ML))
def test_narrow_float_round_trip(backend, tile):
    values = np.array([0.0, -0.0, 1.5, -2.25, 0.125, TOP.get(tile, 57344.0), 3.0, -1.0],
                      np.float32)
    if tile == "ue8m0":                                       # positive powers of two
        values = np.array([1.0, 2.0 ** -127, 4.0, 0.5, 2.0 ** 127, 8.0, 1.0, 0.25], np.float32)
    x = values.astype(ML[tile])
    d = tilelang.to_device(x, backend=backend)
    assert d.dtype == tile and d.itemsize == 1 + (tile == "bf16")
    back = d.numpy()
    assert back.dtype == ML[tile]
    assert back.tobytes() == x.tobytes()                     # bit for bit
    np.testing.assert_array_equal(np.asarray(d[::-3]).view(np.uint8 if tile != "bf16" else
                                                             np.uint16),
                                  x[::-3].view(np.uint8 if tile != "bf16" else np.uint16))
    # converting values: float32 → the narrow type rounds as ml_dtypes does
    e = tilelang.empty(8, tile, backend=backend)
    e.copy_from(values + np.float32(0.01))
    assert e.numpy().tobytes() == (values + np.float32(0.01)).astype(ML[tile]).tobytes()


class FakeCuda:
    """Enough of a CUDA back end for the exports (no memory is touched)."""

    name = "cuda"
    device_id = 1

    def __init__(self):
        self.syncs = 0

    def synchronize(self):
        self.syncs += 1


def test_cuda_exports_describe_device_memory():
    be = FakeCuda()
    d = DeviceArray(be, 0x7F0000001000, (4, 6), "f32")
    assert d.__dlpack_device__() == (KDL_CUDA, 1)
    cai = d.__cuda_array_interface__
    assert cai == {"shape": (4, 6), "typestr": "<f4", "data": (0x7F0000001000, False),
                   "version": 3, "strides": None}
    assert d.T.__cuda_array_interface__["strides"] == (4, 24)
    cap, data, shape, strides, dtype, device = read_dlpack(d[1:, ::2])
    assert (data, shape, strides, dtype, device) == (
        0x7F0000001000 + 24, (3, 3), (6, 2), (2, 32, 1), (KDL_CUDA, 1))
    d.__dlpack__(stream=7)
    assert be.syncs == 1                      # the consumer's stream sees finished work
    h = DeviceArray(be, 0x7F0000002000, (8,), "bf16")
    assert read_dlpack(h)[4] == (4, 16, 1)
    with pytest.raises(AttributeError, match="no bf16 type string"):
        h.__cuda_array_interface__
    emu = tilelang.empty(2, "f32", backend="emulator")
    assert not hasattr(emu, "__cuda_array_interface__")


@pytest.mark.gpu
def test_torch_from_dlpack_on_a_gpu():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():       # a CPU-only torch (the emulated driver's runs)
        pytest.skip("torch has no GPU")
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    d = tilelang.to_device(x, backend="cuda")
    t = torch.from_dlpack(d)
    assert t.is_cuda and t.shape == (4, 6)
    assert torch.equal(t.cpu(), torch.from_numpy(x))
    t.mul_(2)                                  # the same memory
    torch.cuda.synchronize()
    np.testing.assert_array_equal(d.numpy(), 2 * x)
    tv = torch.from_dlpack(d.T)
    assert tv.stride() == (1, 6)
    b = tilelang.to_device(np.float32([1.5, -2]).astype(ml_dtypes.bfloat16), backend="cuda")
    assert torch.from_dlpack(b).dtype == torch.bfloat16
    assert torch.as_tensor(d, device="cuda").data_ptr() == d.ptr     # via the CAI


class Producer:
    """An object that only speaks DLPack (like a foreign library's array)."""

    def __init__(self, inner, fail=False):
        self.inner, self.fail = inner, fail

    def __dlpack__(self, stream=None):
        if self.fail:
            raise RuntimeError("producer broke")
        return self.inner.__dlpack__()

    def __dlpack_device__(self):
        return self.inner.__dlpack_device__()


@pytest.mark.parametrize("backend", HOST_BACKENDS)
def test_dlpack_producers_of_narrow_types_and_broken_ones(backend, tmp_path):
    """NumPy cannot import bf16 through DLPack; the runtime reads the capsule itself."""
    mod = tilelang.compile(
        "kernel cp(x: Array[bf16, 1], y: Array[bf16, 1]) {\n"
        "    store(y, index = (bid(0),), tile = load(x, index = (bid(0),), shape = (8,),\n"
        "                                                padding = 0.0));\n}\n",
        backend=backend, cache_dir=str(tmp_path))
    x = (RNG.standard_normal(8).astype(np.float32)).astype(ml_dtypes.bfloat16)
    src = tilelang.to_device(x, backend="interp")          # host memory behind the capsule
    out = np.zeros(8, ml_dtypes.bfloat16)
    mod.cp[1](Producer(src), out)
    assert out.tobytes() == x.tobytes()
    with pytest.raises(tilelang.KernelArgumentError) as e:
        mod.cp[1](Producer(src, fail=True), out)
    assert (e.value.code, e.value.diagnostics[0].message) == (
        "E0914", "argument `x` of kernel `cp` (x: Array[bf16, 1]) could not be read through "
        "DLPack (RuntimeError: producer broke)")
