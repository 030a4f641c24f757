"""Read an array's address, shape, strides and dtype through DLPack without taking ownership.

`x.__dlpack__()` returns a PyCapsule named "dltensor" holding a `DLManagedTensor*`. We read
the `DLTensor` inside and leave the capsule unconsumed, so its destructor still calls the
producer's deleter; the caller keeps the capsule alive until the launch has been issued.
"""

from __future__ import annotations

import ctypes
import sys

KDL_CPU, KDL_CUDA, KDL_CUDA_HOST, KDL_CUDA_MANAGED = 1, 2, 3, 13


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def read_dlpack(obj, stream=None):
    """(capsule, data address, shape, strides in elements, (code, bits, lanes), (device type,
    device id)). Strides are the C-contiguous ones when the producer gives none."""
    try:
        capsule = obj.__dlpack__() if stream is None else obj.__dlpack__(stream=stream)
    except TypeError:
        capsule = obj.__dlpack__()
    addr = _get_pointer(capsule, b"dltensor")
    # DLManagedTensor starts with its DLTensor (dl_tensor is the first member).
    t = DLTensor.from_address(addr)
    n = t.ndim
    shape = tuple(t.shape[i] for i in range(n))
    if t.strides:
        strides = tuple(t.strides[i] for i in range(n))
    else:
        strides, acc = [], 1
        for s in reversed(shape):
            strides.append(acc)
            acc *= max(s, 1)
        strides = tuple(reversed(strides))
    data = (t.data or 0) + t.byte_offset
    return (capsule, data, shape, strides, (t.dtype.code, t.dtype.bits, t.dtype.lanes),
            (t.device.device_type, t.device.device_id))


# ---------------------------------------------------------------------------------------------
# Exporting: a legacy "dltensor" capsule whose DLManagedTensor keeps its memory's owner alive
# until the consumer calls the deleter. The capsule has no destructor: a Python destructor
# would run inside the consumer's error handling and clobber its exception. Instead each
# export sweeps the capsules nobody consumed and nobody holds any more.

_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", _DELETER)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p),
                ("deleter", _DELETER), ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]


FLAG_READ_ONLY, FLAG_IS_COPIED = 1, 2
_NAME = ctypes.create_string_buffer(b"dltensor")
_NAME_V = ctypes.create_string_buffer(b"dltensor_versioned")
# DLManagedTensor(Versioned) address -> [what it keeps alive, capsule, capsule name]
_LIVE: dict[int, list] = {}


@_DELETER
def _delete(addr):
    try:
        del _LIVE[addr]
    except Exception:              # already swept, or interpreter shutdown
        pass


_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_void_p)(
    ("PyCapsule_IsValid", ctypes.pythonapi))
_new_capsule = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_void_p,
                                 ctypes.c_void_p)(("PyCapsule_New", ctypes.pythonapi))


def sweep() -> None:
    """Release exports whose capsule was never consumed and is referenced only here; forget
    the capsule of consumed ones (their consumer calls the deleter)."""
    for addr, rec in list(_LIVE.items()):
        cap = rec[1]
        if cap is None:
            continue
        if not _is_valid(cap, ctypes.addressof(rec[2])):
            rec[1] = None                                  # renamed: consumed
        elif sys.getrefcount(cap) <= 3:                    # rec, `cap`, getrefcount's argument
            _LIVE.pop(addr, None)


def export(ptr: int, shape, strides, dtype: tuple[int, int], device: tuple[int, int], owner,
           *, versioned: bool = False, copied: bool = False):
    """A DLPack capsule for memory at `ptr` (strides in elements), keeping `owner` alive: a
    DLPack 1.0 "dltensor_versioned" one when the consumer asked for it (writable; marked as
    a copy when it is one), else a legacy "dltensor" one."""
    sweep()
    n = len(shape)
    if versioned:
        mt = DLManagedTensorVersioned()
        mt.version = DLPackVersion(1, 0)
        mt.flags = FLAG_IS_COPIED if copied else 0
        name = _NAME_V
    else:
        mt = DLManagedTensor()
        name = _NAME
    shp = (ctypes.c_int64 * max(n, 1))(*shape)
    st = (ctypes.c_int64 * max(n, 1))(*strides)
    t = mt.dl_tensor
    t.data = ptr or None
    t.device = DLDevice(*device)
    t.ndim = n
    t.dtype = DLDataType(dtype[0], dtype[1], 1)
    t.shape = ctypes.cast(shp, ctypes.POINTER(ctypes.c_int64))
    t.strides = ctypes.cast(st, ctypes.POINTER(ctypes.c_int64))
    t.byte_offset = 0
    mt.deleter = _delete
    addr = ctypes.addressof(mt)
    capsule = _new_capsule(addr, ctypes.addressof(name), None)
    _LIVE[addr] = [(mt, shp, st, owner), capsule, name]
    return capsule
