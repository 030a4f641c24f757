"""The block-size test of a virtual-thread kernel folded into its body's first edge guard.

A kernel in virtual-thread mode (emit/kernel.py) whose launch may be smaller than its declared
threads (`.maxntid`) tests the block size in its entry block and branches to the virtual-thread
loop when the block is short; a full block runs a copy of the body of its own (walk.py). That
copy usually starts with an edge guard: a branch, marked rare by its weights, to the masked
code of a tile that runs past an array's end (lower/stream.py, lower/memory.py). Two rare
branches in a row cost a full block a compare and a branch more than one does, so when it is
safe the two tests become one:

    entry:  ...the body's code up to its first guard...
            @(short || outside) bra rare        // one test on the common path
            ...the full tile...
    rare:   @(ntid < threads) bra loop          // the block size again, read anew
            ...the edge code...

Safe means that a short block may run the body's code before the guard as well, which holds
when that code has no effect but its values: it computes for virtual thread `tid`, which a
short block's loop computes again, and what it writes nowhere cannot happen twice. The
analysis (`speculable`) accepts integer and float arithmetic, casts, comparisons, selects,
address arithmetic, vector element moves and reads of the special registers; any load, store,
division (LLVM's undefined behaviour for a zero divisor), inline assembly or other call keeps
today's form. docs/codegen.md ("Virtual threads") describes both forms.
"""

from __future__ import annotations

import llvmlite.ir as ir

from tilelang.record import record

# instructions (llvmlite opnames) that only compute their value and cannot trap
_PURE_OPS = frozenset((
    "add", "sub", "mul", "shl", "lshr", "ashr", "and", "or", "xor",
    "fadd", "fsub", "fmul", "fneg",
    "trunc", "zext", "sext", "fptrunc", "fpext", "fptoui", "fptosi", "uitofp", "sitofp",
    "ptrtoint", "inttoptr", "bitcast", "addrspacecast",
    "getelementptr", "select", "extractelement", "insertelement", "shufflevector",
    "extractvalue", "insertvalue",
))
_PURE_CALLS = ("llvm.nvvm.read.ptx.sreg.",)     # the special registers: values, no effect


@record(frozen=True)
class FoldedTest:
    """The rewrite made: `rare` is the new block that tests the block size again; it belongs
    right before `edge`, the guard's rare side (walk.py places the blocks)."""

    rare: ir.Block
    edge: ir.Block


def speculable(block: ir.Block) -> bool:
    """Whether every instruction of `block` before its terminator only computes a value."""
    for ins in block.instructions[:-1]:
        if isinstance(ins, ir.CallInstr):
            callee = ins.callee
            if isinstance(callee, ir.InlineAsm) or not callee.name.startswith(_PURE_CALLS):
                return False
        elif isinstance(ins, (ir.ICMPInstr, ir.FCMPInstr)):
            continue
        elif ins.opname not in _PURE_OPS:
            return False
    return True


def rare_side(term) -> ir.Block | None:
    """The successor a conditional branch's weights mark rare (the true one, as every edge
    guard and block-size test here is written), else None."""
    if not isinstance(term, ir.ConditionalBranch):
        return None
    prof = term.metadata.get("prof")
    if prof is None:
        return None
    weights = [getattr(o, "constant", None) for o in prof.operands[1:]]
    if len(weights) != 2 or None in weights or not weights[0] < weights[1]:
        return None
    return term.operands[1]


def block_size_read(builder: ir.IRBuilder, x_only: bool) -> ir.Value:
    """The block's size: ntid.x alone (`x_only`, what the entry block tests for a block
    declared 1-D) or the product of the extents, read through an asm with side effects, so
    that LLVM neither hoists it into the common path nor reuses the entry block's value.
    (Reused, ptxas computes the compare again in the rare block under the entry block's
    line, and the SASS counts of tilelang/tools/sass.py would take that block for one the
    full launch runs.)"""
    text = "mov.u32 $0, %ntid.x;" if x_only else \
        "{ .reg .u32 t; mov.u32 $0, %ntid.x; mov.u32 t, %ntid.y; mul.lo.u32 $0, $0, t; " \
        "mov.u32 t, %ntid.z; mul.lo.u32 $0, $0, t; }"
    i32 = ir.IntType(32)
    return builder.asm(ir.FunctionType(i32, []), text, "=r", [], True, name="ntidr")


def fold(builder: ir.IRBuilder, fn: ir.Function, entry_test, full: ir.Block, short: ir.Value,
         threads: int, one_d: bool) -> FoldedTest | None:
    """Fold the entry block's block-size test `entry_test` (short -> the loop, else `full`)
    into `full`'s first edge guard when `full` ends in one and computes nothing else with an
    effect before it; None (nothing changed) otherwise."""
    entry = entry_test.parent
    guard = full.terminator
    edge = rare_side(guard)
    if edge is None or not speculable(full) or \
            any(isinstance(i, ir.PhiInstr) for i in edge.instructions):
        return None
    loop = entry_test.operands[1]
    cond, common = guard.operands[0], guard.operands[2]
    weights = guard.metadata["prof"]
    rare = fn.append_basic_block("vthread.rare")
    _drop_terminator(full)
    builder.position_at_end(full)
    either = builder.or_(short, cond, name="rare")
    builder.cbranch(either, rare, common).set_metadata("prof", weights)
    builder.position_at_end(rare)
    size = block_size_read(builder, x_only=one_d)
    again = builder.icmp_unsigned("<", size, ir.Constant(ir.IntType(32), threads))
    builder.cbranch(again, loop, edge).set_metadata("prof", weights)
    _drop_terminator(entry)
    builder.position_at_end(entry)
    builder.branch(full)
    return FoldedTest(rare, edge)


def _drop_terminator(block: ir.Block) -> None:
    block.instructions.remove(block.terminator)
    block.terminator = None
