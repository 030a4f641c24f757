"""Whether and how a matrix product runs on tensor cores: the instruction form, the warps'
tiling of the accumulator and its fragment layout (layouts/mma.py), decided from the operand
and accumulator dtypes, the target and the block's threads. None sends the product to the FMA
path of lower/matmul.py."""

from __future__ import annotations

from dataclasses import dataclass

import llvmlite.ir as ir

from tilelang.codegen.layouts.distributed import Layout
from tilelang.codegen.layouts.mma import MmaForm, WarpTiling, acc_layout, mma_form, warp_tiling
from tilelang.codegen.llvm.kernel import KernelEmitter, TileVal
from tilelang.codegen.llvm.sync import convert
from tilelang.ir.ops import BuiltinOp


@dataclass(frozen=True)
class TensorCorePlan:
    form: MmaForm
    b_class: str
    tiling: WarpTiling
    acc: Layout


def tensor_core_plan(kern: KernelEmitter, op: BuiltinOp) -> TensorCorePlan | None:
    """How `op` (mma or matmul) runs on tensor cores, or None for the FMA path."""
    args = op.arg_map
    at, bt = (args[n].type for n in ("a", "b"))
    out = op.result.type
    sm = kern.target.sm
    if sm < 80 or kern.threads < 32:
        return None
    got = mma_form(at.dtype.name, bt.dtype.name, out.dtype.name, sm)
    if got is None:
        return None
    form, b_class = got
    if at.shape[-1] % form.k:
        return None
    tiling = warp_tiling(tuple(out.shape), kern.threads)
    if tiling is None:
        return None
    return TensorCorePlan(form, b_class, tiling,
                          acc_layout(tuple(out.shape), kern.threads, tiling))


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
