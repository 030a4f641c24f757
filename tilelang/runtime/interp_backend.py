"""The interpreter back end: launches run the Tile IR on the reference interpreter
(`tilelang.interp`), block after block, with NumPy — no PTX, no GPU. It is the debugging back
end (`backend="interp"`, or `TILELANG_INTERPRET=1` for every launch, as Triton's
`TRITON_INTERPRET=1`): `print` writes to stdout, a failed `assert` names the block.

Arguments are checked as on the other back ends (dtype, rank, read-only or broadcast arrays
where the kernel writes, scalar ranges, grid limits). Arrays are used in place; bf16, f8 and
tf32 data are handed to the interpreter as float32 copies (its representation of them) and
converted back after the launch. `DeviceArray`s of this back end are ordinary host memory.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from tilelang.codegen.api import KernelArtifact

from .args import ArrayView, check_array, extract
from .dtypes import ITEMSIZE, accepts, numpy_dtype, scalar_problem
from .errors import device_error
from .array_lists import read_list
from .launching import check_writes, scalar_error
from .validate import DeviceLimits, check_launch, check_stream, dims


class InterpBackend:
    name = "interp"
    device_id = 0
    synchronous = True
    host_arrays = True
    cache_tag = "interp"

    def __init__(self):
        self.limits = DeviceLimits("the interpreter", (9, 0))
        self.capability = (9, 0)
        self._buffers: dict[int, np.ndarray] = {}

    def __repr__(self) -> str:
        return "InterpBackend()"

    def default_target(self) -> str:
        return "sm_90a"

    # -- memory: plain host buffers, so views of them are NumPy arrays ------------------------
    def malloc(self, nbytes: int) -> int:
        buf = np.zeros(max(int(nbytes), 1) + 64, np.uint8)
        ptr = buf.ctypes.data
        ptr += -ptr % 64                     # as aligned as device allocations
        self._buffers[ptr] = buf
        return ptr

    def free(self, ptr: int) -> None:
        self._buffers.pop(int(ptr), None)

    def htod(self, ptr: int, array) -> None:
        a = np.ascontiguousarray(array)
        ctypes.memmove(int(ptr), a.ctypes.data, a.nbytes)

    def dtoh(self, array: np.ndarray, ptr: int, nbytes: int) -> None:
        ctypes.memmove(array.ctypes.data, int(ptr), int(nbytes))

    def synchronize(self) -> None:
        pass

    def stream_handle(self, stream, lib=None) -> int:
        if stream is not None:
            check_stream(stream)
        return 0

    def prepare(self, built, layout):      # pragma: no cover - kernels never build PTX here
        raise AssertionError("the interpreter back end runs Tile IR, not PTX")


def host_view(v: ArrayView) -> np.ndarray:
    """A NumPy view of host memory described by an ArrayView (no copy)."""
    dt = numpy_dtype(v.dtype)
    size = ITEMSIZE[v.dtype]
    if any(n == 0 for n in v.shape):
        return np.empty(v.shape, dt)
    lo = sum((n - 1) * s for n, s in zip(v.shape, v.strides) if s < 0)
    hi = sum((n - 1) * s for n, s in zip(v.shape, v.strides) if s > 0)
    nbytes = (hi - lo + 1) * size
    raw = (ctypes.c_char * nbytes).from_address(v.ptr + lo * size)
    base = np.frombuffer(raw, dt)
    return np.lib.stride_tricks.as_strided(base[-lo:] if lo else base, v.shape,
                                           tuple(s * size for s in v.strides))


class InterpKernelRunner:
    """The interpreter's side of one bound kernel: its IR per const values, and launches."""

    def __init__(self, module, info, params, const_values):
        self.module, self.info, self.params, self.const_values = \
            module, info, params, const_values
        self.arrays = tuple(i for i, p in enumerate(params) if p.kind == "array")
        self._ir: dict = {}

    def _lowered(self, consts: dict[str, Any]):
        key = tuple(sorted((k, type(v).__name__, v) for k, v in consts.items()))
        hit = self._ir.get(key)
        if hit is not None:
            return hit
        from tilelang.codegen.generate import written_arrays
        from tilelang.diagnostics import TileError
        from tilelang.driver import compile_source
        from tilelang.interp.interpreter import Interpreter
        mod = self.module
        res = compile_source(mod.text, mod.path, mod.options,
                             kernels=[self.info.name], consts=consts, until="tir")
        if not res.ok:
            raise TileError([d for d in res.diagnostics])
        k = res.ir.kernel(self.info.name)
        written = written_arrays(k)
        idx = frozenset(i for i, p in enumerate(k.params) if p in written)
        spec = getattr(k, "launch", None)
        cluster = tuple(spec.cluster) if spec is not None and spec.cluster else None
        # the launch checks need only the @launch attributes (.reqntid/.maxntid, cluster)
        dims3 = (spec.reqntid or spec.maxntid) if spec is not None else None
        block = tuple(dims3) + (1,) * (3 - len(dims3)) if dims3 else (128, 1, 1)
        art = KernelArtifact(self.info.name, (), block, spec, cluster)
        hit = self._ir[key] = (Interpreter(k), k, idx, cluster, art)
        return hit

    def launch(self, grid, args: tuple, block, stream=None):
        if stream is not None:
            check_stream(stream)
        backend = self.module.backend
        absent = {p.name: None for p, a in zip(self.params, args)
                  if p.kind == "array" and p.optional and a is None}
        # an absent optional array specializes as `-D NAME=None` (docs/abi.md)
        interp, k, written, cluster, art = self._lowered({**self.const_values(), **absent})
        name = self.info.name
        check_launch(name, art, backend.limits, dims(grid, "grid", name),
                     None if block is None else dims(block, "block", name))
        values, views, back, list_views = [], [], [], []
        for i, (p, a) in enumerate(zip(self.params, args)):
            if p.kind == "scalar":
                why = scalar_problem(p.dtype, a)
                if why:
                    raise scalar_error(name, p, why)
                values.append(a.item() if isinstance(a, np.generic) else a)
                continue
            if p.kind == "list":              # each entry as an array argument
                arrs = []
                for j, (q, v, _) in enumerate(read_list(name, p, a, backend)):
                    arr = host_view(v) if not isinstance(a[j], np.ndarray) else a[j]
                    want = np.dtype(k.params[i].type.array.dtype.storage_np_dtype)
                    if arr.dtype != want:
                        staged = arr.astype(want)
                        if i in written:
                            back.append((arr, staged))
                        arr = staged
                    arrs.append(arr)
                    list_views.append((q, v))
                values.append(arrs)
                continue
            if p.name in absent:             # never read: an empty array of its type
                views.append(None)
                values.append(np.empty((0,) * p.rank, k.params[i].type.dtype.storage_np_dtype))
                continue
            v = extract(a)
            ours = v is not None and (v.where == "host" or (
                v.what == "DeviceArray" and v.keep.backend is backend))
            if not ours or v.problem is not None or not accepts(p.dtype, v.dtype) or \
                    len(v.shape) != p.rank or v.strides is None:
                check_array(name, p, v, a, backend, True)
            views.append(v)
            arr = a if isinstance(a, np.ndarray) else host_view(v)
            want = np.dtype(k.params[i].type.dtype.storage_np_dtype)
            if arr.dtype != want:
                staged = arr.astype(want)
                if i in written:
                    back.append((arr, staged))
                arr = staged
            values.append(arr)
        check_writes(name, self.params, self.arrays, written, views, args)
        written_lists = {j for j, p in enumerate(self.params) if p.kind == "list"} & written
        if written_lists:                    # each array of a list the kernel writes
            keys = list(range(len(list_views)))
            check_writes(name, {n: q for n, (q, _) in enumerate(list_views)}, keys, set(keys),
                         [v for _, v in list_views], args)
        from tilelang.interp import InterpreterAssertionError, InterpreterError
        g = dims(grid, "grid", name)
        if 0 in g:                           # an empty grid: checked above, runs nothing
            return None
        try:
            interp.run(values, g, cluster or (1, 1, 1))
        except InterpreterAssertionError as e:
            raise device_error("E0931", f"kernel `{name}` failed an assert in the interpreter: "
                               f"{e}", "the same launch fails the assert on a GPU") from None
        except InterpreterError as e:
            raise device_error("E0931", f"kernel `{name}` failed in the interpreter: {e}",
                               "the interpreter checks each operation against its type; "
                               "an out-of-range access or bad value here is one on the GPU "
                               "too") from None
        finally:
            for dst, staged in back:
                with np.errstate(all="ignore"):
                    dst[...] = staged.astype(dst.dtype)
        return None
