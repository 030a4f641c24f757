"""The parameter buffer of one specialization, laid out once (docs/abi.md): each PTX parameter
at its natural alignment, in order. Per launch only `struct.pack_into` runs."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .dtypes import STRUCT_CHAR
from .signature import ParamInfo


@dataclass(frozen=True)
class ParamLayout:
    fmt: str                          # struct format, explicit padding, no tail padding
    offsets: tuple[int, ...]          # byte offset of each PTX parameter
    sizes: tuple[int, ...]
    size: int                         # bytes up to the end of the last parameter

    @property
    def count(self) -> int:
        return len(self.offsets)


def layout(params: tuple[ParamInfo, ...]) -> ParamLayout:
    """Arrays: u64 address, rank x s64 extents, rank x s64 strides; scalars at their width."""
    chars: list[str] = []
    for p in params:
        if p.kind == "array":
            chars += ["Q"] + ["q"] * (2 * p.rank)
        elif p.kind == "list":                 # the table's address, the number of arrays
            chars += ["Q", "q"]
        elif p.kind == "symmetric":            # the table's address, world size, rank
            chars += ["Q", "q", "q"]
        else:
            chars.append(STRUCT_CHAR[p.dtype])
    fmt, offsets, sizes, off = "<", [], [], 0
    for c in chars:
        size = struct.calcsize("<" + c)
        pad = -off % size
        if pad:
            fmt += f"{pad}x"
            off += pad
        fmt += c
        offsets.append(off)
        sizes.append(size)
        off += size
    return ParamLayout(fmt, tuple(offsets), tuple(sizes), off)
