"""The default layout of a tile of a kernel: blocked (layouts/distributed.py), except that a
2-D shape the kernel reduces (or sorts) along its rows only keeps each row in one warp
(`rows_in_warps`), and a row vector broadcast against such a tile takes its layout without the
rows.

Both the kernel emitter and the planning passes (codegen/plan/) ask for it, so it is a
function of the kernel and the thread count alone (docs/codegen.md, Layouts)."""

from __future__ import annotations

from math import prod

from tilelang.codegen.layouts.distributed import (Layout, blocked, drop_axes, scalar_layout,
                                                  thread_bits)
from tilelang.ir.ops import BuiltinOp, Kernel, walk
from tilelang.sema.constants import ConstValue
from tilelang.sema.types import DType, TileType

REDUCTIONS = ("sum", "prod", "max", "min", "argmax", "argmin")
# Also served best by rows in warps along axis 1: a reduction with a combine function (the same
# tree; its operand may be a tuple of tiles) and the sorts (a row inside one warp needs no
# shared memory: lower/sort.py).
ROW_OPS = REDUCTIONS + ("reduce", "sort", "argsort", "topk")


def row_reduced_shapes(kernel: Kernel) -> dict:
    """2-D tile shapes (R > 1 rows) that the kernel reduces along their rows (axis 1) and
    never along their columns, with the item size of the first such tile: their default
    layout puts rows in warps (rows_in_warps), so a row's reduction needs shuffles only, no
    shared-memory round trip."""
    rows, cols, size = set(), set(), {}
    for op in walk(kernel.body):
        if not (isinstance(op, BuiltinOp) and op.name in ROW_OPS):
            continue
        x = op.arg_map.get("x")
        items = getattr(x, "items", None)          # a tuple operand of `reduce`
        t = getattr(items[0] if items else x, "type", None)
        if not isinstance(t, TileType) or len(t.shape) != 2 or not all(
                isinstance(d, int) for d in t.shape):
            continue
        ax = op.arg_map.get("axis")
        if not isinstance(ax, ConstValue) or not isinstance(ax.value, int):
            cols.add(tuple(t.shape))          # over all axes: no preference
            continue
        (rows if ax.value % 2 == 1 else cols).add(tuple(t.shape))
        size.setdefault(tuple(t.shape), t.dtype.itemsize)
    return {s: size[s] for s in rows - cols if s[0] > 1}


def rows_in_warps(shape: tuple[int, int], itemsize: int, threads: int,
                  vector_bytes: int = 16) -> Layout:
    """Like `blocked` (16-byte vectors along the row, lanes along the row first), but the
    warps take rows before columns, and what is left of a row goes to registers: with up to
    32 vectors per row, a row lies in one warp (Triton's several rows per program)."""
    R, N = shape
    nl, nw = thread_bits(threads)
    next_bit = [0, 0]
    sizes = [R.bit_length() - 1, N.bit_length() - 1]

    def take(order, count):
        out = []
        for d in order:
            while count and next_bit[d] < sizes[d]:
                out.append(tuple((1 << next_bit[d]) if a == d else 0 for a in range(2)))
                next_bit[d] += 1
                count -= 1
        return out, count

    vec = min(max(vector_bytes // max(itemsize, 1), 1), N)
    reg, _ = take([1], vec.bit_length() - 1)
    lane, left = take([1, 0], nl)
    lane += [(0, 0)] * left
    warp, left = take([0, 1], nw)
    warp += [(0, 0)] * left
    rest, _ = take([1, 0], sizes[0] + sizes[1])
    return Layout((R, N), tuple(reg + rest), tuple(lane), tuple(warp))


class DefaultLayouts:
    """The default layouts of one kernel's tiles over `threads` (a power of two)."""

    def __init__(self, kernel: Kernel, threads: int):
        self.threads = threads
        self.row_shapes = row_reduced_shapes(kernel)

    @property
    def scalar(self) -> Layout:
        return scalar_layout(self.threads)

    def for_shape(self, shape: tuple[int, ...], dtype: DType) -> Layout:
        shape = tuple(shape)
        # one layout per shape whatever the dtype (the reduced tile's vectors), so masks and
        # values of that shape never convert
        if shape in self.row_shapes:
            return rows_in_warps(shape, self.row_shapes[shape], self.threads)
        if len(shape) == 1:
            # a row vector (weights, a column mask) broadcast against such a tile: the tile's
            # layout without its rows, so the broadcast is a renaming of registers
            for r in sorted(self.row_shapes):
                if r[1] == shape[0]:
                    return drop_axes(rows_in_warps(r, self.row_shapes[r], self.threads), (0,),
                                     False)
        return self.blocked_for(shape, dtype)

    def blocked_for(self, shape: tuple[int, ...], dtype: DType) -> Layout:
        # A tile smaller than one 16-byte vector per thread takes narrower vectors rather
        # than leaving whole warps as replicas (every replica thread would load and compute
        # the same elements again): 256 f32 over 128 threads is two per thread, as Triton.
        n = prod(shape)
        vec = 16
        while vec > dtype.itemsize and n * dtype.itemsize < self.threads * vec:
            vec //= 2
        return blocked(tuple(shape), dtype.itemsize, self.threads, vector_bytes=vec)
