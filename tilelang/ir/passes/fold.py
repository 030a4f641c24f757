"""Constant folding through the registry's `fold`: a side-effect-free BuiltinOp whose
arguments are all constants (inline or ConstantOp values) becomes a ConstantOp with the same
result value. A fold the registry refuses (division by zero, strict overflow: compile errors for
source constants, but defined run-time behaviour here) leaves the op alone. An `if` on a constant
condition is replaced by the taken branch when that branch ends in `yield`."""

from __future__ import annotations

from tilelang.diagnostics import TileError
from tilelang.sema.constants import ConstValue, materialize
from tilelang.sema.types import TileType

from tilelang.ir.op_typing import bound_of
from tilelang.ir.ops import Block, BuiltinOp, ConstantOp, IfOp, Kernel, Op, YieldOp
from tilelang.ir.passes.rewrite import remap_operands, substituter, with_ops, with_regions
from tilelang.ir.values import Value
from tilelang.record import replace


class _Folder:
    def __init__(self):
        self.consts: dict[Value, ConstValue] = {}
        self.subst: dict[Value, Value] = {}

    def block(self, block: Block) -> Block:
        out: list[Op] = []
        f = substituter(self.subst)
        for op in block.ops:
            op = remap_operands(op, f)
            if op.regions:
                op = with_regions(op, [self.block(r) for r in op.regions])
            if isinstance(op, IfOp) and op.cond in self.consts:
                taken = op.then if self.consts[op.cond].value else op.else_
                if isinstance(taken.terminator, YieldOp):
                    out.extend(taken.ops[:-1])
                    self.subst.update(zip(op.results, taken.terminator.values))
                    continue
            if isinstance(op, BuiltinOp):
                op = self.fold(op)
            if isinstance(op, ConstantOp):
                self.consts[op.result] = op.value
            out.append(op)
        return with_ops(block, out)

    def fold(self, op: BuiltinOp) -> Op:
        b = op.builtin
        t = op.result_type
        if b.side_effects or not (isinstance(t, TileType) and t.is_scalar):
            return op
        try:
            bound = bound_of(op, self.consts.get)
            if not b.can_fold(bound):
                return op
            c = b.fold(bound, op.span)
            if not isinstance(c, ConstValue):
                return op
            c = materialize(c, t.dtype, op.span)
        except TileError:
            return op
        assert op.result is not None
        return ConstantOp(op.result, c, op.span)


def fold_constants(k: Kernel) -> Kernel:
    return replace(k, body=_Folder().block(k.body))
