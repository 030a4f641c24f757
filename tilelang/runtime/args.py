"""Launch arguments: find each array's address, shape, strides, dtype and device; check them
against the kernel signature; compute the specialization facts (docs/abi.md).

`extract(obj)` understands, fastest first: `DeviceArray`, torch tensors, CuPy arrays and
anything with `__cuda_array_interface__`, NumPy arrays, and anything with DLPack. The way to
read a type is chosen once per Python type and cached.
"""

from __future__ import annotations

import operator
from typing import Callable, NamedTuple

import numpy as np

from .dlpack import KDL_CPU, KDL_CUDA, KDL_CUDA_HOST, KDL_CUDA_MANAGED, read_dlpack
from .device_array import DeviceArray, c_strides
from .dtypes import (DLPACK_TO_TILE, INT_RANGE, ITEMSIZE, NUMPY_TO_TILE, TORCH_TO_TILE, accepts,
                     numpy_problem)
from .errors import arg_error
from .facts import (ABSENT, facts_key, facts_of, mappable, shape_links,  # noqa: F401
                    small)  # (re-exported)
from .signature import ParamInfo


class ArrayView(NamedTuple):
    ptr: int
    shape: tuple
    strides: tuple           # elements
    dtype: str | None        # Tile dtype name, None when the library's dtype has none
    where: str               # "host" | "cuda" | "emulator"
    device_id: int
    keep: object             # what must stay alive until the launch is issued (or the array)
    what: str                # the library, for messages ("torch.Tensor", "numpy.ndarray", ...)
    problem: tuple | None = None   # (code, message, help) when the array cannot be passed


def _from_device_array(a: DeviceArray) -> ArrayView:
    return ArrayView(a.ptr, a.shape, a.strides, a.dtype, a.backend.name,
                     getattr(a.backend, "device_id", 0), a, "DeviceArray")


def _from_torch(t) -> ArrayView:
    dt = TORCH_TO_TILE.get(str(t.dtype))
    if t.is_cuda:
        where, dev = "cuda", t.device.index or 0
    else:
        where, dev = "host", 0
    return ArrayView(t.data_ptr(), tuple(t.shape), tuple(t.stride()), dt, where, dev, t,
                     "torch.Tensor")


def _from_numpy(a: np.ndarray) -> ArrayView:
    size = a.itemsize
    strides = tuple(s // size for s in a.strides) if size and \
        all(s % size == 0 for s in a.strides) else None
    ptr = a.ctypes.data
    return ArrayView(ptr, a.shape, strides, NUMPY_TO_TILE.get(a.dtype.name), "host", 0, a,
                     "numpy.ndarray", numpy_problem(a.dtype, ptr))


def _from_cai(x) -> ArrayView:
    what = f"{type(x).__module__}.{type(x).__qualname__}"
    try:
        cai = x.__cuda_array_interface__
        dt = np.dtype(cai["typestr"])
        shape = tuple(operator.index(n) for n in cai["shape"])
        ptr = operator.index(cai["data"][0] or 0)
        if cai.get("strides") is None:
            strides = c_strides(shape)
        else:
            bst = tuple(operator.index(s) for s in cai["strides"])
            strides = tuple(s // dt.itemsize for s in bst) \
                if dt.itemsize and all(s % dt.itemsize == 0 for s in bst) else None
            if len(bst) != len(shape):
                raise ValueError("strides and shape differ in length")
    except Exception as e:     # a foreign object's malformed interface: say so, never crash
        return ArrayView(0, (), (), None, "cuda", 0, x, what,
                         ("E0914", f"has a malformed `__cuda_array_interface__` ({e})",
                          "pass a torch tensor, a CuPy array or a DeviceArray"))
    dev = 0
    dev_attr = getattr(x, "device", None)
    if dev_attr is not None:
        dev = int(getattr(dev_attr, "id", 0) or 0)
    return ArrayView(ptr, shape, strides, NUMPY_TO_TILE.get(dt.name), "cuda", dev, x, what,
                     numpy_problem(dt, ptr))


def _from_dlpack(x) -> ArrayView:
    what = f"{type(x).__module__}.{type(x).__qualname__}"
    try:
        dev_type, dev_id = x.__dlpack_device__()
        if int(dev_type) == KDL_CPU:
            try:
                a = np.from_dlpack(x)   # a view: NumPy may mark it read-only, the memory is not
            except Exception:           # a dtype NumPy lacks (bf16, f8): read the capsule
                a = None
            if a is not None:
                v = _from_numpy(a)
                return v._replace(keep=(x, a), what=what)
        capsule, data, shape, strides, (code, bits, lanes), (dt, did) = read_dlpack(x)
    except Exception as e:     # a foreign producer that fails: say so, never crash
        return ArrayView(0, (), (), None, "host", 0, x, what,
                         ("E0914", f"could not be read through DLPack ({type(e).__name__}: "
                          f"{e})", "pass a NumPy array, a torch tensor or a DeviceArray"))
    where = "cuda" if dt in (KDL_CUDA, KDL_CUDA_HOST, KDL_CUDA_MANAGED) else \
        "host" if dt == KDL_CPU else f"dlpack:{dt}"
    tile = DLPACK_TO_TILE.get((code, bits)) if lanes == 1 else None
    return ArrayView(data, shape, strides, tile, where, did, (x, capsule), what)


_READERS: dict[type, Callable | None] = {DeviceArray: _from_device_array,
                                         np.ndarray: _from_numpy}


def _reader_for(tp: type):
    if issubclass(tp, DeviceArray):
        return _from_device_array
    if issubclass(tp, np.ndarray):
        return _from_numpy
    mod = tp.__module__ or ""
    if mod.split(".")[0] == "torch" and hasattr(tp, "data_ptr") and hasattr(tp, "stride"):
        return _from_torch
    if hasattr(tp, "__cuda_array_interface__"):
        return _from_cai
    if hasattr(tp, "__dlpack__") and hasattr(tp, "__dlpack_device__"):
        return _from_dlpack
    return None


def extract(obj) -> ArrayView | None:
    """The array view of `obj`, or None when `obj` is not an array the runtime understands."""
    tp = type(obj)
    reader = _READERS.get(tp, _reader_for)
    if reader is _reader_for:
        reader = _READERS[tp] = _reader_for(tp)
    return reader(obj) if reader is not None else None


# ---------------------------------------------------------------------------------------------
# Checks and facts

def check_array(kernel: str, p: ParamInfo, v: ArrayView | None, obj, backend,
                host_ok: bool) -> None:
    """Raise the diagnostic for an argument that cannot be passed as array parameter `p`."""
    backend_name = backend.name
    where = f"argument `{p.name}` of kernel `{kernel}` ({p.show()})"
    if obj is None:
        raise arg_error("E0914", f"{where} is None, but the parameter is not optional",
                        f"pass an array, or declare `{p.name}: Optional[Array[{p.dtype}, "
                        f"{p.rank}]]` and test `is_none({p.name})` in the kernel", p.span)
    if v is None:
        raise arg_error("E0914", f"{where} is {_a(obj)}, not an array",
                        "pass a torch tensor, a CuPy array, a DLPack array, a NumPy array (on "
                        "the emulator) or a tilelang DeviceArray", p.span)
    if v.problem is not None:
        code, message, helptext = v.problem
        raise arg_error(code, f"{where} {message}", helptext, p.span)
    if v.dtype is None or not _dtype_ok(p.dtype, v.dtype):
        got = v.dtype or "a dtype Tile has no name for"
        raise arg_error("E0911", f"{where} has dtype {got}, expected {p.dtype}",
                        f"convert it first, e.g. `x.astype(...)` / `x.to(...)` to {p.dtype}",
                        p.span)
    if len(v.shape) != p.rank:
        raise arg_error("E0912", f"{where} has rank {len(v.shape)} (shape {tuple(v.shape)}), "
                        f"expected rank {p.rank}",
                        "reshape the argument to the kernel's rank", p.span)
    if v.strides is None:
        raise arg_error("E0914", f"{where} has strides that are not a whole number of "
                        "elements", "make a copy with element-aligned strides", p.span)
    if v.where == "host" and not host_ok:
        raise arg_error("E0913", f"{where} is in host memory ({v.what}), but the {backend_name} "
                        "back end needs GPU memory",
                        "move it to the GPU first (e.g. `x.cuda()`), or use the emulator back "
                        "end for NumPy arrays", p.span)
    if v.where != "host" and v.where != backend_name:
        if v.where == "cuda":
            runs = "interpreter" if backend_name == "interp" else backend_name
            helptext = f"the {runs} runs on host memory: pass a NumPy array, or a " \
                f"DeviceArray made with `tilelang.to_device(..., backend='{backend_name}')`"
            place = "CUDA device memory"
        else:
            helptext = f"copy it to {backend_name} memory first"
            place = f"{v.where} memory"
        raise arg_error("E0913", f"{where} is in {place} ({v.what}), but the kernel runs on "
                        f"the {backend_name} back end", helptext, p.span)
    if v.what == "DeviceArray" and not same_driver(v.keep.backend, backend):
        raise arg_error("E0913", f"{where} is a DeviceArray of another {backend_name} device "
                        f"({v.keep.backend!r})", "make device arrays with the module's "
                        "`to_device`/`empty`, or with the same back end object", p.span)


def same_driver(a, b) -> bool:
    """Back-end objects that launch each other's arrays: the same object, or two devices of
    one CUDA driver (the launch then runs on the arrays' device, docs/launch-path.md)."""
    if a is b:
        return True
    da = getattr(a, "driver_backend", None)
    return da is not None and da is getattr(b, "driver_backend", None)


def _dtype_ok(param: str, arg: str) -> bool:
    return accepts(param, arg)


def _a(obj) -> str:
    tp = type(obj)
    name = tp.__name__ if tp.__module__ == "builtins" else f"{tp.__module__}.{tp.__qualname__}"
    return f"an {name}" if name[:1].lower() in "aeiou" else f"a {name}"


def itemsize(dtype: str) -> int:
    return ITEMSIZE[dtype]


# ---------------------------------------------------------------------------------------------
# Fast readers: one per (parameter, Python type), with the parameter's checks built in. They
# return ((address, *shape, *strides), facts key, library) or None, in which case the launch
# takes the general path (which stages host arrays or raises the diagnostic).

def _no_reader(a):
    return None


def make_binder(params: tuple[ParamInfo, ...], convert: tuple, backend) -> Callable:
    """Generate `bind(args) -> (values, facts, library) | None` for one kernel: the loop over
    parameters unrolled, each array read by the reader cached for its Python type, each
    scalar passed through its converter (bf16, f8, bool) or as is (struct checks the rest)."""
    if any(p.kind in ("list", "symmetric") for p in params):
        return _no_reader                    # lists and symmetric arrays: the general path
    env: dict = {"fast_reader": fast_reader, "no_reader": _no_reader, "backend": backend,
                 "ABSENT": ABSENT}
    names = [f"x{i}" for i in range(len(params))]
    body, parts, facts, libs = [], [], [], []
    arr = [i for i, p in enumerate(params) if p.kind == "array"]
    if names:
        body.append(f"    {', '.join(names)}, = args")
    for i, p in enumerate(params):
        x = names[i]
        if p.kind == "array":
            env[f"P{i}"], env[f"R{i}"] = p, {}
            pad = ""
            if p.optional:                   # None: zeros in the ABI slots, facts `None`
                env[f"N{i}"] = ((0,) * (1 + 2 * p.rank), ABSENT, None)
                body += [f"    if {x} is None:", f"        g{i} = N{i}", "    else:"]
                pad = "    "
            body += [pad + line for line in (
                     f"    t = type({x})",
                     f"    r = R{i}.get(t)",
                     "    if r is None:",
                     f"        r = R{i}[t] = fast_reader(t, P{i}, backend) or no_reader",
                     f"    g{i} = r({x})",
                     f"    if g{i} is None:",
                     "        return None")]
            parts.append(f"g{i}[0]")
            facts.append(f"g{i}[1]")
            libs.append(f"g{i}[2]")
        else:
            # the exact Python type struct packs as is skips the converter (the check and
            # conversion of `_scalar_converter`): an int for an integer parameter (struct
            # checks its range as `scalar_problem` does), a float for a float one
            env[f"C{i}"] = convert[i]
            exact = "int" if p.dtype in INT_RANGE else \
                "float" if p.dtype in ("f16", "f32", "tf32", "f64") else None
            if exact is None:
                body.append(f"    {x} = C{i}({x})")
            else:
                body += [f"    if {x}.__class__ is not {exact}:", f"        {x} = C{i}({x})"]
            parts.append(f"({x},)")
    # the `same_shape` fact: array j's key gains `=i` for the first earlier array i of the
    # same rank whose extents (values[1:1+rank] of each) are all equal
    ranks = [p.rank for p in params if p.kind == "array"]
    for j in range(1, len(ranks)):
        tests = [(i, " and ".join([f"g{arr[j]}[0][{d}] == g{arr[i]}[0][{d}]"
                                   for d in range(1, 1 + ranks[j])] +
                                  [f"g{arr[k]}[1] != ABSENT" for k in (i, j)
                                   if params[arr[k]].optional]))
                 for i in range(j) if ranks[j] and ranks[i] == ranks[j]]
        if tests:
            body.append(f"    f{j} = g{arr[j]}[1]")
            for n, (i, same) in enumerate(tests):
                body += [f"    {'elif' if n else 'if'} {same}:", f"        f{j} += '={i}'"]
            facts[j] = f"f{j}"
    lib = " or ".join(libs) or "None"
    body.append(f"    return {' + '.join(parts) or '()'}, "
                f"({', '.join(facts)}{',' if facts else ''}), {lib}")
    code = "def bind(args):\n" + "\n".join(body) + "\n"
    exec(compile(code, "<tilelang binder>", "exec"), env)
    return env["bind"]


def fast_reader(tp: type, p: ParamInfo, backend):
    dtype, rank, size = p.dtype, p.rank, ITEMSIZE[p.dtype]
    if issubclass(tp, DeviceArray):
        sig = (dtype, rank)

        def read_device_array(a):
            if a.backend is not backend or a._sig != sig:
                return None
            return a._abi, a._facts, None
        return read_device_array
    mod = (tp.__module__ or "").split(".")[0]
    if mod == "torch" and hasattr(tp, "data_ptr") and backend.name == "cuda":
        ok_dtypes: list = []                  # the torch dtype objects seen to match
        dev = getattr(backend, "device_id", 0)

        def read_torch(t):
            tdt = t.dtype
            if tdt not in ok_dtypes:
                if not _dtype_ok(dtype, TORCH_TO_TILE.get(str(tdt))):
                    return None
                ok_dtypes.append(tdt)
            if not t.is_cuda or t.get_device() != dev:
                return None
            shape = t.shape
            if len(shape) != rank:
                return None
            ptr, strides = t.data_ptr(), t.stride()
            if 0 in strides:                  # broadcast: the general path checks writes
                return None
            return (ptr, *shape, *strides), facts_of(ptr, shape, strides, size), "torch"
        return read_torch
    if mod == "cupy" and hasattr(tp, "data") and backend.name == "cuda":
        dev = getattr(backend, "device_id", 0)

        def read_cupy(x):
            if not _dtype_ok(dtype, NUMPY_TO_TILE.get(x.dtype.name)) or not x.dtype.isnative:
                return None
            shape = x.shape
            if len(shape) != rank or x.device.id != dev:
                return None
            bst = x.strides
            if 0 in bst or any(s % size for s in bst):
                return None
            strides = tuple(s // size for s in bst)
            ptr = x.data.ptr
            return (ptr, *shape, *strides), facts_of(ptr, shape, strides, size), "cupy"
        return read_cupy
    return None
