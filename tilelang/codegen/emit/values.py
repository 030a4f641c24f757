"""The values a kernel's emission binds to Tile IR values (`KernelEmitter.env`): a tile as the
registers of one thread (`TileVal`), an `Array` parameter as its address, extents and strides
(`ArrayVal`). docs/codegen.md describes the layouts a tile's registers follow."""

from __future__ import annotations

from typing import Any

import llvmlite.ir as ir

from tilelang.codegen.api import ArrayFacts
from tilelang.codegen.layouts.distributed import Layout
from tilelang.record import field as rfield, record
from tilelang.sema.types import DType


@record(frozen=True)
class TileVal:
    """A tile (or scalar) as the registers of one thread: `regs[r]` holds the element at
    register r of `layout`, in the compute type of `dtype`."""

    dtype: DType
    layout: Layout
    regs: tuple[ir.Value, ...]
    # the op that computed it when it can be computed again in another layout (emit/remat.py)
    origin: Any = rfield(default=None, compare=False, repr=False)
    # the 32-bit shared address of a row-major copy of it, valid in the iteration of the
    # loop that copied it ahead (lower/memory.py's loads from a prefetch ring's stage):
    # another layout reads it from there (emit/sync.py), no shuffles
    staged: Any = rfield(default=None, compare=False, repr=False)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.layout.shape

    @property
    def value(self) -> ir.Value:
        """The one register of a scalar."""
        assert len(self.regs) == 1
        return self.regs[0]


@record(frozen=True)
class ArrayVal:
    """An `Array` parameter: global address, extents and strides (i64, elements)."""

    dtype: DType
    rank: int
    address: ir.Value
    extents: tuple[ir.Value, ...]
    strides: tuple[ir.Value, ...]
    facts: ArrayFacts
    name: str = ""
    # under the NVSHMEM lowering, a symmetric array's peer `peer(x, r)`: (this rank's address
    # of x in the symmetric heap (i64), the PE r (i64)), which NVSHMEM's signals take
    # (lower/distributed.py); None otherwise
    symmetric: tuple[ir.Value, ir.Value] | None = None


@record(frozen=True)
class ListVal:
    """A `List[Array[...]]` parameter: the global address of its table (one entry per array:
    address, extents, strides, as i64; docs/abi.md "Lists of arrays") and its length (i64).
    `facts` hold for every array of the list; `list_item` (lower/memory.py) reads an entry."""

    dtype: DType
    rank: int
    table: ir.Value
    length: ir.Value
    facts: ArrayFacts
    name: str = ""
    # a `Symmetric[Array[...]]` parameter: the launching rank (i64), whose entry is its own
    # buffer (docs/distributed.md); None for a plain list
    me: ir.Value | None = None
    # under the NVSHMEM lowering (docs/distributed.md): this rank's buffer, an array in the
    # symmetric heap; `table` is then its address, `length` nvshmem_n_pes() and `me`
    # nvshmem_my_pe(), and an entry is reached through nvshmem_ptr (lower/array_list.py)
    local: ArrayVal | None = None
    # a symmetric array that multimem_* reach (plan/distributed.py): its multicast address
    # (i64, same offsets and strides as this rank's buffer); under NVSHMEM made from
    # nvshmemx_mc_ptr at the use instead
    mc: ir.Value | None = None
