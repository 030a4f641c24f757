"""Lists of arrays at launch (docs/abi.md "Lists of arrays"; docs/python-api.md "Lists of
arrays"): a `List[Array[T, N]]` argument is a Python list or tuple of arrays. Each entry is
checked as an array parameter is; the facts that hold for every entry are the list's
specialization facts; the kernel receives the address of a device table (per entry: address,
extents, strides, each 8 bytes) and the number of entries.

Tables are the one thing a launch may copy to the device. Each distinct list (the entries'
addresses, extents and strides) is uploaded once and kept by the bound kernel (`TableCache`),
so launching again with the same arrays copies nothing — which is what CUDA graph capture
needs (docs/launch-path.md): a launch during capture whose table is not yet on the device is
refused (E0918) instead of being turned by the driver into an invalidated capture. A list
with a staged host array (NumPy on the emulator) gets a table for that launch only.
"""

from __future__ import annotations

import struct
from typing import Callable

import numpy as np

from .args import ArrayView, _a, check_array, extract, same_driver
from .device_array import DeviceArray
from .dtypes import ITEMSIZE, accepts
from .errors import arg_error
from .facts import facts_key
from .signature import ParamInfo

MAX_TABLES = 64          # tables kept per bound kernel; more distinct lists start over


def entry_param(p: ParamInfo, j: int) -> ParamInfo:
    """Entry j of list parameter `p`, as the array parameter it is checked as."""
    return ParamInfo(f"{p.name}[{j}]", "array", p.dtype, p.rank, span=p.span)


def read_list(kernel: str, p: ParamInfo, obj, backend) -> list:
    """[(entry param, view, stage)] for a list argument: `stage` when the entry is a host
    array the back end copies in; raises the diagnostic of a bad list or entry."""
    where = f"argument `{p.name}` of kernel `{kernel}` ({p.show()})"
    if not isinstance(obj, (list, tuple)):
        raise arg_error("E0914", f"{where} is {_a(obj)}, not a list of arrays",
                        f"pass a list or tuple of arrays of {p.dtype} and rank {p.rank}, "
                        "e.g. `[w0, w1, w2]`", p.span)
    if not obj:
        raise arg_error("E0914", f"{where} is an empty {type(obj).__name__}",
                        "a list parameter takes at least one array (a kernel could index "
                        "nothing in an empty one): skip the launch when there is none, or "
                        "launch an empty grid", p.span)
    out = []
    for j, a in enumerate(obj):
        q = entry_param(p, j)
        v = extract(a)
        ok = v is not None and v.problem is None and accepts(p.dtype, v.dtype) and \
            len(v.shape) == p.rank and v.strides is not None
        if ok and v.where == backend.name and not (
                v.what == "DeviceArray" and not same_driver(v.keep.backend, backend)):
            out.append((q, v, False))
        elif ok and v.where == "host" and backend.host_arrays:
            out.append((q, v, True))
        else:
            check_array(kernel, q, v, a, backend, backend.host_arrays)
            raise AssertionError("check_array accepts what read_list refused")  # pragma: no cover
    return out


def list_facts(views: list[ArrayView], dtype: str) -> str:
    """The facts key that holds for every entry: each of `c`, `a`, `e`, `s` when all entries
    have it, `n` when any has it; never a shape link (docs/abi.md)."""
    keys = [facts_key(v.ptr, v.shape, v.strides, ITEMSIZE[dtype]) for v in views]
    head = "".join(ch if all(k[i] == ch for k in keys) else "-"
                   for i, ch in enumerate("cae"))
    small = "s" if all("s" in k[3:] for k in keys) else ""
    return head + small + ("n" if any("n" in k[3:] for k in keys) else "")


def table_bytes(views: list[ArrayView], rank: int) -> bytes:
    """The device table of a list: per entry its address, extents and strides (docs/abi.md)."""
    fmt = "<Q" + "q" * (2 * rank)
    return b"".join(struct.pack(fmt, v.ptr, *v.shape, *v.strides) for v in views)


class TableCache:
    """The device tables of one bound kernel's list arguments, by contents (see the module
    docstring). `get` returns a table's device address."""

    def __init__(self):
        self.tables: dict[tuple, DeviceArray] = {}

    def get(self, device, views: list[ArrayView], rank: int, keep: bool,
            capturing: Callable[[], bool]) -> tuple[int, DeviceArray | None]:
        """(address, the table when the caller must keep it alive through the launch)."""
        key = (getattr(device, "device_id", 0), id(device), rank,
               tuple((v.ptr, tuple(v.shape), tuple(v.strides)) for v in views))
        got = self.tables.get(key) if keep else None
        if got is not None:
            return got.ptr, None
        if capturing():
            raise arg_error(
                "E0918", f"a list of {len(views)} arrays needs a device table that is not on "
                "the device yet, and the stream is capturing a CUDA graph (which forbids the "
                "copy)", "launch once with the same list of arrays before capturing: the "
                "table is kept and the captured launch copies nothing (docs/launch-path.md)")
        data = np.frombuffer(table_bytes(views, rank), np.uint8)
        table = DeviceArray.from_host(device, data)
        if not keep:
            return table.ptr, table
        if len(self.tables) >= MAX_TABLES:
            # tables still in use by queued launches must outlive them: wait first
            device.synchronize()
            self.tables.clear()
        self.tables[key] = table
        return table.ptr, None
