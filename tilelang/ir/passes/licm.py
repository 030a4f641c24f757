"""Loop-invariant code motion: an op at the top level of a `for`/`while` body whose operands
are all defined outside the loop (or by ops already hoisted) moves in front of the loop.
Candidates: ConstantOps and side-effect-free BuiltinOps; ops that read memory only when the
whole loop has no effects. Hoisted ops run even when the loop runs zero times, which is safe:
pure references never fail (out-of-bounds loads read padding, integer division by zero gives
0). Inner loops are processed first, so invariants climb out of nests."""

from __future__ import annotations

from tilelang.ir.ops import Block, BuiltinOp, ConstantOp, ForOp, Kernel, Op, WhileOp, walk
from tilelang.ir.passes.effects import has_effects, reads_memory
from tilelang.ir.passes.rewrite import with_ops, with_regions
from tilelang.ir.values import Value
from tilelang.record import replace


def _defined_inside(op: Op) -> set[Value]:
    inside: set[Value] = set()
    for r in op.regions:
        inside.update(r.args)
        for o in walk(r):
            inside.update(o.results)
            for rr in o.regions:
                inside.update(rr.args)
    return inside


def _hoist(loop: ForOp | WhileOp) -> tuple[list[Op], Op]:
    inside = _defined_inside(loop)
    loop_pure = not any(has_effects(o) for r in loop.regions for o in r.ops
                        if not o.is_terminator)
    hoisted: list[Op] = []
    kept: list[Op] = []
    for op in loop.body.ops:
        movable = isinstance(op, ConstantOp) or (
            isinstance(op, BuiltinOp) and not op.builtin.side_effects
            and (loop_pure or not reads_memory(op)))
        if movable and not any(v in inside for v in op.operands):
            hoisted.append(op)
            inside.difference_update(op.results)
        else:
            kept.append(op)
    return hoisted, replace(loop, body=replace(loop.body, ops=tuple(kept)))


def _block(block: Block) -> Block:
    out: list[Op] = []
    for op in block.ops:
        if op.regions:
            op = with_regions(op, [_block(r) for r in op.regions])
        if isinstance(op, (ForOp, WhileOp)):
            hoisted, op = _hoist(op)
            out.extend(hoisted)
        out.append(op)
    return with_ops(block, out)


def hoist_loop_invariants(k: Kernel) -> Kernel:
    return replace(k, body=_block(k.body))
