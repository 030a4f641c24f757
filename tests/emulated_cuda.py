"""A stand-in for `cuda.bindings.driver` that runs launches on the PTX emulator, for tests only.

With `TILELANG_TEST_EMULATED_GPU=1`, tests/conftest.py installs it before any test imports
the driver, so `pytest -m gpu` runs the GPU tests' logic on a machine without a GPU: the
runtime's CUDA back end (tilelang/runtime/cuda.py, tensormap.py) is unchanged and talks to
this module as it would to the driver. Nothing in tilelang/ knows about it, and without the
variable nothing changes (on a GPU the tests check the real driver).

* Every call is first handed to the real cuda-bindings (when installed) with the same
  arguments: without a driver library it fails only after converting them, so a call whose
  arguments cuda-bindings refuses (a TypeError: the wrong types or count) fails here as it
  would on a GPU.
* Device memory is the emulator's memory; a launch reads the kernelParams pointer array as
  the driver does (each pointer to its parameter's bytes at the PTX's sizes) and runs the
  kernel's PTX, which comes from the cubin's link (nvJitLink calls are recorded: cubin ->
  PTX). A cubin not linked in this process cannot load (CUDA_ERROR_INVALID_IMAGE).
* The driver's launch rules that the runtime must follow are enforced: more than 48 KB of
  dynamic shared memory needs CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES first, clusters
  of more than 8 blocks need the non-portable attribute, the grid must be whole clusters.
* Registers and static shared memory come from the cubin's ELF (`.nv.info`'s EIATTR_REGCOUNT
  for the kernel's symbol, `.nv.shared.NAME`'s size), not from the linker's log that the
  runtime reads; occupancy is not modelled (CUDA_ERROR_NOT_SUPPORTED).
* Devices: `EmulatedDriver(devices=N)` (or `TILELANG_EMULATED_GPUS=N` for `install()`) has N
  devices with their own primary contexts, kernel attributes (cuKernelSetAttribute is per
  device) and allocations. They share one emulator heap (one address space, as with unified
  addressing), but a launch on a device whose parameters hold an address inside another
  device's allocation fails with CUDA_ERROR_ILLEGAL_ADDRESS: no peer access is modelled.
  Allocations and launches go to the calling thread's current context's device.
* Streams and stream capture (CUDA graphs): launches on a stream that is not capturing
  complete before they return. `cuStreamBeginCapture` .. `cuStreamEndCapture` records the
  launches issued to the stream (their parameter bytes copied at capture, as the driver does)
  into a graph that `cuGraphInstantiate` and `cuGraphLaunch` replay. While a capture is active
  (any thread's in GLOBAL mode, the thread's own in THREAD_LOCAL mode, none in RELAXED mode) the
  calls the CUDA programming guide calls unsafe during capture fail with
  CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidate the capture: allocation and free
  (cuMemAlloc, cuMemFree), synchronous copies and sets, context synchronization, module loads
  and unloads; synchronizing or querying the capturing stream (or an event recorded in it,
  CUDA_ERROR_CAPTURED_EVENT) does too; work on the legacy default stream while a blocking
  stream captures is CUDA_ERROR_STREAM_CAPTURE_IMPLICIT. Host-only calls stay legal: context
  get/set, device and function attributes, tensor-map encoding, cuStreamIsCapturing.
  `unsafe_during_capture` lists the unsafe calls; `captured` counts the launches recorded.
* Events read the host clock.
"""

from __future__ import annotations

import ctypes
import enum
import hashlib
import struct
import sys
import threading
import time
import types

import numpy as np

# H200 (sm_90) attributes as the driver reports them
ATTRS = {"COMPUTE_CAPABILITY_MAJOR": 9, "COMPUTE_CAPABILITY_MINOR": 0,
         "MAX_THREADS_PER_BLOCK": 1024, "MAX_BLOCK_DIM_X": 1024, "MAX_BLOCK_DIM_Y": 1024,
         "MAX_BLOCK_DIM_Z": 64, "MAX_GRID_DIM_X": 2**31 - 1, "MAX_GRID_DIM_Y": 65535,
         "MAX_GRID_DIM_Z": 65535, "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN": 232448,
         "MAX_SHARED_MEMORY_PER_BLOCK": 49152, "MULTIPROCESSOR_COUNT": 132,
         "L2_CACHE_SIZE": 62914560, "WARP_SIZE": 32, "MAX_REGISTERS_PER_BLOCK": 65536,
         "MAX_THREADS_PER_MULTIPROCESSOR": 2048,
         "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR": 233472, "CLOCK_RATE": 1980000,
         "MEMORY_CLOCK_RATE": 3201000, "GLOBAL_MEMORY_BUS_WIDTH": 6144}
NAME = b"Emulated H200 (tests/emulated_cuda.py)"
STATIC_SMEM_LIMIT = 48 * 1024

_real = None
try:                                            # the real bindings: types, enums, call checks
    from cuda.bindings import driver as _real   # noqa: F811
except Exception:                               # pragma: no cover - no cuda-bindings
    _real = None

# cubin (sha256) -> PTX, filled by the nvJitLink hook
LINKED: dict[str, str] = {}


class CUresult(enum.IntEnum):
    CUDA_SUCCESS = 0
    CUDA_ERROR_INVALID_VALUE = 1
    CUDA_ERROR_NOT_INITIALIZED = 3
    CUDA_ERROR_INVALID_DEVICE = 101
    CUDA_ERROR_INVALID_CONTEXT = 201
    CUDA_ERROR_INVALID_IMAGE = 200
    CUDA_ERROR_NOT_FOUND = 500
    CUDA_ERROR_INVALID_HANDLE = 400
    CUDA_ERROR_ILLEGAL_STATE = 401
    CUDA_ERROR_ILLEGAL_ADDRESS = 700
    CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701
    CUDA_ERROR_NOT_SUPPORTED = 801
    CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900
    CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901
    CUDA_ERROR_STREAM_CAPTURE_IMPLICIT = 906
    CUDA_ERROR_CAPTURED_EVENT = 907
    CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD = 908
    CUDA_ERROR_CLUSTER_OUT_OF_RESOURCES = 913


# calls the CUDA programming guide calls unsafe while a stream captures (they allocate, copy
# synchronously or synchronize, none of which a graph can record)
UNSAFE_DURING_CAPTURE = frozenset({
    "cuMemAlloc", "cuMemFree", "cuMemcpyHtoD", "cuMemcpyDtoH", "cuMemsetD8", "cuMemsetD32",
    "cuCtxSynchronize", "cuLibraryLoadData", "cuModuleLoadData", "cuModuleUnload"})
LEGACY_STREAMS = (0, 1)          # NULL and CU_STREAM_LEGACY; 2 is CU_STREAM_PER_THREAD
CTX_BASE = 0xC0


class _Capture:
    """One capture sequence: its stream, mode, thread and the launches recorded so far."""

    _ids = 0

    def __init__(self, stream: int, mode: int):
        _Capture._ids += 1
        self.id, self.stream, self.mode = _Capture._ids, stream, mode
        self.thread = threading.get_ident()
        self.ops: list = []
        self.valid = True


class ShapeError(AssertionError):
    """cuda-bindings refused the arguments of a call (the same call fails on a GPU)."""


def _real_check(name: str, args) -> None:
    fn = getattr(_real, name, None) if _real is not None else None
    if fn is None:
        if _real is not None:
            raise ShapeError(f"cuda.bindings.driver has no {name}")
        return
    try:
        fn(*args)
    except (TypeError, ValueError, OverflowError, AttributeError) as e:
        raise ShapeError(f"cuda-bindings refuses {name}{tuple(args)!r}: "
                         f"{type(e).__name__}: {e}") from None
    except Exception:                   # no driver library: the arguments were converted
        pass


def _enum(value, cls_name: str):
    """The real enum member when the bindings are there, else the value."""
    cls = getattr(_real, cls_name, None) if _real is not None else None
    return cls(int(value)) if cls is not None else value


def _res(err):
    return _enum(err, "CUresult")


def _elf_facts(cubin: bytes, name: str) -> tuple[int, int]:
    """(registers, static shared bytes) of kernel `name` from a cubin: the EIATTR_REGCOUNT
    entry (attribute 0x2f: symbol index, count) of `.nv.info` for the kernel's symbol, and
    the size of `.nv.shared.NAME`."""
    if cubin[:4] != b"\x7fELF" or cubin[4] != 2:
        return 0, 0
    shoff, = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    secs = [struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * shentsize)
            for i in range(shnum)]

    def cstr(table, off):
        return cubin[table + off:cubin.index(b"\0", table + off)].decode()
    names = [cstr(secs[shstrndx][4], s[0]) for s in secs]
    symbol, regs, smem = None, 0, 0
    for s, sname in zip(secs, names):
        if s[1] == 2:                                       # SHT_SYMTAB
            strtab = secs[s[6]][4]
            for k in range(s[5] // 24):
                if cstr(strtab, struct.unpack_from("<I", cubin, s[4] + 24 * k)[0]) == name:
                    symbol = k
        elif sname == f".nv.shared.{name}":
            smem = s[5]
    if smem >= 1024 and b".nv.reservedSmem" in cubin:
        # sm_90 cubins put the 1 KB the system reserves per block into the section; ptxas's
        # "bytes smem" leaves it out, and (a guess until a GPU says) so does the driver
        smem -= 1024
    for s, sname in zip(secs, names):
        if sname != ".nv.info":
            continue
        data, i = cubin[s[4]:s[4] + s[5]], 0
        while i + 4 <= len(data):
            fmt, attr = data[i], data[i + 1]
            if fmt == 4:                                    # EIFMT_SVAL: u16 size, payload
                n, = struct.unpack_from("<H", data, i + 2)
                if attr == 0x2F and n == 8:
                    sym, value = struct.unpack_from("<II", data, i + 4)
                    if sym == symbol:
                        regs = value
                i += 4 + n
            else:
                i += 4
    return regs, smem


class _Kernel:
    """A kernel handle; its attributes are per device (cuKernelSetAttribute takes one)."""

    def __init__(self, handle, fn, ptx_fn_name, cubin):
        self.handle, self.fn, self.name = handle, fn, ptx_fn_name
        self.max_dynamic_on: dict[int, int] = {}
        self.nonportable_on: dict[int, bool] = {}
        self.regs, self.static_smem = _elf_facts(cubin, ptx_fn_name)

    # device 0's attributes, for tests written before there were several devices
    @property
    def max_dynamic(self) -> int:
        return self.max_dynamic_on.get(0, STATIC_SMEM_LIMIT)

    @max_dynamic.setter
    def max_dynamic(self, value: int) -> None:
        self.max_dynamic_on[0] = int(value)


class EmulatedDriver(types.ModuleType):
    """The functions the project calls; types and enums come from the real bindings."""

    def __init__(self, devices: int = 1):
        super().__init__("cuda.bindings.driver")
        from tilelang.emulator import EmulatorDevice
        self.device = EmulatorDevice(counters=False)
        self.device_count = int(devices)
        self.CUresult = _real.CUresult if _real is not None else CUresult
        self._handles: dict[int, object] = {}
        self._next = 0x1000
        self._tls = threading.local()
        self._lock = threading.RLock()
        self.calls: list[str] = []
        self.owners: dict[int, tuple[int, int]] = {}   # allocation -> (end, device)
        self.streams: dict[int, dict] = {}             # created streams: flags, capture
        self.captures: list[_Capture] = []             # active capture sequences
        self.captured = 0                              # launches recorded into graphs
        self.unsafe_during_capture = UNSAFE_DURING_CAPTURE

    def __getattr__(self, name):
        if _real is not None and not (name[:2] == "cu" and name[2:3].isupper()):
            return getattr(_real, name)          # types, enums, cuuint32_t, ...
        raise AttributeError(f"the emulated driver has no {name}")

    # -- helpers --------------------------------------------------------------------------
    def _new(self, obj) -> int:
        with self._lock:
            self._next += 0x10
            self._handles[self._next] = obj
            return self._next

    def _get(self, h, kind):
        obj = self._handles.get(int(h))
        return obj if isinstance(obj, kind) else None

    def _call(self, name, args):
        self.calls.append(name)
        _real_check(name, args)

    # -- capture rules ------------------------------------------------------------------------
    def _prohibiting(self) -> list:
        """The captures that prohibit unsafe calls from this thread (an invalidated one
        too, until its cuStreamEndCapture)."""
        me = threading.get_ident()
        return [c for c in self.captures if c.mode == 0 or (c.mode == 1 and c.thread == me)]

    def _unsafe(self, name):
        """CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED for an unsafe call during capture (which
        invalidates the captures that prohibit it), else None."""
        if name not in UNSAFE_DURING_CAPTURE:
            return None
        bad = self._prohibiting()
        for c in bad:
            c.valid = False
        return _res(CUresult.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED) if bad else None

    def _capture_of(self, stream) -> _Capture | None:
        h = int(stream)
        return next((c for c in self.captures if c.stream == h), None)

    def _implicit(self, stream):
        """Work on the legacy stream waits for every blocking stream; one that captures cannot
        be waited for: CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, and its capture is invalidated."""
        if int(stream) not in LEGACY_STREAMS:
            return None
        bad = [c for c in self.captures
               if not self.streams.get(c.stream, {}).get("flags", 0) & 1]
        for c in bad:
            c.valid = False
        return _res(CUresult.CUDA_ERROR_STREAM_CAPTURE_IMPLICIT) if bad else None

    # -- devices --------------------------------------------------------------------------------
    def _current_device(self) -> int | None:
        ctx = getattr(self._tls, "ctx", 0)
        d = (ctx - CTX_BASE) // 0x10 if ctx else -1
        return d if 0 <= d < self.device_count and ctx == CTX_BASE + 0x10 * d else None

    def _foreign_address(self, data: bytes, device: int) -> bool:
        """Parameter bytes holding (8-byte aligned) an address inside another device's
        allocation."""
        for (w,) in struct.iter_unpack("<Q", data[:len(data) // 8 * 8]):
            for start, (end, dev) in self.owners.items():
                if dev != device and start <= w < end:
                    return True
        return False

    # -- init, device, context --------------------------------------------------------------
    def cuInit(self, flags):
        self._call("cuInit", (flags,))
        return (_res(0),)

    def cuDriverGetVersion(self):
        self._call("cuDriverGetVersion", ())
        return _res(0), 13000

    def cuDeviceGetCount(self):
        self._call("cuDeviceGetCount", ())
        return _res(0), self.device_count

    def cuDeviceGet(self, i):
        self._call("cuDeviceGet", (i,))
        if not 0 <= int(i) < self.device_count:
            return _res(CUresult.CUDA_ERROR_INVALID_VALUE), None
        return _res(0), _enum(int(i), "CUdevice")

    def cuDeviceGetName(self, n, dev):
        self._call("cuDeviceGetName", (n, dev))
        return _res(0), NAME[:n - 1] + b"\0" * max(n - len(NAME), 1)

    def cuDeviceGetAttribute(self, attr, dev):
        self._call("cuDeviceGetAttribute", (attr, dev))
        key = attr.name.replace("CU_DEVICE_ATTRIBUTE_", "")
        if key not in ATTRS:
            return _res(CUresult.CUDA_ERROR_NOT_SUPPORTED), 0
        return _res(0), ATTRS[key]

    def cuDeviceTotalMem(self, dev):
        self._call("cuDeviceTotalMem", (dev,))
        return _res(0), 141 * 2**30

    def cuDevicePrimaryCtxRetain(self, dev):
        self._call("cuDevicePrimaryCtxRetain", (dev,))
        if not 0 <= int(dev) < self.device_count:
            return _res(CUresult.CUDA_ERROR_INVALID_VALUE), None
        return _res(0), _enum(CTX_BASE + 0x10 * int(dev), "CUcontext")

    def cuDevicePrimaryCtxRelease(self, dev):
        self._call("cuDevicePrimaryCtxRelease", (dev,))
        return (_res(0),)

    def cuCtxGetCurrent(self):
        self._call("cuCtxGetCurrent", ())
        return _res(0), _enum(getattr(self._tls, "ctx", 0), "CUcontext")

    def cuCtxSetCurrent(self, ctx):
        self._call("cuCtxSetCurrent", (ctx,))
        self._tls.ctx = int(ctx)
        return (_res(0),)

    def cuCtxGetDevice(self):
        self._call("cuCtxGetDevice", ())
        d = self._current_device()
        if d is None:
            return _res(CUresult.CUDA_ERROR_INVALID_CONTEXT), None
        return _res(0), _enum(d, "CUdevice")

    def cuCtxSynchronize(self):
        self._call("cuCtxSynchronize", ())
        bad = self._unsafe("cuCtxSynchronize")
        if bad is not None:
            return (bad,)
        return (_res(0),) if self._ctx_ok() else (_res(CUresult.CUDA_ERROR_INVALID_CONTEXT),)

    def _ctx_ok(self) -> bool:
        return self._current_device() is not None

    # -- streams and capture ------------------------------------------------------------------
    def cuStreamCreate(self, flags):
        self._call("cuStreamCreate", (flags,))
        h = self._new(["stream"])
        self.streams[h] = {"flags": int(flags)}
        return _res(0), _enum(h, "CUstream")

    def cuStreamDestroy(self, stream):
        self._call("cuStreamDestroy", (stream,))
        self.streams.pop(int(stream), None)
        self._handles.pop(int(stream), None)
        return (_res(0),)

    def cuStreamSynchronize(self, stream):
        self._call("cuStreamSynchronize", (stream,))
        c = self._capture_of(stream)
        if c is not None:
            c.valid = False
            return (_res(CUresult.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED),)
        bad = self._implicit(stream)
        return (bad,) if bad is not None else (_res(0),)

    def cuStreamQuery(self, stream):
        self._call("cuStreamQuery", (stream,))
        c = self._capture_of(stream)
        if c is not None:
            c.valid = False
            return (_res(CUresult.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED),)
        return (_res(0),)

    def cuStreamBeginCapture(self, stream, mode):
        self._call("cuStreamBeginCapture", (stream, mode))
        if int(stream) in LEGACY_STREAMS:
            return (_res(CUresult.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED),)
        if self._capture_of(stream) is not None:
            return (_res(CUresult.CUDA_ERROR_ILLEGAL_STATE),)
        self.captures.append(_Capture(int(stream), int(mode)))
        return (_res(0),)

    def _status(self, c):
        status = 0 if c is None else 1 if c.valid else 2
        return _enum(status, "CUstreamCaptureStatus")

    def cuStreamIsCapturing(self, stream):
        self._call("cuStreamIsCapturing", (stream,))
        bad = self._implicit_query(stream)
        if bad is not None:
            return bad, None
        return _res(0), self._status(self._capture_of(stream))

    def cuStreamGetCaptureInfo(self, stream):
        self._call("cuStreamGetCaptureInfo", (stream,))
        bad = self._implicit_query(stream)
        if bad is not None:
            return bad, None, 0, None, [], [], 0
        c = self._capture_of(stream)
        return _res(0), self._status(c), (c.id if c else 0), None, [], [], 0

    def _implicit_query(self, stream):
        """Asking the legacy stream while a blocking stream captures is an error (without
        invalidating anything)."""
        if int(stream) in LEGACY_STREAMS and any(
                not self.streams.get(c.stream, {}).get("flags", 0) & 1 for c in self.captures):
            return _res(CUresult.CUDA_ERROR_STREAM_CAPTURE_IMPLICIT)
        return None

    def cuStreamEndCapture(self, stream):
        self._call("cuStreamEndCapture", (stream,))
        c = self._capture_of(stream)
        if c is None:
            return _res(CUresult.CUDA_ERROR_ILLEGAL_STATE), None
        if c.mode != 2 and c.thread != threading.get_ident():
            return _res(CUresult.CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD), None
        self.captures.remove(c)
        if not c.valid:
            return _res(CUresult.CUDA_ERROR_STREAM_CAPTURE_INVALIDATED), None
        return _res(0), _enum(self._new(("graph", tuple(c.ops))), "CUgraph")

    def cuGraphInstantiate(self, graph, flags):
        self._call("cuGraphInstantiate", (graph, flags))
        g = self._handles.get(int(graph))
        if not (isinstance(g, tuple) and g[0] == "graph"):
            return _res(CUresult.CUDA_ERROR_INVALID_VALUE), None
        return _res(0), _enum(self._new(("exec", g[1])), "CUgraphExec")

    def cuGraphLaunch(self, exec_, stream):
        """Replays the recorded launches in order (each on the device it was captured on)."""
        self._call("cuGraphLaunch", (exec_, stream))
        g = self._handles.get(int(exec_))
        if not (isinstance(g, tuple) and g[0] == "exec"):
            return (_res(CUresult.CUDA_ERROR_INVALID_VALUE),)
        c = self._capture_of(stream)
        if c is not None:                   # a graph launched into a capture: one more node
            c.ops.extend(g[1])
            return (_res(0),)
        for op in g[1]:
            err = self._execute(*op)
            if int(err) != 0:
                return (err,)
        return (_res(0),)

    def cuGraphDestroy(self, graph):
        self._call("cuGraphDestroy", (graph,))
        self._handles.pop(int(graph), None)
        return (_res(0),)

    def cuGraphExecDestroy(self, exec_):
        self._call("cuGraphExecDestroy", (exec_,))
        self._handles.pop(int(exec_), None)
        return (_res(0),)

    def cuGetErrorName(self, err):
        self._call("cuGetErrorName", (err,))
        known = int(err) in CUresult._value2member_map_
        return _res(0), (CUresult(int(err)).name if known else f"CUDA_ERROR_{int(err)}").encode()

    def cuGetErrorString(self, err):
        self._call("cuGetErrorString", (err,))
        return _res(0), b"(emulated driver)"

    # -- memory -----------------------------------------------------------------------------
    def cuMemAlloc(self, n):
        self._call("cuMemAlloc", (n,))
        bad = self._unsafe("cuMemAlloc")
        if bad is not None:
            return bad, None
        d = self._current_device()
        if d is None:
            return _res(CUresult.CUDA_ERROR_INVALID_CONTEXT), None
        ptr = int(self.device.malloc(max(int(n), 1)))
        self.owners[ptr] = (ptr + max(int(n), 1), d)
        return _res(0), _enum(ptr, "CUdeviceptr")

    def cuMemFree(self, p):
        self._call("cuMemFree", (p,))
        bad = self._unsafe("cuMemFree")
        if bad is not None:
            return (bad,)
        self.device.free(int(p))
        self.owners.pop(int(p), None)
        return (_res(0),)

    def cuMemcpyHtoD(self, dst, src, n):
        self._call("cuMemcpyHtoD", (dst, src, n))
        bad = self._unsafe("cuMemcpyHtoD")
        if bad is not None:
            return (bad,)
        self.device.memcpy_htod(int(dst), ctypes.string_at(int(src), int(n)))
        return (_res(0),)

    def cuMemcpyDtoH(self, dst, src, n):
        self._call("cuMemcpyDtoH", (dst, src, n))
        bad = self._unsafe("cuMemcpyDtoH")
        if bad is not None:
            return (bad,)
        data = self.device.memcpy_dtoh(None, int(src), int(n))
        ctypes.memmove(int(dst), data, int(n))
        return (_res(0),)

    def cuMemsetD8Async(self, dst, value, n, stream):
        self._call("cuMemsetD8Async", (dst, value, n, stream))
        bad = self._implicit(stream)
        if bad is not None:
            return (bad,)
        c = self._capture_of(stream)
        if c is not None:
            c.ops.append(("memset", int(dst), int(value), int(n)))
            return (_res(0),)
        self.device.memset(int(dst), int(value), int(n))
        return (_res(0),)

    def cuMemsetD32(self, dst, value, n):
        self._call("cuMemsetD32", (dst, value, n))
        bad = self._unsafe("cuMemsetD32")
        if bad is not None:
            return (bad,)
        self.device.memcpy_htod(int(dst), struct.pack("<I", int(value) & 0xFFFFFFFF) * int(n))
        return (_res(0),)

    def cuMemsetD8(self, dst, value, n):
        self._call("cuMemsetD8", (dst, value, n))
        bad = self._unsafe("cuMemsetD8")
        if bad is not None:
            return (bad,)
        self.device.memset(int(dst), int(value), int(n))
        return (_res(0),)

    # -- modules and kernels ----------------------------------------------------------------
    def _load(self, name, code):
        ptx = LINKED.get(hashlib.sha256(bytes(code)).hexdigest())
        if ptx is None:
            return _res(CUresult.CUDA_ERROR_INVALID_IMAGE), None
        module = self.device.load_module(ptx)
        return _res(0), _enum(self._new(("module", module, bytes(code))), name)

    def cuLibraryLoadData(self, code, *rest):
        self._call("cuLibraryLoadData", (code, *rest))
        bad = self._unsafe("cuLibraryLoadData")
        return (bad, None) if bad is not None else self._load("CUlibrary", code)

    def cuModuleLoadData(self, code):
        self._call("cuModuleLoadData", (code,))
        bad = self._unsafe("cuModuleLoadData")
        return (bad, None) if bad is not None else self._load("CUmodule", code)

    def cuModuleUnload(self, m):
        self._call("cuModuleUnload", (m,))
        bad = self._unsafe("cuModuleUnload")
        return (bad,) if bad is not None else (_res(0),)

    def _kernel(self, lib, name, kind):
        entry = self._handles.get(int(lib))
        if not (isinstance(entry, tuple) and entry[0] == "module"):
            return _res(CUresult.CUDA_ERROR_INVALID_HANDLE), None
        _, module, cubin = entry
        try:
            fn = module.get_function(name.decode())
        except Exception:
            return _res(CUresult.CUDA_ERROR_NOT_FOUND), None
        k = _Kernel(0, fn, name.decode(), cubin)
        k.handle = self._new(k)
        return _res(0), _enum(k.handle, kind)

    def cuLibraryGetKernel(self, lib, name):
        self._call("cuLibraryGetKernel", (lib, name))
        return self._kernel(lib, name, "CUkernel")

    def cuModuleGetFunction(self, mod, name):
        self._call("cuModuleGetFunction", (mod, name))
        return self._kernel(mod, name, "CUfunction")

    def _set_attr(self, k, attr, value, dev):
        if k is None:
            return (_res(CUresult.CUDA_ERROR_INVALID_HANDLE),)
        if dev is None or not 0 <= dev < self.device_count:
            return (_res(CUresult.CUDA_ERROR_INVALID_DEVICE),)
        if attr.name == "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES":
            if int(value) + k.static_smem > ATTRS["MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"]:
                return (_res(CUresult.CUDA_ERROR_INVALID_VALUE),)
            k.max_dynamic_on[dev] = int(value)
        elif attr.name == "CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED":
            k.nonportable_on[dev] = bool(value)
        else:
            return (_res(CUresult.CUDA_ERROR_NOT_SUPPORTED),)
        return (_res(0),)

    def cuKernelSetAttribute(self, attr, value, kernel, dev):
        self._call("cuKernelSetAttribute", (attr, value, kernel, dev))
        return self._set_attr(self._get(kernel, _Kernel), attr, value, int(dev))

    def cuFuncSetAttribute(self, fn, attr, value):
        self._call("cuFuncSetAttribute", (fn, attr, value))
        return self._set_attr(self._get(fn, _Kernel), attr, value, self._current_device())

    def _get_attr(self, k, attr, dev):
        if k is None:
            return _res(CUresult.CUDA_ERROR_INVALID_HANDLE), None
        got = {"CU_FUNC_ATTRIBUTE_NUM_REGS": k.regs,
               "CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES": k.static_smem,
               "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES":
                   k.max_dynamic_on.get(dev or 0, STATIC_SMEM_LIMIT)}.get(attr.name)
        if got is None:
            return _res(CUresult.CUDA_ERROR_NOT_SUPPORTED), None
        return _res(0), got

    def cuKernelGetAttribute(self, attr, kernel, dev):
        self._call("cuKernelGetAttribute", (attr, kernel, dev))
        return self._get_attr(self._get(kernel, _Kernel), attr, int(dev))

    def cuFuncGetAttribute(self, attr, fn):
        self._call("cuFuncGetAttribute", (attr, fn))
        return self._get_attr(self._get(fn, _Kernel), attr, self._current_device())

    def cuOccupancyMaxActiveBlocksPerMultiprocessor(self, fn, threads, smem):
        self._call("cuOccupancyMaxActiveBlocksPerMultiprocessor", (fn, threads, smem))
        return _res(CUresult.CUDA_ERROR_NOT_SUPPORTED), 0

    # -- launches ---------------------------------------------------------------------------
    def _run(self, f, grid, block, smem, params, cluster, stream):
        """Checks a launch as the driver does, then runs it on the current context's device,
        or records it when the stream captures."""
        k = self._get(f, _Kernel)
        if k is None:
            return (_res(CUresult.CUDA_ERROR_INVALID_HANDLE),)
        dev = self._current_device()
        if dev is None:
            return (_res(CUresult.CUDA_ERROR_INVALID_CONTEXT),)
        bad = self._implicit(stream)
        if bad is not None:
            return (bad,)
        if int(smem) > k.max_dynamic_on.get(dev, STATIC_SMEM_LIMIT):
            return (_res(CUresult.CUDA_ERROR_INVALID_VALUE),)
        if cluster is not None:
            size = cluster[0] * cluster[1] * cluster[2]
            if size > 8 and not k.nonportable_on.get(dev, False) or size > 16:
                return (_res(CUresult.CUDA_ERROR_CLUSTER_OUT_OF_RESOURCES),)
            if any(g % c for g, c in zip(grid, cluster)):
                return (_res(CUresult.CUDA_ERROR_INVALID_VALUE),)
        prog = k.fn.program
        buf = bytearray(prog.kparam_size)
        if k.fn.params:
            ptrs = (ctypes.c_void_p * len(k.fn.params)).from_address(int(params))
            for i, p in enumerate(k.fn.params):
                off, size, _ = prog.kparams[p.name]
                buf[off:off + size] = ctypes.string_at(ptrs[i], size)
        op = ("launch", k, tuple(grid), tuple(block), int(smem), bytes(buf), cluster, dev)
        c = self._capture_of(stream)
        if c is not None:                   # recorded with its parameters' bytes of now
            if not c.valid:
                return (_res(CUresult.CUDA_ERROR_STREAM_CAPTURE_INVALIDATED),)
            c.ops.append(op)
            self.captured += 1
            return (_res(0),)
        return (self._execute(*op),)

    def _execute(self, kind, *rest):
        if kind == "memset":
            dst, value, n = rest
            self.device.memset(dst, value, n)
            return _res(0)
        k, grid, block, smem, data, cluster, dev = rest
        if len(self.owners) and self.device_count > 1 and self._foreign_address(data, dev):
            return _res(CUresult.CUDA_ERROR_ILLEGAL_ADDRESS)
        from tilelang.emulator import ExecutionError, LaunchRefused
        try:
            with self._lock:
                self.device.launch(k.fn, grid, block, data, cluster=cluster, shared_mem=smem)
        except LaunchRefused:
            return _res(CUresult.CUDA_ERROR_INVALID_VALUE)
        except ExecutionError:
            return _res(CUresult.CUDA_ERROR_ILLEGAL_ADDRESS)
        return _res(0)

    def cuLaunchKernel(self, f, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        self._call("cuLaunchKernel", (f, gx, gy, gz, bx, by, bz, smem, stream, params, extra))
        return self._run(f, (gx, gy, gz), (bx, by, bz), smem, params, None, stream)

    def cuLaunchKernelEx(self, cfg, f, params, extra):
        self._call("cuLaunchKernelEx", (cfg, f, params, extra))
        cluster = None
        for a in list(cfg.attrs)[:int(cfg.numAttrs)]:
            if a.id.name == "CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION":
                d = a.value.clusterDim
                cluster = (int(d.x), int(d.y), int(d.z))
        return self._run(f, (int(cfg.gridDimX), int(cfg.gridDimY), int(cfg.gridDimZ)),
                         (int(cfg.blockDimX), int(cfg.blockDimY), int(cfg.blockDimZ)),
                         int(cfg.sharedMemBytes), params, cluster, cfg.hStream)

    # -- tensor maps ------------------------------------------------------------------------
    def cuTensorMapEncodeTiled(self, dtype, rank, addr, dims, strides, box, estrides,
                               interleave, swizzle, l2, oob):
        self._call("cuTensorMapEncodeTiled", (dtype, rank, addr, dims, strides, box,
                                              estrides, interleave, swizzle, l2, oob))
        from tilelang.emulator import tensormap as emu
        try:
            raw = bytes(emu.encode(int(dtype), int(rank), int(addr),
                                   tuple(int(x) for x in dims), tuple(int(x) for x in strides),
                                   tuple(int(x) for x in box), tuple(int(x) for x in estrides),
                                   int(interleave), int(swizzle), int(l2), int(oob)))
        except ValueError:
            return _res(CUresult.CUDA_ERROR_INVALID_VALUE), None
        words = list(struct.unpack("<16Q", raw))
        if _real is not None:                   # the bindings' own type, as the driver gives
            tm = _real.CUtensorMap()
            tm.opaque = words
        else:
            tm = types.SimpleNamespace(opaque=words)
        return _res(0), tm

    # -- events -----------------------------------------------------------------------------
    def cuEventCreate(self, flags):
        self._call("cuEventCreate", (flags,))
        return _res(0), _enum(self._new(["event", None]), "CUevent")

    def cuEventRecord(self, ev, stream):
        self._call("cuEventRecord", (ev, stream))
        c = self._capture_of(stream)
        self._handles[int(ev)][1] = c if c is not None else time.perf_counter()
        return (_res(0),)

    def _captured_event(self, ev) -> bool:
        return isinstance(self._handles.get(int(ev), [None, None])[1], _Capture)

    def cuEventSynchronize(self, ev):
        self._call("cuEventSynchronize", (ev,))
        if self._captured_event(ev):
            return (_res(CUresult.CUDA_ERROR_CAPTURED_EVENT),)
        return (_res(0),)

    def cuEventQuery(self, ev):
        self._call("cuEventQuery", (ev,))
        if self._captured_event(ev):
            return (_res(CUresult.CUDA_ERROR_CAPTURED_EVENT),)
        return (_res(0),)

    def cuEventElapsedTime(self, a, b):
        self._call("cuEventElapsedTime", (a, b))
        if self._captured_event(a) or self._captured_event(b):
            return _res(CUresult.CUDA_ERROR_CAPTURED_EVENT), 0.0
        ta, tb = self._handles[int(a)][1], self._handles[int(b)][1]
        return _res(0), (tb - ta) * 1e3

    def cuEventDestroy(self, ev):
        self._call("cuEventDestroy", (ev,))
        self._handles.pop(int(ev), None)
        return (_res(0),)


def _record_links():
    """Remember the PTX of every cubin nvJitLink makes in this process."""
    from tilelang import nvjitlink
    if getattr(nvjitlink.link_ptx, "_emulated_cuda", False):
        return
    orig = nvjitlink.link_ptx

    def link_ptx(ptx, options, *a, **kw):
        cubin, info = orig(ptx, options, *a, **kw)
        text = ptx.decode() if isinstance(ptx, (bytes, bytearray)) else str(ptx)
        LINKED[hashlib.sha256(bytes(cubin)).hexdigest()] = text
        return cubin, info
    link_ptx._emulated_cuda = True
    nvjitlink.link_ptx = link_ptx


def install() -> EmulatedDriver:
    """Make `from cuda.bindings import driver` give the emulated driver in this process."""
    current = sys.modules.get("cuda.bindings.driver")
    if isinstance(current, EmulatedDriver):
        return current
    import os
    drv = EmulatedDriver(devices=int(os.environ.get("TILELANG_EMULATED_GPUS", "1") or 1))
    if "cuda.bindings" not in sys.modules:
        try:
            import cuda.bindings  # noqa: F401
        except ImportError:                     # pragma: no cover - no cuda-bindings
            pkg = sys.modules.setdefault("cuda", types.ModuleType("cuda"))
            sub = types.ModuleType("cuda.bindings")
            sub.__path__ = []
            sys.modules["cuda.bindings"] = sub
            pkg.bindings = sub
    sys.modules["cuda.bindings.driver"] = drv
    sys.modules["cuda.bindings"].driver = drv
    _record_links()
    return drv
