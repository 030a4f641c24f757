"""Tensor-core products as the lowerings see them: the plan of a product (decided before
emission by plan/products.py: the instruction form, the warps' tiling, the accumulator's
fragment layout, or warp-group MMA on sm_90a), whether a loop is warp-specialized now, and
the layouts loop-carried values of a product take. None sends a product to the FMA path of
lower/matmul.py."""

from __future__ import annotations

import llvmlite.ir as ir

from tilelang.codegen.layouts.distributed import Layout
from tilelang.codegen.llvm.kernel import KernelEmitter, TileVal
from tilelang.codegen.llvm.sync import convert
from tilelang.codegen.plan.tensor_cores import (TensorCorePlan, image_fits,  # noqa: F401
                                                image_span, producer_block, wg_k,
                                                wgmma_ready)
from tilelang.ir.ops import BuiltinOp


def specialized(kern: KernelEmitter) -> bool:
    """Whether a pipelined TMA + wgmma loop emitted now is warp-specialized (wgmma_product,
    mma_prefetch): a producer block whose producer group has not exited yet (after its
    first specialized loop it has)."""
    return producer_block(kern) and not kern.barrier_threads


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


def row_stat_layout(kern: KernelEmitter, ops, shape: tuple[int, ...]) -> Layout | None:
    """The layout in which a loop should carry a value of `shape` that a kept-dims reduction
    in `ops` computes from a tensor-core product's accumulator (attention's running max and
    sum): the reduction's own result layout, so neither the reduction's result nor the
    broadcast back onto the accumulator needs an exchange through shared memory."""
    from tilelang.codegen.layouts.distributed import drop_axes
    plans = {}
    for o in ops:
        if isinstance(o, BuiltinOp) and o.name in ("mma", "matmul", "@"):
            p = tensor_core_plan(kern, o)
            if p is not None:
                plans.setdefault(tuple(p.acc.shape), p)
    for o in ops:
        if not (isinstance(o, BuiltinOp) and o.builtin.group == "reduce" and o.result is not None
                and tuple(o.result.type.shape) == tuple(shape)):
            continue
        x = o.arg_map.get("x")
        p = plans.get(tuple(getattr(x, "type", None) and x.type.shape or ()))
        if p is None or len(shape) != p.acc.rank or "axis" not in o.arg_map:
            continue
        ax = kern.const_ints(o.arg_map["axis"])[0] % len(shape)
        return drop_axes(p.acc, (ax,), True)
    return None


ELEMENTWISE_GROUPS = ("operator", "math", "dtype")


def product_behind(ops, value) -> BuiltinOp | None:
    """The `mma` among `ops` whose result `value` is, directly or through element-wise ops
    that keep the layout of their first operand of the result's shape (`mma(...) * s`): a
    loop carrying `value` should carry it in that product's accumulator layout."""
    defs = {o.result.id: o for o in ops if isinstance(o, BuiltinOp) and o.result is not None}
    seen = 0
    while seen < len(ops):
        o = defs.get(getattr(value, "id", None))
        if o is None:
            return None
        if o.name == "mma":
            return o
        if o.builtin.group not in ELEMENTWISE_GROUPS:
            return None
        shape = tuple(o.result.type.shape)
        value = next((v for _, v in o.args if hasattr(v, "id") and
                      tuple(getattr(v.type, "shape", ())) == shape), None)
        seen += 1
    return None
