"""What optimizations may assume about an op.

- `has_effects`: must stay, in order: a registry entry marked `side_effects` (store, scatter,
  atomics, print, assert), a terminator, a structured op containing one of those or a
  `break`/`continue`/`return` that leaves it, and every `while` (it may not terminate).
- `reads_memory`: the result depends on array contents: a side-effect-free registry entry
  with an `Array` argument (load, gather; num_tiles too, conservatively), or a structured op
  containing one. Such ops may be removed when unused, but are not merged or moved across an
  op with effects. (The registry has no `reads_memory` flag yet; the Array argument stands in.)
"""

from __future__ import annotations

from tilelang.sema.types import ArrayType

from tilelang.ir.ops import (Block, BreakOp, BuiltinOp, ConstantOp, ContinueOp, ForOp,
                             Op, ReturnOp, WhileOp)


def _escapes(block: Block, in_loop: bool) -> bool:
    """Whether a break/continue (outside a nested loop) or a return occurs in block."""
    for op in block.ops:
        if isinstance(op, ReturnOp):
            return True
        if isinstance(op, (BreakOp, ContinueOp)) and not in_loop:
            return True
        loop = in_loop or isinstance(op, (ForOp, WhileOp))
        if any(_escapes(r, loop) for r in op.regions):
            return True
    return False


def has_effects(op: Op) -> bool:
    if isinstance(op, BuiltinOp):
        return op.builtin.side_effects
    if isinstance(op, ConstantOp):
        return False
    if isinstance(op, WhileOp) or op.is_terminator:
        return True
    if any(has_effects(o) for r in op.regions for o in r.ops if not o.is_terminator):
        return True
    return any(_escapes(r, isinstance(op, ForOp)) for r in op.regions)


def reads_memory(op: Op) -> bool:
    if isinstance(op, BuiltinOp):
        return not op.builtin.side_effects and any(
            isinstance(v.type, ArrayType) for v in op.operands)
    return any(reads_memory(o) for r in op.regions for o in r.ops)
