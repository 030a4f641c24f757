"""Creation: `zeros`, `ones`, `full` (every register the same value, in the default layout)
and `arange` (each register's linear index, from the thread's layout offset)."""

from __future__ import annotations

from tilelang.codegen.emit.kernel import KernelEmitter, TileVal
from tilelang.codegen.emit.remat import arange_in, full_value
from tilelang.codegen.lower.table import lowers
from tilelang.ir.ops import BuiltinOp


@lowers("zeros", "ones")
def filled(kern: KernelEmitter, op: BuiltinOp) -> TileVal:
    rt = op.result.type
    return kern.splat(0 if op.name == "zeros" else 1, rt.dtype, kern.layout_for(rt))


@lowers("full")
def full(kern: KernelEmitter, op: BuiltinOp) -> TileVal:
    rt = op.result.type
    return kern.splat(full_value(kern, op), rt.dtype, kern.layout_for(rt))


@lowers("arange")
def arange(kern: KernelEmitter, op: BuiltinOp) -> TileVal:
    rt = op.result.type
    return arange_in(kern, kern.layout_for(rt), rt.dtype)
