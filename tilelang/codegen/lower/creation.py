"""Creation: `zeros`, `ones`, `full` (every register the same value, in the default layout)
and `arange` (each register's linear index, from the thread's layout offset)."""

from __future__ import annotations

import llvmlite.ir as ir

from tilelang.codegen.llvm.kernel import I32, KernelEmitter, TileVal
from tilelang.codegen.lower.table import lowers
from tilelang.ir.ops import BuiltinOp
from tilelang.ir.values import Value
from tilelang.sema.types import I32 as T_I32


@lowers("zeros", "ones")
def filled(kern: KernelEmitter, op: BuiltinOp) -> TileVal:
    rt = op.result.type
    return kern.splat(0 if op.name == "zeros" else 1, rt.dtype, kern.layout_for(rt))


def full_value(kern: KernelEmitter, op: BuiltinOp) -> ir.Value:
    """`full`'s value, in the result's element type (also lower/remat.py's)."""
    rt = op.result.type
    v = op.arg_map["value"]
    if isinstance(v, Value):
        t = kern.tile(v)
        return t.value if t.dtype == rt.dtype else kern.se.cast(t.value, t.dtype, rt.dtype)
    return kern.se.constant(v.value, rt.dtype)


@lowers("full")
def full(kern: KernelEmitter, op: BuiltinOp) -> TileVal:
    rt = op.result.type
    return kern.splat(full_value(kern, op), rt.dtype, kern.layout_for(rt))


@lowers("arange")
def arange(kern: KernelEmitter, op: BuiltinOp) -> TileVal:
    from tilelang.codegen.lower import stream      # it imports this module (through remat)
    later = stream.deferred(kern, op)
    if later is not None:
        return later                                # computed per vector by its streams
    rt = op.result.type
    return arange_in(kern, kern.layout_for(rt), rt.dtype)


def arange_in(kern: KernelEmitter, lay, dtype) -> TileVal:
    """`arange` in `lay` (also lower/remat.py's): each register's linear index, the
    thread's part computed once."""
    base = kern.thread_linear(lay.thread_weights())
    b = kern.builder
    regs = []
    for r in range(lay.num_regs):
        i = b.add(base, ir.Constant(I32, lay.reg_linear(r)))
        regs.append(i if dtype == T_I32 else kern.se.cast(i, T_I32, dtype))
    return TileVal(dtype, lay, tuple(regs))
