"""The emulator back end: kernels run on the CPU PTX emulator (`tilelang.emulator`).

NumPy arguments are copied into emulator memory before the launch and back after it (arrays
whose memory overlaps share one device buffer, so aliasing views behave as on a GPU); a
`DeviceArray` made on this back end is passed without copies. Launches are synchronous and
return the emulator's `LaunchReport`.
"""

from __future__ import annotations

import ctypes
import struct

import numpy as np

from tilelang.diagnostics import InternalCompilerError
from tilelang.emulator import (EmulatorDevice, EmulatorError, ExecutionError, LaunchRefused,
                               LaunchReport)

from .args import ArrayView
from .compiler import Built
from .cuda import target_for
from .dtypes import ITEMSIZE
from .errors import device_error
from .packing import ParamLayout
from .validate import DeviceLimits, LaunchShape, check_stream


class EmulatorBackend:
    name = "emulator"
    device_id = 0
    synchronous = True
    host_arrays = True         # NumPy arguments are copied in and out around a launch
    # callables given every LaunchReport of every emulator back end (tilelang.testing.do_bench
    # collects counters this way); while any is registered, memory counters are recorded too
    observers: list = []

    def __init__(self, capability: tuple[int, int] = (9, 0), *, counters: bool = False,
                 printf_stream=None, max_steps: int | None = None):
        # max_steps: the emulator's step limit (default: TILELANG_EMULATOR_MAX_STEPS or 50M)
        self.device = EmulatorDevice(counters=counters, printf_stream=printf_stream,
                                     max_steps=max_steps)
        at = self.device.attributes
        self.capability = tuple(capability)
        self.limits = DeviceLimits(
            "the emulator", self.capability,
            at["max_threads_per_block"], tuple(at["max_block_dim"]), tuple(at["max_grid_dim"]),
            at["max_shared_memory_per_block"], at["max_cluster_size"])

    def __repr__(self) -> str:
        return f"EmulatorBackend(sm_{self.limits.sm})"

    def default_target(self) -> str:
        """The target a GPU of the emulated capability gets (the CUDA back end's map)."""
        return target_for(self.capability)

    @property
    def cache_tag(self) -> str:
        return "ptx"          # the emulator needs no cubin

    # -- memory -------------------------------------------------------------------------------
    def malloc(self, nbytes: int) -> int:
        return int(self.device.malloc(nbytes))

    def free(self, ptr: int) -> None:
        self.device.free(ptr)

    def htod(self, ptr: int, array) -> None:
        self.device.memcpy_htod(ptr, array)

    def dtoh(self, array: np.ndarray, ptr: int, nbytes: int) -> None:
        self.device.memcpy_dtoh(array, ptr, nbytes)

    def synchronize(self) -> None:
        self.device.synchronize()

    def stream_handle(self, stream, lib=None) -> int:
        """Emulator launches complete before they return, in order: streams do not apply (but
        what is no stream anywhere is refused)."""
        if stream is not None:
            check_stream(stream)
        return 0

    # -- kernels ------------------------------------------------------------------------------
    def prepare(self, built: Built, layout: ParamLayout) -> "EmulatorLaunch":
        name = built.artifact.name
        try:
            fn = self.device.load_module(built.ptx).get_function(name)
        except EmulatorError as e:
            raise device_error("E0930", f"the emulator cannot load kernel `{name}`: {e}",
                               "the PTX uses something the emulator does not support; run it "
                               "on a GPU (backend='cuda')") from e
        prog = fn.program
        sizes = tuple(prog.kparams[p.name][1] for p in fn.params)
        if sizes != layout.sizes or prog.kparam_size != layout.size:
            raise InternalCompilerError.at(
                "E9999", f"internal compiler error: kernel `{name}` has PTX parameters of "
                f"{list(sizes)} bytes, the ABI (docs/abi.md) gives {list(layout.sizes)}", None,
                help="this is a bug in tilec; please report it with the input file")
        return EmulatorLaunch(self, fn, layout.fmt, name)

    def stage(self, views: list[tuple[int, ArrayView]]):
        """Copy host arrays in. Returns ({index: device address}, finish) where finish()
        copies writable arrays back and frees the buffers."""
        spans = []
        for i, v in views:
            lo, hi = _byte_span(v)
            spans.append((v.ptr + lo, v.ptr + hi, i, v))
        spans.sort(key=lambda s: s[0])
        groups: list[list] = []
        for s in spans:                       # merge overlapping host ranges
            if groups and s[0] < groups[-1][1]:
                groups[-1][1] = max(groups[-1][1], s[1])
                groups[-1][2].append(s)
            else:
                groups.append([s[0], s[1], [s]])
        addrs, bufs = {}, []
        for lo, hi, members in groups:
            n = max(hi - lo, 1)
            dev = self.malloc(n)
            if hi > lo:
                self.device.memcpy_htod(dev, ctypes.string_at(lo, hi - lo))
            writable = any(m[3].keep.flags.writeable if isinstance(m[3].keep, np.ndarray)
                           else True for m in members)
            bufs.append((lo, hi, dev, writable))
            for _, _, i, v in members:
                addrs[i] = dev + (v.ptr - lo)

        def finish():
            for lo, hi, dev, writable in bufs:
                try:
                    if writable and hi > lo:
                        data = self.device.memcpy_dtoh(None, dev, hi - lo)
                        ctypes.memmove(lo, data, hi - lo)
                finally:
                    self.free(dev)
        return addrs, finish


class EmulatorLaunch:
    """One loaded specialization on the emulator."""

    __slots__ = ("backend", "fn", "fmt", "name")

    def __init__(self, backend: EmulatorBackend, fn, fmt: str, name: str):
        self.backend, self.fn, self.fmt, self.name = backend, fn, fmt, name

    def launch(self, values, shape: LaunchShape, stream=None):
        if shape.empty:
            return self.nothing(shape)
        packed = struct.pack(self.fmt, *values)
        device = self.backend.device
        observers = EmulatorBackend.observers
        detailed = device.detailed_counters
        try:
            if observers:
                device.detailed_counters = True
            rep = device.launch(self.fn, shape.grid, shape.block, packed,
                                cluster=shape.cluster, shared_mem=shape.shared_mem)
            for f in observers:
                f(rep)
            return rep
        except LaunchRefused as e:
            raise device_error("E0930", f"the emulator refused the launch of `{self.name}`: {e}",
                               "the launch breaks a rule the CUDA driver enforces") from e
        except ExecutionError as e:
            raise device_error("E0931", f"kernel `{self.name}` faulted on the emulator: {e}",
                               "the emulator checks every access; a fault here is a fault "
                               "on the GPU (or undefined behaviour there)") from e
        finally:
            device.detailed_counters = detailed


    def nothing(self, shape: LaunchShape) -> LaunchReport:
        """An empty grid runs no block: a report of no threads and no work (the observers
        see it too, as they see every launch)."""
        rep = LaunchReport(self.name, shape.grid, shape.block, shape.cluster or (1, 1, 1), 0)
        for f in EmulatorBackend.observers:
            f(rep)
        return rep


def _byte_span(v: ArrayView) -> tuple[int, int]:
    """[lo, hi) byte offsets from element (0, ..., 0) that the array touches."""
    size = ITEMSIZE[v.dtype]
    lo = hi = 0
    for n, s in zip(v.shape, v.strides):
        if n <= 0:
            return 0, 0
        if s >= 0:
            hi += (n - 1) * s
        else:
            lo += (n - 1) * s
    return lo * size, (hi + 1) * size
