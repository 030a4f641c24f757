"""Dead code elimination: ops without effects (see effects.py) whose results are all unused
are removed, in every region, until nothing changes (removing one use can kill its operand's
definition). Loops whose results are unused and whose bodies have no effects go too."""

from __future__ import annotations

from tilelang.ir.ops import Block, Kernel, Op, walk
from tilelang.ir.passes.effects import has_effects
from tilelang.ir.passes.rewrite import with_ops, with_regions
from tilelang.ir.values import Value
from tilelang.record import replace


def _uses(block: Block) -> set[Value]:
    used: set[Value] = set()
    for op in walk(block):
        used.update(op.operands)
    return used


def _sweep(block: Block, used: set[Value]) -> tuple[Block, bool]:
    out: list[Op] = []
    changed = False
    for op in block.ops:
        if not has_effects(op) and not any(r in used for r in op.results):
            changed = True
            continue
        if op.regions:
            regions = []
            for r in op.regions:
                nr, c = _sweep(r, used)
                regions.append(nr)
                changed |= c
            op = with_regions(op, regions)
        out.append(op)
    return with_ops(block, out), changed


def eliminate_dead_code(k: Kernel) -> Kernel:
    body = k.body
    changed = True
    while changed:
        body, changed = _sweep(body, _uses(body))
    return replace(k, body=body)
