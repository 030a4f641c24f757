"""Common subexpression elimination with scoped tables: an op identical to one that dominates
it (same entry, same arguments, same result type) is dropped and its result replaced.
Candidates are ConstantOps and side-effect-free BuiltinOps. Ops that read memory are keyed
with a "memory epoch" that every op with effects advances, and a loop whose body has effects
starts a new epoch (a load in the body may see the previous iteration's store)."""

from __future__ import annotations

from typing import Hashable

from tilelang.ir.ops import Block, BuiltinOp, ConstantOp, ForOp, Kernel, Op, WhileOp
from tilelang.ir.passes.effects import has_effects, reads_memory
from tilelang.ir.passes.rewrite import remap_operands, substituter, with_ops, with_regions
from tilelang.ir.values import Value
from tilelang.record import replace


class _CSE:
    def __init__(self):
        self.subst: dict[Value, Value] = {}
        self.epoch = 0

    def key(self, op: Op) -> Hashable | None:
        if isinstance(op, ConstantOp):
            return ("const", op.value, op.result.type)
        if isinstance(op, BuiltinOp) and not op.builtin.side_effects:
            mem = self.epoch if reads_memory(op) else None
            return ("op", op.name, op.args, op.varargs, op.result_type, mem)
        return None

    def block(self, block: Block, table: dict) -> Block:
        table = dict(table)   # this region's scope: sees the enclosing ones
        f = substituter(self.subst)
        out: list[Op] = []
        for op in block.ops:
            op = remap_operands(op, f)
            if op.regions:
                effects = has_effects(op)
                if effects and isinstance(op, (ForOp, WhileOp)):
                    self.epoch += 1
                op = with_regions(op, [self.block(r, table) for r in op.regions])
                if effects:
                    self.epoch += 1
            elif has_effects(op):
                self.epoch += 1
            k = self.key(op)
            if k is not None:
                prev = table.get(k)
                if prev is not None:
                    self.subst[op.results[0]] = prev
                    continue
                table[k] = op.results[0]
            out.append(op)
        return with_ops(block, out)


def eliminate_common_subexpressions(k: Kernel) -> Kernel:
    return replace(k, body=_CSE().block(k.body, {}))
