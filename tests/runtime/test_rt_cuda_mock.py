"""The CUDA back end's logic without a GPU: `cuda.bindings.driver` is replaced by a recording
stand-in (memory is host memory), so these tests check what the runtime hands the driver —
the kernelParams pointer array and the bytes it points at (docs/abi.md), the launch
configuration, cuLaunchKernelEx's cluster attribute, the kernel attributes for large dynamic
shared memory and non-portable clusters, stream handles, context handling and the readable
errors. The cubins are real (nvJitLink runs without a GPU). tests/runtime/test_rt_gpu.py runs
the same paths on a GPU."""

from __future__ import annotations

import ctypes
import enum
import struct
import threading

import numpy as np
import pytest

import tilelang
from rt_support import FakeCompiler, fresh_runtime, source  # noqa: F401
from tilelang.runtime import cuda as rt_cuda
from tilelang.runtime import backends as rt_backends


class CUresult(enum.IntEnum):
    CUDA_SUCCESS = 0
    CUDA_ERROR_INVALID_VALUE = 1
    CUDA_ERROR_INVALID_CONTEXT = 201
    CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701


class Handle:
    def __init__(self, v=0):
        self.v = int(v)

    def __int__(self):
        return self.v


class CUfunction(Handle):
    pass


class CUstream(Handle):
    pass


class Obj:
    def __init__(self, **kw):
        self.__dict__.update(kw)


class FakeDriver:
    CUresult = CUresult
    CUfunction = CUfunction
    CUstream = CUstream
    CUdevice_attribute = enum.IntEnum("A", [
        "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR", "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR",
        "CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK", "CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X",
        "CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y", "CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z",
        "CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X", "CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y",
        "CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z",
        "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"])
    CUfunction_attribute = enum.IntEnum("F", [
        "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES",
        "CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED"])
    CUlaunchAttributeID = enum.IntEnum("L", ["CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION"])

    def __init__(self, cc=(9, 0), current_ctx=0):
        self.cc = cc
        self.current = current_ctx
        self.calls: list = []
        self.launches: list = []
        self.mem: dict[int, ctypes.Array] = {}
        self.fail_next: CUresult | None = None
        A = self.CUdevice_attribute
        self.attrs = {A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: cc[0],
                      A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: cc[1],
                      A.CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: 1024,
                      A.CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: 1024,
                      A.CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: 1024,
                      A.CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: 64,
                      A.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: 2**31 - 1,
                      A.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: 65535,
                      A.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: 65535,
                      A.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: 232448}
        self.thread_ctx = threading.local()

    # -- context and device -------------------------------------------------------------------
    def cuCtxGetCurrent(self):
        return CUresult.CUDA_SUCCESS, Handle(getattr(self.thread_ctx, "ctx", self.current))

    def cuCtxGetDevice(self):
        return CUresult.CUDA_SUCCESS, 0

    def cuDeviceGet(self, i):
        return CUresult.CUDA_SUCCESS, i

    def cuDevicePrimaryCtxRetain(self, dev):
        return CUresult.CUDA_SUCCESS, Handle(77)

    def cuCtxSetCurrent(self, ctx):
        self.calls.append(("cuCtxSetCurrent", int(ctx)))
        self.thread_ctx.ctx = int(ctx)
        return (CUresult.CUDA_SUCCESS,)

    def cuDeviceGetAttribute(self, a, dev):
        return CUresult.CUDA_SUCCESS, self.attrs[a]

    def cuDeviceGetName(self, n, dev):
        return CUresult.CUDA_SUCCESS, b"Fake GPU\0\0\0"

    def cuGetErrorName(self, err):
        return CUresult.CUDA_SUCCESS, CUresult(err).name.encode()

    def cuGetErrorString(self, err):
        return CUresult.CUDA_SUCCESS, b"described"

    def cuCtxSynchronize(self):
        self.calls.append(("cuCtxSynchronize",))
        return (CUresult.CUDA_SUCCESS,)

    # -- memory (host memory standing in for the device) --------------------------------------
    def cuMemAlloc(self, n):
        buf = (ctypes.c_char * (n + 256))()
        addr = (ctypes.addressof(buf) + 255) // 256 * 256
        self.mem[addr] = buf
        return CUresult.CUDA_SUCCESS, addr

    def cuMemFree(self, p):
        self.mem.pop(int(p), None)
        return (CUresult.CUDA_SUCCESS,)

    def cuMemcpyHtoD(self, dst, src, n):
        ctypes.memmove(int(dst), int(src), n)
        return (CUresult.CUDA_SUCCESS,)

    def cuMemcpyDtoH(self, dst, src, n):
        ctypes.memmove(int(dst), int(src), n)
        return (CUresult.CUDA_SUCCESS,)

    # -- modules and launches -----------------------------------------------------------------
    def cuLibraryLoadData(self, code, *rest):
        assert isinstance(code, bytes) and code[:4] == b"\x7fELF"     # a real cubin
        self.calls.append(("cuLibraryLoadData", rest))
        return CUresult.CUDA_SUCCESS, Handle(5)

    def cuLibraryGetKernel(self, lib, name):
        self.calls.append(("cuLibraryGetKernel", name))
        return CUresult.CUDA_SUCCESS, Handle(0xBEEF)

    def cuKernelSetAttribute(self, attrib, val, kernel, dev):
        self.calls.append(("cuKernelSetAttribute", attrib.name, val, int(kernel)))
        return (CUresult.CUDA_SUCCESS,)

    def CUlaunchConfig(self):
        return Obj()

    def CUlaunchAttribute(self):
        return Obj(id=None, value=Obj(clusterDim=Obj(x=0, y=0, z=0)))

    def _params(self, addr):
        self.last_params_addr = addr
        return addr

    def _check_context(self):
        if self.fail_next is not None:
            err, self.fail_next = self.fail_next, None
            return err
        if getattr(self.thread_ctx, "ctx", self.current) == 0:
            return CUresult.CUDA_ERROR_INVALID_CONTEXT
        return CUresult.CUDA_SUCCESS

    def cuLaunchKernel(self, f, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        err = self._check_context()
        if err == CUresult.CUDA_SUCCESS:
            self.launches.append({"f": int(f), "grid": (gx, gy, gz), "block": (bx, by, bz),
                                  "smem": smem, "stream": int(stream), "params": params,
                                  "ex": None})
        return (err,)

    def cuLaunchKernelEx(self, cfg, f, params, extra):
        err = self._check_context()
        if err == CUresult.CUDA_SUCCESS:
            a = cfg.attrs[0]
            self.launches.append({
                "f": int(f), "grid": (cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ),
                "block": (cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ),
                "smem": cfg.sharedMemBytes, "stream": int(cfg.hStream), "params": params,
                "ex": (a.id.name, (a.value.clusterDim.x, a.value.clusterDim.y,
                                   a.value.clusterDim.z), cfg.numAttrs)})
        return (err,)


def read_params(addr: int, layout) -> tuple:
    """Follow the kernelParams pointer array as the driver does and decode each value."""
    ptrs = (ctypes.c_void_p * layout.count).from_address(addr)
    chars = [c for c in layout.fmt[1:] if c.isalpha() and c != "x"]
    return tuple(struct.unpack("<" + c, ctypes.string_at(ptrs[i], layout.sizes[i]))[0]
                 for i, c in enumerate(chars))


@pytest.fixture
def drv(monkeypatch):
    d = FakeDriver()
    monkeypatch.setattr(rt_cuda, "_driver", lambda: d)
    monkeypatch.setattr(rt_backends, "_BACKENDS", {})
    return d


@pytest.fixture
def mod(drv, tmp_path):
    return tilelang.compile(source("vadd", "scalars", "clus", "clus16", "bigsmem", "copy2d"),
                            backend="cuda", compiler=FakeCompiler(), cache_dir=str(tmp_path))


def test_backend_reads_the_device(drv):
    be = tilelang.get_backend("cuda")
    assert be.limits.name == "Fake GPU (device 0)"
    assert be.capability == (9, 0) and be.default_target() == "sm_90a"
    assert be.limits.max_shared_per_block == 232448
    assert ("cuCtxSetCurrent", 77) in drv.calls          # no context was current


def test_existing_context_is_kept(monkeypatch):
    d = FakeDriver(current_ctx=12)
    monkeypatch.setattr(rt_cuda, "_driver", lambda: d)
    rt_cuda.CudaBackend()
    assert not [c for c in d.calls if c[0] == "cuCtxSetCurrent"]


@pytest.mark.parametrize("cc,target", [((8, 0), "sm_80"), ((8, 6), "sm_86"), ((8, 7), "sm_86"),
                                       ((8, 9), "sm_89"), ((9, 0), "sm_90a"),
                                       ((10, 0), "sm_100a"), ((12, 0), "sm_120a"),
                                       ((12, 1), "sm_120")])
def test_target_for_capability(cc, target):
    assert rt_cuda.target_for(cc) == target


def test_vadd_parameters_reach_the_driver(mod, drv):
    a = mod.to_device(np.arange(3000, dtype=np.float32))
    c = mod.empty(3000, "f32")
    mod.vadd[3](a, a[::2], c, stream=1234)
    [launch] = drv.launches
    assert launch["grid"] == (3, 1, 1) and launch["block"] == (128, 1, 1)
    assert launch["smem"] == 0 and launch["stream"] == 1234 and launch["ex"] is None
    assert launch["f"] == 0xBEEF
    lay = mod.vadd._layout
    assert read_params(launch["params"], lay) == (a.ptr, 3000, 1, a.ptr, 1500, 2, c.ptr, 3000, 1)
    assert ("cuLibraryGetKernel", b"vadd") in drv.calls
    spec = mod.vadd._specs[("caes", "-aes", "caes=0")]      # c has a's shape
    assert spec.cubin[:4] == b"\x7fELF"
    np.testing.assert_array_equal(a.numpy(), np.arange(3000, dtype=np.float32))


def test_scalars_packed_for_the_driver(mod, drv):
    out = mod.empty(10, "u64")
    mod.scalars[1](out, -5, 65535, -7, 2**40, 1.5, 0.1, 0.25, True, 1.01171875, 2**64 - 1)
    vals = read_params(drv.launches[0]["params"], mod.scalars._layout)
    assert vals[3:] == (-5, 65535, -7, 2**40, 1.5, float(np.float32(0.1)), 0.25, 1,
                        0x3F82, 2**64 - 1)     # bf16 1.015625 = 0x3f82


def test_cluster_kernel_uses_launch_kernel_ex(mod, drv):
    out = mod.empty(8, "i32")
    mod.clus[8](out)
    ex = drv.launches[0]["ex"]
    assert ex == ("CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION", (2, 1, 1), 1)
    assert drv.launches[0]["block"] == (32, 1, 1)
    assert not [c for c in drv.calls if c[0] == "cuKernelSetAttribute"]


def test_large_dynamic_shared_memory_sets_the_attribute(mod, drv):
    out = mod.empty(128, "i32")
    mod.bigsmem[1](out)
    assert ("cuKernelSetAttribute", "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES", 65536,
            0xBEEF) in drv.calls
    assert drv.launches[0]["smem"] == 65536


def test_nonportable_cluster_attribute(drv, tmp_path):
    from dataclasses import replace
    from rt_support import LIBRARY
    fc = FakeCompiler()
    m = tilelang.compile(source("clus16"), backend="cuda", compiler=fc, cache_dir=str(tmp_path))
    built = fc.build(m.text, m.path, "clus16", {}, {"out": tilelang.runtime.module.ArrayFacts()},
                     m.options, True)
    built = replace(built, artifact=replace(built.artifact, nonportable_cluster=True))
    from tilelang.runtime.packing import layout
    m.backend.prepare(built, layout(LIBRARY["clus16"].params))
    assert ("cuKernelSetAttribute", "CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED", 1,
            0xBEEF) in drv.calls
    with pytest.raises(tilelang.LaunchConfigError) as e:      # portable kernels: 8 at most
        m.clus16[(4, 4)](m.empty(16, "i32"))
    assert e.value.code == "E0906"


def test_thread_without_context(mod, drv):
    a = mod.to_device(np.zeros(16, np.float32))
    errors = []

    def work():
        try:
            drv.thread_ctx.ctx = 0               # a fresh thread has no current context
            mod.vadd[1](a, a, a)
        except Exception as e:                   # pragma: no cover - reported below
            errors.append(e)
    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert not errors and len(drv.launches) == 1
    assert drv.calls.count(("cuCtxSetCurrent", 77)) == 2


def test_driver_error_names_the_kernel(mod, drv):
    a = mod.to_device(np.zeros(16, np.float32))
    drv.fail_next = CUresult.CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES
    with pytest.raises(tilelang.DeviceError) as e:
        mod.vadd[1](a, a, a)
    assert e.value.code == "E0930"
    assert e.value.diagnostics[0].message == "cuLaunchKernel for kernel `vadd` failed: " \
        "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: described"


def test_streams(mod, drv):
    a = mod.to_device(np.zeros(16, np.float32))

    class TorchLikeStream:
        cuda_stream = 99

    class ProtocolStream:
        def __cuda_stream__(self):
            return (0, 55)
    mod.vadd[1](a, a, a, stream=TorchLikeStream())
    mod.vadd[1](a, a, a, stream=ProtocolStream())
    mod.vadd[1](a, a, a, stream=CUstream(7))
    tilelang.launch(None, 1, mod.vadd, (a, a, a))
    assert [x["stream"] for x in drv.launches] == [99, 55, 7, 0]
    with pytest.raises(tilelang.KernelArgumentError) as e:
        mod.vadd[1](a, a, a, stream=2.5)
    assert e.value.diagnostics[0].message == "cannot use float as a CUDA stream"


def test_host_arrays_are_refused(mod):
    with pytest.raises(tilelang.KernelArgumentError) as e:
        mod.vadd[1](np.zeros(4, np.float32), np.zeros(4, np.float32), np.zeros(4, np.float32))
    assert e.value.diagnostics[0].message == "argument `a` of kernel `vadd` " \
        "(a: Array[f32, 1]) is in host " \
        "memory (numpy.ndarray), but the cuda back end needs GPU memory"


def test_cuda_array_interface_arrays(mod, drv):
    buf = mod.empty((4, 6), "f32")

    class CAI:
        __cuda_array_interface__ = {"shape": (4, 3), "typestr": "<f4",
                                    "data": (buf.ptr, False), "strides": (24, 8), "version": 3}
    mod.copy2d[4](CAI(), buf)
    vals = read_params(drv.launches[0]["params"], mod.copy2d._layout)
    assert vals[:5] == (buf.ptr, 4, 3, 6, 2)
    assert mod.copy2d._specs.keys() == {("---s", "c--s")}   # 24-byte rows: not aligned16


def test_device_array_exports_on_cuda(mod, drv):
    """A CUDA DeviceArray describes its device memory (DLPack kDLCUDA, CAI v3), and what it
    exports launches like any CUDA array; a broadcast view is refused where the kernel writes."""
    from tilelang.runtime.dlpack import KDL_CUDA, read_dlpack
    from tilelang.runtime.device_array import DeviceArray
    a = mod.to_device(np.arange(24, dtype=np.float32).reshape(4, 6))
    assert a.__dlpack_device__() == (KDL_CUDA, 0)
    _, data, shape, strides, dtype, device = read_dlpack(a.T)
    assert (data, shape, strides, dtype, device) == (a.ptr, (6, 4), (1, 6), (2, 32, 1),
                                                    (KDL_CUDA, 0))
    syncs = sum(1 for c in drv.calls if c[0] == "cuCtxSynchronize")
    a.__dlpack__(stream=5)
    assert sum(1 for c in drv.calls if c[0] == "cuCtxSynchronize") == syncs + 1

    class Foreign:                            # what CuPy would build from the interface
        def __init__(self, cai):
            self.cai = cai

        @property
        def __cuda_array_interface__(self):
            return self.cai
    out = mod.empty((4, 3), "f32")
    mod.copy2d[4](Foreign(a[:, ::2].__cuda_array_interface__), out)
    vals = read_params(drv.launches[-1]["params"], mod.copy2d._layout)
    assert vals[:5] == (a.ptr, 4, 3, 6, 2)
    np.testing.assert_array_equal(np.asarray(a), np.arange(24).reshape(4, 6))
    wide = DeviceArray(mod.backend, out.ptr, (4, 3), "f32", (0, 1), out)
    launches = len(drv.launches)
    with pytest.raises(tilelang.KernelArgumentError) as e:
        mod.copy2d[4](a, wide)
    assert e.value.diagnostics[0].message.startswith(
        "argument `dst` of kernel `copy2d` (dst: Array[f32, 2]) is a broadcast view")
    assert len(drv.launches) == launches                  # nothing reached the driver
    mod.copy2d[4](wide, mod.empty((4, 3), "f32"))         # as an input it is fine
