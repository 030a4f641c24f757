"""The CUDA back end on the driver API of cuda-python (`cuda.bindings.driver`).

- Devices and contexts (docs/launch-path.md): one `CudaBackend` per device, all sharing the
  first one's registry (`for_device`, `get_backend("cuda:N")`). Every call that needs a
  context — a launch, an allocation, a copy — runs in its device's primary context, which is
  the one torch and CuPy use: when another context is current it is made current for the call
  and the caller's restored after (one cuCtxGetCurrent per launch when it already is). When
  none is current, the primary context is made current and left so, as the CUDA runtime does.
- Capture (CUDA graphs): after a specialization's first launch on a device, a launch calls
  only cuCtxGetCurrent (and cuCtxSetCurrent when switching), cuTensorMapEncodeTiled for a
  TMA kernel whose arrays changed (host-only, legal during capture) and cuLaunchKernel(Ex):
  no allocation, copy, synchronization or module load. Driver errors that stream capture
  causes are explained as such (`CAPTURE_ERRORS`).
- Loading: `cuLibraryLoadData` + `cuLibraryGetKernel` give a context-independent `CUkernel`
  (the driver loads it into a context on first launch there).
- Attributes from the kernel's contract: the dynamic shared memory limit when the kernel needs
  more than 48 KB, and the non-portable cluster size when the cluster is larger than 8.
- Launching: the parameter buffer and the pointer array are built once per specialization;
  a launch packs the values into the buffer (`struct.pack_into`) and calls `cuLaunchKernel`,
  or `cuLaunchKernelEx` with the cluster-dimension attribute for cluster kernels.
- Errors: every driver status becomes a `DeviceError` naming the call and the kernel.
"""

from __future__ import annotations

import ctypes
import struct
import sys
import threading

import numpy as np

from .compiler import Built
from .errors import BackendUnavailable, arg_error, device_error, _diag
from .packing import ParamLayout
from .validate import DeviceLimits, LaunchShape

EMULATOR_HINT = ("run on the CPU emulator instead: pass backend='emulator' or set "
                 "TILELANG_BACKEND=emulator")

# Compute capability -> compile target: the `a` variant where the exact device is known. An
# `a` target costs nothing when a kernel uses no arch-specific instruction (its PTX then says
# the portable `.target`, tilelang/targets.py), and it lets the kernels that can use one do so:
# on 12.0 (RTX 50, RTX PRO) sm_120a's block-scaled mma.sync, setmaxnreg and the TMA operand
# rings of its mma.sync pipelines (docs/codegen.md, "sm_120a").
_TARGETS = {(8, 0): "sm_80", (8, 6): "sm_86", (8, 9): "sm_89", (9, 0): "sm_90a",
            (10, 0): "sm_100a", (12, 0): "sm_120a"}


def target_for(capability: tuple[int, int]) -> str:
    if capability in _TARGETS:
        return _TARGETS[capability]
    lower = [cc for cc in _TARGETS if cc <= capability and cc[0] == capability[0]]
    if lower:                            # binary-compatible within a major version
        return _TARGETS[max(lower)].rstrip("a")
    raise BackendUnavailable(_diag(
        "E0920", f"the GPU has compute capability {capability[0]}.{capability[1]}, which tilec "
        "does not target", "tilec targets sm_80, sm_86, sm_89, sm_90(a), sm_100a and sm_120(a); "
        "pass arch=... to choose one, or " + EMULATOR_HINT))


def _driver():
    """The driver module after a successful cuInit, or a BackendUnavailable diagnostic."""
    try:
        from cuda.bindings import driver as drv
    except Exception as e:  # cuda-python missing or broken
        raise BackendUnavailable(_diag(
            "E0920", f"the CUDA back end needs cuda-python (`cuda.bindings.driver`): {e}",
            EMULATOR_HINT)) from None
    try:
        (err,) = drv.cuInit(0)
    except Exception as e:  # libcuda.so not found: no NVIDIA driver installed
        raise BackendUnavailable(_diag(
            "E0920", "no NVIDIA driver was found, so the CUDA back end cannot run "
            f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})",
            EMULATOR_HINT)) from None
    if err != drv.CUresult.CUDA_SUCCESS:
        raise BackendUnavailable(_diag(
            "E0920", f"the NVIDIA driver failed to initialize: {_err_text(drv, err)}",
            EMULATOR_HINT)) from None
    err, count = drv.cuDeviceGetCount()
    if err != drv.CUresult.CUDA_SUCCESS or count == 0:
        raise BackendUnavailable(_diag("E0920", "the NVIDIA driver sees no GPU", EMULATOR_HINT))
    return drv


# CUresult codes of stream capture (cuda.h): what each means for a Tile launch
CAPTURE_ERRORS = {
    900: "the call is not allowed while a stream captures a CUDA graph (an allocation, a "
         "synchronous copy, a synchronization or a module load)",
    901: "the stream's capture was invalidated by an earlier call that capture forbids",
    906: "work on the legacy default stream would wait for a stream that is capturing",
    907: "the event was recorded during a capture",
}
CAPTURE_HELP = ("during CUDA graph capture a launch may only pack its arguments and launch "
                "(docs/launch-path.md): launch each kernel once with the same kinds of "
                "arguments before capturing (the first launch loads its code), make and copy "
                "arrays outside the capture, and pass the capturing stream (`stream=`, or use "
                "torch tensors on torch's current stream)")


def _err_text(drv, err) -> str:
    try:
        _, name = drv.cuGetErrorName(err)
        _, text = drv.cuGetErrorString(err)
        return f"{name.decode()}: {text.decode()}"
    except Exception:
        return str(err)


class CudaBackend:
    name = "cuda"
    synchronous = False
    host_arrays = False

    def __init__(self, device: int | None = None, *,
                 driver_backend: "CudaBackend | None" = None):
        drv = self.drv = _driver() if driver_backend is None else driver_backend.drv
        ok = drv.CUresult.CUDA_SUCCESS
        self._ok = ok
        err, ctx = drv.cuCtxGetCurrent()
        if device is None:
            device = 0
            if err == ok and int(ctx) != 0:
                e2, dev = drv.cuCtxGetDevice()
                if e2 == ok:
                    device = int(dev)
        self.device_id = int(device)
        self.dev = self._check(drv.cuDeviceGet(self.device_id), "cuDeviceGet")
        self.ctx = self._check(drv.cuDevicePrimaryCtxRetain(self.dev),
                               "cuDevicePrimaryCtxRetain")
        self.ctx_int = int(self.ctx)
        self.pending_frees: list[int] = []     # see free_later
        # the backend of the driver: every device's backend, by ordinal, lives in its registry
        self.driver_backend = driver_backend or self
        if driver_backend is None:
            self.devices: dict[int, CudaBackend] = {self.device_id: self}
            self.loaded: dict[int, tuple] = {}      # id(build) -> (build, library, kernel)
        if driver_backend is None and (err != ok or int(ctx) == 0):
            self._check(drv.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")

        A = drv.CUdevice_attribute

        def attr(a):
            return int(self._check(drv.cuDeviceGetAttribute(a, self.dev),
                                   "cuDeviceGetAttribute"))
        cc = (attr(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
              attr(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR))
        raw = self._check(drv.cuDeviceGetName(256, self.dev), "cuDeviceGetName")
        name = raw.split(b"\0", 1)[0].decode(errors="replace").strip()
        self.capability = cc
        self.limits = DeviceLimits(
            f"{name} (device {self.device_id})", cc,
            attr(A.CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK),
            (attr(A.CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X), attr(A.CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y),
             attr(A.CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)),
            (attr(A.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X), attr(A.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y),
             attr(A.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)),
            attr(A.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
            16 if cc[0] >= 9 else 1)

    def __repr__(self) -> str:
        return f"CudaBackend({self.limits.name})"

    def for_device(self, ordinal: int) -> "CudaBackend":
        """The backend of device `ordinal` of the same driver (made on first use)."""
        root = self.driver_backend
        got = root.devices.get(ordinal)
        if got is None:
            count = self._check(self.drv.cuDeviceGetCount(), "cuDeviceGetCount")
            if not 0 <= ordinal < int(count):
                raise arg_error("E0913", f"there is no CUDA device {ordinal} (the driver sees "
                                f"{int(count)})", "use an array on an existing device, or "
                                f"`cuda:0` .. `cuda:{int(count) - 1}`")
            got = root.devices[ordinal] = CudaBackend(ordinal, driver_backend=root)
        return got

    # -- context: this device's primary context for the calls that need one -----------------
    def enter(self):
        """Make this device's primary context current; returns what `leave` restores."""
        err, cur = self.drv.cuCtxGetCurrent()
        c = int(cur) if err == self._ok else 0
        if c == self.ctx_int:
            return None
        self._check(self.drv.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")
        return cur if c else None          # none was current: ours stays, as the runtime's

    def leave(self, previous) -> None:
        if previous is not None:
            self._check(self.drv.cuCtxSetCurrent(previous), "cuCtxSetCurrent")

    def _check(self, result, what: str, kernel: str | None = None):
        err, *rest = result if isinstance(result, tuple) else (result,)
        if err != self._ok:
            who = f" for kernel `{kernel}`" if kernel else ""
            capture = CAPTURE_ERRORS.get(int(err))
            if capture is not None:
                raise device_error("E0930", f"{what}{who} failed on {self.limits_name()}: "
                                   f"{_err_text(self.drv, err)} ({capture})", CAPTURE_HELP)
            raise device_error("E0930", f"{what}{who} failed: {_err_text(self.drv, err)}",
                               "a sticky error (illegal address, launch failure) poisons the "
                               "context: earlier launches may have caused it; run with "
                               "CUDA_LAUNCH_BLOCKING=1 or on the emulator to locate it")
        return rest[0] if len(rest) == 1 else (tuple(rest) if rest else None)

    def limits_name(self) -> str:
        limits = getattr(self, "limits", None)
        return limits.name if limits is not None else f"device {self.device_id}"

    def default_target(self) -> str:
        return target_for(self.capability)

    @property
    def cache_tag(self) -> str:
        return "cubin"

    # -- memory -------------------------------------------------------------------------------
    def _in_context(self, call, what: str):
        previous = self.enter()
        try:
            return self._check(call(), what)
        finally:
            self.leave(previous)

    def malloc(self, nbytes: int) -> int:
        n = max(int(nbytes), 1)
        self.free_pending()
        return int(self._in_context(lambda: self.drv.cuMemAlloc(n), "cuMemAlloc"))

    def free(self, ptr: int) -> None:
        self._in_context(lambda: self.drv.cuMemFree(ptr), "cuMemFree")

    def free_later(self, ptr: int) -> None:
        """A `DeviceArray` that goes away: its memory is freed at this device's next
        allocation or synchronize, not from the garbage collector. A collection can run in
        the middle of a driver call (re-entering the driver from there can deadlock) or during
        a CUDA graph capture, where cuMemFree is not allowed (docs/launch-path.md)."""
        self.pending_frees.append(int(ptr))

    def free_pending(self) -> None:
        pending = self.pending_frees
        while pending:
            self.free(pending[-1])         # kept when the driver refuses (during a capture)
            pending.pop()

    def htod(self, ptr: int, array) -> None:
        a = np.ascontiguousarray(array)
        self._in_context(lambda: self.drv.cuMemcpyHtoD(ptr, a.ctypes.data, a.nbytes),
                         "cuMemcpyHtoD")

    def dtoh(self, array: np.ndarray, ptr: int, nbytes: int) -> None:
        self._in_context(lambda: self.drv.cuMemcpyDtoH(array.ctypes.data, ptr, int(nbytes)),
                         "cuMemcpyDtoH")

    def is_capturing(self, stream: int) -> bool:
        """Whether `stream` is capturing a CUDA graph (then a list's new device table, a copy,
        is refused before the driver would invalidate the capture: runtime/array_lists.py)."""
        status = self._in_context(lambda: self.drv.cuStreamIsCapturing(stream),
                                  "cuStreamIsCapturing")
        return int(status) != 0

    def synchronize(self) -> None:
        self._in_context(self.drv.cuCtxSynchronize, "cuCtxSynchronize")
        self.free_pending()

    def stage(self, views):                  # pragma: no cover - check_array refuses host arrays
        raise AssertionError("the CUDA back end takes no host arrays")

    # -- streams ------------------------------------------------------------------------------
    def stream_handle(self, stream, lib=None) -> int:
        """A raw CUstream from None (torch's or CuPy's current stream when the arrays come from
        that library, else the default stream), an int, a torch or CuPy stream, a CUstream or
        anything with `__cuda_stream__`."""
        if stream is None:
            if lib is None:
                return 0
            if lib == "torch" or lib == "torch.Tensor":
                torch = sys.modules["torch"]
                raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
                if raw is not None:
                    return int(raw(self.device_id))
                return int(torch.cuda.current_stream(self.device_id).cuda_stream)
            if lib.startswith("cupy") and "cupy" in sys.modules:
                return int(sys.modules["cupy"].cuda.get_current_stream().ptr)
            return 0
        if isinstance(stream, int) and not isinstance(stream, bool):
            return stream
        if hasattr(stream, "__cuda_stream__"):
            return int(stream.__cuda_stream__()[1])
        for attr in ("cuda_stream", "ptr", "handle"):
            h = getattr(stream, attr, None)
            if isinstance(h, int):
                return h
        if isinstance(stream, self.drv.CUstream):
            return int(stream)
        raise arg_error("E0917", f"cannot use {type(stream).__name__} as a CUDA stream",
                        "pass a torch.cuda.Stream, a cupy.cuda.Stream, a CUstream, an int "
                        "handle or None (the current stream)")

    # -- kernels ------------------------------------------------------------------------------
    def prepare(self, built: Built, layout: ParamLayout) -> "CudaLaunch":
        drv, art = self.drv, built.artifact
        name = art.name
        if built.cubin is None:
            raise device_error("E0930", f"no cubin for kernel `{name}`",
                               "the runtime links PTX with nvJitLink before loading; this is "
                               "a bug")
        # a library and its CUkernel are context-independent: a build already loaded for
        # another device is reused, only its attributes are set for this one
        loaded = self.driver_backend.loaded
        hit = loaded.get(id(built))
        if hit is not None and hit[0] is built:
            lib, kernel = hit[1], hit[2]
        else:
            lib = self._check(drv.cuLibraryLoadData(built.cubin, None, None, 0, None, None, 0),
                              "cuLibraryLoadData", name)
            kernel = self._check(drv.cuLibraryGetKernel(lib, name.encode()),
                                 "cuLibraryGetKernel", name)
            if any(p.kind == "nvshmem" for p in art.params):
                # NVSHMEM's device state into the library (docs/distributed.md)
                from tilelang.runtime.nvshmem_host import init_library
                init_library(int(lib), name)
            loaded[id(built)] = (built, lib, kernel)
        FA = drv.CUfunction_attribute
        if art.dynamic_smem > 0:
            total = art.dynamic_smem
            self._check(drv.cuKernelSetAttribute(
                FA.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, total, kernel, self.dev),
                "cuKernelSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)", name)
        if art.cluster and (art.nonportable_cluster or
                            art.cluster[0] * art.cluster[1] * art.cluster[2] > 8):
            self._check(drv.cuKernelSetAttribute(
                FA.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1, kernel, self.dev),
                "cuKernelSetAttribute(NON_PORTABLE_CLUSTER_SIZE_ALLOWED)", name)
        return CudaLaunch(self, lib, kernel, layout, name)


class CudaLaunch:
    """One loaded specialization: its kernel handle and its reusable parameter buffer."""

    def __init__(self, backend: CudaBackend, lib, kernel, layout: ParamLayout, name: str):
        drv = backend.drv
        self.backend, self.lib, self.kernel, self.name = backend, lib, kernel, name
        self.f = drv.CUfunction(int(kernel))        # a CUkernel launches as a CUfunction
        self.fmt = layout.fmt
        self.buf = ctypes.create_string_buffer(max(layout.size, 8))
        base = ctypes.addressof(self.buf)
        self.ptrs = (ctypes.c_void_p * max(layout.count, 1))(
            *[base + off for off in layout.offsets])
        self.params = ctypes.addressof(self.ptrs) if layout.count else 0
        self.lock = threading.Lock()
        self._launch = drv.cuLaunchKernel
        self._launch_ex = drv.cuLaunchKernelEx
        self._get_ctx = drv.cuCtxGetCurrent
        self._ctx_int = backend.ctx_int
        self._ok = drv.CUresult.CUDA_SUCCESS
        self._configs: dict = {}

    def _config(self, shape: LaunchShape, stream: int):
        key = (shape.grid, shape.block, shape.cluster, shape.shared_mem)
        cfg = self._configs.get(key)
        if cfg is None:
            drv = self.backend.drv
            cfg = drv.CUlaunchConfig()
            cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = shape.grid
            cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = shape.block
            cfg.sharedMemBytes = shape.shared_mem
            attr = drv.CUlaunchAttribute()
            attr.id = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
            attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = \
                shape.cluster
            cfg.attrs = [attr]
            cfg.numAttrs = 1
            if len(self._configs) > 256:
                self._configs.clear()
            self._configs[key] = cfg
        cfg.hStream = stream
        return cfg

    def launch(self, values, shape: LaunchShape, stream: int = 0):
        """Pack, then launch in the device's primary context (made current for the call when
        another is; the parameters are copied by the driver at the call, so the buffer is
        free again when it returns, during stream capture too). An empty grid calls nothing:
        the driver refuses a zero extent, and there is no block to run."""
        if shape.empty:
            return None
        with self.lock:
            struct.pack_into(self.fmt, self.buf, 0, *values)
            e, cur = self._get_ctx()
            if e == self._ok and int(cur) == self._ctx_int:
                err = self._issue(shape, stream)
            else:
                previous = self.backend.enter()
                try:
                    err = self._issue(shape, stream)
                finally:
                    self.backend.leave(previous)
        if err != self._ok:
            self.backend._check((err,), "cuLaunchKernel" if shape.cluster is None
                                else "cuLaunchKernelEx", self.name)
        return None

    def nothing(self, shape: LaunchShape):
        """What an empty launch returns (see `launch`)."""
        return None

    def _issue(self, shape: LaunchShape, stream: int):
        if shape.cluster is None:
            g, b = shape.grid, shape.block
            return self._launch(self.f, g[0], g[1], g[2], b[0], b[1], b[2], shape.shared_mem,
                                stream, self.params, 0)[0]
        return self._launch_ex(self._config(shape, stream), self.f, self.params, 0)[0]
