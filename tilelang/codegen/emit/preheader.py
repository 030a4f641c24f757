"""Code emitted once on the way into the innermost loop instead of in its body: the loop's
entry edge (its preheader's unconditional branch into the header) is redirected through a
block of its own, after any such block emitted before for the same loop (the chain's last
block is `KernelEmitter.kept_fill_exits[header]`). Used for a loop-invariant register operand's
wgmma image (lower/tensorcore/wgmma_product.kept_image) and for layout conversions of
loop-invariant tiles (emit/sync.py: attention backward's per-row statistics, converted into
the accumulator layout once instead of through shared memory in every iteration).

Values are loop-invariant when every register is computed in a block emitted before the
loop's header (blocks are appended in emission order, so the loop's own come after it)."""

from __future__ import annotations

from typing import Callable, TypeVar

import llvmlite.ir as ir

from tilelang.codegen.emit.kernel import KernelEmitter

T = TypeVar("T")


def entry(kern: KernelEmitter) -> tuple[ir.Block, ir.Block, int] | None:
    """(the block that enters the innermost loop, its header, the header's index among the
    function's blocks) when that entry is one unconditional branch, else None."""
    if not kern.loops:
        return None
    header = kern.loops[-1].header
    blocks = list(kern.fn.blocks)
    at = blocks.index(header)
    if id(header) in kern.kept_fill_exits:
        return kern.kept_fill_exits[id(header)], header, at
    into = [bb for bb in blocks[:at] if bb.is_terminated and header in
            getattr(bb.terminator, "operands", ())]
    if len(into) != 1 or not isinstance(into[0].terminator, ir.Branch) or \
            isinstance(into[0].terminator, ir.ConditionalBranch):
        return None
    return into[0], header, at


def invariant(kern: KernelEmitter, regs, at: int) -> bool:
    """Whether every register is computed before the loop whose header is block `at`."""
    pos = {id(bb): i for i, bb in enumerate(kern.fn.blocks)}
    return all(not isinstance(r, ir.Instruction) or pos.get(id(r.parent), at) < at
               for r in regs)


def before_loop(kern: KernelEmitter, emit: Callable[[], T], name: str = "loop.pre"
                ) -> tuple[T, ir.Block] | None:
    """`emit()` run in a new block on the innermost loop's entry edge: (its result, the
    block), or None when the loop has no such edge. The builder comes back where it was."""
    found = entry(kern)
    if found is None:
        return None
    pre, header, _ = found
    b = kern.builder
    here = b.block
    block = kern.fn.append_basic_block(name)
    pre.instructions.remove(pre.terminator)
    pre.terminator = None
    b.position_at_end(pre)
    b.branch(block)
    b.position_at_end(block)
    out = emit()
    last = b.block
    b.branch(header)
    kern.kept_fill_exits[id(header)] = last
    for ins in header.instructions:
        if isinstance(ins, ir.PhiInstr):
            ins.incomings = [(v, last if bb is pre else bb) for v, bb in ins.incomings]
    b.position_at_end(here)
    return out, block


def dominates(fn: ir.Function, a: ir.Block, b: ir.Block) -> bool:
    """Whether every path from the entry to `b` passes `a`, in the blocks emitted so far
    (later blocks of structured control flow join paths that already pass it, or are loop
    headers dominating what they reach)."""
    entry_bb = fn.blocks[0]
    if entry_bb is a:
        return True
    seen, todo = {id(a), id(entry_bb)}, [entry_bb]
    while todo:
        bb = todo.pop()
        if bb is b:
            return False
        term = bb.terminator if bb.is_terminated else None
        for nxt in (term.operands if term is not None else ()):
            if isinstance(nxt, ir.Block) and id(nxt) not in seen:
                seen.add(id(nxt))
                todo.append(nxt)
    return True
