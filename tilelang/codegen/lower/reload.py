"""Re-loads: a tile computed element-wise from loads of global arrays that would be kept in
registers across a block reduction is computed again after it, from a second read of the
same elements, instead (what PyTorch's softmax does for rows too wide to keep).

Why: a block reduction ends with a barrier, and whatever a thread needs after it stays in its
registers through it. A 4,096-wide f32 row over 128 threads is 32 values per thread; softmax
keeps its row through the max and its exponentials through the sum, layernorm its row and the
centred row, RMSNorm its row: 46-48 registers, 62% theoretical occupancy, where 100% allows 32.
Reading the row again from global memory (L2 holds it: 16 KiB per row) costs one more read
per pass; computing `exp` again costs its instructions again.

Decision (`again`): at each top-level reduction whose reduced axes span several warps (so it
has a barrier), the tiles defined before it and used after it cost each thread about
`ceil(elements x words / threads)` registers, threads being the kernel's block size (scalars
and a row's statistics, a register each, are not counted). When that sum exceeds the budget,
those tiles become candidates, with every value their element-wise definition is computed
from. The budget is BUDGET (16: half the 32 registers a thread has at full occupancy, 65,536 /
2,048, leaving the other half for addresses, the pass's own vectors and the reduction) when
one of the tiles has a math function to compute again (softmax's `exp`), CHEAP_BUDGET (8)
when they are loads and arithmetic only (a second read costs a few instructions per vector:
layernorm and RMSNorm at 2,048 reach 100% that way, softmax at 2,048 keeps its row and its
exponentials at 32 registers). A tile whose definition has an exact math function (`_math`:
`exp` in precision "ieee", whose second computation would nearly double the kernel's
instructions) is kept. Rows of 256 and 1,024 f32 over 128 threads (2 or 8 registers) never
change. lower/stream.py then lets a candidate's consumers (a store, a reduction) compute it
per vector from loads of their own, and leaves it out of registers when all its uses are such
consumers.

Exactness: a re-load reads what the first load read, because
- only plain tile loads of global arrays are read again (`index`, no mask, no `order`), by
  emitting the same op again: the same array, index, shape and padding SSA values, so the same
  elements in the same layout;
- only top-level ops of the kernel body take part (run once per thread, never in a loop whose
  index could change between the two reads);
- nothing between the load and the re-reading consumer, in program order, writes global
  memory (stream.py checks `_writes_nothing` over the ops in between) except that consumer's
  own store, which each thread makes one vector at a time after reading that vector: the
  vectors a thread re-reads are the ones it writes (stream.py's `_lines_up`), so other threads'
  stores never touch them, and the thread reads each before writing it (in place, `y` is `x`,
  works). Another block's writes to elements a block reads are unordered with its reads in
  the plain code already (a race, docs/language.md), so re-reading makes no defined program
  undefined;
- the recomputation emits the same ScalarEmitter calls on the same operands, and reductions
  combine in the same tree (reduce.Tree), so results are bit-identical to keeping the tile.
"""

from __future__ import annotations

from math import ceil, prod

from tilelang.codegen.emit.kernel import KernelEmitter
from tilelang.codegen.scalar.emitter import FLOAT_MATH
from tilelang.ir.ops import BuiltinOp, walk
from tilelang.ir.values import Value
from tilelang.sema.constants import ConstStr

BUDGET = 16                 # registers per thread live across a block reduction, see above
CHEAP_BUDGET = 8            # ... when none of those tiles has a math function to compute again
REDUCTIONS = ("sum", "prod", "max", "min", "argmax", "argmin")


def again(kern: KernelEmitter) -> frozenset[int]:
    """Ids of the values lower/stream.py may compute again at their consumers (cached)."""
    got = kern._cache.get("reload.again")
    if got is None:
        got = kern._cache["reload.again"] = _again(kern)
    return got


def _again(kern: KernelEmitter) -> frozenset[int]:
    ops = kern.kernel.body.ops
    defined: dict[int, int] = {}
    last: dict[int, int] = {}
    for i, op in enumerate(ops):
        if getattr(op, "result", None) is not None:
            defined[op.result.id] = i
        for inner in [op, *(o for r in op.regions for o in walk(r))]:
            for v in inner.operands:
                last[v.id] = i              # a use in a nested region counts where it is
    out: set[int] = set()
    for i, op in enumerate(ops):
        if not (isinstance(op, BuiltinOp) and op.name in REDUCTIONS and _across_warps(kern, op)):
            continue
        live = [vid for vid, p in defined.items() if p < i < last.get(vid, -1)]
        # tiles only: scalars and a row's statistics are a register each, held anyway
        cost = {vid: c for vid in live
                for c in [_registers(kern, ops[defined[vid]].result)] if c > 1}
        math = {vid: _math(kern, ops, defined, vid) for vid in cost}
        # a re-read alone is cheap; recomputing a math function costs its instructions again
        budget = BUDGET if any(math.values()) else CHEAP_BUDGET
        if sum(cost.values()) > budget:
            out.update(vid for vid in cost if math[vid] != "exact")
    if not out:
        return frozenset()
    # with what they are computed from (element-wise chains of loads): those may have other
    # uses too; stream.py keeps whatever is still used outside its consumers
    todo, seen = list(out), set(out)
    while todo:
        op = ops[defined[todo.pop()]]
        for v in op.operands:
            if isinstance(v, Value) and v.id in defined and v.id not in seen and \
                    getattr(v.type, "shape", None):
                seen.add(v.id)
                todo.append(v.id)
    return frozenset(seen)


def _math(kern: KernelEmitter, ops, defined: dict, vid: int) -> str | None:
    """The math functions computing v again would repeat per element: "exact" when one runs
    in an exact mode (`exp` in precision "ieee": a polynomial of some 25 instructions, where
    "fast" has `ex2.approx`), "approx" when there are only approximated ones, else None."""
    todo, seen, got = [vid], {vid}, None
    while todo:
        v = todo.pop()
        op = ops[defined[v]]
        if not isinstance(op, BuiltinOp):
            continue
        dt = getattr(op.result.type, "dtype", None)
        if op.name in FLOAT_MATH and dt is not None:
            if not kern.se.approximates(
                    op.name, dt, {n: a for n, a in op.args if isinstance(a, ConstStr)}):
                return "exact"
            got = "approx"
        for a in op.operands:
            if a.id in defined and a.id not in seen and getattr(a.type, "shape", None):
                seen.add(a.id)
                todo.append(a.id)
    return got


def _registers(kern: KernelEmitter, v: Value) -> int:
    """Registers a thread holds for tile v, about: its share of the elements in 32-bit words."""
    shape = getattr(v.type, "shape", None)
    if not shape:
        return 1
    words = max(1, v.type.dtype.bits // 32)
    return ceil(prod(shape) * words / kern.threads)


def _across_warps(kern: KernelEmitter, op: BuiltinOp) -> bool:
    """The reduction's reduced axes span warps in its input's default layout (a barrier)."""
    x = op.arg_map.get("x")
    shape = tuple(getattr(getattr(x, "type", None), "shape", ()) or ())
    if not shape:
        return False
    lay = kern.layout_for(x.type)
    a = op.arg_map.get("axis")
    axes = range(len(shape)) if a is None else \
        [kern.const_ints(a)[0] % len(shape)]
    return any(basis[d] for basis in lay.warp for d in axes)
