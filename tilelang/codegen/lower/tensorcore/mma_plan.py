"""Tensor-core products as the lowerings see them: the plan of a product (decided before
emission by plan/products.py: the instruction form, the warps' tiling, the accumulator's
fragment layout, or warp-group MMA on sm_90a; None sends it to the FMA path of
lower/tensorcore/matmul.py), and values converted into a plan's layouts."""

from __future__ import annotations

import llvmlite.ir as ir

from tilelang.codegen.layouts.distributed import Layout
from tilelang.codegen.emit.kernel import KernelEmitter, TileVal
from tilelang.codegen.emit.sync import convert
from tilelang.codegen.plan.tensor_cores import (TensorCorePlan, image_fits,  # noqa: F401
                                                image_span, producer_block, wg_k,
                                                wgmma_ready)
from tilelang.ir.ops import BuiltinOp
# which loop-carried values take a product's layouts is the loops pass's (plan/loops.py)
from tilelang.codegen.plan.loops import product_behind, row_stat_layout  # noqa: F401


def tensor_core_plan(kern: KernelEmitter, op: BuiltinOp) -> TensorCorePlan | None:
    """How `op` (mma or matmul) runs on tensor cores, or None for the FMA path: the kernel
    plan's decision (plan/products.py)."""
    return kern.plan.products.of(op)


def to_layout(kern: KernelEmitter, t: TileVal, lay: Layout) -> TileVal:
    """`t` in `lay`: a splat of one constant is rebuilt for free, anything else converted."""
    if t.layout == lay:
        return t
    first = t.regs[0] if t.regs else None
    if isinstance(first, ir.Constant) and all(r is first or (isinstance(r, ir.Constant) and
                                                              str(r) == str(first))
                                              for r in t.regs):
        return TileVal(t.dtype, lay, (first,) * lay.num_regs)
    return convert(kern, t, lay)
