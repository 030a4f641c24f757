"""How a tile of an array is accessed: whether vectors are allowed, the layout a load takes
and its vector width (docs/codegen.md, Layouts: access layouts). Decisions asked by the
streams pass before emission and by lower/memory.py while it emits; `kern` is the emitter
or a plan.inputs.PlanInputs (the same questions by the same names)."""

from __future__ import annotations

from tilelang.codegen.layouts.distributed import Layout, blocked, vector_width
from tilelang.ir.ops import BuiltinOp


def tile_indexed(op: BuiltinOp) -> bool:
    """A plain tile access (whole tiles by `index`, no mask): what the tensor-core operand
    pipelines and epilogues take over."""
    return "index" in op.arg_map and "mask" not in op.arg_map


def vectorizable(arr, axes: tuple[int, ...]) -> bool:
    """The facts allow 16-byte vectors along the array's last axis: it is contiguous, and
    every other stride keeps a vector that starts on a multiple of its width 16-byte
    aligned (a tile's start along the last axis is a multiple of the tile width)."""
    return bool(axes) and arr.facts.contiguous and arr.facts.aligned16


def access_vector_width(arr, axes: tuple[int, ...], layout: Layout,
                        aligned: bool | int | None = True) -> int:
    """Registers per vector access of a tile of `arr` in `layout` (1: scalar accesses)."""
    if not vectorizable(arr, axes):
        return 1
    vw = vector_width(layout, axes.index(arr.rank - 1))
    while vw > 1 and (vw * arr.dtype.itemsize > 16 or (type(aligned) is int and aligned % vw)):
        vw //= 2
    return vw


def access_layout(kern, arr, axes: tuple[int, ...], shape: tuple[int, ...], dtype) -> Layout:
    """The layout a tile is loaded in: vectors and lanes along the tile axis that is
    contiguous in memory; one element per thread when no vector access is possible, so that a
    warp's scalar accesses are still consecutive."""
    if not shape:
        return kern.scalar_layout
    fast = axes.index(arr.rank - 1) if arr.rank - 1 in axes else len(shape) - 1
    if fast == len(shape) - 1 and vectorizable(arr, axes):
        return kern.layout_for_shape(shape, dtype)
    width = 16 if vectorizable(arr, axes) else dtype.itemsize
    return blocked(shape, dtype.itemsize, kern.threads, vector_bytes=width, fast_axis=fast)
