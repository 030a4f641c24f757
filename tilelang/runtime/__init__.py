"""The Tile runtime: compile, specialize, cache and launch kernels on a GPU (CUDA driver) or on
the CPU emulator. See docs/python-api.md.

Names are imported on first use, so `import tilelang` stays cheap and needs no driver.
"""

from __future__ import annotations

from . import errors  # noqa: F401  (registers the E09xx codes)

_EXPORTS = {
    "compile": "module", "launch": "module", "get_backend": "backends", "Module": "module",
    "Kernel": "module", "Specialization": "specialize",
    "DeviceArray": "device_array",
    "CompileOptions": "compiler",
    "DiskCache": "cache", "cache_dir": "cache",
    "LaunchConfigError": "errors", "KernelArgumentError": "errors",
    "BackendUnavailable": "errors", "KernelNotFound": "errors", "DeviceError": "errors",
    "RuntimeUsageError": "errors", "ArrayUsageError": "errors",
    "HostFunction": "host_fn",
    "pack_f4": "mx_formats", "unpack_f4": "mx_formats",
}

__all__ = sorted(_EXPORTS) + ["to_device", "empty", "cdiv"]


def __getattr__(name: str):
    mod = _EXPORTS.get(name)
    if mod is None:
        raise AttributeError(f"module 'tilelang.runtime' has no attribute {name!r}")
    import importlib
    value = globals()[name] = getattr(importlib.import_module(f"{__name__}.{mod}"), name)
    return value


def to_device(array, backend=None):
    """Copy a host (NumPy) array to a back end's memory: a `DeviceArray`."""
    from .backends import get_backend
    from .device_array import DeviceArray
    return DeviceArray.from_host(get_backend(backend), array)


def empty(shape, dtype: str, backend=None):
    """An uninitialized `DeviceArray` of a Tile dtype (`"f32"`, `"bf16"`, ...)."""
    from .backends import get_backend
    from .device_array import DeviceArray
    return DeviceArray.empty(get_backend(backend), shape, dtype)


def cdiv(a, b):
    """Ceiling division of integers, `-(-a // b)`: the number of tiles of size `b` that cover
    `a` elements (Triton's `cdiv`, the Tile built-in `cdiv`)."""
    import operator
    try:
        a, b = operator.index(a), operator.index(b)
    except TypeError:
        raise TypeError(f"cdiv takes two integers, got {type(a).__name__} and "
                        f"{type(b).__name__}") from None
    if b == 0:
        raise ZeroDivisionError("cdiv by zero")
    return -(-a // b)
