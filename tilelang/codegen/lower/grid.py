"""Grid built-ins: `bid`, `num_blocks`, `cluster_rank`, `cluster_size` (scalars every thread
reads from special registers). Without clusters (before sm_90) a block is its own cluster."""

from __future__ import annotations

import llvmlite.ir as ir

from tilelang.codegen.emit.kernel import I32, KernelEmitter, TileVal
from tilelang.codegen.lower.table import lowers
from tilelang.ir.ops import BuiltinOp
from tilelang.sema.types import I32 as T_I32

_AXES = "xyz"


def _scalar(kern: KernelEmitter, v: ir.Value) -> TileVal:
    return TileVal(T_I32, kern.scalar_layout, (v,))


@lowers("bid")
def bid(kern: KernelEmitter, op: BuiltinOp) -> TileVal:
    axis = kern.const_ints(op.arg_map["axis"])[0]
    return _scalar(kern, kern.sreg(f"ctaid.{_AXES[axis]}"))


@lowers("num_blocks")
def num_blocks(kern: KernelEmitter, op: BuiltinOp) -> TileVal:
    axis = kern.const_ints(op.arg_map["axis"])[0]
    return _scalar(kern, kern.sreg(f"nctaid.{_AXES[axis]}"))


@lowers("cluster_rank")
def cluster_rank(kern: KernelEmitter, op: BuiltinOp) -> TileVal:
    if not kern.target.clusters:
        return _scalar(kern, ir.Constant(I32, 0))
    return _scalar(kern, kern.sreg("cluster.ctarank"))


@lowers("cluster_size")
def cluster_size(kern: KernelEmitter, op: BuiltinOp) -> TileVal:
    if not kern.target.clusters:
        return _scalar(kern, ir.Constant(I32, 1))
    return _scalar(kern, kern.sreg("cluster.nctarank"))
