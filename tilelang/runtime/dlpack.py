"""Read an array's address, shape, strides and dtype through DLPack without taking ownership.

`x.__dlpack__()` returns a PyCapsule named "dltensor" holding a `DLManagedTensor*`. We read
the `DLTensor` inside and leave the capsule unconsumed, so its destructor still calls the
producer's deleter; the caller keeps the capsule alive until the launch has been issued.
"""

from __future__ import annotations

import ctypes

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
