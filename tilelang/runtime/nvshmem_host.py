"""NVSHMEM's host side for kernels compiled with the NVSHMEM lowering (docs/distributed.md,
"The NVSHMEM lowering"): after the CUDA back end loads such a kernel's cubin it calls
`nvshmemx_culibrary_init` (the runtime loads cubins as context-independent `CUlibrary`s;
`nvshmemx_cumodule_init` is its counterpart for a `CUmodule`), which fills the library's
`nvshmemi_device_state_d` with the process's NVSHMEM state. NVSHMEM itself must already be
initialized by the program (nvshmem4py's `nvshmem.core.init`, or PyTorch's symmetric memory
with its NVSHMEM back end): Tile does not bootstrap a world of processes.

The host library is the one the process already loaded when there is one (its soname), else
`$NVSHMEM_HOME/lib` or the `nvidia-nvshmem-cu13` wheel's (`pip install tilelang[nvshmem]`).
"""

from __future__ import annotations

import ctypes
import os
import threading

from tilelang.diagnostics import register_codes
from tilelang.runtime.errors import device_error

register_codes({
    "E0935": "a kernel compiled for NVSHMEM cannot be initialized (no NVSHMEM host library, "
             "NVSHMEM not initialized, or nvshmemx_culibrary_init failed)",
})

SONAME = "libnvshmem_host.so.3"
# nvshmemx_init_status: NVSHMEM_STATUS_IS_INITIALIZED and later mean a usable NVSHMEM
_IS_INITIALIZED = 2

_lock = threading.Lock()
_host: ctypes.CDLL | None = None


def candidates() -> list[str]:
    out = [SONAME]
    home = os.environ.get("NVSHMEM_HOME")
    if home:
        out.append(os.path.join(home, "lib", SONAME))
    try:
        import importlib.util
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        spec = None
    for root in (spec.submodule_search_locations or []) if spec else []:
        out.append(os.path.join(root, "nvshmem", "lib", SONAME))
    return out


def host_library() -> ctypes.CDLL:
    """NVSHMEM's host library (loaded once), or DeviceError E0935."""
    global _host
    with _lock:
        if _host is None:
            tried = []
            for cand in candidates():
                try:
                    lib = ctypes.CDLL(cand, mode=ctypes.RTLD_GLOBAL)
                    lib.nvshmemx_culibrary_init.argtypes = [ctypes.c_void_p]
                    lib.nvshmemx_culibrary_init.restype = ctypes.c_int
                    lib.nvshmemx_init_status.argtypes = []
                    lib.nvshmemx_init_status.restype = ctypes.c_int
                    _host = lib
                    break
                except (OSError, AttributeError) as e:
                    tried.append(f"{cand}: {e}")
            else:
                raise device_error("E0935", "the kernel was compiled with the NVSHMEM lowering, "
                                   "but NVSHMEM's host library could not be loaded ("
                                   + "; ".join(tried) + ")",
                                   "pip install 'tilelang[nvshmem]' (NVSHMEM 3.4 or newer), "
                                   "or set NVSHMEM_HOME")
    return _host


def init_library(library_handle: int, kernel: str) -> None:
    """Initialize NVSHMEM's state in a loaded CUlibrary (`library_handle`, its address)."""
    lib = host_library()
    status = lib.nvshmemx_init_status()
    if status < _IS_INITIALIZED:
        raise device_error("E0935", f"kernel `{kernel}` calls NVSHMEM, but NVSHMEM is not "
                           f"initialized in this process (nvshmemx_init_status() = {status})",
                           "initialize NVSHMEM first (nvshmem4py's nvshmem.core.init, or "
                           "PyTorch symmetric memory with the NVSHMEM back end)")
    rc = lib.nvshmemx_culibrary_init(ctypes.c_void_p(library_handle))
    if rc != 0:
        raise device_error("E0935", f"nvshmemx_culibrary_init failed for kernel `{kernel}` "
                           f"(error {rc})", "check that the NVSHMEM the kernel was compiled "
                           "against is the one this process initialized")
