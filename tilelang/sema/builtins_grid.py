"""Grid built-ins: `bid(axis)`, `num_blocks(axis)`, `cdiv(a, b)`, `cluster_rank()`,
`cluster_size()`. All are scalar i32 (cdiv: the promoted integer dtype of its operands).

References need to know which block runs: they take a `ctx: GridContext` keyword that the
interpreter supplies. `cdiv(a, b)` is the ceiling of a / b for any signs (floor + 1 when the
remainder is non-zero); it folds on constants, so `@host fn`s and const shapes can use it.
"""

from __future__ import annotations


from tilelang.lazy import lazy_module

from tilelang.diagnostics import TileSemanticError
from tilelang.record import record
from tilelang.sema.builtins_core import (CONST, Builtin, BoundArgs, Param, arg, common_dtype,
                                         const_int, fail, int_scalar, register)
from tilelang.sema.constants import ConstValue, materialize
from tilelang.sema.types import I32, LOOSE_INT, Type, round_to_dtype, scalar

np = lazy_module("numpy")


@record(frozen=True)
class GridContext:
    """Where the reference interpreter is: this block's id, the grid, the cluster shape."""

    block: tuple[int, int, int] = (0, 0, 0)
    grid: tuple[int, int, int] = (1, 1, 1)
    cluster: tuple[int, int, int] = (1, 1, 1)


def _axis_typing(bound: BoundArgs, span) -> Type:
    axis = const_int(bound, "axis", span)
    if axis not in (0, 1, 2):
        raise fail("E0507", bound, "axis", f"must be 0, 1 or 2 (x, y, z), found {axis}", span)
    return scalar(I32)


def _bid_ref(axis: int, ctx: GridContext = GridContext()):
    return np.int32(ctx.block[axis])


def _num_blocks_ref(axis: int, ctx: GridContext = GridContext()):
    return np.int32(ctx.grid[axis])


register(Builtin("bid", "grid", (Param("axis", CONST),), _axis_typing, _bid_ref,
                 doc="this block's index along grid axis 0, 1 or 2", scalar_only=True))
register(Builtin("num_blocks", "grid", (Param("axis", CONST),), _axis_typing, _num_blocks_ref,
                 doc="the number of blocks along grid axis 0, 1 or 2", scalar_only=True))


def _cluster_rank_ref(ctx: GridContext = GridContext()):
    x, y, z = (b % c for b, c in zip(ctx.block, ctx.cluster))
    cx, cy, _ = ctx.cluster
    return np.int32(x + cx * (y + cy * z))


def _cluster_size_ref(ctx: GridContext = GridContext()):
    return np.int32(ctx.cluster[0] * ctx.cluster[1] * ctx.cluster[2])


register(Builtin("cluster_rank", "grid", (), lambda b, s: scalar(I32), _cluster_rank_ref,
                 doc="this block's rank inside its cluster (x fastest)", scalar_only=True))
register(Builtin("cluster_size", "grid", (), lambda b, s: scalar(I32), _cluster_size_ref,
                 doc="the number of blocks in a cluster", scalar_only=True))


def _cdiv_typing(bound: BoundArgs, span) -> Type:
    for n in ("a", "b"):
        int_scalar(bound, n, arg(bound, n), span)
    dt = common_dtype(bound, ["a", "b"], span)
    return LOOSE_INT if dt is None else scalar(dt)


def _cdiv_fold(bound: BoundArgs, span) -> ConstValue:
    t = _cdiv_typing(bound, span)
    a, b = bound["a"].const.value, bound["b"].const.value
    if b == 0:
        raise TileSemanticError.at("E0403", f"`cdiv`: division by zero: cdiv({a}, 0)",
                                   bound["b"].span or span)
    r = -(-a // b)
    return materialize(ConstValue(r), t.dtype, span) if t != LOOSE_INT else ConstValue(r)


def _cdiv_ref(a, b, dtype=None):
    x, y = np.asarray(a), np.asarray(b)
    if dtype is not None:
        x, y = round_to_dtype(x, dtype), round_to_dtype(y, dtype)
    with np.errstate(all="ignore"):
        safe = np.where(y == 0, 1, y).astype(y.dtype)
        q = np.floor_divide(x, safe) + (np.mod(x, safe) != 0)
    return np.where(y == 0, 0, q).astype(q.dtype)


def _cdiv_hints(bound: BoundArgs, span) -> dict:
    t = _cdiv_typing(bound, span)
    return {} if t == LOOSE_INT else {"dtype": t.dtype}


register(Builtin("cdiv", "grid", (Param("a"), Param("b")), _cdiv_typing, _cdiv_ref,
                 doc="ceil(a / b) for integers: the number of size-b pieces that cover a",
                 scalar_only=True, fold=_cdiv_fold, ref_hints=_cdiv_hints))
