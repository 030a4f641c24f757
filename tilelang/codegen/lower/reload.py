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
  memory (plan/streams.py checks `writes_nothing` over the ops in between) except that consumer's
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

from tilelang.codegen.emit.kernel import KernelEmitter
# the decision is the reloads planning pass's (plan/reloads.py): BUDGET, CHEAP_BUDGET there
from tilelang.codegen.plan.reloads import BUDGET, CHEAP_BUDGET  # noqa: F401


def again(kern: KernelEmitter) -> frozenset[int]:
    """Ids of the values lower/stream.py may compute again at their consumers (the kernel
    plan's reloads)."""
    return kern.plan.reloads.values
