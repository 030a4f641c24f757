"""The back ends by name: one shared object per name, so device arrays made with
`tilelang.to_device` work with every module on that back end (docs/python-api.md)."""

from __future__ import annotations

import os
from typing import Any

from .errors import usage_error

BACKENDS = ("cuda", "emulator", "interp")
_BACKENDS: dict[str, Any] = {}


def get_backend(backend=None):
    """A back end object from a name ("cuda", "emulator"), None (`TILELANG_BACKEND`, else
    "cuda") or a back-end object (returned as is). One shared object per name, so device
    arrays made with `tilelang.to_device` work with every module on that back end."""
    if backend is None:
        backend = os.environ.get("TILELANG_BACKEND", "").strip() or "cuda"
    if not isinstance(backend, str):
        if not all(hasattr(backend, a) for a in ("name", "malloc", "limits")):
            raise usage_error("E0921", f"`backend` is {type(backend).__name__}, not a back end",
                              "pass a back-end name (`cuda`, `emulator`, `interp`) or an "
                              "object from `tilelang.get_backend`")
        return backend
    name = backend.strip().lower()
    device = None
    if name.startswith("cuda:") and name[5:].isdigit() and name[5:].isascii():
        name, device = "cuda", int(name[5:])     # one device of the driver: "cuda:1"
    if name not in BACKENDS:
        raise usage_error("E0921", f"unknown back end `{backend}`",
                          "the back ends are `cuda` (a GPU through the CUDA driver; "
                          "`cuda:N` for device N), "
                          "`emulator` (the CPU PTX emulator) and `interp` (the reference "
                          "interpreter)")
    if interpret_everything():
        name = "interp"
    b = _BACKENDS.get(name)
    if b is None:
        if name == "cuda":
            from .cuda import CudaBackend
            b = CudaBackend()
        elif name == "interp":
            from .interp_backend import InterpBackend
            b = InterpBackend()
        else:
            from .emulator_backend import EmulatorBackend
            b = EmulatorBackend()
        _BACKENDS[name] = b
    if device is not None and name == "cuda":
        return b.for_device(device)
    return b


def interpret_everything() -> bool:
    """`TILELANG_INTERPRET=1`: every launch runs on the reference interpreter, whatever back
    end was asked for by name (as Triton's `TRITON_INTERPRET=1`)."""
    return os.environ.get("TILELANG_INTERPRET", "").strip().lower() in ("1", "true", "yes", "on")

