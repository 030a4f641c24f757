"""`DeviceArray`: memory on a back end's device with a shape, element strides and a Tile dtype.

On the emulator it is how a script avoids the copy-in/copy-out that NumPy arguments get; on
the CUDA back end it is device memory for scripts that use neither torch nor CuPy.
"""

from __future__ import annotations

import numpy as np

from .dtypes import ITEMSIZE, numpy_dtype, tile_of_numpy


def c_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    out, acc = [], 1
    for s in reversed(shape):
        out.append(acc)
        acc *= max(int(s), 1)
    return tuple(reversed(out))


class DeviceArray:
    """Device memory viewed as an array. `ptr` is the address of element (0, ..., 0);
    `strides` are in elements (docs/abi.md)."""

    __slots__ = ("backend", "ptr", "shape", "strides", "dtype", "_owner", "_sig", "_abi",
                 "_facts", "__weakref__")

    def __init__(self, backend, ptr: int, shape, dtype: str, strides=None, owner=None):
        self.backend = backend
        self.ptr = int(ptr)
        self.shape = tuple(int(s) for s in shape)
        self.strides = tuple(int(s) for s in strides) if strides is not None else \
            c_strides(self.shape)
        self.dtype = dtype
        self._owner = owner        # the allocation this view keeps alive (itself if it owns)
        # What a launch passes, computed once (a DeviceArray never changes): docs/abi.md
        from .args import facts_key
        self._sig = (dtype, len(self.shape))
        self._abi = (self.ptr, *self.shape, *self.strides)
        self._facts = facts_key(self.ptr, self.shape, self.strides, ITEMSIZE[dtype])

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def empty(cls, backend, shape, dtype: str) -> "DeviceArray":
        shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(shape)
        n = int(np.prod(shape, dtype=np.int64)) if shape else 1
        nbytes = max(n * ITEMSIZE[dtype], 1)
        alloc = _Allocation(backend, backend.malloc(nbytes), nbytes)
        return cls(backend, alloc.ptr, shape, dtype, owner=alloc)

    @classmethod
    def from_host(cls, backend, array, dtype: str | None = None) -> "DeviceArray":
        a = np.ascontiguousarray(array)
        tile = dtype or tile_of_numpy(a.dtype)
        if tile is None:
            raise ValueError(f"NumPy dtype {a.dtype} has no Tile dtype")
        if a.itemsize != ITEMSIZE[tile]:
            raise ValueError(f"{a.dtype} elements are {a.itemsize} bytes; {tile} needs "
                             f"{ITEMSIZE[tile]}")
        out = cls.empty(backend, a.shape, tile)
        if a.nbytes:
            backend.htod(out.ptr, a)
        return out

    # -- properties ---------------------------------------------------------------------------
    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1

    @property
    def itemsize(self) -> int:
        return ITEMSIZE[self.dtype]

    @property
    def device(self) -> str:
        return self.backend.name

    def is_contiguous(self) -> bool:
        return self.strides == c_strides(self.shape)

    # -- views and copies ---------------------------------------------------------------------
    def numpy(self) -> np.ndarray:
        """A host copy (NumPy dtype of the Tile dtype; bf16/f8 need ml_dtypes)."""
        dt = numpy_dtype(self.dtype)
        if self.size == 0:
            return np.empty(self.shape, dt)
        lo, hi = _span(self.shape, self.strides)
        raw = np.empty((hi - lo) * self.itemsize, np.uint8)
        self.backend.dtoh(raw, self.ptr + lo * self.itemsize, raw.size)
        base = raw.view(dt)
        view = np.lib.stride_tricks.as_strided(
            base[-lo:] if lo else base, self.shape,
            tuple(s * self.itemsize for s in self.strides))
        return np.array(view)

    def copy_from(self, array) -> None:
        """Fill from a host array of the same shape (contiguous arrays only)."""
        a = np.ascontiguousarray(array)
        if a.shape != self.shape:
            raise ValueError(f"shape {a.shape} differs from the device array's {self.shape}")
        if not self.is_contiguous():
            raise ValueError("copy_from needs a contiguous device array")
        if a.nbytes:
            self.backend.htod(self.ptr, a)

    def __getitem__(self, key) -> "DeviceArray":
        """Basic slicing (ints and slices with steps, negative steps included): a view."""
        if not isinstance(key, tuple):
            key = (key,)
        if len(key) > self.ndim:
            raise IndexError(f"too many indices for a {self.ndim}-d array")
        ptr, shape, strides = self.ptr, [], []
        for i, (n, st) in enumerate(zip(self.shape, self.strides)):
            k = key[i] if i < len(key) else slice(None)
            if isinstance(k, slice):
                start, stop, step = k.indices(n)
                ptr += start * st * self.itemsize
                shape.append(len(range(start, stop, step)))
                strides.append(st * step)
            else:
                k = int(k)
                if not -n <= k < n:
                    raise IndexError(f"index {k} out of range for axis {i} of size {n}")
                ptr += (k % n) * st * self.itemsize
        return DeviceArray(self.backend, ptr, shape, self.dtype, strides,
                           self._owner if self._owner is not None else self)

    @property
    def T(self) -> "DeviceArray":
        return DeviceArray(self.backend, self.ptr, self.shape[::-1], self.dtype,
                           self.strides[::-1], self._owner)

    def __repr__(self) -> str:
        return (f"DeviceArray(shape={self.shape}, dtype={self.dtype}, strides={self.strides}, "
                f"device={self.backend.name})")


class _Allocation:
    """Frees its memory when the last view goes away."""

    __slots__ = ("backend", "ptr", "nbytes")

    def __init__(self, backend, ptr: int, nbytes: int):
        self.backend, self.ptr, self.nbytes = backend, int(ptr), nbytes

    def __del__(self):
        try:
            self.backend.free(self.ptr)
        except Exception:   # interpreter shutdown or a lost context: nothing left to free
            pass


def _span(shape, strides) -> tuple[int, int]:
    """[lo, hi) element offsets, relative to element (0, ..., 0), that the array touches."""
    lo = hi = 0
    for n, s in zip(shape, strides):
        if n <= 0:
            return 0, 0
        if s >= 0:
            hi += (n - 1) * s
        else:
            lo += (n - 1) * s
    return lo, hi + 1
