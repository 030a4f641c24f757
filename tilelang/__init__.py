"""Tile: a block/tile GPU language compiled to PTX and cubin.

The public Python API lives here (docs/python-api.md); the compiler stages live in
subpackages (frontend → sema → ir → codegen → runtime), with the emulator and the reference
interpreter as back ends.

    import tilelang
    mod = tilelang.compile("examples/vadd.tile", backend="emulator")   # or "cuda", "interp"
    mod.vadd[tilelang.cdiv(n, 1024)](a, b, c)
    mod.vadd_grid(n)                                # a @host fn, evaluated from Python

The API names are loaded on first use, so `import tilelang` needs neither NumPy nor a driver.
"""

from .version import __version__

from .runtime import errors as _runtime_errors  # noqa: F401,E402  (registers E09xx codes)

_API = ("compile", "launch", "to_device", "empty", "get_backend", "cdiv", "Module", "Kernel",
        "DeviceArray", "LaunchConfigError", "KernelArgumentError", "BackendUnavailable",
        "KernelNotFound", "DeviceError", "RuntimeUsageError", "ArrayUsageError", "pack_f4",
        "unpack_f4")

__all__ = ["__version__", *_API]


def __getattr__(name: str):
    if name in _API:
        from . import runtime
        value = globals()[name] = getattr(runtime, name)    # later lookups skip this hook
        return value
    raise AttributeError(f"module 'tilelang' has no attribute {name!r}")
