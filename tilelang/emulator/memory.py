"""Device memory of the emulator: the global heap and the address windows of each state space.

Global memory is one growing NumPy byte array; allocations are placed at 256-byte aligned
offsets above `GLOBAL_BASE`, so a device pointer is a plain 64-bit integer as on a GPU. Shared and
local memory live with the executing batch (see executor.py); their generic-address windows are
fixed constants so `cvta` is a simple add.
"""

from __future__ import annotations

import bisect
import contextlib

import numpy as np

from .errors import EmulatorError

GLOBAL_BASE = 0x0000_7000_0000_0000
SHARED_WINDOW = 0x0000_0100_0000_0000     # generic address of shared offset 0
SHARED_WINDOW_SIZE = 1 << 32
LOCAL_WINDOW = 0x0000_0200_0000_0000      # generic address of local offset 0
LOCAL_WINDOW_SIZE = 1 << 32
PARAM_WINDOW = 0x0000_0300_0000_0000      # address of kernel parameter byte 0 (ld.param [reg],
PARAM_WINDOW_SIZE = 1 << 32               # generic after cvta.param: the same number)
_ALIGN = 256
REUSE_ABOVE = 1 << 30          # reuse freed ranges only once the heap would pass 1 GiB
_NO_LOCK = contextlib.nullcontext()


class GlobalMemory:
    """The global heap: allocation, host copies and bounds lookup."""

    def __init__(self):
        self.data = np.zeros(1 << 16, dtype=np.uint8)
        self.top = 0                      # next free offset
        self.starts: list = []            # sorted allocation start offsets
        self.ends: list = []              # matching end offsets (exclusive)
        self.names: list = []             # owner description, for error messages
        self._np_starts = np.zeros(0, np.int64)
        self._np_ends = np.zeros(0, np.int64)
        self._views = {}
        # multicast windows (NVLink SHARP, ops_multimem.py): window address -> (bytes, the
        # address of each rank's buffer it maps to, in rank order)
        self.multicast: dict[int, tuple[int, tuple[int, ...]]] = {}

    # -- allocation -----------------------------------------------------------------------
    def alloc(self, nbytes: int, name: str = "") -> int:
        if nbytes < 0:
            raise EmulatorError(f"cannot allocate {nbytes} bytes")
        off = (self.top + _ALIGN - 1) // _ALIGN * _ALIGN
        end = off + max(int(nbytes), 1)
        if end > REUSE_ABOVE:
            reused = self._reuse(int(nbytes), name)
            if reused is not None:
                return reused
        if end > self.data.size:
            size = self.data.size
            while size < end:
                size *= 2
            grown = np.zeros(size, np.uint8)
            grown[:self.data.size] = self.data
            self.data = grown
            self._views.clear()
        self.top = end
        self.starts.append(off)
        self.ends.append(off + int(nbytes))
        self.names.append(name)
        self._np_starts = np.asarray(self.starts, np.int64)
        self._np_ends = np.asarray(self.ends, np.int64)
        return GLOBAL_BASE + off

    def _reuse(self, nbytes: int, name: str):
        """First fit among freed ranges (kept as empty entries in place, so order holds)."""
        for i, (s, e) in enumerate(zip(self.starts, self.ends)):
            if s != e:
                continue
            cap = (self.starts[i + 1] if i + 1 < len(self.starts) else self.top) - s
            if cap >= max(nbytes, 1):
                self.ends[i] = s + nbytes
                self.names[i] = name
                self.data[s:s + nbytes] = 0
                self._np_ends = np.asarray(self.ends, np.int64)
                return GLOBAL_BASE + s
        return None

    def free(self, addr: int) -> None:
        off = addr - GLOBAL_BASE
        i = bisect.bisect_left(self.starts, off)
        if i >= len(self.starts) or self.starts[i] != off:
            raise EmulatorError(f"free of {addr:#x}, which is not the start of an allocation")
        # Freed ranges stay reserved so stale pointers keep faulting; they are reused only
        # when the heap would otherwise grow past REUSE_ABOVE.
        self.ends[i] = self.starts[i]
        self._np_ends = np.asarray(self.ends, np.int64)

    def atomically(self):
        """A context in which a read-modify-write is atomic for every user of this memory
        (one process here; shared_world.py's memory takes a lock across processes)."""
        return _NO_LOCK

    def view(self, dtype) -> np.ndarray:
        v = self._views.get(dtype)
        if v is None:
            v = self._views[dtype] = self.data.view(dtype)
        return v

    # -- host copies ----------------------------------------------------------------------
    def check_host_range(self, addr: int, nbytes: int, what: str) -> int:
        off = int(addr) - GLOBAL_BASE
        i = bisect.bisect_right(self.starts, off) - 1
        if i < 0 or off + nbytes > self.ends[i] or off < self.starts[i]:
            raise EmulatorError(f"{what}: range [{int(addr):#x}, +{nbytes}) is outside every "
                                f"live allocation")
        return off

    def write(self, addr: int, data: bytes | np.ndarray) -> None:
        buf = np.frombuffer(memoryview(np.ascontiguousarray(data)).cast("B"), np.uint8)
        off = self.check_host_range(addr, buf.size, "memcpy_htod")
        self.data[off:off + buf.size] = buf

    def read(self, addr: int, nbytes: int) -> bytes:
        off = self.check_host_range(addr, nbytes, "memcpy_dtoh")
        return self.data[off:off + nbytes].tobytes()

    # -- device access checks -------------------------------------------------------------
    def bad_accesses(self, off: np.ndarray, size: int) -> np.ndarray:
        """Boolean mask of offsets whose [off, off+size) is not inside one live allocation."""
        i = np.searchsorted(self._np_starts, off, side="right") - 1
        ok = i >= 0
        ic = np.where(ok, i, 0)
        if self._np_starts.size == 0:
            return np.ones(off.shape, bool)
        ok &= (off >= self._np_starts[ic]) & (off + size <= self._np_ends[ic])
        return ~ok
