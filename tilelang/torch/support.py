"""What the parts of tilelang.torch share: importing torch on first use, the dtype map, the
error type, the arrays a kernel writes (from its ABI), and the launch on the tensors' device and
stream (docs/torch.md, "Devices and streams")."""

from __future__ import annotations

import inspect
import weakref

# Tile dtype -> torch dtype attribute name (tf32 arrays are float32 tensors, docs/python-api.md).
_TORCH_DTYPE = {
    "bool": "bool", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
    "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64",
    "f16": "float16", "bf16": "bfloat16", "f32": "float32", "tf32": "float32",
    "f64": "float64", "f8e4m3": "float8_e4m3fn", "f8e5m2": "float8_e5m2",
    "ue8m0": "float8_e8m0fnu", "f4e2m1x2": "float4_e2m1fn_x2",  # torch has no f6, f4 only packed
}


def import_torch():
    try:
        import torch
    except ImportError:
        raise ImportError("tilelang.torch needs PyTorch, which is not installed: "
                          "pip install 'tilec[torch]' (or any torch >= 2.4)") from None
    return torch


def torch_dtype(tile_dtype: str):
    """The torch dtype of arrays passed for a Tile dtype."""
    return getattr(import_torch(), _TORCH_DTYPE[tile_dtype])


class TileOpError(ValueError):
    """A mistake in making a Tile operator (the message names the operator and the fix)."""


_WRITTEN: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def written_arrays(kernel) -> frozenset:
    """The names of the arrays `kernel` (with its consts bound) writes, from its compiled ABI
    (docs/abi.md, `AbiParam.written`); compiled once per bound kernel."""
    got = _WRITTEN.get(kernel)              # (a bound kernel is one object per const values)
    if got is None:
        art = kernel.compile().artifact
        got = _WRITTEN[kernel] = frozenset(p.name for p in art.params
                                        if p.kind in ("array", "list") and p.written)
    return got


def launch(kernel, grid, args, where: str, *, stream=None, block=None):
    """Launch `kernel` (consts bound) on `args`: on CUDA tensors on their device, made current
    for the call, and that device's current torch stream unless `stream` is given. A grid
    with a zero dimension (empty tensors) is the runtime's empty launch: checked, then no
    block runs (docs/python-api.md "Launching")."""
    torch = import_torch()
    device = device_of(args, where, torch)
    if device is not None and device.type == "cuda":
        with torch.cuda.device(device):
            return kernel.launch(grid, args, block=block,
                                 stream=stream if stream is not None
                                 else torch.cuda.current_stream(device))
    return kernel.launch(grid, args, stream=stream, block=block)


def with_signature(fn, sig: inspect.Signature):
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)
    wrapper.__signature__ = sig
    wrapper.__name__ = getattr(fn, "__name__", "tile_op")
    return wrapper


def scalar_type(dtype: str):
    if dtype == "bool":
        return bool
    return float if dtype.startswith(("f", "bf", "tf")) else int


def shape_tuple(shape, where: str, name: str) -> tuple:
    if isinstance(shape, int) or hasattr(shape, "node"):       # an int or a SymInt
        return (shape,)
    try:
        return tuple(shape)
    except TypeError:
        raise TileOpError(f"{where}: the shape function of output `{name}` returned "
                          f"{shape!r}, not a tuple of ints") from None


def device_of(values, where: str, torch):
    devices = {v.device for v in values if isinstance(v, torch.Tensor)}
    if len(devices) > 1:
        raise TileOpError(f"{where}: tensors on different devices "
                          f"({', '.join(sorted(map(str, devices)))}); move them to one")
    return next(iter(devices), None)


def describe(v) -> str:
    dim = getattr(v, "dim", None)
    return f"a tensor of rank {dim()}" if callable(dim) else type(v).__name__


def names(items) -> str:
    return ", ".join(f"`{n}`" for n in items)
