"""`DeviceArray`: memory on a back end's device with a shape, element strides and a Tile dtype.

On the emulator it is how a script avoids the copy-in/copy-out that NumPy arguments get; on
the CUDA back end it is device memory for scripts that use neither torch nor CuPy.
"""

from __future__ import annotations

import operator

import numpy as np

from .dtypes import CODE_BYTES, ITEMSIZE, numpy_dtype, numpy_problem, tile_of_numpy
from .errors import value_error
from .facts import facts_key

DTYPE_NAMES = ", ".join(ITEMSIZE)
MAX_BYTES = 1 << 48          # more than any device has: a larger request is a mistake


def tile_dtype(dtype) -> str:
    """The Tile dtype name of `dtype`: a Tile name ("f32", "bf16"), or a NumPy dtype, type or
    full name that has one (np.float32, "float32", ml_dtypes.bfloat16)."""
    if isinstance(dtype, str) and dtype in ITEMSIZE:
        return dtype
    tile = None
    try:
        # NumPy reads None, "float", int... as 64-bit types: too easy to get by accident
        if dtype is None or dtype in (int, float, complex, bool):
            raise TypeError
        dt = np.dtype(dtype)
        if isinstance(dtype, str) and dt.name != dtype:
            raise TypeError
        if dt.isnative and dt.fields is None:
            tile = tile_of_numpy(dt)
    except Exception:       # anything NumPy cannot read as a dtype
        pass
    if tile is None:
        raise value_error(f"unknown dtype {dtype!r}", f"use a Tile dtype: {DTYPE_NAMES}")
    return tile


def check_shape(shape, dtype: str) -> tuple[int, ...]:
    """A shape as a tuple of non-negative ints (an int is a 1-d shape)."""
    try:
        if isinstance(shape, bool):
            raise TypeError
        dims = (operator.index(shape),)
    except TypeError:
        try:
            if isinstance(shape, (str, bytes)) or any(isinstance(d, bool) for d in shape):
                raise TypeError
            dims = tuple(operator.index(d) for d in shape)
        except TypeError:
            raise value_error(f"a shape is an int or a tuple of ints, got {shape!r}",
                              "e.g. `(1024,)` or `(64, 32)`") from None
    bad = [d for d in dims if d < 0]
    if bad:
        raise value_error(f"shape {dims} has a negative extent ({bad[0]})",
                          "every extent must be 0 or more")
    if len(dims) > 32:
        raise value_error(f"shape {dims} has {len(dims)} dimensions", "use at most 32")
    n = 1
    for d in dims:
        n *= d
    if n * ITEMSIZE[dtype] > MAX_BYTES:
        raise value_error(f"an array of {dtype} with shape {dims} would take "
                          f"{n * ITEMSIZE[dtype]} bytes, more than any device has",
                          "use a smaller shape")
    return dims


def host_array(array) -> np.ndarray:
    """`array` as a C-contiguous NumPy array in native byte order, or ArrayUsageError."""
    if isinstance(array, DeviceArray):
        raise value_error("this is already a DeviceArray", "use it as it is, or `.numpy()` "
                          "for a host copy")
    try:
        a = np.ascontiguousarray(array)
    except Exception as e:   # ragged lists and the like: NumPy's own reason
        raise value_error(f"cannot make an array of {type(array).__name__}: {e}",
                          "pass a NumPy array or a nested list of numbers") from None
    if not a.dtype.isnative and a.dtype.fields is None:
        a = a.astype(a.dtype.newbyteorder("="))      # the same values, native bytes
    problem = numpy_problem(a.dtype)
    if problem is not None or tile_of_numpy(a.dtype) is None and a.dtype.kind not in "biuf":
        why = problem[1] if problem else f"has dtype {a.dtype}, which is not a Tile dtype"
        raise value_error(f"the host array {why}", f"convert it to one of: {DTYPE_NAMES}")
    return a


def _raw(a: np.ndarray) -> np.ndarray:
    """The bytes of a C-contiguous array (ml_dtypes' bf16/f8 have no buffer format)."""
    return a.reshape(-1).view(np.uint8)


def _convert(a: np.ndarray, tile: str) -> np.ndarray:
    """Values of `a` as `tile` elements (bf16 rounded to nearest even, f8 saturated)."""
    try:
        return np.ascontiguousarray(a.astype(numpy_dtype(tile)))
    except (TypeError, ValueError, OverflowError) as e:
        raise value_error(f"cannot convert {a.dtype} values to {tile}: {e}",
                          f"pass an array of {tile} values") from None


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
        # a broadcast view (a zero stride) never matches, so launches take the general path,
        # which refuses it where the kernel writes (an empty array has nothing to share)
        self._sig = (dtype, len(self.shape)) \
            if 0 not in self.strides or 0 in self.shape else None
        self._abi = (self.ptr, *self.shape, *self.strides)
        self._facts = facts_key(self.ptr, self.shape, self.strides, ITEMSIZE[dtype])

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def empty(cls, backend, shape, dtype: str) -> "DeviceArray":
        dtype = tile_dtype(dtype)
        shape = check_shape(shape, dtype)
        n = int(np.prod(shape, dtype=object)) if shape else 1
        nbytes = max(n * ITEMSIZE[dtype], 1)
        try:
            ptr = backend.malloc(nbytes)
        except MemoryError:
            from .errors import device_error
            raise device_error("E0930", f"cannot allocate {nbytes} bytes on the "
                               f"{backend.name} back end (an array of {dtype} with shape "
                               f"{shape})",
                               "use a smaller array") from None
        alloc = _Allocation(backend, ptr, nbytes)
        return cls(backend, alloc.ptr, shape, dtype, owner=alloc)

    @classmethod
    def from_host(cls, backend, array, dtype: str | None = None) -> "DeviceArray":
        """A device copy of a host array. With `dtype`, values are converted to it; unsigned
        integers of the dtype's width are taken as its raw bits (bf16, f8)."""
        a = host_array(array)
        tile = tile_of_numpy(a.dtype)
        if dtype is not None:
            want = tile_dtype(dtype)
            if tile != want and not (want == "tf32" and tile == "f32"):
                raw = a.dtype.kind == "u" and a.itemsize == ITEMSIZE[want] and \
                    (want == "bf16" or want in CODE_BYTES)
                if not raw:
                    a = _convert(a, want)
            tile = want
        if tile is None:
            raise value_error(f"NumPy dtype {a.dtype} has no Tile dtype",
                              f"convert the array to one of: {DTYPE_NAMES}")
        out = cls.empty(backend, a.shape, tile)
        if a.nbytes:
            backend.htod(out.ptr, _raw(a))
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
        # strided through unsigned ints of the element size (as_strided cannot take
        # ml_dtypes' dtypes), then the copy is viewed as the real dtype
        base = raw.view(f"u{self.itemsize}")
        view = np.lib.stride_tricks.as_strided(
            base[-lo:] if lo else base, self.shape,
            tuple(s * self.itemsize for s in self.strides))
        return np.array(view).view(dt)

    def copy_from(self, array) -> None:
        """Fill from a host array of the same shape (contiguous device arrays only)."""
        a = host_array(array)
        if tile_of_numpy(a.dtype) != self.dtype:
            a = _convert(a, self.dtype)
        if a.shape != self.shape:
            raise value_error(f"copy_from: the host array's shape {a.shape} differs from the "
                              f"device array's {self.shape}", "pass an array of the same shape")
        if not self.is_contiguous():
            raise value_error("copy_from needs a contiguous device array, this one has strides "
                              f"{self.strides}", "copy into the array it is a view of")
        if a.nbytes:
            self.backend.htod(self.ptr, _raw(a))

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
                try:
                    start, stop, step = k.indices(n)
                except (TypeError, ValueError) as e:
                    raise IndexError(f"bad slice {k} for axis {i}: {e}") from None
                ptr += start * st * self.itemsize
                shape.append(len(range(start, stop, step)))
                strides.append(st * step)
            else:
                try:
                    k = operator.index(k)
                except TypeError:
                    raise IndexError(f"DeviceArray indices are ints and slices, got "
                                     f"{type(k).__name__} {k!r}") from None
                if not -n <= k < n:
                    raise IndexError(f"index {k} out of range for axis {i} of size {n}")
                ptr += (k % n) * st * self.itemsize
        return DeviceArray(self.backend, ptr, shape, self.dtype, strides,
                           self._owner if self._owner is not None else self)

    @property
    def T(self) -> "DeviceArray":
        return DeviceArray(self.backend, self.ptr, self.shape[::-1], self.dtype,
                           self.strides[::-1], self._owner)

    # -- exporting: NumPy, DLPack, CUDA array interface -----------------------------------------
    def __array__(self, dtype=None, copy=None):
        """`np.asarray(d)`: a host copy (device memory is never a NumPy buffer)."""
        if copy is False:
            raise ValueError("a DeviceArray becomes a NumPy array only by a copy "
                             "(np.asarray(d) or d.numpy())")
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def __dlpack_device__(self) -> tuple[int, int]:
        """(kDLCUDA, device) on the CUDA back end, else (kDLCPU, 0): the emulator's and the
        interpreter's arrays are exported as host memory."""
        from .dlpack import KDL_CPU, KDL_CUDA
        if self.backend.name == "cuda":
            return (KDL_CUDA, int(getattr(self.backend, "device_id", 0)))
        return (KDL_CPU, 0)

    def __dlpack__(self, stream=None, *, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule: the device memory itself on CUDA and on the interpreter (host
        memory); on the emulator, whose memory is not in this process's address space, a
        host copy (`copy=False` is refused there)."""
        from .dlpack import export
        from .dtypes import DLPACK_TO_TILE
        code = {v: k for k, v in DLPACK_TO_TILE.items()}
        code["tf32"] = (2, 32)
        device = self.__dlpack_device__()
        if dl_device is not None and tuple(dl_device) != device:
            raise BufferError(f"this DeviceArray lives on DLPack device {device}, not "
                              f"{tuple(dl_device)}")
        versioned = max_version is not None and tuple(max_version)[:1] >= (1,)
        if self.backend.name == "emulator":
            if copy is False:
                raise BufferError("the emulator's memory can only be exported as a copy")
            host = self.numpy()
            strides = tuple(s // self.itemsize for s in host.strides)
            return export(host.ctypes.data, host.shape, strides, code[self.dtype], device,
                          host, versioned=versioned, copied=True)
        if copy:
            raise BufferError("DeviceArray exports its memory without copying; copy it "
                              "with the consumer")
        if stream is not None and stream != -1 and self.backend.name == "cuda":
            self.backend.synchronize()      # launches so far are done before the consumer
        return export(self.ptr, self.shape, self.strides, code[self.dtype], device,
                      self._owner if self._owner is not None else self, versioned=versioned)

    @property
    def __cuda_array_interface__(self) -> dict:
        """Version 3 of Numba's CUDA array interface (CuPy, Numba, torch.as_tensor), on the
        CUDA back end and for dtypes NumPy names (not bf16/f8)."""
        if self.backend.name != "cuda":
            raise AttributeError("only DeviceArrays of the CUDA back end are CUDA arrays")
        if self.dtype == "bf16" or self.dtype in CODE_BYTES:
            raise AttributeError(f"the CUDA array interface has no {self.dtype} type string; "
                                 "use DLPack (`torch.from_dlpack(d)`)")
        size = self.itemsize
        return {"shape": self.shape, "typestr": numpy_dtype(self.dtype).str,
                "data": (self.ptr, False), "version": 3,
                "strides": None if self.is_contiguous() else
                tuple(s * size for s in self.strides)}

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
            # a driver back end frees later (runtime/cuda.py, free_later): this may run inside
            # a driver call or a CUDA graph capture
            getattr(self.backend, "free_later", self.backend.free)(self.ptr)
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
