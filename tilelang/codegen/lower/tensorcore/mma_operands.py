"""Operands of tensor-core products that go from global to shared memory without registers.

A `load` whose only use is as operand `a` or `b` of a matrix product in the same region, with
nothing in between that can write memory (loads and ops that only compute; no store, atomic or
print) and zero padding, is *deferred*: emit_region binds its result to a `DeferredLoad`
instead of loading it into registers. The product then copies the tile with 16-byte
`cp.async` straight into its swizzled shared-memory image (zero-filling what lies outside the
array through the instruction's src-size), or loads it the ordinary way when it cannot (a
product that takes the FMA path, an array without the 16-byte facts, an 8/32-bit operand
whose contiguous axis is not K). Keeping the tile out of registers is what lets a 128 x 128
f32 accumulator live in 168 registers without spills.
"""

from __future__ import annotations

import llvmlite.ir as ir

from tilelang.codegen.emit.kernel import I32, KernelEmitter, TileVal
from tilelang.codegen.lower.table import lookup
# the decisions (which loads are deferred, along which axis they copy) are plan/operands.py's
from tilelang.codegen.plan.operands import (PRODUCTS, PURE_GROUPS, PURE_MEMORY,  # noqa: F401
                                            PURE_TILE, DeferredLoad, writes_nothing,
                                            async_axis, is_pure_scalar)

def materialize(kern: KernelEmitter, v) -> TileVal:
    """The operand as registers: a deferred load (and its views) is emitted here."""
    if isinstance(v, DeferredLoad):
        t = lookup("load", "memory")(kern, v.op)
        kern.env[v.op.result.id] = t
        for o in v.chain:
            kern.emit_builtin(o)
            t = kern.env[o.result.id]
        return t
    return v


def commit_group(kern: KernelEmitter) -> None:
    fn = kern.se.declare("llvm.nvvm.cp.async.commit.group", ir.VoidType(), [])
    kern.builder.call(fn, [])


def wait_group(kern: KernelEmitter, n: int) -> None:
    fn = kern.se.declare("llvm.nvvm.cp.async.wait.group", ir.VoidType(), [I32])
    kern.builder.call(fn, [ir.Constant(I32, n)])
