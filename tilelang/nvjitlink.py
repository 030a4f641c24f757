"""nvJitLink through ctypes: the library is found and loaded once per process, and importing
this module loads nothing.

`cuda.bindings.nvjitlink` does the same job but its import (cuda.pathfinder, pathlib,
dataclasses, certifi...) cost 30-60 ms of every cold `tilec` run before any PTX existed, and
`targets.linker_max_ptx` paid it again just to read the version. The C API used here is nine
functions of nvJitLink.h, stable since CUDA 12.0 (their plain, unversioned symbols are
exported by the 12.x and 13.x libraries).

The library is looked for where the `nvidia-nvjitlink` wheels put it (found through the
`nvidia` namespace package, so an environment where that package cannot be imported has no
nvJitLink here either), then by its soname through the system loader.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading

# nvJitLinkInputType and nvJitLinkResult (nvJitLink.h)
INPUT_PTX = 2
RESULTS = ("SUCCESS", "ERROR_UNRECOGNIZED_OPTION", "ERROR_MISSING_ARCH", "ERROR_INVALID_INPUT",
           "ERROR_PTX_COMPILE", "ERROR_NVVM_COMPILE", "ERROR_INTERNAL", "ERROR_THREADPOOL",
           "ERROR_UNRECOGNIZED_INPUT", "ERROR_FINALIZE", "ERROR_NULL_INPUT",
           "ERROR_INCOMPATIBLE_OPTIONS", "ERROR_INCORRECT_INPUT_TYPE", "ERROR_ARCH_MISMATCH",
           "ERROR_OUTDATED_LIBRARY", "ERROR_MISSING_FATBIN", "ERROR_UNRECOGNIZED_ARCH",
           "ERROR_UNSUPPORTED_ARCH", "ERROR_LTO_NOT_ENABLED")

# (folder under the `nvidia` namespace package, file name), newest first; the same places
# and names as cuda-pathfinder's catalog
_WHEEL_FILES = {
    "linux": (("cu13/lib", "libnvJitLink.so.13"), ("nvjitlink/lib", "libnvJitLink.so.12")),
    "win32": (("cu13/bin/x86_64", "nvJitLink_130_0.dll"), ("nvjitlink/bin", "nvJitLink_120_0.dll")),
}
_SONAMES = {"linux": ("libnvJitLink.so.13", "libnvJitLink.so.12"),
            "win32": ("nvJitLink_130_0.dll", "nvJitLink_120_0.dll")}


class NvJitLinkUnavailable(Exception):
    """No usable nvJitLink library (the message says what was tried)."""


class NvJitLinkError(Exception):
    """A call failed; `result` is the nvJitLinkResult name, e.g. ERROR_PTX_COMPILE."""

    def __init__(self, result: int):
        self.code = result
        self.result = RESULTS[result] if 0 <= result < len(RESULTS) else f"ERROR_{result}"
        super().__init__(f"{self.result} ({result})")


def _platform() -> str:
    return "win32" if sys.platform == "win32" else "linux"


def candidates() -> list[str]:
    """The library files to try, in order: the wheels' copies, then sonames for the loader."""
    out = []
    try:
        import importlib.util
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        spec = None
    for root in (spec.submodule_search_locations or []) if spec else []:
        for sub, name in _WHEEL_FILES[_platform()]:
            path = os.path.join(root, *sub.split("/"), name)
            if os.path.isfile(path):
                out.append(path)
    return out + list(_SONAMES[_platform()])


class _Library:
    def __init__(self, path: str, dll: ctypes.CDLL):
        self.path = path
        self.dll = dll
        c_size_p = ctypes.POINTER(ctypes.c_size_t)
        sig = {
            "nvJitLinkCreate": (ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint32,
                                ctypes.POINTER(ctypes.c_char_p)),
            "nvJitLinkDestroy": (ctypes.POINTER(ctypes.c_void_p),),
            "nvJitLinkAddData": (ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t,
                                 ctypes.c_char_p),
            "nvJitLinkComplete": (ctypes.c_void_p,),
            "nvJitLinkGetLinkedCubinSize": (ctypes.c_void_p, c_size_p),
            "nvJitLinkGetLinkedCubin": (ctypes.c_void_p, ctypes.c_void_p),
            "nvJitLinkGetErrorLogSize": (ctypes.c_void_p, c_size_p),
            "nvJitLinkGetErrorLog": (ctypes.c_void_p, ctypes.c_char_p),
            "nvJitLinkGetInfoLogSize": (ctypes.c_void_p, c_size_p),
            "nvJitLinkGetInfoLog": (ctypes.c_void_p, ctypes.c_char_p),
            "nvJitLinkVersion": (ctypes.POINTER(ctypes.c_uint), ctypes.POINTER(ctypes.c_uint)),
        }
        for name, args in sig.items():
            fn = getattr(dll, name)          # AttributeError: not an nvJitLink we know
            fn.argtypes = args
            fn.restype = ctypes.c_int
            setattr(self, name[len("nvJitLink"):], fn)
        major, minor = ctypes.c_uint(), ctypes.c_uint()
        _check(self.Version(ctypes.byref(major), ctypes.byref(minor)))
        self.version = (major.value, minor.value)


def _check(result: int) -> None:
    if result != 0:
        raise NvJitLinkError(result)


_lock = threading.Lock()
_loaded: _Library | None = None
_failure: str | None = None


def library() -> _Library:
    """The process's nvJitLink (loaded on the first call), or NvJitLinkUnavailable."""
    global _loaded, _failure
    if _loaded is not None:
        return _loaded
    with _lock:
        if _loaded is None and _failure is None:
            tried = []
            for cand in candidates():
                try:
                    _loaded = _Library(cand, ctypes.CDLL(cand))
                    break
                except (OSError, AttributeError, NvJitLinkError) as e:
                    tried.append(f"{cand}: {e}")
            else:
                _failure = "no nvJitLink library could be loaded (" + ("; ".join(tried)
                                                                     or "none found") + ")"
    if _loaded is None:
        raise NvJitLinkUnavailable(_failure)
    return _loaded


def version() -> tuple[int, int]:
    """(major, minor) of the loaded nvJitLink, e.g. (13, 5)."""
    return library().version


def _text(lib: _Library, handle: ctypes.c_void_p, error: bool) -> str:
    size = ctypes.c_size_t()
    _check((lib.GetErrorLogSize if error else lib.GetInfoLogSize)(handle, ctypes.byref(size)))
    if not size.value:
        return ""
    buf = ctypes.create_string_buffer(size.value)
    _check((lib.GetErrorLog if error else lib.GetInfoLog)(handle, buf))
    return buf.raw.rstrip(b"\0").decode("utf-8", errors="replace")


class LinkFailed(Exception):
    """The link failed at `stage` ("options" or "input"): `error` is the NvJitLinkError and
    `log` nvJitLink's error log (ptxas's messages), possibly empty."""

    def __init__(self, stage: str, error: NvJitLinkError, log: str):
        self.stage, self.error, self.log = stage, error, log
        super().__init__(log or str(error))


def link_ptx(ptx: bytes, options: list[str], name: str = "tile.ptx") -> tuple[bytes, str]:
    """(cubin, info log) of one PTX module linked with `options`; LinkFailed otherwise."""
    lib = library()
    handle = ctypes.c_void_p()
    argv = (ctypes.c_char_p * len(options))(*(o.encode() for o in options))
    try:
        _check(lib.Create(ctypes.byref(handle), len(options), argv))
    except NvJitLinkError as e:
        raise LinkFailed("options", e, "") from None
    try:
        try:
            _check(lib.AddData(handle, INPUT_PTX, ptx, len(ptx), name.encode()))
            _check(lib.Complete(handle))
        except NvJitLinkError as e:
            raise LinkFailed("input", e, _text(lib, handle, error=True)) from None
        size = ctypes.c_size_t()
        _check(lib.GetLinkedCubinSize(handle, ctypes.byref(size)))
        cubin = ctypes.create_string_buffer(size.value)
        _check(lib.GetLinkedCubin(handle, cubin))
        return cubin.raw[:size.value], _text(lib, handle, error=False)
    finally:
        lib.Destroy(ctypes.byref(handle))

